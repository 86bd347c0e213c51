//! The run store: a sled database (default `./store`).
//!
//! Every write of a run record is one sled transaction over the `runs`, `trials`, `running`
//! and `summaries` trees, followed by a flush, so a crash never leaves a half-written run or
//! loses a finished one, and a run's summary always matches its record.
//! sled allows one process at a time; a second one gets [`StoreError::Locked`], which says
//! which process holds the store.

pub mod keys;
pub mod record;
pub mod summary;

use std::path::{Path, PathBuf};

use sled::Transactional;
use sled::transaction::{ConflictableTransactionError, TransactionError};

pub use record::{Environment, RunRecord, Status};
pub use summary::RunSummary;

/// Version of the record layout; bumped when it changes incompatibly.
pub const SCHEMA: u32 = 1;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error(
        "the store at `{path}` is in use by another memctl process{holder}\n\
         help: wait for it to finish, or use another store with `--store PATH` (or MEMCTL_STORE)"
    )]
    Locked { path: PathBuf, holder: String },
    #[error("cannot open the store at `{path}`: {source}")]
    Open { path: PathBuf, source: sled::Error },
    #[error("the store at `{path}` has schema {found}, but this memctl reads schema {SCHEMA}")]
    Schema { path: PathBuf, found: String },
    #[error("store error: {0}")]
    Sled(#[from] sled::Error),
    #[error("corrupt run record {id}: {reason}")]
    Corrupt { id: u64, reason: String },
    #[error("no run with id {0}")]
    NoSuchRun(u64),
}

pub struct Store {
    db: sled::Db,
    runs: sled::Tree,
    trials: sled::Tree,
    running: sled::Tree,
    summaries: sled::Tree,
    path: PathBuf,
    /// Runs found `running` at open (their process died) and marked `interrupted`.
    recovered: Vec<u64>,
    /// The last id handed out; only this process holds the store (sled's lock), so a counter
    /// started from the highest stored id gives consecutive ids 1, 2, 3, …
    last_id: std::sync::atomic::AtomicU64,
}

/// File next to the database naming the process that has it open.
const HOLDER_FILE: &str = "holder";

impl Store {
    /// Opens (creating if needed) the store at `path`.
    pub fn open(path: &Path) -> Result<Store, StoreError> {
        std::fs::create_dir_all(path).map_err(|e| StoreError::Open { path: path.into(), source: e.into() })?;
        let db_path = path.join("db");
        let db = match sled::Config::new().path(&db_path).open() {
            Ok(db) => db,
            // sled reports the lock as an I/O error "could not acquire lock …".
            Err(sled::Error::Io(e))
                if e.kind() == std::io::ErrorKind::WouldBlock || e.to_string().contains("acquire lock") =>
            {
                let holder = std::fs::read_to_string(path.join(HOLDER_FILE))
                    .map(|h| format!(" ({})", h.trim()))
                    .unwrap_or_default();
                return Err(StoreError::Locked { path: path.into(), holder });
            }
            Err(source) => {
                return Err(StoreError::Open { path: path.into(), source });
            }
        };
        let holder = format!("pid {}: {}", std::process::id(), std::env::args().collect::<Vec<_>>().join(" "));
        let _ = std::fs::write(path.join(HOLDER_FILE), holder);
        let meta = db.open_tree(keys::META)?;
        match meta.get(keys::SCHEMA_KEY)? {
            None => {
                meta.insert(keys::SCHEMA_KEY, SCHEMA.to_string().as_bytes())?;
            }
            Some(v) if v.as_ref() == SCHEMA.to_string().as_bytes() => {}
            Some(v) => {
                return Err(StoreError::Schema { path: path.into(), found: String::from_utf8_lossy(&v).into() });
            }
        }
        let runs = db.open_tree(keys::RUNS)?;
        let trials = db.open_tree(keys::TRIALS)?;
        let running = db.open_tree(keys::RUNNING)?;
        let summaries = db.open_tree(keys::SUMMARIES)?;
        let last = runs.last()?.and_then(|(k, _)| keys::run_id(&k)).unwrap_or(0);
        let last_id = std::sync::atomic::AtomicU64::new(last);
        let mut store = Store { db, runs, trials, running, summaries, path: path.into(), recovered: vec![], last_id };
        let version = summary::SUMMARY_VERSION.to_string();
        if meta.get(keys::SUMMARY_VERSION_KEY)?.is_none_or(|v| v.as_ref() != version.as_bytes()) {
            store.rebuild_summaries()?;
            meta.insert(keys::SUMMARY_VERSION_KEY, version.as_bytes())?;
            store.db.flush()?;
        }
        store.recover()?;
        Ok(store)
    }

    /// Rewrites every summary from its record (a store from before summaries, or with an older
    /// summary layout).
    fn rebuild_summaries(&self) -> Result<(), StoreError> {
        self.summaries.clear()?;
        for item in self.runs.iter() {
            let (k, v) = item?;
            let id = keys::run_id(&k).unwrap_or(0);
            let record = decode(id, &v)?;
            self.summaries.insert(k, summary::encode(&RunSummary::of(&record)))?;
        }
        Ok(())
    }

    /// Marks runs left `running` by a process that died as `interrupted`. sled's lock means no
    /// other process can be running them now.
    fn recover(&mut self) -> Result<(), StoreError> {
        let ids: Vec<u64> = self.running.iter().keys().filter_map(|k| k.ok().and_then(|k| keys::run_id(&k))).collect();
        for id in ids {
            match self.get(id) {
                Ok(mut r) if r.status == Status::Running => {
                    r.status = Status::Interrupted;
                    r.stop_reason = "interrupted: its process stopped before the run finished".into();
                    self.put(&r)?;
                    self.recovered.push(id);
                }
                _ => {
                    self.running.remove(keys::run_key(id))?;
                }
            }
        }
        Ok(())
    }

    /// Runs that [`Store::open`] found abandoned and marked `interrupted`.
    pub fn recovered(&self) -> &[u64] {
        &self.recovered
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// A fresh run id: one more than any id stored or handed out by this process.
    pub fn next_id(&self) -> Result<u64, StoreError> {
        Ok(self.last_id.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1)
    }

    /// Writes a run record atomically (record, summary and trial index together) and flushes.
    pub fn put(&self, record: &RunRecord) -> Result<(), StoreError> {
        self.write(record)?;
        self.db.flush()?;
        Ok(())
    }

    /// Writes many records (each atomically) and flushes once: imports, tests, benchmarks.
    pub fn put_many(&self, records: &[RunRecord]) -> Result<(), StoreError> {
        for r in records {
            self.write(r)?;
        }
        self.db.flush()?;
        Ok(())
    }

    fn write(&self, record: &RunRecord) -> Result<(), StoreError> {
        let bytes =
            serde_json::to_vec(record).map_err(|e| StoreError::Corrupt { id: record.id, reason: e.to_string() })?;
        let summary = summary::encode(&RunSummary::of(record));
        let key = keys::run_key(record.id);
        let trial = record.trial_key.as_bytes().to_vec();
        let in_flight = record.status == Status::Running;
        (&self.runs, &self.trials, &self.running, &self.summaries)
            .transaction(|(runs, trials, running, summaries)| {
                runs.insert(&key, bytes.as_slice())?;
                summaries.insert(&key, summary.as_slice())?;
                trials.insert(trial.as_slice(), &key)?;
                if in_flight {
                    running.insert(&key, &[])?;
                } else {
                    running.remove(&key)?;
                }
                Ok::<(), ConflictableTransactionError<()>>(())
            })
            .map_err(|e| tx_error(e, record.id))
    }

    /// Deletes runs (record and summary). A trial whose latest run is deleted falls back to its
    /// newest remaining run, or to none (a sweep then runs it again).
    pub fn delete(&self, ids: &[u64]) -> Result<(), StoreError> {
        let mut missing = ids.iter().filter(|id| !self.runs.contains_key(keys::run_key(**id)).unwrap_or(false));
        if let Some(id) = missing.next() {
            return Err(StoreError::NoSuchRun(*id));
        }
        let gone: std::collections::HashSet<u64> = ids.iter().copied().collect();
        // The trials the deleted runs were latest of, and their newest surviving run.
        let mut fallback: std::collections::HashMap<Vec<u8>, Option<u64>> = Default::default();
        for &id in ids {
            let s = self.summary(id)?;
            let trial = s.trial_key.as_bytes().to_vec();
            if self.trials.get(&trial)?.is_some_and(|k| keys::run_id(&k) == Some(id)) {
                fallback.insert(trial, None);
            }
        }
        if !fallback.is_empty() {
            for s in self.summaries()? {
                if let Some(slot) = fallback.get_mut(s.trial_key.as_bytes()) {
                    if !gone.contains(&s.id) && slot.is_none_or(|id| s.id > id) {
                        *slot = Some(s.id);
                    }
                }
            }
        }
        (&self.runs, &self.trials, &self.running, &self.summaries)
            .transaction(|(runs, trials, running, summaries)| {
                for &id in ids {
                    let key = keys::run_key(id);
                    runs.remove(&key)?;
                    summaries.remove(&key)?;
                    running.remove(&key)?;
                }
                for (trial, latest) in &fallback {
                    match latest {
                        Some(id) => trials.insert(trial.as_slice(), &keys::run_key(*id))?,
                        None => trials.remove(trial.as_slice())?,
                    };
                }
                Ok::<(), ConflictableTransactionError<()>>(())
            })
            .map_err(|e| tx_error(e, ids.first().copied().unwrap_or(0)))?;
        self.db.flush()?;
        Ok(())
    }

    /// Adds `tag` to a run (`add`), or removes it; returns whether the tags changed.
    pub fn tag(&self, id: u64, tag: &str, add: bool) -> Result<bool, StoreError> {
        let mut r = self.get(id)?;
        let had = r.tags.iter().any(|t| t == tag);
        if add == had {
            return Ok(false);
        }
        if add {
            r.tags.push(tag.to_string());
        } else {
            r.tags.retain(|t| t != tag);
        }
        self.put(&r)?;
        Ok(true)
    }

    /// One run's summary.
    pub fn summary(&self, id: u64) -> Result<RunSummary, StoreError> {
        let bytes = self.summaries.get(keys::run_key(id))?.ok_or(StoreError::NoSuchRun(id))?;
        summary::decode(id, &bytes)
    }

    /// Every run's summary, oldest first (decoded on all cores: 10 000 take tens of ms).
    pub fn summaries(&self) -> Result<Vec<RunSummary>, StoreError> {
        use rayon::prelude::*;
        let raw: Vec<(sled::IVec, sled::IVec)> = self.summaries.iter().collect::<Result<_, _>>()?;
        raw.par_iter()
            .map_init(summary::Decoder::default, |d, (k, v)| d.decode(keys::run_id(k).unwrap_or(0), v))
            .collect()
    }

    pub fn get(&self, id: u64) -> Result<RunRecord, StoreError> {
        let bytes = self.runs.get(keys::run_key(id))?.ok_or(StoreError::NoSuchRun(id))?;
        decode(id, &bytes)
    }

    /// The latest run of a trial, if any.
    pub fn latest_of_trial(&self, trial_key: &str) -> Result<Option<RunRecord>, StoreError> {
        match self.trials.get(trial_key.as_bytes())? {
            Some(k) => {
                let id = keys::run_id(&k).ok_or(StoreError::Corrupt { id: 0, reason: "bad trial index".into() })?;
                Ok(Some(self.get(id)?))
            }
            None => Ok(None),
        }
    }

    /// Every run, oldest first.
    pub fn all(&self) -> Result<Vec<RunRecord>, StoreError> {
        let mut out = vec![];
        for item in self.runs.iter() {
            let (k, v) = item?;
            let id = keys::run_id(&k).unwrap_or(0);
            out.push(decode(id, &v)?);
        }
        Ok(out)
    }
}

fn tx_error(e: TransactionError<()>, id: u64) -> StoreError {
    match e {
        TransactionError::Storage(s) => StoreError::Sled(s),
        TransactionError::Abort(()) => StoreError::Corrupt { id, reason: "transaction aborted".into() },
    }
}

fn decode(id: u64, bytes: &[u8]) -> Result<RunRecord, StoreError> {
    serde_json::from_slice(bytes).map_err(|e| StoreError::Corrupt { id, reason: e.to_string() })
}
