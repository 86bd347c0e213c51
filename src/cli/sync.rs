//! `memctl sync [DIR]`: merge finished Slurm runs (shards) into the local store.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use crate::cli::{context::Context, slurm_submit};
use crate::slurm::shard;
use crate::store::{Status, Store};

/// Merge the runs finished on a Slurm cluster into the local store (idempotent).
#[derive(clap::Args)]
pub struct Args {
    /// A sweep directory, or the shared root holding several (default: `slurm`).
    #[arg(default_value = "slurm")]
    dir: PathBuf,
}

pub fn run(args: Args, ctx: &Context) -> anyhow::Result<i32> {
    let dirs = sweep_dirs(&args.dir);
    if dirs.is_empty() {
        anyhow::bail!(
            "{}: no Slurm sweep here (a sweep's folder holds `manifests/`, written by `memctl sweep --executor slurm`); \
             pass the sweep's folder or the shared root above it",
            args.dir.display()
        );
    }
    let store = Store::open(&ctx.store)?;
    let mut totals = (0, 0, 0);
    for dir in dirs {
        let (imported, present, unreadable) = sync_dir(&store, &dir)?;
        let (missing, unread) = missing_tasks(&dir);
        eprintln!(
            "{}: {imported} imported, {present} already in the store{}{}{}",
            dir.display(),
            if unreadable > 0 { format!(", {unreadable} unreadable shards") } else { String::new() },
            if missing.is_empty() {
                String::new()
            } else {
                format!(", {} without a result yet: {}", missing.len(), missing.join(", "))
            },
            match unread {
                Some(e) => format!(" (some may still be queued: the queue cannot be read, {e})"),
                None => String::new(),
            }
        );
        totals = (totals.0 + imported, totals.1 + present, totals.2 + unreadable);
    }
    Ok(if totals.2 > 0 { 1 } else { 0 })
}

/// The sweep directories under `dir` (or `dir` itself).
pub fn sweep_dirs(dir: &Path) -> Vec<PathBuf> {
    if dir.join("manifests").is_dir() {
        return vec![dir.to_path_buf()];
    }
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|d| d.filter_map(Result::ok).map(|e| e.path()).filter(|p| p.join("manifests").is_dir()).collect())
        .unwrap_or_default();
    dirs.sort();
    dirs
}

/// Imports each shard unless its trial's latest run in the store covers it ([`import_shard`]). Returns (imported, already present, unreadable).
fn sync_dir(store: &Store, dir: &Path) -> anyhow::Result<(usize, usize, usize)> {
    let (mut imported, mut present, mut unreadable) = (0, 0, 0);
    for (path, shard) in shard::read_all(dir) {
        let record = match shard {
            Ok(r) => r,
            Err(e) => {
                eprintln!("warning: {}: {e}", path.display());
                unreadable += 1;
                continue;
            }
        };
        if import_shard(store, record)? {
            imported += 1;
        } else {
            present += 1;
        }
    }
    Ok((imported, present, unreadable))
}

/// Adds a shard's run to the store unless the trial's latest run there is this run, a done run
/// that started with it, or any run that started later: as `import` does, the trial's newest
/// attempt stands (a local `--force` run after the cluster's). A run that started later than
/// the latest (a trial submitted again with `--force` or `--retry-failed`) is added. Returns
/// whether it was.
pub fn import_shard(store: &Store, record: crate::store::RunRecord) -> Result<bool, crate::store::StoreError> {
    let (status, started_at) = (record.status, record.started_at);
    store.import(record, |latest| {
        latest.is_some_and(|l| {
            l.started_at > started_at
                || (l.started_at == started_at && (l.status == status || l.status == Status::Done))
        })
    })
}

/// Labels of submitted trials with no shard and no longer queued (killed, preempted, or lost);
/// where the queue cannot be read, every one without a shard, and why.
pub fn missing_tasks(dir: &Path) -> (Vec<String>, Option<crate::slurm::scheduler::SlurmError>) {
    let have: HashSet<String> =
        shard::read_all(dir).into_iter().filter_map(|(_, r)| r.ok()).map(|r| r.trial_key).collect();
    let (mut missing, mut unread) = (vec![], None);
    for m in slurm_submit::manifests(dir) {
        let queued = m.queued_tasks().unwrap_or_else(|e| {
            unread = Some(e);
            vec![]
        });
        let queued: HashSet<usize> = queued.into_iter().map(|(i, _)| i).collect();
        for (i, t) in m.trials.iter().enumerate() {
            let queued = m.task_of_trial(i).is_some_and(|task| queued.contains(&task));
            if !have.contains(&t.trial_key) && !queued && !missing.contains(&t.trial_key) {
                missing.push(t.trial_key.clone());
            }
        }
    }
    (missing, unread)
}

#[cfg(test)]
mod tests {
    use super::import_shard;
    use crate::store::{Status, Store, record};

    /// A shard is added unless the trial's latest run covers it: syncing twice adds nothing, an
    /// older run stays out, a later rerun comes in.
    #[test]
    fn a_shard_is_imported_unless_the_trials_latest_run_covers_it() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("store")).unwrap();
        let run = |status: Status, started_at: f64| {
            let mut r = record::decode(include_bytes!("../../tests/fixtures/run_record_v1.json")).unwrap();
            (r.status, r.started_at) = (status, started_at);
            r
        };
        assert!(import_shard(&store, run(Status::Done, 100.0)).unwrap(), "a new trial");
        assert!(!import_shard(&store, run(Status::Done, 100.0)).unwrap(), "the same run again");
        assert!(!import_shard(&store, run(Status::Failed, 50.0)).unwrap(), "older than the done run");
        assert!(import_shard(&store, run(Status::Failed, 200.0)).unwrap(), "a rerun that started later");
        assert!(!import_shard(&store, run(Status::Failed, 200.0)).unwrap(), "that rerun again");
        assert!(import_shard(&store, run(Status::Done, 300.0)).unwrap(), "a later done run");
        // A run here that failed after the cluster's run started (a local `--force`): the
        // cluster's older run does not become the trial's latest.
        store.put(&crate::store::RunRecord { id: 99, ..run(Status::Failed, 500.0) }).unwrap();
        assert!(!import_shard(&store, run(Status::Failed, 400.0)).unwrap(), "older than the failed run");
        assert_eq!(store.all().unwrap().len(), 4);
        assert!(!import_shard(&store, run(Status::Done, 450.0)).unwrap(), "even a done one");
    }
}
