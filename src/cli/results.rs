//! `memctl results FILE.yaml [-o OUT.md]`: the paper-reproduction tables, from the store.

use std::path::PathBuf;

use crate::cli::Context;
use crate::report::results;
use crate::store::Store;

/// Write the reproduction tables described in a YAML file from the runs in the store.
#[derive(clap::Args)]
pub struct Args {
    /// The tables' description (e.g. specs/paper/results.yaml).
    description: PathBuf,
    /// Write the Markdown here instead of printing it.
    #[arg(long, short)]
    output: Option<PathBuf>,
}

pub fn run(args: Args, ctx: &Context) -> anyhow::Result<i32> {
    let text = std::fs::read_to_string(&args.description)
        .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", args.description.display()))?;
    let report = results::load(&text).map_err(|e| anyhow::anyhow!("{}: {e}", args.description.display()))?;
    let store = Store::open(&ctx.store)?;
    let md = results::render(&report, &store.all()?.into_iter().map(crate::store::as_seen).collect::<Vec<_>>());
    match &args.output {
        Some(p) => {
            std::fs::write(p, md)?;
            eprintln!("wrote {}", p.display());
        }
        None => print!("{md}"),
    }
    Ok(0)
}
