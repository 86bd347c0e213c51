//! `memctl rm RUN... [--yes]`: delete runs from the store.

use std::io::{BufRead, IsTerminal, Write};

use crate::cli::context::Context;
use crate::query::Field;
use crate::store::Store;

/// Delete runs (record, curves and summary). Asks for confirmation on a terminal; without a
/// terminal, --yes is required. A sweep runs a trial again if its latest run is deleted and
/// no earlier run of it is left. A deleted run stays deleted through `memctl sync` (its Slurm
/// shard is not added again, and submitting the sweep again runs its trial); `memctl import`
/// of a file holding it adds it back.
#[derive(clap::Args)]
pub struct Args {
    /// Run ids.
    #[arg(required = true)]
    runs: Vec<u64>,
    /// Delete without asking.
    #[arg(long, short)]
    yes: bool,
}

pub fn run(args: Args, ctx: &Context) -> anyhow::Result<i32> {
    let store = Store::open_existing(&ctx.store)?;
    let mut ids = args.runs.clone();
    ids.sort_unstable();
    ids.dedup();
    let mut lines = vec![];
    for &id in &ids {
        let s = store.summary(id)?;
        let values: Vec<String> = s
            .swept
            .iter()
            .filter(|k| *k != "seed")
            .filter_map(|k| Field::Named(k.clone()).config_value(&s).map(|v| format!("{k}={v}")))
            .collect();
        lines.push(format!(
            "  {id}  {} {} seed={} {} {}",
            s.experiment,
            s.model,
            s.seed,
            values.join(" "),
            s.status.as_str()
        ));
    }
    if !args.yes {
        if !std::io::stdin().is_terminal() {
            eprintln!("error: not deleting {} run{} without confirmation; pass --yes", ids.len(), plural(ids.len()));
            return Ok(2);
        }
        eprintln!("delete {} run{}:", ids.len(), plural(ids.len()));
        for l in &lines {
            eprintln!("{l}");
        }
        eprint!("delete? [y/N] ");
        std::io::stderr().flush()?;
        let mut answer = String::new();
        std::io::stdin().lock().read_line(&mut answer)?;
        if !matches!(answer.trim().to_lowercase().as_str(), "y" | "yes") {
            eprintln!("nothing deleted");
            return Ok(1);
        }
    }
    store.delete(&ids)?;
    eprintln!("deleted {} run{}", ids.len(), plural(ids.len()));
    Ok(0)
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}
