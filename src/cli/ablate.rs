//! `memctl ablate FILE EXPERIMENT [KEY=VALUES...]`: the full model and each leave-one-out variant (one boolean
//! switch turned off), run over seeds, summarised as an ablation table.
//!
//! Each variant is the experiment checked with command-line overrides (`gates=false
//! transfer=true seed=1..3`), exactly as `memctl sweep FILE EXPERIMENT gates=false ...` would
//! plan it, so trials already done by either are not run again. A switch that a `zip` pairs
//! with other names is refused: that override picks the zip's rows, which would change the
//! other names' values between the variants. An experiment with a `search` is ablated at one
//! configuration, each searched name fixed on the command line, over the search's seeds.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use crate::check::{Program, SearchPlan, Trial};
use crate::cli::runs::{self, Format};
use crate::cli::{context::Context, load, sweep};
use crate::lang::{Spec, ast};
use crate::report::ablation;
use crate::source::SourceMap;
use crate::store::{RunSummary, Store};
use std::sync::Arc;

use crate::sweep::probe::ChildProber;
use crate::sweep::{Options, identity};
use crate::value::Value;

/// Ablate a model's boolean switches: run the full model (every switch on) and, for each
/// switch, the model with that switch off, over seeds; print steps to converge and the final
/// test metric of each variant as mean ± std (n) over seeds (sample std, n − 1).
#[derive(clap::Args)]
pub struct Args {
    /// Spec file.
    file: PathBuf,
    /// The experiment whose model to ablate.
    experiment: String,
    /// `KEY=VALUES` overrides for every variant, as `sweep` takes them (`d=48`, `lr=1e-3`); a
    /// search's searched names must all be fixed this way.
    #[arg(value_name = "KEY=VALUES")]
    overrides: Vec<String>,
    /// Only these boolean parameters (comma separated; default: all of the model's).
    #[arg(long, value_delimiter = ',', value_name = "A,B,...")]
    switches: Option<Vec<String>>,
    /// Seeds 1..N for every variant (default: the experiment's own seeds, its sweep's or its
    /// search's).
    #[arg(long, value_name = "N")]
    seeds: Option<u64>,
    /// Final metric to report (default: accuracy, if the runs have it).
    #[arg(long)]
    metric: Option<String>,
    /// Show the variants and their trials; run nothing.
    #[arg(long)]
    dry_run: bool,
    #[command(flatten)]
    parallel: sweep::Parallelism,
    /// No progress bars.
    #[arg(long, short)]
    quiet: bool,
    /// Output format of the table.
    #[arg(long, default_value = "table")]
    format: Format,
}

/// One variant of the model and its trials.
pub struct Variant {
    /// `full`, or `w/o SWITCH`.
    pub name: String,
    /// The command-line overrides that make it (`gates=false`, `seed=1..3`).
    pub overrides: Vec<String>,
    pub spec: Spec,
    pub trials: Vec<Trial>,
}

/// The variants of `experiment`'s model, with `overrides` (`KEY=VALUES`, as `sweep` takes them)
/// applied to every variant; `Err(code)` after printing a spec error.
pub fn plan(
    file: &Path,
    experiment: &str,
    overrides: &[String],
    switches: Option<&[String]>,
    seeds: Option<u64>,
    ctx: &Context,
) -> anyhow::Result<Result<Vec<Variant>, i32>> {
    let (spec, program) = match load::load_checked_with(file, Some(experiment), overrides, ctx) {
        Ok(p) => p,
        Err(code) => return Ok(Err(code)),
    };
    let trials = load::select(&program, Some(experiment), file)?;
    let config = &trials[0].config;
    let given: Vec<&str> = overrides.iter().filter_map(|o| o.split_once('=')).map(|(k, _)| k.trim()).collect();
    let bools: Vec<&String> =
        config.params.iter().filter(|(_, v)| matches!(v, Value::Bool(_))).map(|(k, _)| k).collect();
    let chosen: Vec<String> = match switches {
        Some(list) => {
            // `--switches gates,` would otherwise name the parameter ``.
            if list.iter().any(|s| s.trim().is_empty()) {
                return Err(AblateError::EmptySwitchName { list: list.join(",") }.into());
            }
            for (i, s) in list.iter().enumerate() {
                if list[..i].contains(s) {
                    return Err(AblateError::SwitchTwice { name: s.clone() }.into());
                }
                if !bools.contains(&s) {
                    return Err(AblateError::NotASwitch {
                        name: s.clone(),
                        found: config.params.get(s).map(Value::describe),
                        model: config.model.clone(),
                        switches: bools.iter().map(|b| b.to_string()).collect(),
                    }
                    .into());
                }
                if given.contains(&s.as_str()) {
                    return Err(AblateError::SwitchOverridden { name: s.clone() }.into());
                }
            }
            list.to_vec()
        }
        // A switch the command line sets stays as set.
        None => bools.iter().filter(|b| !given.contains(&b.as_str())).map(|s| s.to_string()).collect(),
    };
    if chosen.is_empty() {
        return Err(AblateError::NoSwitches { model: config.model.clone() }.into());
    }
    if let Some(exp) = spec.ast.experiments.iter().find(|e| e.name.name == experiment) {
        refuse_zipped(exp, &chosen, &spec.sources)?;
    }
    // A search's trials stand for its domains (the ends of `lr`'s range); an ablation needs
    // one configuration, so every name the switches leave searched must be fixed.
    if let Some(search) = search_of(&program, experiment) {
        refuse_searched(search, &chosen, experiment, file)?;
    }
    if seeds == Some(0) {
        return Err(AblateError::NoSeeds.into());
    }
    if seeds.is_some() && given.contains(&"seed") {
        return Err(AblateError::SeedsTwice.into());
    }
    let mut variants = vec![];
    let names = std::iter::once(None).chain(chosen.iter().map(Some));
    for off in names {
        let mut overrides = overrides.to_vec();
        overrides.extend(chosen.iter().map(|s| format!("{s}={}", Some(s) != off)));
        if let Some(n) = seeds {
            overrides.push(format!("seed=1..{n}"));
        }
        let (spec, program) = match load::load_checked_with(file, Some(experiment), &overrides, ctx) {
            Ok(p) => p,
            Err(code) => return Ok(Err(code)),
        };
        let trials = match search_of(&program, experiment) {
            // The configuration the overrides fix, with each of the search's seeds.
            Some(search) => {
                refuse_searched(search, &[], experiment, file)?;
                match search.fixed_trials() {
                    Some(Ok(trials)) => trials,
                    Some(Err(d)) => {
                        eprint!("{}", crate::diag::Diagnostics(vec![d]).render(&spec.sources, ctx.color));
                        return Ok(Err(2));
                    }
                    None => vec![],
                }
            }
            None => load::select(&program, Some(experiment), file)?,
        };
        let name = off.map_or("full".to_string(), |s| format!("w/o {s}"));
        variants.push(Variant { name, overrides, spec, trials });
    }
    Ok(Ok(variants))
}

/// Why an ablation cannot be planned as asked.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum AblateError {
    #[error(
        "--switches `{list}` has an empty name: list the switches separated by single commas, e.g. `--switches gates,transfer`"
    )]
    EmptySwitchName { list: String },
    #[error("--switches names `{name}` twice")]
    SwitchTwice { name: String },
    #[error(
        "`{name}` {} of model `{model}` (its switches: {})",
        .found.as_ref().map_or("is not a parameter".to_string(), |v| format!("is {v}, not a boolean")),
        if .switches.is_empty() { "none".to_string() } else { .switches.join(", ") }
    )]
    NotASwitch { name: String, found: Option<String>, model: String, switches: Vec<String> },
    #[error("model `{model}` has no boolean parameters to ablate")]
    NoSwitches { model: String },
    #[error(
        "`{switch}` is zipped with {} in the sweep of experiment `{experiment}` ({at}): turning it off \
         would pick the zip's other rows and change {} too, and an ablation holds every other swept value \
         fixed; sweep `{switch}` as an axis of its own beside the zip, or leave it out of the ablation \
         (`--switches` naming the others)",
        quoted(.partners), quoted(.partners)
    )]
    ZippedSwitch { switch: String, partners: Vec<String>, experiment: String, at: String },
    #[error("`{name}` is set on the command line and named in --switches: an ablation sets each switch itself")]
    SwitchOverridden { name: String },
    #[error(
        "experiment `{experiment}` is a search, and an ablation runs one configuration: fix {} on the command \
         line, e.g. `memctl ablate {file} {experiment} {}` (`memctl search-report {file} {experiment}` shows the \
         configurations the search found)",
        .open.iter().map(|(n, d)| format!("`{n}` (searched in {d})")).collect::<Vec<_>>().join(", "),
        .open.iter().map(|(n, _)| format!("{n}=…")).collect::<Vec<_>>().join(" ")
    )]
    Searched { experiment: String, file: String, open: Vec<(String, String)> },
    #[error("--seeds must be at least 1")]
    NoSeeds,
    #[error("--seeds and a `seed=…` override both set the seeds: give one")]
    SeedsTwice,
    #[error("--metric `{metric}`: no trial of the ablation reports this final metric; {hint}")]
    UnknownMetric { metric: String, hint: String },
    #[error("--metric `{metric}`: no run of the ablation has this final metric; {hint}")]
    MetricNotInRuns { metric: String, hint: String },
}

/// The `search` of experiment `name`, if it has one.
fn search_of<'p>(program: &'p Program, name: &str) -> Option<&'p SearchPlan> {
    program.experiments.iter().find(|e| e.name == name)?.search.as_deref()
}

/// Refuses a search with a name still searched that is not among `switches` (which the
/// variants fix).
fn refuse_searched(search: &SearchPlan, switches: &[String], experiment: &str, file: &Path) -> Result<(), AblateError> {
    let open: Vec<(String, String)> = (search.spec.dims.iter())
        .filter(|d| !switches.contains(&d.name.name))
        .map(|d| (d.name.name.clone(), d.domain.to_string()))
        .collect();
    if open.is_empty() {
        return Ok(());
    }
    Err(AblateError::Searched { experiment: experiment.to_string(), file: file.display().to_string(), open })
}

/// Refuses a switch that a `zip` pairs with other names: overriding it picks the zip's rows
/// (as `sweep` does), so the variant without it would also change its partners' values.
fn refuse_zipped(exp: &ast::Experiment, switches: &[String], sources: &SourceMap) -> Result<(), AblateError> {
    for entry in exp.sweep.iter().flatten() {
        let ast::SweepEntry::Zip { axes, span } = entry else { continue };
        let Some(switch) = switches.iter().find(|s| axes.iter().any(|a| a.name.name == **s)) else { continue };
        let partners: Vec<String> = axes.iter().map(|a| a.name.name.clone()).filter(|n| n != switch).collect();
        if !partners.is_empty() {
            return Err(AblateError::ZippedSwitch {
                switch: switch.clone(),
                partners,
                experiment: exp.name.name.clone(),
                at: sources.location(*span),
            });
        }
    }
    Ok(())
}

/// The values a trial's sweep sets other than the seed and the switches (`d=48`).
fn other_values(t: &Trial, switches: &[String]) -> String {
    crate::value::assignments(t.config.swept.iter().filter(|(k, _)| k != "seed" && !switches.contains(k)))
}

pub fn run(args: Args, ctx: &Context) -> anyhow::Result<i32> {
    let variants = match plan(&args.file, &args.experiment, &args.overrides, args.switches.as_deref(), args.seeds, ctx)?
    {
        Ok(v) => v,
        Err(code) => return Ok(code),
    };
    // A misspelt metric is refused before anything trains: the trials' tasks say what they report.
    if let Some(metric) = &args.metric {
        check_metric(metric, &variants)?;
    }
    let switches: Vec<String> =
        variants.iter().filter_map(|v| v.name.strip_prefix("w/o ").map(str::to_string)).collect();
    if args.dry_run {
        for v in &variants {
            println!("{} ({}): {} trial{}", v.name, v.overrides.join(" "), v.trials.len(), plural(v.trials.len()));
            for t in &v.trials {
                println!("    {}", crate::value::assignments(&t.config.swept));
            }
        }
        return Ok(0);
    }
    let store = Store::open(&ctx.store)?;
    let mut code = 0;
    for v in &variants {
        eprintln!("{}: {}", v.name, v.overrides.join(" "));
        let mut opts = Options {
            memory: crate::cli::memory::budget_unchecked(&v.trials, None).into(),
            pack: args.parallel.packing(),
            // A search's pruned runs stopped early: the comparison needs each run to its budget.
            retry_pruned: true,
            ..Options::one_at_a_time()
        };
        // The variants run one after another: each variant's packs share the cores.
        let packs = crate::sweep::packs::plan(&v.trials, &opts, &vec![true; v.trials.len()]).len();
        let on_gpu = sweep::on_gpu(None, &v.trials);
        (opts.jobs, opts.threads) = args.parallel.budget(packs, usize::from(on_gpu));
        let prober = ChildProber::for_this_exe(
            args.file.clone(),
            Some(args.experiment.clone()),
            v.overrides.clone(),
            opts.threads,
            None,
        );
        opts.prober = prober.map(|p| Arc::new(p) as _);
        let source = load::spec_source(&args.file, &v.spec);
        code = code.max(sweep::execute(&store, &source, &v.trials, &opts, args.quiet)?);
    }
    // Rows: each variant, split by any other swept values; the latest run of each trial.
    let mut rows: Vec<ablation::Row> = vec![];
    for v in &variants {
        for t in &v.trials {
            let other = other_values(t, &switches);
            let Some(record) = store.latest_of_trial(&identity::trial_key(t))? else { continue };
            let summary = RunSummary::of(&record);
            match rows.iter_mut().find(|r| r.variant == v.name && r.other == other) {
                Some(r) => r.runs.push(summary),
                None => rows.push(ablation::Row { variant: v.name.clone(), other, runs: vec![summary] }),
            }
        }
    }
    let metric = args.metric.clone().unwrap_or_else(|| ablation::default_metric(&rows));
    let known: BTreeSet<&str> =
        rows.iter().flat_map(|r| &r.runs).flat_map(|s| s.final_metrics.keys()).map(String::as_str).collect();
    if !known.is_empty() && !known.contains(metric.as_str()) {
        let hint = crate::suggest::did_you_mean(&metric, known.iter().copied())
            .unwrap_or_else(|| format!("its runs have: {}", known.iter().copied().collect::<Vec<_>>().join(", ")));
        return Err(AblateError::MetricNotInRuns { metric, hint }.into());
    }
    let sheet = ablation::sheet(&rows, &metric);
    runs::print(&sheet, args.format)?;
    Ok(code)
}

/// Refuses a `--metric` that no trial of the ablation reports as a final metric.
fn check_metric(metric: &str, variants: &[Variant]) -> Result<(), AblateError> {
    let known: BTreeSet<String> =
        variants.iter().flat_map(|v| &v.trials).flat_map(crate::train::final_metric_names).collect();
    if known.contains(metric) {
        return Ok(());
    }
    let hint = crate::suggest::did_you_mean(metric, known.iter().map(String::as_str))
        .unwrap_or_else(|| format!("they report: {}", known.iter().cloned().collect::<Vec<_>>().join(", ")));
    Err(AblateError::UnknownMetric { metric: metric.to_string(), hint })
}

/// `` `d` `` or `` `d`, `max_time` ``.
fn quoted(names: &[String]) -> String {
    names.iter().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", ")
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}
