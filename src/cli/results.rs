//! `memctl results FILE.yaml [-o OUT.md] [--data-dir DIR]`: the paper-reproduction tables,
//! from the store, and the data behind each as JSON.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use crate::cli::Context;
use crate::report::selection::select;
use crate::report::{results, table_data};
use crate::store::{RunRecord, Store};

/// Write the reproduction tables described in a YAML file from the runs in the store.
#[derive(clap::Args)]
pub struct Args {
    /// The tables' description (e.g. specs/paper/results.yaml).
    description: PathBuf,
    /// Write the Markdown here instead of printing it.
    #[arg(long, short)]
    output: Option<PathBuf>,
    /// Also write the data behind every table here, one JSON file per table (`<table-slug>.json`).
    #[arg(long)]
    data_dir: Option<PathBuf>,
}

pub fn run(args: Args, ctx: &Context) -> anyhow::Result<i32> {
    let text = std::fs::read_to_string(&args.description)
        .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", args.description.display()))?;
    let report = results::load(&text).map_err(|e| anyhow::anyhow!("{}: {e}", args.description.display()))?;
    let store = Store::open(&ctx.store)?;
    let runs: Vec<_> = store.all()?.into_iter().map(crate::store::as_seen).collect();
    let md = results::render(&report, &runs);
    if let Some(dir) = &args.data_dir {
        write_data(dir, &report, &runs)?;
    }
    match &args.output {
        Some(p) => {
            std::fs::write(p, md)?;
            eprintln!("wrote {}", p.display());
        }
        None => print!("{md}"),
    }
    Ok(0)
}

/// One JSON file per table, named by its title (a second table of the same name gets `-2`).
fn write_data(dir: &Path, report: &results::Report, runs: &[RunRecord]) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).map_err(|e| anyhow::anyhow!("cannot create {}: {e}", dir.display()))?;
    let mut used = BTreeSet::new();
    for t in report.all_tables() {
        let base = table_data::slug(&t.title);
        let name =
            (1..).map(|i| if i == 1 { base.clone() } else { format!("{base}-{i}") }).find(|n| used.insert(n.clone()));
        let path = dir.join(format!("{}.json", name.unwrap_or(base)));
        let json = table_data::render(t, &select(runs, &t.experiments, &t.rows))?;
        std::fs::write(&path, json + "\n").map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))?;
    }
    eprintln!("wrote {} table data files to {}", report.all_tables().count(), dir.display());
    Ok(())
}
