//! `memctl prims`: the primitives a step can use, with their arguments.

use crate::cli::context::Context;

/// List the primitives and their signatures.
#[derive(clap::Args)]
pub struct Args {
    /// Print a Markdown table (the README's, between its `prims` markers).
    #[arg(long)]
    markdown: bool,
}

pub fn run(args: Args, _ctx: &Context) -> anyhow::Result<i32> {
    if args.markdown {
        print!("{}", markdown());
        return Ok(0);
    }
    for p in crate::prims::PRIMS {
        println!("{}\n    {}", call(*p), p.summary());
    }
    Ok(0)
}

/// `outs = name(args)` as a spec writes the call.
fn call(p: &dyn crate::prims::Lower) -> String {
    let sig = crate::check::call_signature(p.signature());
    let outs = p.outputs();
    let returns = if outs.len() > 1 { format!("{} = ", outs.join(", ")) } else { String::new() };
    format!("{returns}{}({sig})", p.name())
}

/// The primitives as a Markdown table, generated from the registry.
pub fn markdown() -> String {
    let mut out = String::from("| Primitive | What it computes |\n|---|---|\n");
    for p in crate::prims::PRIMS {
        out += &format!("| `{}` | {} |\n", call(*p).replace('|', "\\|"), p.summary().replace('|', "\\|"));
    }
    out
}
