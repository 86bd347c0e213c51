//! `memctl prims`: the primitives a step can use, with their arguments.

use crate::cli::Context;

/// List the primitives and their signatures.
#[derive(clap::Args)]
pub struct Args {}

pub fn run(_args: Args, _ctx: &Context) -> anyhow::Result<i32> {
    for p in crate::prims::PRIMS {
        let sig = crate::check::call_signature(p.signature());
        let outs = p.outputs();
        let returns = if outs.len() > 1 { format!("{} = ", outs.join(", ")) } else { String::new() };
        println!("{returns}{}({sig})\n    {}", p.name(), p.summary());
    }
    Ok(0)
}
