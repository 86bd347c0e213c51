//! `memctl worker --manifest M --index I`: run one trial of a Slurm submission (an array task)
//! and write its run record as a shard. Started by Slurm, not by hand.

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;

use crate::cli::{Context, load};
use crate::slurm::manifest::{Manifest, Snapshot};
use crate::slurm::shard;
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
    let Ok((spec, program)) = load::load_checked_from(&spec_path, &Snapshot(&manifest.files), &manifest.overrides, ctx)
    else {
        return Ok(2);
    };
    let trials = load::select(&program, manifest.experiment.as_deref(), &spec_path)?;
    let Some(trial) = trials.iter().find(|t| identity::trial_key(t) == entry.trial_key) else {
        anyhow::bail!("no trial with identity {} in the manifest's spec (was memctl upgraded?)", entry.trial_key);
    };
    let threads =
        std::env::var("SLURM_CPUS_PER_TASK").ok().and_then(|s| s.parse().ok()).unwrap_or(manifest.threads).max(1);
    let opts = Options { force: true, retry_failed: true, jobs: 1, threads, device: manifest.device.clone() };
    let source = load::spec_source(&spec_path, &spec);
    let mut record = sweep::new_record(0, trial, &source, &opts);
    eprintln!("memctl worker: trial {} ({})", entry.trial_key, entry.label);
    sweep::train_into_record(&mut record, trial, threads, &Silent, &AtomicBool::new(false));
    let sweep_dir = args.manifest.parent().and_then(|p| p.parent()).map(PathBuf::from).unwrap_or_default();
    shard::write(&sweep_dir, &record)?;
    eprintln!("memctl worker: {} → {}", record.status.as_str(), shard::path(&sweep_dir, &record.trial_key).display());
    Ok(if record.status == crate::store::Status::Done { 0 } else { 1 })
}
