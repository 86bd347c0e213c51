//! `memctl sweep FILE --executor slurm`: write a manifest of the trials not done yet and submit
//! them as one Slurm job array; for a search, submit its workers, each of which takes the
//! study's next trial from the store.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use crate::check::Trial;
use crate::slurm::manifest::{Manifest, ManifestSearch, ManifestTrial, Recorder};
use crate::slurm::scheduler::{self, SlurmOptions};
use crate::slurm::{self, shard};
use crate::store::checkpoints::CheckpointDir;
use crate::store::{Status, Store, keys};
use crate::sweep::search::Search;
use crate::sweep::{Options, Plan, identity};

pub struct Submission<'a> {
    pub spec_path: &'a Path,
    pub experiment: Option<&'a str>,
    pub overrides: &'a [String],
    pub shared: PathBuf,
    pub memctl: PathBuf,
    pub slurm: SlurmOptions,
    pub dry_run: bool,
}

/// Submits the trials that are neither done in the local store, nor done in a shard not yet
/// synced, nor still queued or running from an earlier submission. Returns the exit code.
pub fn submit(
    store: &Store,
    trials: &[Trial],
    recorder: &Recorder,
    opts: &Options,
    sub: Submission,
) -> anyhow::Result<i32> {
    let dir = slurm::sweep_dir(&sub.shared, sub.spec_path, sub.experiment);
    std::fs::create_dir_all(dir.join("logs"))?;
    let (todo, skipped) = to_submit(store, trials, &dir, opts)?;
    eprintln!(
        "{} trial{} to submit; {} done in the store, {} finished on the cluster (not synced yet), {} still queued or running",
        todo.len(),
        if todo.len() == 1 { "" } else { "s" },
        skipped.done_here,
        skipped.done_on_cluster,
        skipped.in_flight
    );
    if todo.is_empty() {
        if skipped.done_on_cluster > 0 {
            eprintln!("run `memctl sync {}` to bring finished runs into the store", dir.display());
        }
        return Ok(0);
    }
    let manifest = Manifest {
        version: crate::slurm::manifest::MANIFEST_VERSION,
        spec_path: sub.spec_path.display().to_string(),
        files: recorder.files.borrow().clone(),
        experiment: sub.experiment.map(str::to_string),
        overrides: sub.overrides.to_vec(),
        workdir: std::env::current_dir().ok(),
        trials: todo
            .iter()
            .map(|t| ManifestTrial {
                trial_key: identity::trial_key(t),
                label: crate::value::assignments(&t.config.swept),
            })
            .collect(),
        packs: packs_of(&todo, opts),
        search: None,
        threads: opts.threads,
        device: opts.device.clone(),
        job: None,
    };
    if sub.dry_run {
        for task in 0..manifest.tasks() {
            for (k, i) in manifest.trials_of_task(task).into_iter().enumerate() {
                let t = &manifest.trials[i];
                let index = if k == 0 { format!("{task:>4}") } else { "    ".to_string() };
                println!("{index}  {}  {}", t.trial_key, t.label);
            }
        }
        println!("{} array tasks would be submitted from {}", manifest.tasks(), dir.display());
        return Ok(0);
    }
    // A settled trial run again on purpose starts afresh, as in a local sweep: the checkpoint
    // an earlier run left is not its to resume. Its shard, which the new run will replace,
    // is brought into the store first if it is not there yet (unless a later run of the trial
    // is, as `sync` decides).
    let checkpoints = CheckpointDir::new(dir.join("checkpoints"));
    for key in &skipped.afresh {
        if let Ok(record) = shard::read(&shard::path(&dir, key)) {
            crate::cli::sync::import_shard(store, record)?;
        }
        checkpoints.remove(key)?;
    }
    let count = manifest.tasks();
    let (job, path) = write_and_submit(&dir, manifest, count, &sub)?;
    println!("{job}");
    eprintln!(
        "submitted job {job}: {} array task{} from {}\nfollow it with `memctl status {}`; bring finished runs into the store with `memctl sync {}`",
        count,
        if count == 1 { "" } else { "s" },
        path.display(),
        dir.display(),
        dir.display()
    );
    Ok(0)
}

/// The trials a submission leaves out, by why.
struct Skipped {
    /// Settled in the local store: done or pruned (without `--force`), failed (without
    /// `--force` or `--retry-failed`), or running in a process here.
    done_here: usize,
    /// Settled (done, failed, pruned) in a shard of the sweep directory, not yet synced into
    /// the store.
    done_on_cluster: usize,
    /// Still queued or running from an earlier submission.
    in_flight: usize,
    /// Not left out: settled trials run again on purpose (`--force`, `--retry-failed`), which
    /// start afresh.
    afresh: Vec<String>,
}

/// Which of `trials` to submit, given the store and what the sweep directory `dir` holds
/// (shards not yet synced, earlier submissions still queued or running), and those left out.
fn to_submit<'t>(
    store: &Store,
    trials: &'t [Trial],
    dir: &Path,
    opts: &Options,
) -> anyhow::Result<(Vec<&'t Trial>, Skipped)> {
    let shards: Vec<_> = shard::read_all(dir)
        .into_iter()
        .filter_map(|(_, r)| r.ok())
        .filter(|r| matches!(r.status, Status::Done | Status::Failed | Status::Pruned))
        .collect();
    let with_shard: HashSet<String> = shards.iter().map(|r| r.trial_key.clone()).collect();
    // A shard of a run deleted from the store (`memctl rm`) settles nothing: `sync` would
    // not bring it in, so its trial is submitted again.
    let deleted = store.deleted_origins()?;
    let settled_in_shards: HashMap<String, Status> = shards
        .into_iter()
        .filter(|r| !deleted.contains(&keys::origin_key(&r.trial_key, r.started_at)))
        .map(|r| (r.trial_key, r.status))
        .collect();
    // The queue is read only when some trial would be submitted: with every trial settled, a
    // controller out of reach does not matter.
    let mut active: Option<HashSet<String>> = None;
    let mut todo: Vec<&Trial> = vec![];
    let mut skipped = Skipped { done_here: 0, done_on_cluster: 0, in_flight: 0, afresh: vec![] };
    let plans = Plan::of_all(store, trials)?;
    for (t, plan) in trials.iter().zip(plans) {
        let key = identity::trial_key(t);
        // A shard not synced yet settles its trial as the store would ([`Plan::runs`]).
        let settled_on_cluster = match settled_in_shards.get(&key) {
            Some(Status::Done) => !opts.force,
            Some(Status::Pruned) => !(opts.force || opts.retry_pruned),
            Some(Status::Failed) => !(opts.force || opts.retry_failed),
            _ => false,
        };
        if !plan.runs(opts) {
            skipped.done_here += 1;
            continue;
        }
        if settled_on_cluster {
            skipped.done_on_cluster += 1;
            continue;
        }
        let active = match &mut active {
            Some(active) => active,
            None => active.insert(active_trials(dir)?),
        };
        if active.contains(&key) {
            skipped.in_flight += 1;
        } else {
            let settled = matches!(plan, Plan::Done(_) | Plan::Failed(_) | Plan::Pruned(_));
            if settled || with_shard.contains(&key) {
                skipped.afresh.push(key);
            }
            todo.push(t);
        }
    }
    Ok((todo, skipped))
}

/// The array tasks' packs of `todo` under `--pack` (as a local sweep packs them; a task
/// trains its pack on its `--cpus-per-task` threads); none when every trial trains alone.
fn packs_of(todo: &[&Trial], opts: &Options) -> Vec<Vec<usize>> {
    let trials: Vec<Trial> = todo.iter().map(|t| (*t).clone()).collect();
    let packs = crate::sweep::packs::plan(&trials, opts, &vec![true; trials.len()]);
    if packs.iter().all(|p| p.len() == 1) { vec![] } else { packs }
}

/// Writes `manifest` as the sweep directory's next submission, submits `count` array tasks
/// running it, and records the job id in it; returns the job id and the manifest's path.
fn write_and_submit(
    dir: &Path,
    mut manifest: Manifest,
    count: usize,
    sub: &Submission,
) -> anyhow::Result<(String, PathBuf)> {
    let manifests = dir.join("manifests");
    // Past the highest number (a deleted manifest's number is not reused: its tasks' ledgers
    // in `tasks/` are its own).
    let n = std::fs::read_dir(&manifests)
        .map(|d| {
            d.filter_map(Result::ok)
                .filter_map(|e| e.path().file_stem()?.to_str()?.parse::<usize>().ok())
                .max()
                .unwrap_or(0)
        })
        .unwrap_or(0)
        + 1;
    let path = manifests.join(format!("{n}.json"));
    manifest.write(&path)?;
    let name = format!("memctl-{}", dir.file_name().and_then(|f| f.to_str()).unwrap_or("sweep"));
    let job = match scheduler::submit(&sub.memctl, &path, &dir.join("logs"), count, &name, &sub.slurm) {
        Ok(job) => job,
        Err(e) => {
            // Nothing was queued; a manifest without a job would read as a submission whose
            // every trial went missing.
            let _ = std::fs::remove_file(&path);
            return Err(e.into());
        }
    };
    manifest.job = Some(job.clone());
    manifest.write(&path)?;
    Ok((job, path))
}

/// Submits `workers` array tasks for a search: each opens the store (`store`, which the
/// compute nodes must reach) and runs the search there as a local sweep's worker does, taking
/// the study's next trial or proposing its next configuration in one exclusive store session,
/// so no two workers take one trial, and a worker killed at any moment loses nothing (its
/// trial resumes from its checkpoint in the next worker that takes it). Nothing is submitted
/// once every configuration of the study is settled.
pub fn submit_search(
    store: &Store,
    search: &Search,
    recorder: &Recorder,
    opts: &Options,
    workers: usize,
    sub: Submission,
) -> anyhow::Result<i32> {
    let experiment = search.experiment();
    let dir = slurm::sweep_dir(&sub.shared, sub.spec_path, Some(experiment));
    std::fs::create_dir_all(dir.join("logs"))?;
    let study = store.study(search.key(), experiment)?;
    let settled = search.outcomes(&study)?.len();
    eprintln!(
        "search {experiment}: {} of {} configurations proposed so far, {settled} settled",
        study.configs.len(),
        search.configurations()
    );
    if study.configs.len() >= search.configurations() && settled >= search.configurations() {
        eprintln!("the search is complete; nothing to submit (`memctl search-report` shows it)");
        return Ok(0);
    }
    let workers = workers.clamp(1, search.trial_count().max(1));
    let store_path = std::path::absolute(store.path())?;
    let manifest = Manifest {
        version: crate::slurm::manifest::MANIFEST_VERSION,
        spec_path: sub.spec_path.display().to_string(),
        files: recorder.files.borrow().clone(),
        experiment: Some(experiment.to_string()),
        overrides: sub.overrides.to_vec(),
        workdir: std::env::current_dir().ok(),
        trials: vec![],
        packs: vec![],
        search: Some(ManifestSearch { experiment: experiment.to_string(), store: store_path.clone(), workers }),
        threads: opts.threads,
        device: opts.device.clone(),
        job: None,
    };
    if sub.dry_run {
        println!(
            "{workers} search worker{} would be submitted from {}, sharing the store {}",
            if workers == 1 { "" } else { "s" },
            dir.display(),
            store_path.display()
        );
        return Ok(0);
    }
    let (job, path) = write_and_submit(&dir, manifest, workers, &sub)?;
    println!("{job}");
    eprintln!(
        "submitted job {job}: {workers} search worker{} from {}, recording into the store {}\n\
         follow it with `memctl status {}`; `memctl search-report {} {experiment}` shows what it found",
        if workers == 1 { "" } else { "s" },
        path.display(),
        store_path.display(),
        dir.display(),
        sub.spec_path.display()
    );
    Ok(0)
}

/// Identities of trials whose array task is still queued or running in an earlier submission.
fn active_trials(dir: &Path) -> anyhow::Result<HashSet<String>> {
    let mut active = HashSet::new();
    for m in manifests(dir) {
        for (task, _state) in m.queued_tasks()? {
            for i in m.trials_of_task(task) {
                active.insert(m.trials[i].trial_key.clone());
            }
        }
    }
    Ok(active)
}

/// Every manifest of a sweep directory, in submission order.
pub fn manifests(dir: &Path) -> Vec<Manifest> {
    let Ok(entries) = std::fs::read_dir(dir.join("manifests")) else { return vec![] };
    let mut paths: Vec<(usize, PathBuf)> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter_map(|p| Some((p.file_stem()?.to_str()?.parse().ok()?, p)))
        .collect();
    paths.sort();
    let read = |p: PathBuf| match Manifest::read(&p) {
        Ok(m) => Some(m),
        Err(e) => {
            eprintln!("warning: {}: {e}; its trials are taken as not submitted", p.display());
            None
        }
    };
    paths.into_iter().filter_map(|(_, p)| read(p)).collect()
}
