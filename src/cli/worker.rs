//! `memctl worker --manifest M --index I`: run one trial of a Slurm submission (an array task)
//! and write its run record as a shard; or, for a search's submission, run the search against
//! its store as one of its workers. Started by Slurm, not by hand.

use std::path::PathBuf;

use crate::check::Trial;
use crate::cli::{context::Context, load};
use crate::slurm::manifest::{Manifest, ManifestSearch, ManifestTrial, Snapshot};
use crate::slurm::{scheduler, shard, signals};
use crate::store::Store;
use crate::store::checkpoints::CheckpointDir;
use crate::sweep::{self, Options, SpecSource, identity};
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
    // The submission's folder, for relative paths to resolve as they did there; the manifest's
    // own path (its sweep's shards and checkpoints sit beside it) stays the file just read.
    let args = Args { manifest: std::path::absolute(&args.manifest)?, ..args };
    if let Some(dir) = &manifest.workdir
        && let Err(e) = std::env::set_current_dir(dir)
    {
        // Not every compute node mounts it; a spec without relative data paths runs anyway.
        eprintln!(
            "warning: cannot work in the submission's folder {} ({e}); relative data paths resolve against {}",
            dir.display(),
            std::env::current_dir().map_or("this task's folder".into(), |d| d.display().to_string())
        );
    }
    if let Some(search) = &manifest.search {
        return run_search(&args, &manifest, search, ctx);
    }
    let task = manifest.trials_of_task(args.index);
    if task.is_empty() {
        anyhow::bail!(
            "manifest {} has {} array tasks; no index {}",
            args.manifest.display(),
            manifest.tasks(),
            args.index
        );
    }
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
    let mut pack = vec![];
    for &i in &task {
        let entry = &manifest.trials[i];
        let Some(trial) = trials.iter().find(|t| identity::trial_key(t) == entry.trial_key) else {
            anyhow::bail!(
                "no trial with identity {} in the manifest's spec (was memctl upgraded, or its data files changed?)",
                entry.trial_key
            );
        };
        pack.push((entry, trial));
    }
    let source = load::spec_source(&spec_path, &spec);
    match pack[..] {
        [(entry, trial)] => run_trial_task(&args, &manifest, entry, trial, &source),
        _ => run_pack_task(&args, &manifest, &pack, &source),
    }
}

/// An array task of one trial: trains it on the task's CPUs, resumed from and checkpointed to
/// its checkpoint, and writes its shard when it ends. A signal stops it with its checkpoint
/// saved (no shard, so a requeued task resumes it).
fn run_trial_task(
    args: &Args,
    manifest: &Manifest,
    entry: &ManifestTrial,
    trial: &Trial,
    source: &SpecSource,
) -> anyhow::Result<i32> {
    let threads = threads(manifest);
    let opts = Options {
        force: true,
        retry_failed: true,
        threads,
        device: manifest.device.clone(),
        ..Options::one_at_a_time()
    };
    let mut record = sweep::new_record(0, trial, source, &opts);
    eprintln!("memctl worker: trial {} ({})", entry.trial_key, entry.label);
    let checkpoints = CheckpointDir::new(sweep_dir(&args.manifest).join("checkpoints"));
    let resume = sweep::live::load_checkpoint(&checkpoints, &entry.trial_key, trial.config.train.steps, &Log);
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

/// An array task of a packed submission: trains its trials as one pack on the task's CPUs,
/// each resumed from and checkpointed to its own checkpoint, and writes each trial's shard as
/// it leaves the pack. A signal stops the pack at the next step (or evaluation batch) with every
/// trial's checkpoint saved (no shard for those, so a requeued task resumes them).
fn run_pack_task(
    args: &Args,
    manifest: &Manifest,
    pack: &[(&crate::slurm::manifest::ManifestTrial, &crate::check::Trial)],
    source: &sweep::SpecSource,
) -> anyhow::Result<i32> {
    use crate::store::Status;
    let opts = Options { device: manifest.device.clone(), threads: threads(manifest), ..Options::one_at_a_time() };
    let dir = sweep_dir(&args.manifest);
    let checkpoints = CheckpointDir::new(dir.join("checkpoints"));
    // Trials of the pack that ended in an earlier attempt of this task (before it was requeued)
    // keep their shards. Only this task's own attempts count: a shard from an earlier
    // submission is a run that `--force` or `--retry-failed` asked to repeat.
    let ledger = EndedLedger::of_task(&args.manifest, args.index);
    let mut ended = ledger.read()?;
    let pack: Vec<_> = pack.iter().filter(|(entry, _)| !ended.contains(&entry.trial_key)).collect();
    let mut records = vec![];
    let mut lives = vec![];
    for (entry, trial) in &pack {
        eprintln!("memctl worker: trial {} ({}) in a pack of {}", entry.trial_key, entry.label, pack.len());
        let mut record = sweep::new_record(0, trial, source, &opts);
        let resume = sweep::live::load_checkpoint(&checkpoints, &entry.trial_key, trial.config.train.steps, &Log);
        if let (Some(state), Some(p)) = (&resume, record.progress.as_mut()) {
            p.resumed_from = Some(state.step as u64);
            eprintln!("memctl worker: {} resumes from its checkpoint at step {}", entry.trial_key, state.step);
        }
        let key = entry.trial_key.clone();
        lives.push(sweep::live::Live::new(None, checkpoints.clone(), record.clone(), key, &Silent, &Log, resume));
        records.push(record);
    }
    let members: Vec<crate::train::pack::PackMember<'_>> = pack
        .iter()
        .copied()
        .zip(&lives)
        .map(|((_, trial), live)| crate::train::pack::PackMember { trial, observer: live, checkpoints: live })
        .collect();
    let stop = signals::install();
    let (mut interrupted, mut failed) = (0, 0);
    let mut write_error = None;
    let mut end = |p: usize, outcome: crate::train::Outcome| {
        let record = &mut records[p];
        sweep::complete_record(record, Ok(outcome));
        lives[p].stop_writing();
        record.progress = lives[p].progress();
        match record.status {
            Status::Interrupted => {
                interrupted += 1;
                eprintln!("memctl worker: {} stopped at step {}; checkpoint saved", record.trial_key, record.steps_run);
            }
            status => {
                failed += usize::from(status != Status::Done);
                // Listed as ended only once its shard is written: a requeued attempt trains
                // again a trial whose shard a write error lost.
                let written = shard::write(&dir, record).and_then(|()| {
                    ended.insert(record.trial_key.clone());
                    ledger.write(&ended)
                });
                match written {
                    Ok(()) => eprintln!("memctl worker: {} {}", record.trial_key, status.as_str()),
                    Err(e) => write_error = Some(e),
                }
            }
        }
    };
    let trained = crate::pool::run_in_pool(threads(manifest), || {
        let device = crate::device::open(manifest.device.as_deref().unwrap_or("cpu"))?;
        crate::train::pack::train_pack(&members, &device, stop, &mut end);
        Ok::<_, sweep::TrialError>(())
    });
    trained.map_err(sweep::TrialError::from).and_then(|r| r)?;
    // Requeued before a write error is reported, so that the pack's interrupted trials go on.
    if interrupted > 0 && signals::time_limit_near() {
        eprintln!("memctl worker: time limit near: requeueing this task");
        scheduler::requeue_this_task()?;
    }
    if let Some(e) = write_error {
        return Err(e.into());
    }
    Ok(if interrupted + failed > 0 { 1 } else { 0 })
}

/// The trials of a packed array task that ended (and wrote their shards) in its attempts so
/// far: a requeued attempt trains the others. One file per task of a submission
/// (`SWEEP/tasks/<manifest>.<index>`), a trial key a line, rewritten atomically.
struct EndedLedger(PathBuf);

impl EndedLedger {
    fn of_task(manifest: &std::path::Path, index: usize) -> EndedLedger {
        let submission = manifest.file_stem().and_then(|s| s.to_str()).unwrap_or("manifest");
        EndedLedger(sweep_dir(manifest).join("tasks").join(format!("{submission}.{index}")))
    }

    /// The trial keys written so far; none before the task's first trial ends.
    fn read(&self) -> std::io::Result<std::collections::BTreeSet<String>> {
        let text = match std::fs::read_to_string(&self.0) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
            read => read?,
        };
        Ok(text.lines().filter(|l| !l.is_empty()).map(str::to_string).collect())
    }

    fn write(&self, ended: &std::collections::BTreeSet<String>) -> std::io::Result<()> {
        let text: String = ended.iter().map(|k| format!("{k}\n")).collect();
        shard::write_atomic(&self.0, text.as_bytes())
    }
}

/// Compute threads per trial: Slurm's CPUs per task, else the manifest's.
fn threads(manifest: &Manifest) -> usize {
    std::env::var("SLURM_CPUS_PER_TASK").ok().and_then(|s| s.parse().ok()).unwrap_or(manifest.threads).max(1)
}

/// One worker of a search: runs the search against its store, one trial at a time, until the
/// study has no trial left that is not settled or running in another worker. A signal stops
/// its trial at the next step (or evaluation batch) with a checkpoint (recorded `interrupted`,
/// which the next worker to reach it resumes); after Slurm's time-limit warning the task
/// requeues itself.
fn run_search(args: &Args, manifest: &Manifest, s: &ManifestSearch, ctx: &Context) -> anyhow::Result<i32> {
    let spec_path = PathBuf::from(&manifest.spec_path);
    let Ok((spec, program)) =
        load::load_checked_from(&spec_path, &Snapshot(&manifest.files), Some(&s.experiment), &manifest.overrides, ctx)
    else {
        return Ok(2);
    };
    let Some(plan) = program.experiments.iter().find(|e| e.name == s.experiment).and_then(|e| e.search.as_deref())
    else {
        anyhow::bail!("the manifest's spec has no search `{}` (was memctl upgraded?)", s.experiment);
    };
    let store = Store::open(&s.store)?;
    let search = sweep::search::Search::new(&store, plan, &s.experiment);
    let opts = Options {
        force: false,
        retry_failed: false,
        retry_pruned: false,
        jobs: 1,
        threads: threads(manifest),
        device: manifest.device.clone(),
        prober: None,
        memory: Default::default(),
        pack: crate::sweep::packs::Packing::Off,
    };
    eprintln!(
        "memctl worker: search {} (worker {} of {}), store {}",
        s.experiment,
        args.index + 1,
        s.workers,
        s.store.display()
    );
    let stop = signals::install();
    let source = load::spec_source(&spec_path, &spec);
    let r = search.run(&source, &opts, &Log, stop)?;
    eprintln!(
        "memctl worker: search {}: {} trial{} run ({} pruned, {} interrupted), {} settled or running elsewhere",
        s.experiment,
        r.ran,
        if r.ran == 1 { "" } else { "s" },
        r.pruned,
        r.interrupted,
        r.done_before + r.failed_before + r.elsewhere
    );
    if stop.load(std::sync::atomic::Ordering::SeqCst) && signals::time_limit_near() {
        eprintln!("memctl worker: time limit near: requeueing this task");
        scheduler::requeue_this_task()?;
    }
    Ok(if r.failed > 0 || r.interrupted > 0 { 1 } else { 0 })
}

/// The sweep directory a manifest belongs to (`SWEEP/manifests/NAME.json`).
fn sweep_dir(manifest: &std::path::Path) -> PathBuf {
    manifest.parent().and_then(|p| p.parent()).map(PathBuf::from).unwrap_or_default()
}

/// A worker reports to its log (stderr): a search's runs as they start and end, and warnings.
struct Log;

impl sweep::Reporter for Log {
    fn trial_started(
        &self,
        _: usize,
        trial: &crate::check::Trial,
        run_id: u64,
        resumed_from: Option<u64>,
    ) -> Box<dyn crate::train::Observer + '_> {
        // Only a search's worker reports here (a worker of one trial trains without a reporter).
        let values = crate::value::assignments(&trial.config.swept);
        match resumed_from {
            Some(step) => eprintln!("memctl worker: run {run_id} ({values}) resumes at step {step}"),
            None => eprintln!("memctl worker: run {run_id} ({values}) starts"),
        }
        Box::new(Silent)
    }
    fn trial_finished(&self, _: usize, record: &crate::store::RunRecord) {
        eprintln!("memctl worker: run {} {}", record.id, record.status.as_str());
    }
    fn warning(&self, message: &str) {
        eprintln!("memctl worker: warning: {message}");
    }
}

#[cfg(test)]
mod tests {
    use super::EndedLedger;

    /// A requeued attempt of a packed task reads the trials its earlier attempts ended; another
    /// task, or the same task of another submission, has its own.
    #[test]
    fn a_task_s_ledger_holds_what_its_own_attempts_ended() -> std::io::Result<()> {
        let dir = tempfile::tempdir()?;
        let manifest = |n: usize| dir.path().join("manifests").join(format!("{n}.json"));
        let ledger = EndedLedger::of_task(&manifest(1), 0);
        assert!(ledger.read()?.is_empty(), "nothing ended before the first attempt");
        let ended = ["aa".to_string(), "bb".to_string()].into();
        ledger.write(&ended)?;
        assert_eq!(EndedLedger::of_task(&manifest(1), 0).read()?, ended);
        assert!(EndedLedger::of_task(&manifest(1), 1).read()?.is_empty(), "another task");
        assert!(EndedLedger::of_task(&manifest(2), 0).read()?.is_empty(), "another submission");
        Ok(())
    }
}
