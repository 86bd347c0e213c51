//! The run store: a sled database (default `./store`).
//!
//! Every write of a run record is one sled transaction over the `runs` and `trials` trees,
//! followed by a flush, so a crash never leaves a half-written run or loses a finished one.
//! sled allows one process at a time; a second one gets [`StoreError::Locked`], which says
//! which process holds the store.

pub mod keys;
pub mod record;

use std::path::{Path, PathBuf};

use sled::Transactional;
use sled::transaction::{ConflictableTransactionError, TransactionError};

pub use record::{Environment, RunRecord, Status};

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
        let last = runs.last()?.and_then(|(k, _)| keys::run_id(&k)).unwrap_or(0);
        let last_id = std::sync::atomic::AtomicU64::new(last);
        let mut store = Store { db, runs, trials, running, path: path.into(), recovered: vec![], last_id };
        store.recover()?;
        Ok(store)
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

    /// Writes a run record atomically (record and trial index together) and flushes.
    pub fn put(&self, record: &RunRecord) -> Result<(), StoreError> {
        let bytes =
            serde_json::to_vec(record).map_err(|e| StoreError::Corrupt { id: record.id, reason: e.to_string() })?;
        let key = keys::run_key(record.id);
        let trial = record.trial_key.as_bytes().to_vec();
        let in_flight = record.status == Status::Running;
        (&self.runs, &self.trials, &self.running)
            .transaction(|(runs, trials, running)| {
                runs.insert(&key, bytes.as_slice())?;
                trials.insert(trial.as_slice(), &key)?;
                if in_flight {
                    running.insert(&key, &[])?;
                } else {
                    running.remove(&key)?;
                }
                Ok::<(), ConflictableTransactionError<()>>(())
            })
            .map_err(|e| match e {
                TransactionError::Storage(s) => StoreError::Sled(s),
                TransactionError::Abort(()) => {
                    StoreError::Corrupt { id: record.id, reason: "transaction aborted".into() }
                }
            })?;
        self.db.flush()?;
        Ok(())
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

fn decode(id: u64, bytes: &[u8]) -> Result<RunRecord, StoreError> {
    serde_json::from_slice(bytes).map_err(|e| StoreError::Corrupt { id, reason: e.to_string() })
}
