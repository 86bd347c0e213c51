//! `memctl run FILE [EXPERIMENT]`: run one trial of an experiment now (its sweep's first
//! point), even if it was run before.

use std::path::PathBuf;
use std::sync::Arc;

use crate::cli::{context::Context, load, sweep};
use crate::store::Store;
use crate::sweep::Options;
use crate::sweep::probe::ChildProber;

/// Run an experiment once: the first trial of its sweep, always (re-runs if already done).
#[derive(clap::Args)]
pub struct Args {
    /// Spec file.
    file: PathBuf,
    /// The experiment (default: the first in the file).
    experiment: Option<String>,
    /// Compute threads (default: all cores).
    #[arg(long, value_parser = crate::cli::counts::thread_count)]
    threads: Option<usize>,
    /// Device: cpu, cuda or cuda:N (overrides the spec's `device`).
    #[arg(long)]
    device: Option<String>,
    /// No progress bar.
    #[arg(long, short)]
    quiet: bool,
}

pub fn run(args: Args, ctx: &Context) -> anyhow::Result<i32> {
    if let Some(o) = args.experiment.as_deref().filter(|e| e.contains('=')) {
        anyhow::bail!(
            "`run` takes no overrides such as `{o}`; `memctl sweep {} EXPERIMENT {o}` runs with them \
             (`--force` to run a trial that is done again)",
            args.file.display()
        );
    }
    let Ok((spec, program)) = load::load_checked(&args.file, ctx) else {
        return Ok(2);
    };
    let exp = match &args.experiment {
        Some(name) => program.experiments.iter().find(|e| &e.name == name),
        None => program.experiments.first(),
    };
    let Some(exp) = exp else {
        let names: Vec<&str> = program.experiments.iter().map(|p| p.name.as_str()).collect();
        anyhow::bail!(
            "no experiment {}in {} (experiments: {})",
            args.experiment.as_ref().map(|e| format!("`{e}` ")).unwrap_or_default(),
            args.file.display(),
            if names.is_empty() { "none".to_string() } else { names.join(", ") }
        );
    };
    // The device opens before the run is claimed: a missing one is an error, not a failed run.
    crate::device::open(args.device.as_deref().unwrap_or(&exp.trials[0].config.train.device))?;
    let Some(memory) = crate::cli::memory::budget(&spec, &program, &exp.trials[..1], args.device.as_deref(), ctx)
    else {
        return Ok(2);
    };
    let store = Store::open(&ctx.store)?;
    // `run` always runs its trial, unless another process is running it now: that is a failure
    // to run, not a skip (a sweep's claim decides the same again, against a race).
    if let Some(crate::sweep::Plan::Running(id)) = crate::sweep::Plan::of_all(&store, &exp.trials[..1])?.first() {
        eprintln!(
            "error: the trial is running in another process (run {id}); `memctl runs` shows its progress, and \
             `memctl run` runs it again once that ends"
        );
        return Ok(1);
    }
    let source = load::spec_source(&args.file, &spec);
    let mut opts = Options {
        force: true,
        retry_failed: true,
        retry_pruned: true,
        jobs: 1,
        threads: sweep::threads(args.threads),
        device: args.device.clone(),
        prober: None,
        memory: memory.into(),
        pack: crate::sweep::packs::Packing::Off,
    };
    opts.prober =
        ChildProber::for_this_exe(args.file.clone(), Some(exp.name.clone()), vec![], opts.threads, args.device.clone())
            .map(|p| Arc::new(p) as _);
    sweep::execute(&store, &source, &exp.trials[..1], &opts, args.quiet)
}
