//! `memctl diff RUN_A RUN_B`: what differs between two runs, and how their results compare.

use crate::cli::context::Context;
use crate::report::diff;
use crate::store::Store;

/// Compare two runs: the configuration values that differ, every final metric side by side
/// with its change (B − A), and a line diff of the spec texts if they differ.
#[derive(clap::Args)]
pub struct Args {
    run_a: u64,
    run_b: u64,
}

pub fn run(args: Args, ctx: &Context) -> anyhow::Result<i32> {
    let store = Store::open_existing(&ctx.store)?;
    let a = crate::store::as_seen(store.get(args.run_a)?);
    let b = crate::store::as_seen(store.get(args.run_b)?);
    print!("{}", diff::diff(&a, &b).render(&a, &b));
    Ok(0)
}
