//! `memctl runs`: past runs as a table — filtered, sorted, grouped — newest first.

use crate::cli::context::Context;
use crate::query;
use crate::report::sheet::Cell;
use crate::report::{csv, json, markdown, table, view};
use crate::store::{RunSummary, Status, Store};

/// Show past runs, newest first: filter them, sort them, choose columns, or group them.
///
/// Fields: id, status, experiment, model, task, seed, tags, started, ended, steps_run,
/// steps_to_converge, epochs_to_converge, wall, param_count, spec, spec_hash, trial; the
/// model's parameters (`d`, `gates`), task options (`pairs`), train settings (`lr`, `steps`)
/// and final metrics (`accuracy`, `val_accuracy`). `param.NAME`, `task.NAME`, `train.NAME`
/// and `metric.NAME` name one of those explicitly.
#[derive(clap::Args)]
pub struct Args {
    /// Only runs matching EXPR, e.g. `d in [48, 96] and (status == "done" or accuracy > 0.9)`,
    /// `"ablation" in tags`, `started >= 2025-01-31`, `experiment ~ "sam_*"`. Tests: `==`,
    /// `!=`, `<`, `<=`, `>`, `>=`, `~` (glob), `in [...]`, `not in`; combine with and, or, not
    /// and parentheses. A test on a field a run does not have is false for that run.
    #[arg(long = "where", value_name = "EXPR", allow_hyphen_values = true)]
    filter: Option<String>,
    /// Sort by a column or field; `-NAME` sorts descending (missing values last).
    #[arg(long, value_name = "[-]COLUMN", allow_hyphen_values = true, value_parser = sort_key)]
    sort: Option<(String, bool)>,
    /// Show at most this many rows (at least 1).
    #[arg(long, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    limit: Option<usize>,
    /// Exactly these columns (comma separated); with --group-by, the fields to summarise.
    #[arg(long, value_delimiter = ',', value_name = "A,B,...", value_parser = field_name)]
    columns: Option<Vec<String>>,
    /// Show every configuration value (parameters, task options, train settings) that differs
    /// between the shown runs, and hide those that are the same in all of them.
    #[arg(long)]
    only_changed: bool,
    /// One row per distinct value of these fields (comma separated), with `mean ± std (n)` of
    /// each final metric and of steps to converge over the group's runs, each trial counted
    /// once by its latest run (--all: every run). std is the sample standard deviation (n − 1);
    /// n counts the runs that have the value (a run that did not converge has no steps to
    /// converge).
    #[arg(long, value_delimiter = ',', value_name = "PARAMS", value_parser = field_name)]
    group_by: Option<Vec<String>>,
    /// Output format: table, csv, json (the rows shown) or md (Markdown); `records` prints
    /// the complete stored records (curves and spec text included) of the selected runs, as
    /// JSON.
    #[arg(long, default_value = "table")]
    format: RunsFormat,
    /// Also list interrupted attempts of trials that ran again later (hidden by default), and
    /// with --group-by count every run of a trial, not only its latest.
    #[arg(long)]
    all: bool,
}

/// How a sheet is printed (also `memctl ablate --format`).
#[derive(Clone, Copy, PartialEq, clap::ValueEnum)]
pub enum Format {
    Table,
    Csv,
    Json,
    Md,
}

/// `memctl runs` formats: a sheet's, or the full records.
#[derive(Clone, Copy, PartialEq, clap::ValueEnum)]
enum RunsFormat {
    Table,
    Csv,
    Json,
    Md,
    Records,
}

/// Prints a sheet (a table says so when it is empty).
pub fn print(sheet: &crate::report::sheet::Sheet, format: Format) -> anyhow::Result<()> {
    match format {
        Format::Table if sheet.rows.is_empty() => println!("no runs match"),
        Format::Table => println!("{}", table::render(sheet)),
        Format::Csv => print!("{}", csv::render(sheet)?),
        Format::Json => println!("{}", json::render(sheet)),
        Format::Md => print!("{}", markdown::render(sheet)),
    }
    Ok(())
}

pub fn run(args: Args, ctx: &Context) -> anyhow::Result<i32> {
    // A store not made yet has no runs. It is not created here: a mistyped `--store` shows
    // as its path in the answer, not as a new empty folder (`watch memctl runs` may also start
    // before the sweep that makes the store).
    // A file where the store should be is a mistake to say, not an empty store.
    let store = if Store::exists_at(&ctx.store) || ctx.store.is_file() {
        Some(Store::open_existing(&ctx.store)?)
    } else {
        None
    };
    let summaries = match &store {
        Some(store) => store.summaries()?,
        None => vec![],
    };
    let (runs, hidden) = listed(summaries, args.all);
    let filter = match &args.filter {
        Some(text) => match query::prepare(text, &runs) {
            Ok(q) => Some(q),
            Err(e) => {
                let (d, sources) = *e;
                // `Diagnostics` ends each message with a blank line, as `check` prints them.
                eprint!("{}", crate::diag::Diagnostics::from(d).render(&sources, ctx.color));
                return Ok(2);
            }
        },
        None => None,
    };
    let sort = args.sort;
    let records = args.format == RunsFormat::Records;
    if records && args.group_by.is_some() {
        anyhow::bail!("--format records prints whole runs and cannot be grouped");
    }
    let v = view::View {
        filter,
        sort,
        limit: args.limit,
        columns: if records { Some(vec!["id".into()]) } else { args.columns },
        only_changed: args.only_changed && !records,
        group_by: args.group_by,
        every_run: args.all,
    };
    let sheet = match view::build(&runs, &v) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {e}");
            return Ok(2);
        }
    };
    let format = match args.format {
        RunsFormat::Records => {
            let mut out = vec![];
            for row in &sheet.rows {
                if let (Some(store), [Cell::Int(id)]) = (&store, &row[..]) {
                    out.push(crate::store::as_seen(store.get(*id as u64)?));
                }
            }
            println!("{}", serde_json::to_string_pretty(&out)?);
            return Ok(0);
        }
        RunsFormat::Table if runs.is_empty() => {
            let none = if store.is_some() { "no runs in" } else { "no store at" };
            println!("{none} {} yet; start with `memctl sweep specs/quickstart.mem`", ctx.store.display());
            return Ok(0);
        }
        RunsFormat::Table => Format::Table,
        RunsFormat::Csv => Format::Csv,
        RunsFormat::Json => Format::Json,
        RunsFormat::Md => Format::Md,
    };
    print(&sheet, format)?;
    if sheet.left_out > 0 && format == Format::Table {
        eprintln!(
            "({} earlier run{} of trials that ran again not counted: each trial counts once, by its latest run; --all counts every run)",
            sheet.left_out,
            if sheet.left_out == 1 { "" } else { "s" }
        );
    }
    if hidden > 0 && format == Format::Table {
        eprintln!(
            "({hidden} interrupted attempt{} of trials that ran again not shown; --all shows them)",
            if hidden == 1 { "" } else { "s" }
        );
    }
    // Freeing ten thousand summaries one by one takes longer than the query; the process is
    // about to exit and the OS reclaims them at once.
    std::mem::forget(runs);
    Ok(0)
}

/// The runs to list, as readers see them (`RunSummary::as_seen`), and how many were left
/// out: interrupted attempts of a trial that has a later run (a resumed or re-run trial), unless
/// `all`. They stay in the store and in `--all`.
pub fn listed(runs: Vec<RunSummary>, all: bool) -> (Vec<RunSummary>, usize) {
    let runs: Vec<RunSummary> = runs.into_iter().map(RunSummary::as_seen).collect();
    if all {
        return (runs, 0);
    }
    let latest = crate::store::summary::latest_ids(&runs);
    let superseded: std::collections::HashSet<u64> = runs
        .iter()
        .filter(|r| r.status == Status::Interrupted && latest.get(r.trial_key.as_str()).is_some_and(|&l| l > r.id))
        .map(|r| r.id)
        .collect();
    let hidden = superseded.len();
    (runs.into_iter().filter(|r| !superseded.contains(&r.id)).collect(), hidden)
}

/// A field or column named on the command line: not blank.
fn field_name(s: &str) -> Result<String, &'static str> {
    let name = s.trim();
    if name.is_empty() { Err("a field name, not a blank") } else { Ok(name.to_string()) }
}

/// `NAME` (ascending) or `-NAME` (descending).
fn sort_key(s: &str) -> Result<(String, bool), &'static str> {
    match s.trim().strip_prefix('-') {
        Some(name) => Ok((field_name(name).map_err(|_| "a field name after `-` (`-accuracy`)")?, true)),
        None => Ok((field_name(s)?, false)),
    }
}

#[cfg(test)]
mod tests {
    use super::{field_name, sort_key};

    #[test]
    fn a_blank_field_name_is_refused_where_a_column_or_sort_key_is_named() {
        assert_eq!(sort_key("-accuracy"), Ok(("accuracy".to_string(), true)));
        assert_eq!(sort_key("d"), Ok(("d".to_string(), false)));
        assert!(sort_key("-").is_err() && sort_key("").is_err() && sort_key(" ").is_err());
        assert_eq!(field_name(" lr "), Ok("lr".to_string()));
        assert!(field_name("").is_err());
    }
}
