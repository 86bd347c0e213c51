//! `memctl plot RUN... -o FILE.png|svg`: learning curves of runs, or of groups of runs.

use std::collections::BTreeSet;
use std::path::PathBuf;

use crate::cli::context::Context;
use crate::query::{self, Field};
use crate::report::curves::{self, Band, XAxis};
use crate::report::plot::{self, Plot};
use crate::store::{RunRecord, RunSummary, Store};

/// Plot learning curves: one line per run, or with --group-by one line per group (the mean
/// over its runs, typically seeds) with a band (min..max, or ± sample std).
#[derive(clap::Args)]
pub struct Args {
    /// Run ids (and/or choose runs with --where).
    runs: Vec<u64>,
    /// Also plot the runs matching this filter (the language of `memctl runs --where`).
    #[arg(long = "where", value_name = "EXPR", allow_hyphen_values = true)]
    filter: Option<String>,
    /// Curve to plot, e.g. val_accuracy, val_loss, train_loss (default: val_accuracy if every
    /// run has it).
    #[arg(long)]
    metric: Option<String>,
    /// One line per distinct value of these fields (comma separated), averaged over its runs:
    /// each trial's latest run, as `runs --group-by` counts them.
    #[arg(long, value_delimiter = ',', value_name = "PARAMS")]
    group_by: Option<Vec<String>>,
    /// With --group-by, average every run, a trial run again (`--force`) as often as it ran.
    #[arg(long, requires = "group_by")]
    all: bool,
    /// The band around each group's mean.
    #[arg(long, default_value = "std")]
    band: Band,
    /// What the x axis measures: steps, or seconds of training (at each run's mean rate).
    #[arg(long, default_value = "step")]
    x: XAxis,
    /// Fix the value axis to LO,HI, e.g. `0,1` for accuracies (default: fitted to the curves,
    /// where a change from 0.085 to 0.109 fills the height).
    #[arg(long, value_delimiter = ',', value_name = "LO,HI", allow_hyphen_values = true)]
    y_range: Option<Vec<f64>>,
    /// Plot title (default: the metric and experiments).
    #[arg(long)]
    title: Option<String>,
    /// Output file, .png or .svg.
    #[arg(short, long)]
    output: PathBuf,
}

pub fn run(args: Args, ctx: &Context) -> anyhow::Result<i32> {
    let store = Store::open_existing(&ctx.store)?;
    let mut ids = args.runs.clone();
    if let Some(text) = &args.filter {
        // As `runs` lists them: a resumed trial's interrupted attempt would count its seed twice.
        let summaries = crate::cli::runs::listed(store.summaries()?, false).0;
        match query::prepare(text, &summaries) {
            Ok(q) => ids.extend(summaries.iter().filter(|s| q.matches(s)).map(|s| s.id)),
            Err(e) => {
                let (d, sources) = *e;
                // `Diagnostics` ends each message with a blank line, as `check` prints them.
                eprint!("{}", crate::diag::Diagnostics::from(d).render(&sources, ctx.color));
                return Ok(2);
            }
        }
    }
    ids.sort_unstable();
    ids.dedup();
    if ids.is_empty() {
        anyhow::bail!("no runs to plot: name run ids, or choose runs with --where");
    }
    let runs: Vec<RunRecord> = store.get_many(&ids)?.into_iter().map(crate::store::as_seen).collect();
    let metric = match args.metric.clone().or_else(|| curves::default_metric(&runs)) {
        Some(m) => m,
        None => anyhow::bail!("the runs have no curve in common; name one with --metric"),
    };
    if !runs.iter().any(|r| r.curves.contains_key(&metric)) {
        let names: BTreeSet<&str> = runs.iter().flat_map(|r| r.curves.keys()).map(String::as_str).collect();
        let hint = crate::suggest::did_you_mean(&metric, names.iter().copied())
            .unwrap_or_else(|| format!("they have: {}", names.into_iter().collect::<Vec<_>>().join(", ")));
        anyhow::bail!("no run plotted has a curve `{metric}`; {hint}");
    }
    if let Some(r) = runs.iter().find(|r| !r.curves.contains_key(&metric)) {
        let names: Vec<&str> = r.curves.keys().map(String::as_str).collect();
        eprintln!(
            "note: run {} has no curve `{metric}` (it has: {})",
            r.id,
            if names.is_empty() { "none".to_string() } else { names.join(", ") }
        );
    }
    // A diverged run's curve may hold no number to draw: say so, rather than leave it out
    // silently (or draw empty axes when every run diverged), and leave it out of a group's
    // mean too, which it would make NaN at every step.
    let finite = |r: &RunRecord| r.curves.get(&metric).is_some_and(|c| c.iter().any(|(_, v)| v.is_finite()));
    let (runs, diverged): (Vec<RunRecord>, Vec<RunRecord>) =
        runs.into_iter().partition(|r| finite(r) || !r.curves.contains_key(&metric));
    if !diverged.is_empty() {
        let ids = diverged.iter().map(|r| r.id.to_string()).collect::<Vec<_>>().join(", ");
        let (runs_word, one) = if diverged.len() == 1 { ("run", true) } else { ("runs", false) };
        if !runs.iter().any(finite) {
            anyhow::bail!(
                "nothing to plot: every value of `{metric}` is NaN or infinite in {runs_word} {ids} (diverged); \
                 plot another curve with --metric"
            );
        }
        let (has, is) = if one { ("has", "is") } else { ("have", "are") };
        eprintln!("note: {runs_word} {ids} {has} no finite value of `{metric}` (diverged) and {is} left out");
    }
    // A group counts each trial's latest run, as `runs --group-by` does.
    let mut runs = runs;
    if args.group_by.is_some() && !args.all {
        let summaries: Vec<RunSummary> = runs.iter().map(RunSummary::of).collect();
        let (latest, left_out) = crate::store::summary::latest_of_each_trial(summaries.iter().collect());
        if left_out > 0 {
            let latest: BTreeSet<u64> = latest.iter().map(|s| s.id).collect();
            let earlier: Vec<String> =
                runs.iter().filter(|r| !latest.contains(&r.id)).map(|r| r.id.to_string()).collect();
            let (runs_word, of) = if left_out == 1 { ("run", "its trial's") } else { ("runs", "their trials'") };
            eprintln!(
                "note: {runs_word} {} left out: each group counts {of} latest run (--all counts every run)",
                earlier.join(", ")
            );
            runs.retain(|r| latest.contains(&r.id));
        }
    }
    let series = match &args.group_by {
        Some(keys) => {
            let summaries: Vec<RunSummary> = runs.iter().map(RunSummary::of).collect();
            let mut fields = vec![];
            for k in keys {
                let f = Field::parse(k).ok_or_else(|| {
                    anyhow::anyhow!("--group-by `{k}`: unknown namespace (namespaces: param., task., train., metric.)")
                })?;
                // A field no plotted run has would put every run in one group named `k=·`.
                if query::fields::kinds(&f, &summaries).is_empty() {
                    let names = query::fields::names(&summaries);
                    let hint = crate::suggest::did_you_mean(k, names.iter().map(String::as_str))
                        .unwrap_or_else(|| "group by a parameter, task option, train setting or seed".into());
                    anyhow::bail!("--group-by `{k}`: none of the {} runs plotted has this field; {hint}", runs.len());
                }
                fields.push((k.clone(), f));
            }
            curves::per_group(&runs, &metric, &fields, args.band, args.x)
        }
        None => curves::per_run(&runs, &metric, args.x),
    };
    let mut experiments: Vec<&str> = runs.iter().map(|r| r.config.experiment.as_str()).collect();
    experiments.dedup();
    let title = args.title.clone().unwrap_or_else(|| format!("{metric}: {}", experiments.join(", ")));
    let y_range = match args.y_range.as_deref() {
        // A span past the largest float (`-1e308,1e308`) would stall the axis's tick layout.
        Some(&[lo, hi]) if lo < hi && (hi - lo).is_finite() => Some((lo, hi)),
        Some(r) => {
            anyhow::bail!("--y-range takes two numbers LO,HI with LO below HI and a finite span, not {r:?}")
        }
        None => None,
    };
    let plot = Plot { title: &title, x_label: args.x.label(), y_label: &metric, series: &series, y_range };
    match plot::draw(&args.output, &plot) {
        Err(e @ plot::PlotError::Drawing(_)) => anyhow::bail!("cannot write {}: {e}", args.output.display()),
        Err(e) => anyhow::bail!("{e}"),
        Ok(()) => {}
    }
    eprintln!("wrote {} ({} line{})", args.output.display(), series.len(), if series.len() == 1 { "" } else { "s" });
    Ok(0)
}
