//! `memctl sweep FILE [EXPERIMENT]`: run every trial of the experiments, skipping trials
//! already done in the store.

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;

use crate::cli::{Context, load, progress::Progress};
use crate::store::Store;
use crate::sweep::{self, Options, TrialResult};

/// Run every trial of a spec's experiments (or of one), skipping trials already done.
#[derive(clap::Args)]
pub struct Args {
    /// Spec file.
    file: PathBuf,
    /// Only this experiment.
    experiment: Option<String>,
    /// Re-run trials that are already done.
    #[arg(long)]
    force: bool,
    /// Compute threads per trial (default: all cores).
    #[arg(long)]
    threads: Option<usize>,
    /// Device for every trial: cpu, cuda or cuda:N (overrides the spec's `device`).
    #[arg(long)]
    device: Option<String>,
    /// No progress bars.
    #[arg(long, short)]
    quiet: bool,
}

pub fn run(args: Args, ctx: &Context) -> anyhow::Result<i32> {
    let Ok((spec, program)) = load::load_checked(&args.file, ctx) else {
        return Ok(2);
    };
    let mut trials = vec![];
    for exp in &program.experiments {
        if args.experiment.as_ref().is_none_or(|e| e == &exp.name) {
            trials.extend(exp.trials.iter().cloned());
        }
    }
    if let Some(e) = &args.experiment {
        if trials.is_empty() {
            let names: Vec<&str> = program.experiments.iter().map(|p| p.name.as_str()).collect();
            anyhow::bail!("no experiment `{e}` in {} (experiments: {})", args.file.display(), names.join(", "));
        }
    }
    if let Some(d) = &args.device {
        crate::device::open(d)?;
    }
    let store = Store::open(&ctx.store)?;
    let source = load::spec_source(&args.file, &spec);
    let opts = Options { force: args.force, threads: threads(args.threads), device: args.device.clone() };
    execute(&store, &source, &trials, &opts, args.quiet)
}

/// Runs trials in order; the exit code is 1 if any failed.
pub fn execute(
    store: &Store,
    source: &sweep::SpecSource,
    trials: &[crate::check::Trial],
    opts: &Options,
    quiet: bool,
) -> anyhow::Result<i32> {
    let progress = Progress::new(trials.len(), quiet);
    let cancel = AtomicBool::new(false);
    let mut ran = 0;
    let mut skipped = 0;
    for (i, t) in trials.iter().enumerate() {
        match sweep::run_trial(store, source, i, t, opts, &progress, &cancel)? {
            TrialResult::Skipped { .. } => skipped += 1,
            TrialResult::Finished(_) => ran += 1,
        }
    }
    let failed = progress.failures();
    eprintln!("{ran} trial{} run, {skipped} already done, {failed} failed", if ran == 1 { "" } else { "s" });
    Ok(if failed > 0 { 1 } else { 0 })
}

/// Compute threads per trial: the flag, or every core.
pub fn threads(flag: Option<usize>) -> usize {
    flag.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get())).max(1)
}
