//! `memctl search-report SPEC [EXPERIMENT]`: what a search found.

use std::path::PathBuf;

use crate::cli::{context::Context, load};
use crate::store::Store;
use crate::sweep::search::Search;

/// Show what a search found: its configurations, best first (mean ± sd over seeds), which the
/// pruner stopped and where, the training steps used against a full grid, and the metric
/// plotted against each searched name.
#[derive(clap::Args)]
pub struct Args {
    /// Spec file.
    file: PathBuf,
    /// The experiment with the search (default: every experiment with one).
    experiment: Option<String>,
}

pub fn run(args: Args, ctx: &Context) -> anyhow::Result<i32> {
    let Ok((_, program)) =
        load::load_checked_from(&args.file, &crate::lang::Disk, args.experiment.as_deref(), &[], ctx)
    else {
        return Ok(2);
    };
    let searches: Vec<_> = program
        .experiments
        .iter()
        .filter(|e| args.experiment.as_deref().is_none_or(|name| name == e.name))
        .filter_map(|e| Some((e.name.as_str(), e.search.as_deref()?)))
        .collect();
    if searches.is_empty() {
        anyhow::bail!("no experiment with a `search` in {}", args.file.display());
    }
    let store = Store::open_existing(&ctx.store)?;
    for (i, (name, plan)) in searches.iter().enumerate() {
        let search = Search::new(&store, plan, name);
        let (study, rows) = search.configurations_run()?;
        if i > 0 {
            println!();
        }
        if rows.is_empty() {
            println!(
                "search {name}: no configuration proposed or run in {} (`memctl sweep {}` runs the search; \
                 `memctl import` brings its runs from the store that ran it)",
                ctx.store.display(),
                args.file.display()
            );
            continue;
        }
        print!("{}", crate::report::search::render(name, search.spec(), &study, &rows, search.steps_per_trial()));
    }
    Ok(0)
}
