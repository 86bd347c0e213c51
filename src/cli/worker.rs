//! `memctl worker --manifest M --index I`: run one trial of a Slurm submission (an array task)
//! and write its run record as a shard. Started by Slurm, not by hand.

use std::path::PathBuf;

use crate::cli::{Context, load};
use crate::slurm::manifest::{Manifest, Snapshot};
use crate::slurm::{scheduler, shard, signals};
use crate::store::checkpoints::CheckpointDir;
use crate::sweep::{self, Options, identity};
use crate::train::Silent;

/// Run one trial of a Slurm manifest and write its run record (used by array tasks).
#[derive(clap::Args)]
pub struct Args {
    /// The submission's manifest.
    #[arg(long)]
    manifest: PathBuf,
    /// Index of the trial in the manifest (`$SLURM_ARRAY_TASK_ID`).
    #[arg(long)]
    index: usize,
}

pub fn run(args: Args, ctx: &Context) -> anyhow::Result<i32> {
    let manifest = Manifest::read(&args.manifest)
        .map_err(|e| anyhow::anyhow!("cannot read manifest {}: {e}", args.manifest.display()))?;
    let Some(entry) = manifest.trials.get(args.index) else {
        anyhow::bail!(
            "manifest {} has {} trials; no index {}",
            args.manifest.display(),
            manifest.trials.len(),
            args.index
        );
    };
    let spec_path = PathBuf::from(&manifest.spec_path);
    let Ok((spec, program)) = load::load_checked_from(
        &spec_path,
        &Snapshot(&manifest.files),
        manifest.experiment.as_deref(),
        &manifest.overrides,
        ctx,
    ) else {
        return Ok(2);
    };
    let trials = load::select(&program, manifest.experiment.as_deref(), &spec_path)?;
    let Some(trial) = trials.iter().find(|t| identity::trial_key(t) == entry.trial_key) else {
        anyhow::bail!("no trial with identity {} in the manifest's spec (was memctl upgraded?)", entry.trial_key);
    };
    let threads =
        std::env::var("SLURM_CPUS_PER_TASK").ok().and_then(|s| s.parse().ok()).unwrap_or(manifest.threads).max(1);
    let opts = Options {
        force: true,
        retry_failed: true,
        jobs: 1,
        threads,
        device: manifest.device.clone(),
        prober: None,
        memory: sweep::memory_budget::MemoryBudget::unlimited(),
        pack: crate::sweep::packs::Packing::Off,
    };
    let source = load::spec_source(&spec_path, &spec);
    let mut record = sweep::new_record(0, trial, &source, &opts);
    eprintln!("memctl worker: trial {} ({})", entry.trial_key, entry.label);
    let checkpoints = CheckpointDir::new(sweep_dir(&args.manifest).join("checkpoints"));
    let resume = sweep::live::load_checkpoint(&checkpoints, &entry.trial_key, &Log);
    if let (Some(state), Some(p)) = (&resume, record.progress.as_mut()) {
        p.resumed_from = Some(state.step as u64);
        eprintln!("memctl worker: resuming from its checkpoint at step {}", state.step);
    }
    let live = sweep::live::Live::new(
        None,
        checkpoints.clone(),
        record.clone(),
        entry.trial_key.clone(),
        &Silent,
        &Log,
        resume,
    );
    let stop = signals::install();
    sweep::train_into_record(&mut record, trial, threads, &live, stop);
    record.progress = live.progress();
    if record.status == crate::store::Status::Interrupted {
        // Stopped by Slurm: the checkpoint is saved and no shard is written, so the trial
        // counts as not run yet; a requeued or resubmitted task resumes it.
        eprintln!("memctl worker: stopped at step {}; checkpoint saved", record.steps_run);
        if signals::time_limit_near() {
            eprintln!("memctl worker: time limit near: requeueing this task");
            scheduler::requeue_this_task()?;
        }
        return Ok(1);
    }
    let sweep_dir = sweep_dir(&args.manifest);
    shard::write(&sweep_dir, &record)?;
    eprintln!("memctl worker: {} → {}", record.status.as_str(), shard::path(&sweep_dir, &record.trial_key).display());
    Ok(if record.status == crate::store::Status::Done { 0 } else { 1 })
}

/// The sweep directory a manifest belongs to (`SWEEP/manifests/NAME.json`).
fn sweep_dir(manifest: &std::path::Path) -> PathBuf {
    manifest.parent().and_then(|p| p.parent()).map(PathBuf::from).unwrap_or_default()
}

/// A worker runs one trial and reports to its log (stderr): only warnings matter.
struct Log;

impl sweep::Reporter for Log {
    fn trial_started(
        &self,
        _: usize,
        _: &crate::check::Trial,
        _: u64,
        _: Option<u64>,
    ) -> Box<dyn crate::train::Observer + '_> {
        Box::new(Silent)
    }
    fn trial_skipped(&self, _: usize, _: &crate::check::Trial, _: u64, _: crate::store::Status) {}
    fn trial_finished(&self, _: usize, _: &crate::store::RunRecord) {}
    fn warning(&self, message: &str) {
        eprintln!("memctl worker: warning: {message}");
    }
}
