//! The table `memctl sweep` ends with: the latest run of each of its trials in the dashboard's
//! compact columns (one row per experiment when there are many trials).

use std::collections::HashMap;

use crate::check::Trial;
use crate::cli::runs::{self, Format};
use crate::report::view;
use crate::store::{RunSummary, Store};
use crate::sweep::identity;

/// More trials than this are summarised one row per experiment (mean ± std over its runs).
const MOST_ROWS: usize = 20;

/// Prints the table of `trials`' latest runs (nothing if none has run).
pub fn print(store: &Store, trials: &[Trial]) -> anyhow::Result<()> {
    let keys: HashMap<String, ()> = trials.iter().map(|t| (identity::trial_key(t), ())).collect();
    let (listed, _) = runs::listed(store.summaries()?, false);
    let mut latest: HashMap<&str, &RunSummary> = HashMap::new();
    for r in listed.iter().filter(|r| keys.contains_key(&r.trial_key)) {
        let id = latest.entry(r.trial_key.as_str()).or_insert(r);
        if r.id > id.id {
            *id = r;
        }
    }
    if latest.is_empty() {
        return Ok(());
    }
    let mut shown: Vec<RunSummary> = latest.into_values().cloned().collect();
    // Oldest first, as `view::build` takes the store's runs.
    shown.sort_by_key(|r| r.id);
    let group_by = (shown.len() > MOST_ROWS).then(|| vec!["experiment".to_string()]);
    // The dashboard's few columns (the stop metric among them), so the table fits a terminal;
    // `memctl runs` shows the rest.
    let columns = group_by.is_none().then(|| view::compact_column_names(&shown.iter().collect::<Vec<_>>()));
    let v = view::View { group_by, columns, ..view::View::default() };
    let sheet = view::build(&shown, &v).map_err(|e| anyhow::anyhow!(e))?;
    println!();
    runs::print(&sheet, Format::Table)
}
