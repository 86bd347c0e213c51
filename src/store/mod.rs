//! The run store: a directory (default `./store`) holding a sled database and checkpoints.
//!
//! # Many processes, one store
//!
//! sled allows one process at a time to open a database. A store must serve many: sweeps
//! writing their trials, two sweeps on the same spec, `memctl runs` and the dashboard reading
//! while they train, `memctl sync` merging Slurm shards. memctl therefore never keeps the
//! database open: every operation is one short exclusive [session](session) — open, read or
//! write in one sled transaction, flush, close — and a process that finds the store in use
//! waits its turn ([`Store::wait`], `MEMCTL_STORE_WAIT`). A running trial's progress records
//! go through a [coalescing writer thread](crate::sweep::progress_writer), so training never
//! waits for a turn; only a trial's claim, its final record and its checkpoints do.
//!
//! Measured on a store of 10 000 runs with 200-point curves (270 MB; `cargo bench --bench
//! store_concurrency`, 2-core AMD EPYC, training on one core): opening takes 6 ms and closing 3
//! ms; `memctl runs --where … --group-by …` run every 0.1 s while a sweep trained and wrote took
//! a median 71 ms (p90 114 ms, 7 of 282 over 200 ms); the store cost that sweep 0.40 % of its
//! time (26 ms per 6-second trial). So taking turns costs little: readers see every write
//! within milliseconds, and no daemon has to be started, found or recovered. The alternatives
//! were a writer process that others talk to (a second moving part whose death strands
//! everyone) and another embedded engine (SQLite in WAL mode would do, but the project chose
//! sled and the measurements say it is enough).
//!
//! What this buys:
//! - **No trial runs twice.** A sweep claims a trial in one session ([`Store::claim`]): it
//!   reads the trial's latest run and, unless that run is done or still running, writes a new
//!   `running` run for it. Two sweeps cannot both see the trial free, because sessions exclude
//!   each other.
//! - **Dead runs are taken over.** A `running` run names its process ([`owner`]); a sweep that
//!   finds the process gone marks the run `interrupted` and runs the trial again, from its
//!   last checkpoint ([`checkpoints`]). The claim counts how many times in a row the trial's
//!   process died before its first step; a sweep probes such a trial in a process of its own
//!   before running it again ([`crate::sweep::probe`]), and fails it only on a crash it saw.
//! - **Live progress.** A running trial rewrites its record (curves so far, steps, timings) as
//!   it trains, about every [`PROGRESS_EVERY`] (after a step: less often where one step takes
//!   longer), so that a killed process leaves a record of nearly all it did.
//! - **Nothing lost.** Every write of a record is one sled transaction over the `runs`,
//!   `trials`, `running` and `summaries` trees followed by a flush, so a crash never leaves a
//!   half-written run or loses a finished one, and a summary always matches its record.

mod backoff;
pub mod checkpoints;
pub mod cost;
mod error;
pub mod keys;
mod non_finite;
pub mod owner;
pub mod record;
mod session;
mod snapshot;
pub mod study;
pub mod summary;
pub mod tag_text;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use sled::Transactional;
use sled::transaction::{ConflictableTransactionError, TransactionError};

pub use error::StoreError;
pub use keys::SCHEMA;
pub use record::{Environment, Progress, Pruned, RunRecord, Status, StoredConfig, now};
use session::Session;
pub use study::StudyRecord;
pub use summary::RunSummary;

/// How often a running trial rewrites its record with progress (also its sign of life for
/// processes on other machines, see [`owner::REMOTE_SILENCE`]).
pub const PROGRESS_EVERY: Duration = Duration::from_secs(2);
/// Why a run stopped when its process died under it.
pub const PROCESS_DIED: &str = "interrupted: its process stopped before the run finished";

/// A store on disk. Cheap to clone and to share between threads: it holds only its path (and,
/// for a store it may only read, the shared copy it reads from).
#[derive(Clone, Debug)]
pub struct Store {
    path: PathBuf,
    wait: Duration,
    /// Set when this process cannot write the store: why, and the copy that reads serve from.
    read_only: Option<(String, Arc<snapshot::Snapshot>)>,
    /// Whether a session may create the database: not for a store opened to read or edit runs
    /// ([`Store::open_existing`]), whose folder may be moved or deleted while it is open.
    creates: bool,
}

/// What a sweep may do with a trial, decided in one session by [`Store::claim`].
#[derive(Debug)]
pub enum Claim {
    /// The trial is this sweep's: its new `running` record (already stored), and the run it
    /// takes over, if its previous run was interrupted.
    Run { record: Box<RunRecord>, took_over: Option<u64> },
    /// Not run: its latest run is done (or failed, without retrying failures), recorded as
    /// `experiment`'s (the name may differ from this sweep's: names are not in an identity).
    Settled { run_id: u64, status: Status, experiment: String },
    /// Another live process is running it now.
    RunningElsewhere { run_id: u64, pid: u32, host: String },
}

impl Claim {
    fn settled(prev: RunRecord) -> Claim {
        Claim::Settled { run_id: prev.id, status: prev.status, experiment: prev.config.experiment }
    }
}

/// What [`Store::merge`] did with a run made elsewhere.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Merge {
    Added,
    /// The trial's latest run here covers it.
    Covered,
    /// It was here once and was deleted (`memctl rm`).
    DeletedHere,
}

/// Which settled trials a claim runs again.
#[derive(Clone, Copy, Debug, Default)]
pub struct Rerun {
    /// Trials whose latest run is done (and failed ones).
    pub done: bool,
    /// Trials whose latest run failed.
    pub failed: bool,
    /// Trials whose latest run a search's pruner stopped.
    pub pruned: bool,
}

impl Store {
    /// Opens (creating if needed) the store at `path`, waiting up to `MEMCTL_STORE_WAIT`
    /// seconds (default 120) whenever another process is using it.
    pub fn open(path: &Path) -> Result<Store, StoreError> {
        let wait = std::env::var("MEMCTL_STORE_WAIT")
            .ok()
            .and_then(|s| s.parse::<f64>().ok())
            .filter(|s| s.is_finite() && *s >= 0.0)
            .map_or(Duration::from_secs(120), Duration::from_secs_f64);
        Store::open_with(path, wait)
    }

    /// [`Store::open`] for commands that only read or edit runs (`runs`, `show`, `rm`, `ui`, …):
    /// a store that is not there (no folder, or a folder without a database) is a mistyped path,
    /// not one to create, now or when its folder goes away while it is open.
    pub fn open_existing(path: &Path) -> Result<Store, StoreError> {
        if path.exists() && !path.is_dir() {
            return Err(StoreError::Open { path: path.into(), reason: "it is a file, not a folder".into() });
        }
        if !Store::exists_at(path) {
            return Err(StoreError::Missing(path.into()));
        }
        Ok(Store { creates: false, ..Store::open(path)? })
    }

    /// Whether `path` holds a store (its database folder, `db/`).
    pub fn exists_at(path: &Path) -> bool {
        path.join("db").is_dir()
    }

    /// [`Store::open`] with an explicit wait limit.
    pub fn open_with(path: &Path, wait: Duration) -> Result<Store, StoreError> {
        if path.exists() && !path.is_dir() {
            return Err(StoreError::Open { path: path.into(), reason: "it is a file, not a folder".into() });
        }
        std::fs::create_dir_all(path)
            .map_err(|e| StoreError::Open { path: path.into(), reason: session::io_reason(&e) })?;
        let mut store = Store { path: path.into(), wait, read_only: None, creates: true };
        // One session now, so that a store that cannot be used says so at once.
        match store.session(|_| Ok(())) {
            Ok(()) => {}
            Err(StoreError::Unwritable { reason, .. }) if path.join("db").join("db").is_file() => {
                let copy = snapshot::Snapshot::new()
                    .map_err(|e| StoreError::Open { path: path.into(), reason: format!("{reason}, and {e}") })?;
                store.read_only = Some((reason, Arc::new(copy)));
                store.session(|_| Ok(()))?;
            }
            Err(e) => return Err(e),
        }
        Ok(store)
    }

    /// Whether this process can only read the store (it reads a copy; writes are refused).
    pub fn is_read_only(&self) -> bool {
        self.read_only.is_some()
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// How long an operation waits for another process's session.
    pub fn wait(&self) -> Duration {
        self.wait
    }

    /// Runs `f` in one exclusive session that writes; refused on a store this process may only read.
    fn writing<R>(&self, f: impl FnOnce(&Session) -> Result<R, StoreError>) -> Result<R, StoreError> {
        if let Some((reason, _)) = &self.read_only {
            return Err(StoreError::ReadOnly { path: self.path.clone(), reason: reason.clone() });
        }
        self.session(f)
    }

    /// Runs `f` in one exclusive session (on the copy, for a store this process may only read);
    /// flushes after it.
    fn session<R>(&self, f: impl FnOnce(&Session) -> Result<R, StoreError>) -> Result<R, StoreError> {
        cost::timed(|| {
            if !self.creates && !Store::exists_at(&self.path) {
                return Err(StoreError::Missing(self.path.clone()));
            }
            let path = match &self.read_only {
                Some((_, copy)) => copy.refresh(&self.path, self.wait)?,
                None => self.path.clone(),
            };
            let s = Session::open(&path, self.wait)?;
            let r = f(&s)?;
            s.flush()?;
            Ok(r)
        })
    }

    /// Writes a run record atomically (record, summary and trial index together) and flushes.
    /// Tags are the user's (`memctl tag`): the stored run's tags stand over `record`'s, so that
    /// a run's own progress writes keep a tag added or removed while it trains.
    pub fn put(&self, record: &RunRecord) -> Result<(), StoreError> {
        self.writing(|s| match stored_tags(s, record.id)? {
            Some(tags) if tags != record.tags => write(s, &RunRecord { tags, ..record.clone() }),
            _ => write(s, record),
        })
    }

    /// [`Store::put`] for a trial this process runs (its progress, its final record): written
    /// only while the stored run is still `running`. `false` when it is not, or is no longer
    /// there: another sweep counted this process as gone and took the trial over (or the run
    /// was deleted as dead), and a write from the old process must not undo that.
    pub fn put_while_running(&self, record: &RunRecord) -> Result<bool, StoreError> {
        self.writing(|s| match stored_summary(s, record.id)? {
            Some(stored) if stored.status == Status::Running => {
                write(s, &RunRecord { tags: stored.tags, ..record.clone() }).map(|_| true)
            }
            _ => Ok(false),
        })
    }

    /// Writes many records (each atomically) in one session: imports, tests, benchmarks.
    pub fn put_many(&self, records: &[RunRecord]) -> Result<(), StoreError> {
        self.writing(|s| records.iter().try_for_each(|r| write(s, r)))
    }

    /// Adds a run made elsewhere (a Slurm shard) under a fresh id, unless this store deleted it
    /// (`memctl rm`) or `present` says the trial's latest run (if any) already covers it — all
    /// in one session, so that two imports of the same shard add it once.
    pub fn merge(
        &self,
        record: RunRecord,
        present: impl FnOnce(Option<&RunRecord>) -> bool,
    ) -> Result<Merge, StoreError> {
        self.writing(|s| {
            if s.deleted.contains_key(keys::origin_key(&record.trial_key, record.started_at))? {
                return Ok(Merge::DeletedHere);
            }
            if present(latest_of_trial(s, &record.trial_key)?.as_ref()) {
                return Ok(Merge::Covered);
            }
            write(s, &RunRecord { id: next_id(s)?, ..record })?;
            Ok(Merge::Added)
        })
    }

    /// Adds many runs exported from another store in one session (a session per run spends
    /// most of its time opening and flushing the store), unless `present(run, latest)` says
    /// the trial's latest run covers it; each sees the runs added before it. A run this store
    /// deleted is added again: importing a file is asking for its runs. Returns which were
    /// added.
    pub fn import_all(
        &self,
        records: Vec<RunRecord>,
        mut present: impl FnMut(&RunRecord, Option<&RunRecord>) -> bool,
    ) -> Result<Vec<bool>, StoreError> {
        self.writing(|s| {
            let mut added = Vec::with_capacity(records.len());
            for mut record in records {
                if present(&record, latest_of_trial(s, &record.trial_key)?.as_ref()) {
                    added.push(false);
                    continue;
                }
                record.id = next_id(s)?;
                write(s, &record)?;
                s.deleted.remove(keys::origin_key(&record.trial_key, record.started_at))?;
                added.push(true);
            }
            Ok(added)
        })
    }

    /// The origins ([`keys::origin_key`]) of the runs deleted from this store with `memctl rm`.
    pub fn deleted_origins(&self) -> Result<std::collections::HashSet<Vec<u8>>, StoreError> {
        self.session(|s| s.deleted.iter().keys().map(|k| Ok(k?.to_vec())).collect())
    }

    /// Decides whether this process runs a trial, and if so records it as `running` — all in
    /// one session, so that two processes never both run it. `make` builds the new record from
    /// its id (the next free one) and the run it takes over, if any.
    pub fn claim(
        &self,
        trial_key: &str,
        rerun: Rerun,
        make: impl FnOnce(u64, Option<&RunRecord>) -> RunRecord,
    ) -> Result<Claim, StoreError> {
        self.writing(|s| {
            let latest = latest_of_trial(s, trial_key)?;
            let mut took_over = None;
            let mut deaths = 0;
            if let Some(mut prev) = latest.clone() {
                match prev.status {
                    Status::Done if !rerun.done => return Ok(Claim::settled(prev)),
                    Status::Pruned if !(rerun.done || rerun.pruned) => return Ok(Claim::settled(prev)),
                    Status::Failed if !(rerun.failed || rerun.done) => return Ok(Claim::settled(prev)),
                    Status::Running if !owner::is_gone(&prev, now()) => {
                        let (pid, host) = running_process(&prev);
                        return Ok(Claim::RunningElsewhere { run_id: prev.id, pid, host });
                    }
                    Status::Running => {
                        prev.status = Status::Interrupted;
                        prev.stop_reason = PROCESS_DIED.into();
                        prev.ended_at = Some(now());
                        write(s, &prev)?;
                        deaths = deaths_before_first_step(&prev);
                        took_over = Some(prev.id);
                    }
                    Status::Interrupted => {
                        deaths = deaths_before_first_step(&prev);
                        took_over = Some(prev.id);
                    }
                    Status::Done | Status::Failed | Status::Pruned => {}
                }
            }
            let id = next_id(s)?;
            let mut record = make(id, latest.as_ref().filter(|r| Some(r.id) == took_over));
            if let Some(p) = record.progress.as_mut() {
                p.deaths = deaths;
            }
            write(s, &record)?;
            Ok(Claim::Run { record: Box::new(record), took_over })
        })
    }

    /// Deletes runs (record and summary). A trial whose latest run is deleted falls back to its
    /// newest remaining run, or to none (a sweep then runs it again). The store remembers each
    /// deleted run's origin, so that `memctl sync` does not add it back from its shard.
    pub fn delete(&self, ids: &[u64]) -> Result<(), StoreError> {
        self.writing(|s| {
            if let Some(id) = ids.iter().find(|id| !s.runs.contains_key(keys::run_key(**id)).unwrap_or(false)) {
                return Err(StoreError::NoSuchRun(*id));
            }
            // Summaries, not whole records (megabytes of curves to decode per run).
            let deleted = ids.iter().map(|&id| summary_in(s, id)).collect::<Result<Vec<_>, _>>()?;
            // A live trial would write its record back at its next progress report.
            for summary in &deleted {
                let summary = summary.clone().as_seen();
                if summary.status == Status::Running {
                    let owner = summary.live.and_then(|l| l.owner);
                    let (pid, host) = owner.map_or((0, String::new()), |o| (o.pid, o.hostname));
                    return Err(StoreError::StillRunning { id: summary.id, pid, host });
                }
            }
            let gone: std::collections::HashSet<u64> = ids.iter().copied().collect();
            // The trials the deleted runs were latest of, and their newest surviving run.
            let mut fallback: std::collections::HashMap<Vec<u8>, Option<u64>> = Default::default();
            for summary in &deleted {
                let id = summary.id;
                let trial = summary.trial_key.as_bytes().to_vec();
                if s.trials.get(&trial)?.is_some_and(|k| keys::run_id(&k) == Some(id)) {
                    fallback.insert(trial, None);
                }
            }
            if !fallback.is_empty() {
                for summary in summaries_in(s)? {
                    if let Some(slot) = fallback.get_mut(summary.trial_key.as_bytes())
                        && !gone.contains(&summary.id)
                        && slot.is_none_or(|id| summary.id > id)
                    {
                        *slot = Some(summary.id);
                    }
                }
            }
            (&s.runs, &s.trials, &s.running, &s.summaries, &s.deleted)
                .transaction(|(runs, trials, running, summaries, deleted_origins)| {
                    for &id in ids {
                        let key = keys::run_key(id);
                        runs.remove(&key)?;
                        summaries.remove(&key)?;
                        running.remove(&key)?;
                    }
                    for summary in &deleted {
                        deleted_origins.insert(
                            keys::origin_key(&summary.trial_key, summary.started_at),
                            &keys::run_key(summary.id),
                        )?;
                    }
                    for (trial, latest) in &fallback {
                        match latest {
                            Some(id) => trials.insert(trial.as_slice(), &keys::run_key(*id))?,
                            None => trials.remove(trial.as_slice())?,
                        };
                    }
                    Ok::<(), ConflictableTransactionError<()>>(())
                })
                .map_err(|e| tx_error(e, ids.first().copied().unwrap_or(0)))
        })
    }

    /// Adds `tag` to a run (`add`), or removes it; returns whether the tags changed.
    pub fn tag(&self, id: u64, tag: &str, add: bool) -> Result<bool, StoreError> {
        self.writing(|s| {
            let mut r = get_in(s, id)?;
            let had = r.tags.iter().any(|t| t == tag);
            if add == had {
                return Ok(false);
            }
            if add {
                r.tags.push(tag.to_string());
            } else {
                r.tags.retain(|t| t != tag);
            }
            write(s, &r)?;
            Ok(true)
        })
    }

    /// One run's summary.
    pub fn summary(&self, id: u64) -> Result<RunSummary, StoreError> {
        self.session(|s| summary_in(s, id))
    }

    /// Every run's summary, oldest first (decoded on all cores: 10 000 take tens of ms).
    pub fn summaries(&self) -> Result<Vec<RunSummary>, StoreError> {
        self.session(summaries_in)
    }

    pub fn get(&self, id: u64) -> Result<RunRecord, StoreError> {
        self.session(|s| get_in(s, id))
    }

    /// Several runs in one session, in the order asked.
    pub fn get_many(&self, ids: &[u64]) -> Result<Vec<RunRecord>, StoreError> {
        use rayon::prelude::*;
        // The bytes are read in the session; decoding them (JSON, most of the time) happens
        // after it, in parallel, so that writers wait for the reads only.
        let raw: Vec<(u64, sled::IVec)> = self.session(|s| {
            ids.iter().map(|&id| Ok((id, s.runs.get(keys::run_key(id))?.ok_or(StoreError::NoSuchRun(id))?))).collect()
        })?;
        raw.par_iter().map(|(id, bytes)| record::decode_stored(*id, bytes)).collect()
    }

    /// [`Store::get_many`] of the runs that are there (a page may still name a deleted one).
    pub fn get_present(&self, ids: &[u64]) -> Result<Vec<RunRecord>, StoreError> {
        use rayon::prelude::*;
        let raw: Vec<(u64, sled::IVec)> = self.session(|s| {
            let found = ids.iter().map(|&id| Ok(s.runs.get(keys::run_key(id))?.map(|bytes| (id, bytes))));
            found.filter_map(Result::transpose).collect()
        })?;
        raw.par_iter().map(|(id, bytes)| record::decode_stored(*id, bytes)).collect()
    }

    /// A search's state (empty if it has none yet).
    pub fn study(&self, key: &str, experiment: &str) -> Result<StudyRecord, StoreError> {
        self.session(|s| study_in(s, key, experiment))
    }

    /// Changes a search's state in one session: `f` sees it as stored (empty if new), may
    /// change it, and what it returns is returned; the state is written back if it changed.
    /// Two processes' changes never interleave.
    pub fn update_study<R>(
        &self,
        key: &str,
        experiment: &str,
        f: impl FnOnce(&mut StudyRecord) -> R,
    ) -> Result<R, StoreError> {
        self.writing(|s| {
            let mut study = study_in(s, key, experiment)?;
            let before = study.clone();
            let r = f(&mut study);
            if study != before {
                let bytes = study::encode(&study)
                    .map_err(|e| StoreError::CorruptStudy { key: key.into(), reason: e.to_string() })?;
                s.studies.insert(key.as_bytes(), bytes)?;
            }
            Ok(r)
        })
    }

    /// The summary of each trial's latest run, if any, as seen now ([`RunSummary::as_seen`]),
    /// in the order asked: one session, one index lookup a trial, however large the store.
    pub fn latest_summaries(&self, trial_keys: &[String]) -> Result<Vec<Option<RunSummary>>, StoreError> {
        let latest = self.session(|s| {
            trial_keys
                .iter()
                .map(|key| latest_id(s, key)?.map(|id| summary_in(s, id)).transpose())
                .collect::<Result<Vec<_>, StoreError>>()
        })?;
        Ok(latest.into_iter().map(|l| l.map(RunSummary::as_seen)).collect())
    }

    /// The latest run of a trial, if any.
    pub fn latest_of_trial(&self, trial_key: &str) -> Result<Option<RunRecord>, StoreError> {
        self.session(|s| latest_of_trial(s, trial_key))
    }

    /// Every run, oldest first.
    pub fn all(&self) -> Result<Vec<RunRecord>, StoreError> {
        self.session(|s| {
            let mut out = vec![];
            for item in s.runs.iter() {
                let (k, v) = item?;
                out.push(record::decode_stored(keys::run_id(&k).unwrap_or(0), &v)?);
            }
            Ok(out)
        })
    }
}

/// The run's record as stored, unless it is `running` with its process gone: then as the
/// next sweep will record it (`interrupted`). What readers show.
pub fn as_seen(mut r: RunRecord) -> RunRecord {
    if r.status == Status::Running && owner::is_gone(&r, now()) {
        r.status = Status::Interrupted;
        r.stop_reason = PROCESS_DIED.into();
    }
    r
}

/// How many times in a row the trial's process died before its first step, counting the
/// interrupted run `prev` (whose process died, or which was stopped).
fn deaths_before_first_step(prev: &RunRecord) -> u32 {
    let earlier = prev.progress.as_ref().map_or(0, |p| p.deaths);
    let resumed_at = prev.progress.as_ref().and_then(|p| p.resumed_from).unwrap_or(0);
    let died = prev.stop_reason == PROCESS_DIED;
    if died && prev.steps_run <= resumed_at { earlier + 1 } else { 0 }
}

fn last_id(s: &Session) -> Result<u64, StoreError> {
    Ok(s.runs.last()?.and_then(|(k, _)| keys::run_id(&k)).unwrap_or(0))
}

/// The id of a new run: above every run in the store and every id issued before, so that a
/// deleted run's id never comes back (notes and `memctl diff` commands keep meaning one run).
fn next_id(s: &Session) -> Result<u64, StoreError> {
    let issued = s.meta.get(keys::LAST_ISSUED_ID_KEY)?.and_then(|v| keys::run_id(&v)).unwrap_or(0);
    let id = last_id(s)?.max(issued) + 1;
    s.meta.insert(keys::LAST_ISSUED_ID_KEY, &keys::run_key(id))?;
    Ok(id)
}

/// The process and host of a `running` run.
fn running_process(r: &RunRecord) -> (u32, String) {
    r.environment
        .process
        .as_ref()
        .map_or((r.environment.pid, r.environment.hostname.clone()), |p| (p.pid, p.hostname.clone()))
}

fn write(s: &Session, record: &RunRecord) -> Result<(), StoreError> {
    let bytes = record::encode(record).map_err(|e| StoreError::Corrupt { id: record.id, reason: e.to_string() })?;
    let summary = summary::encode(&RunSummary::of(record));
    let key = keys::run_key(record.id);
    let trial = record.trial_key.as_bytes().to_vec();
    let in_flight = record.status == Status::Running;
    (&s.runs, &s.trials, &s.running, &s.summaries)
        .transaction(|(runs, trials, running, summaries)| {
            runs.insert(&key, bytes.as_slice())?;
            summaries.insert(&key, summary.as_slice())?;
            // The index points at the trial's newest run: never back at an older one.
            let newest = trials.get(trial.as_slice())?.and_then(|k| keys::run_id(&k)).is_none_or(|id| id <= record.id);
            if newest {
                trials.insert(trial.as_slice(), &key)?;
            }
            if in_flight {
                running.insert(&key, &[])?;
            } else {
                running.remove(&key)?;
            }
            Ok::<(), ConflictableTransactionError<()>>(())
        })
        .map_err(|e| tx_error(e, record.id))
}

fn get_in(s: &Session, id: u64) -> Result<RunRecord, StoreError> {
    let bytes = s.runs.get(keys::run_key(id))?.ok_or(StoreError::NoSuchRun(id))?;
    record::decode_stored(id, &bytes)
}

fn summary_in(s: &Session, id: u64) -> Result<RunSummary, StoreError> {
    let bytes = s.summaries.get(keys::run_key(id))?.ok_or(StoreError::NoSuchRun(id))?;
    summary::decode(id, &bytes)
}

/// The tags of run `id` as stored, if it is (and its summary reads).
fn stored_tags(s: &Session, id: u64) -> Result<Option<Vec<String>>, StoreError> {
    Ok(stored_summary(s, id)?.map(|summary| summary.tags))
}

/// The summary of run `id` as stored (none for a run not there, or one that does not decode).
fn stored_summary(s: &Session, id: u64) -> Result<Option<RunSummary>, StoreError> {
    let bytes = s.summaries.get(keys::run_key(id))?;
    Ok(bytes.and_then(|b| summary::decode(id, &b).ok()))
}

fn summaries_in(s: &Session) -> Result<Vec<RunSummary>, StoreError> {
    use rayon::prelude::*;
    let raw: Vec<(sled::IVec, sled::IVec)> = s.summaries.iter().collect::<Result<_, _>>()?;
    raw.par_iter().map_init(summary::Decoder::default, |d, (k, v)| d.decode(keys::run_id(k).unwrap_or(0), v)).collect()
}

fn latest_of_trial(s: &Session, trial_key: &str) -> Result<Option<RunRecord>, StoreError> {
    latest_id(s, trial_key)?.map(|id| get_in(s, id)).transpose()
}

/// The id of a trial's latest run, from the trial index.
fn latest_id(s: &Session, trial_key: &str) -> Result<Option<u64>, StoreError> {
    match s.trials.get(trial_key.as_bytes())? {
        Some(k) => Ok(Some(keys::run_id(&k).ok_or(StoreError::Corrupt { id: 0, reason: "bad trial index".into() })?)),
        None => Ok(None),
    }
}

fn study_in(s: &Session, key: &str, experiment: &str) -> Result<StudyRecord, StoreError> {
    match s.studies.get(key.as_bytes())? {
        Some(bytes) => {
            study::decode(&bytes).map_err(|e| StoreError::CorruptStudy { key: key.into(), reason: e.to_string() })
        }
        None => Ok(StudyRecord::new(experiment)),
    }
}

fn tx_error(e: TransactionError<()>, id: u64) -> StoreError {
    match e {
        TransactionError::Storage(s) => StoreError::Sled(s),
        TransactionError::Abort(()) => StoreError::Corrupt { id, reason: "transaction aborted".into() },
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::store::record::{ProcessIdentity, RECORD_VERSION};

    /// A `running` record of trial `t` whose process is this one, or a dead one.
    pub(crate) fn running(id: u64, alive: bool) -> RunRecord {
        let mut r: RunRecord = record::decode(include_bytes!("../../tests/fixtures/run_record_v1.json")).unwrap();
        (r.id, r.trial_key, r.status, r.record_version) = (id, "t".into(), Status::Running, RECORD_VERSION);
        let me = owner::this_process().clone();
        r.environment.process = Some(if alive { me } else { ProcessIdentity { pid: 1 << 30, start_ticks: 1, ..me } });
        r.steps_run = 0;
        r.progress = Some(Progress {
            steps_total: 10,
            updated_at: now(),
            resumed_from: None,
            checkpoint_step: None,
            max_time: None,
            deaths: 0,
        });
        r
    }

    /// A store in a fresh folder holding one done run, id 1.
    fn store_with_a_done_run() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        store.put(&RunRecord { status: Status::Done, ..running(1, true) }).unwrap();
        dir
    }

    #[test]
    fn a_snapshot_torn_by_a_killed_process_does_not_lose_the_store() {
        let dir = store_with_a_done_run();
        // What a `kill -9` between sled's writing a snapshot and renaming it leaves: a newer
        // `.generating` file, here with a few bytes of a snapshot and no checksum.
        let db = dir.path().join("db");
        let snapshot = std::fs::read_dir(&db)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .find(|n| n.starts_with("snap.") && !n.ends_with(".generating"))
            .expect("sled wrote a snapshot when the session closed");
        std::fs::write(db.join(format!("{snapshot}.generating")), b"torn snap").unwrap();
        let again = Store::open(dir.path()).unwrap();
        assert_eq!(again.get(1).unwrap().status, Status::Done, "the run survives");
        assert!(!db.join(format!("{snapshot}.generating")).exists());
    }

    #[test]
    fn a_store_opened_while_another_process_writes_its_settings_is_read_not_called_damaged() {
        let dir = store_with_a_done_run();
        // What a process sees while another creates the store: sled writes the settings file
        // (`conf`) before it takes its lock, the settings first and their checksum after.
        let conf = dir.path().join("db").join("conf");
        let whole = std::fs::read(&conf).unwrap();
        std::fs::write(&conf, &whole[..whole.len() - 4]).unwrap();
        assert!(matches!(sled::Config::new().path(dir.path().join("db")).open(), Err(sled::Error::Corruption { .. })));
        let (path, settings) = (conf.clone(), whole.clone());
        let writer = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(20));
            std::fs::write(path, settings).unwrap();
        });
        let again = Store::open(dir.path());
        writer.join().unwrap();
        assert_eq!(again.unwrap().get(1).unwrap().status, Status::Done);
        // Settings that stay torn are damage, said as such.
        std::fs::write(&conf, &whole[..whole.len() - 4]).unwrap();
        let damaged = Store::open(dir.path()).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(damaged.contains("is damaged"), "{damaged}");
    }

    #[test]
    fn a_store_read_from_a_copy_sees_the_originals_later_writes_and_refuses_its_own() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let done = |id| RunRecord { status: Status::Done, ..running(id, true) };
        store.put(&done(1)).unwrap();
        // What `open_with` builds when sled cannot open the folder for writing (EACCES, EROFS);
        // as root, which may write anywhere, only this way.
        let copy = Arc::new(snapshot::Snapshot::new().unwrap());
        let reader = Store { read_only: Some(("permission denied".into(), copy)), ..store.clone() };
        assert_eq!(reader.summaries().unwrap().len(), 1);
        store.put(&done(2)).unwrap();
        assert_eq!(reader.summaries().unwrap().len(), 2, "the copy follows the original");
        assert_eq!(reader.get(2).unwrap().status, Status::Done);
        for refused in [reader.put(&done(3)).map(|_| ()), reader.tag(1, "x", true).map(|_| ()), reader.delete(&[1])] {
            assert!(matches!(refused, Err(StoreError::ReadOnly { .. })), "{refused:?}");
        }
        assert_eq!(store.summaries().unwrap().len(), 2, "nothing was written");
        assert!(!store.get(1).unwrap().tags.contains(&"x".to_string()));
    }

    fn claim(store: &Store) -> Claim {
        store.claim("t", Rerun::default(), |id, _| running(id, true)).unwrap()
    }

    #[test]
    fn a_trial_running_here_is_not_claimed_twice_and_a_dead_run_is_taken_over() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let Claim::Run { record, took_over: None } = claim(&store) else { panic!("a new trial runs") };
        assert_eq!(record.id, 1);
        assert!(matches!(claim(&store), Claim::RunningElsewhere { run_id: 1, .. }), "its process is alive");
        // Its process dies: the next claim takes over and records the dead run interrupted.
        store.put(&running(1, false)).unwrap();
        let Claim::Run { record, took_over: Some(1) } = claim(&store) else { panic!("taken over") };
        assert_eq!(record.id, 2);
        let dead = store.get(1).unwrap();
        assert_eq!((dead.status, dead.stop_reason.as_str()), (Status::Interrupted, PROCESS_DIED));
    }

    /// `memctl tag` while a run trains: its next progress write and its final record, written
    /// from the copy the sweep holds, keep the tag (and a removal).
    #[test]
    fn a_tag_added_or_removed_while_a_run_trains_outlives_its_later_writes() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let held = running(1, true);
        store.put(&held).unwrap();
        assert!(store.tag(1, "keep", true).unwrap());
        store.put(&held).unwrap();
        assert_eq!(store.get(1).unwrap().tags, ["keep"]);
        assert_eq!(store.summary(1).unwrap().tags, ["keep"]);
        store.put(&RunRecord { status: Status::Done, ..held.clone() }).unwrap();
        assert_eq!(store.get(1).unwrap().tags, ["keep"], "the final record keeps it");
        assert!(store.tag(1, "keep", false).unwrap());
        store.put(&RunRecord { status: Status::Done, tags: vec!["keep".into()], ..held }).unwrap();
        assert!(store.get(1).unwrap().tags.is_empty(), "and a removal");
    }

    /// A run taken over (its process counted as gone) is not marked running again by its old
    /// process's progress, which still keeps tags as `put` does.
    #[test]
    fn progress_lands_only_on_a_run_still_running() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let held = running(1, true);
        assert!(!store.put_while_running(&held).unwrap(), "no such run: a deleted one is not brought back");
        store.put(&held).unwrap();
        assert!(store.tag(1, "keep", true).unwrap());
        assert!(store.put_while_running(&RunRecord { steps_run: 5, ..held.clone() }).unwrap());
        let stored = store.get(1).unwrap();
        assert_eq!((stored.steps_run, stored.tags), (5, vec!["keep".to_string()]));
        // What a claim writes when it takes the trial over.
        store.put(&RunRecord { status: Status::Interrupted, steps_run: 5, ..held.clone() }).unwrap();
        assert!(!store.put_while_running(&RunRecord { steps_run: 9, ..held }).unwrap());
        let stored = store.get(1).unwrap();
        assert_eq!((stored.status, stored.steps_run), (Status::Interrupted, 5));
    }

    #[test]
    fn a_deleted_run_s_id_is_never_given_to_a_new_run() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let Claim::Run { record, .. } = claim(&store) else { panic!("a new trial runs") };
        let mut done = running(record.id, true);
        done.status = Status::Done;
        store.put(&done).unwrap();
        store.delete(&[1]).unwrap();
        let Claim::Run { record, .. } = claim(&store) else { panic!("the trial runs again") };
        assert_eq!(record.id, 2, "run 1 was deleted, and its id stays its own");
    }

    #[test]
    fn a_run_still_training_is_not_deleted_and_a_dead_one_is() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        store.put(&running(1, true)).unwrap();
        let err = store.delete(&[1]).unwrap_err();
        assert!(matches!(err, StoreError::StillRunning { id: 1, .. }), "{err}");
        assert!(err.to_string().contains("stop its sweep first"), "{err}");
        assert_eq!(store.get(1).unwrap().status, Status::Running, "nothing deleted");
        store.put(&running(1, false)).unwrap();
        store.delete(&[1]).unwrap();
        assert!(matches!(store.get(1), Err(StoreError::NoSuchRun(1))));
    }

    #[test]
    fn a_store_that_is_not_there_or_is_a_file_is_named_and_not_created() {
        let dir = tempfile::tempdir().unwrap();
        let typo = dir.path().join("stroe");
        let err = Store::open_existing(&typo).unwrap_err().to_string();
        assert!(err.contains("no store at") && err.contains("stroe"), "{err}");
        assert!(!typo.exists(), "a reading command created the mistyped store");
        let file = dir.path().join("runs.json");
        std::fs::write(&file, "[]").unwrap();
        for err in [Store::open(&file).unwrap_err(), Store::open_existing(&file).unwrap_err()] {
            assert!(err.to_string().contains("it is a file, not a folder"), "{err}");
        }
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "[]");
    }

    /// A folder of other things is not a store to read, and a store opened to read (the
    /// dashboard's) that goes away meanwhile is not made again by the next read.
    #[test]
    fn a_folder_without_a_store_and_a_store_removed_while_open_are_not_created() {
        let dir = tempfile::tempdir().unwrap();
        let notes = dir.path().join("notes");
        std::fs::create_dir(&notes).unwrap();
        std::fs::write(notes.join("readme.txt"), "notes").unwrap();
        let err = Store::open_existing(&notes).unwrap_err().to_string();
        assert!(err.contains("no store at") && err.contains("notes"), "{err}");
        let names = |p: &Path| std::fs::read_dir(p).unwrap().map(|e| e.unwrap().file_name()).collect::<Vec<_>>();
        assert_eq!(names(&notes), ["readme.txt"], "a reading command wrote into the folder");

        let path = dir.path().join("store");
        Store::open(&path).unwrap().put(&running(1, false)).unwrap();
        let reader = Store::open_existing(&path).unwrap();
        assert_eq!(reader.summaries().unwrap().len(), 1);
        std::fs::remove_dir_all(&path).unwrap();
        assert!(matches!(reader.summaries(), Err(StoreError::Missing(_))));
        assert!(!path.exists(), "a read made the removed store again");
    }

    #[test]
    fn deaths_before_the_first_step_are_counted_and_never_fail_a_trial_by_themselves() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        // A sweep killed ten times while the trial starts: the trial is taken over each time
        // (only a probe that sees it crash fails it, see `sweep::probe`).
        for deaths in 0..10 {
            let Claim::Run { record, .. } = claim(&store) else { panic!("taken over after {deaths} deaths") };
            assert_eq!(record.progress.as_ref().unwrap().deaths, deaths);
            let mut dead = running(record.id, false);
            dead.progress = record.progress.clone();
            store.put(&dead).unwrap();
        }
    }

    #[test]
    fn a_death_after_training_resets_the_count() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        for _ in 0..3 {
            let Claim::Run { record, .. } = claim(&store) else { panic!() };
            let mut dead = running(record.id, false);
            dead.progress = record.progress.clone();
            store.put(&dead).unwrap();
        }
        let Claim::Run { record, .. } = claim(&store) else { panic!() };
        assert_eq!(record.progress.as_ref().unwrap().deaths, 3);
        // This attempt trains before its process dies: the trial is not crash-looping.
        let mut dead = running(record.id, false);
        dead.progress = record.progress.clone();
        dead.steps_run = 5;
        store.put(&dead).unwrap();
        let Claim::Run { record, .. } = claim(&store) else { panic!("runs again") };
        assert_eq!(record.progress.as_ref().unwrap().deaths, 0);
    }
}
