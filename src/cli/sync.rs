//! `memctl sync [DIR]`: merge finished Slurm runs (shards) into the local store.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use crate::cli::{context::Context, slurm_submit};
use crate::slurm::shard;
use crate::store::{Merge, Status, Store};

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
    let mut unreadable = 0;
    for dir in dirs {
        let n = sync_dir(&store, &dir)?;
        let (missing, unread) = missing_tasks(&dir);
        eprintln!(
            "{}: {} imported, {} already in the store{}{}{}{}",
            dir.display(),
            n.imported,
            n.present,
            if n.deleted > 0 {
                format!(", {} deleted here (`memctl rm`), not added again", n.deleted)
            } else {
                String::new()
            },
            if n.unreadable > 0 { format!(", {} unreadable shards", n.unreadable) } else { String::new() },
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
        unreadable += n.unreadable;
    }
    Ok(if unreadable > 0 { 1 } else { 0 })
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

/// What syncing one sweep directory did with its shards.
#[derive(Default)]
struct Synced {
    imported: usize,
    /// Covered by their trial's latest run in the store.
    present: usize,
    /// Deleted from the store with `memctl rm`.
    deleted: usize,
    unreadable: usize,
}

/// Imports each shard unless its trial's latest run in the store covers it, or the store
/// deleted it ([`import_shard`]).
fn sync_dir(store: &Store, dir: &Path) -> anyhow::Result<Synced> {
    let mut n = Synced::default();
    for (path, shard) in shard::read_all(dir) {
        let record = match shard {
            Ok(r) => r,
            Err(e) => {
                eprintln!("warning: {}: {e}", path.display());
                n.unreadable += 1;
                continue;
            }
        };
        match import_shard(store, record)? {
            Merge::Added => n.imported += 1,
            Merge::Covered => n.present += 1,
            Merge::DeletedHere => n.deleted += 1,
        }
    }
    Ok(n)
}

/// Adds a shard's run to the store unless the store deleted it (`memctl rm`), or the trial's
/// latest run there is this run, a done run that started with it, or any run that started
/// later: as `import` does, the trial's newest attempt stands (a local `--force` run after the
/// cluster's). A run that started later than the latest (a trial submitted again with
/// `--force` or `--retry-failed`) is added.
pub fn import_shard(store: &Store, record: crate::store::RunRecord) -> Result<Merge, crate::store::StoreError> {
    let (status, started_at) = (record.status, record.started_at);
    store.merge(record, |latest| {
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
    use crate::store::{Merge, Status, Store, record};

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
        let added = |status, started_at| import_shard(&store, run(status, started_at)).unwrap() == Merge::Added;
        assert!(added(Status::Done, 100.0), "a new trial");
        assert!(!added(Status::Done, 100.0), "the same run again");
        assert!(!added(Status::Failed, 50.0), "older than the done run");
        assert!(added(Status::Failed, 200.0), "a rerun that started later");
        assert!(!added(Status::Failed, 200.0), "that rerun again");
        assert!(added(Status::Done, 300.0), "a later done run");
        // A run here that failed after the cluster's run started (a local `--force`): the
        // cluster's older run does not become the trial's latest.
        store.put(&crate::store::RunRecord { id: 99, ..run(Status::Failed, 500.0) }).unwrap();
        assert!(!added(Status::Failed, 400.0), "older than the failed run");
        assert_eq!(store.all().unwrap().len(), 4);
        assert!(!added(Status::Done, 450.0), "even a done one");
    }

    /// A run deleted with `memctl rm` stays deleted when its shard is synced again; `import` of
    /// a file holding it is asked for it, and adds it back.
    #[test]
    fn a_deleted_run_is_not_synced_back_from_its_shard() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("store")).unwrap();
        let shard = record::decode(include_bytes!("../../tests/fixtures/run_record_v1.json")).unwrap();
        assert_eq!(import_shard(&store, shard.clone()).unwrap(), Merge::Added);
        let id = store.all().unwrap()[0].id;
        store.delete(&[id]).unwrap();
        assert_eq!(import_shard(&store, shard.clone()).unwrap(), Merge::DeletedHere);
        assert!(store.all().unwrap().is_empty());
        let later = record::RunRecord { started_at: shard.started_at + 1.0, ..shard.clone() };
        assert_eq!(import_shard(&store, later).unwrap(), Merge::Added, "a later run of the trial is another run");
        store.delete(&[store.all().unwrap()[0].id]).unwrap();
        assert_eq!(store.import_all(vec![shard.clone()], |_, _| false).unwrap(), [true]);
        assert_eq!(import_shard(&store, shard).unwrap(), Merge::Covered, "imported again, it is the store's once more");
    }
}
