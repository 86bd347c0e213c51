//! One short exclusive use of the sled database: open, read or write, flush, close.
//!
//! sled lets one process at a time open a database (it takes a file lock). memctl never keeps
//! it open longer than one operation, so many processes share a store by taking turns: a
//! process that finds it locked waits (polling with a growing pause) until the holder's
//! operation ends, for at most the store's wait limit, and then says who holds it.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::backoff::LockBackoff;
use super::error::StoreError;
use super::keys::{self, SCHEMA};
use super::summary;

/// The trees of an open store.
pub(super) struct Session {
    db: sled::Db,
    pub meta: sled::Tree,
    pub runs: sled::Tree,
    pub trials: sled::Tree,
    pub running: sled::Tree,
    pub summaries: sled::Tree,
    pub studies: sled::Tree,
    pub deleted: sled::Tree,
}

/// File next to the database naming the process in a session (for the lock message).
const HOLDER_FILE: &str = "holder";

/// How long a database that reads as corrupt, with no process holding it, is tried again
/// before it is called damaged (a creator's write of the `conf` file takes microseconds).
const SETTLING: Duration = Duration::from_millis(200);

impl Session {
    /// Opens the database under `path`, waiting up to `wait` while another process has it.
    pub fn open(path: &Path, wait: Duration) -> Result<Session, StoreError> {
        let db = open_waiting(path, wait)?;
        let _ = std::fs::write(path.join(HOLDER_FILE), holder_line());
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
        let session = Session {
            runs: db.open_tree(keys::RUNS)?,
            trials: db.open_tree(keys::TRIALS)?,
            running: db.open_tree(keys::RUNNING)?,
            summaries: db.open_tree(keys::SUMMARIES)?,
            studies: db.open_tree(keys::STUDIES)?,
            deleted: db.open_tree(keys::DELETED)?,
            meta,
            db,
        };
        let version = summary::SUMMARY_VERSION.to_string();
        if session.meta.get(keys::SUMMARY_VERSION_KEY)?.is_none_or(|v| v.as_ref() != version.as_bytes()) {
            session.rebuild_summaries()?;
            session.meta.insert(keys::SUMMARY_VERSION_KEY, version.as_bytes())?;
            session.flush()?;
        }
        Ok(session)
    }

    pub fn flush(&self) -> Result<(), StoreError> {
        self.db.flush()?;
        Ok(())
    }

    /// Rewrites every summary from its record (a store from before summaries, or with an
    /// older summary layout).
    fn rebuild_summaries(&self) -> Result<(), StoreError> {
        self.summaries.clear()?;
        for item in self.runs.iter() {
            let (k, v) = item?;
            let id = keys::run_id(&k).unwrap_or(0);
            let record = super::record::decode_stored(id, &v)?;
            self.summaries.insert(k, summary::encode(&summary::RunSummary::of(&record)))?;
        }
        Ok(())
    }
}

fn open_waiting(path: &Path, wait: Duration) -> Result<sled::Db, StoreError> {
    let db_path = path.join("db");
    let mut backoff = LockBackoff::new(wait);
    let mut cleared = false;
    let mut corrupt_since = None;
    loop {
        // sled checks the settings file's length, then reads it: one rewritten in between (a
        // process creating the store) reads shorter than measured, and sled panics on it. That
        // is the torn read below, not a bug to end the process on.
        let opened =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| sled::Config::new().path(&db_path).open()));
        let failed = match opened {
            Ok(Ok(db)) => return Ok(db),
            Ok(Err(sled::Error::Corruption { .. })) | Err(_) => None,
            Ok(Err(e)) => Some(e),
        };
        match failed {
            None => match clear_torn_snapshots(&db_path) {
                Torn::Cleared if !cleared => cleared = true,
                // sled reads the settings file (`conf`) before it takes its lock, and a process
                // creating the store writes that file then: a read in between sees half of it.
                // While another process holds the database, wait as for its lock; with none,
                // a damaged database still reads so once a creator's write has had time to end.
                Torn::Held => {
                    if !backoff.pause() {
                        return Err(locked(path, wait));
                    }
                }
                Torn::Cleared | Torn::None => {
                    let since = *corrupt_since.get_or_insert_with(std::time::Instant::now);
                    if since.elapsed() >= SETTLING || !backoff.pause() {
                        return Err(damaged(path, &db_path));
                    }
                }
            },
            Some(sled::Error::Io(e)) if is_lock_error(&e) => {
                if !backoff.pause() {
                    return Err(locked(path, wait));
                }
            }
            Some(sled::Error::Io(e)) if is_unwritable(&e) => {
                return Err(StoreError::Unwritable { path: path.into(), reason: io_reason(&e) });
            }
            Some(sled::Error::Io(e)) => return Err(StoreError::Open { path: path.into(), reason: io_reason(&e) }),
            Some(e) => return Err(StoreError::Open { path: path.into(), reason: e.to_string() }),
        }
    }
}

/// A database that sled reads as corrupt with no process holding it and no torn snapshot left.
fn damaged(path: &Path, db_path: &Path) -> StoreError {
    let reason = format!(
        "its database (`{}`) is damaged; rebuild the store from an export \
         (`memctl --store NEW import runs.json`), or restore the folder from a copy",
        db_path.display()
    );
    StoreError::Open { path: path.into(), reason }
}

/// What [`clear_torn_snapshots`] found.
#[derive(Debug, PartialEq, Eq)]
enum Torn {
    /// It removed half-written snapshots.
    Cleared,
    /// None was there to remove.
    None,
    /// Another process holds the database: nothing was touched.
    Held,
}

/// Why a store's folder or database could not be opened, in words that say what to do.
pub(super) fn io_reason(e: &std::io::Error) -> String {
    match e.raw_os_error() {
        Some(libc::EROFS) => "it is on a read-only file system".into(),
        Some(libc::EACCES) | Some(libc::EPERM) => "permission denied".into(),
        _ => e.to_string(),
    }
}

/// Whether opening failed because this process may not write where the store is (sled writes
/// to open even to read): such a store is read from a copy ([`super::snapshot`]).
fn is_unwritable(e: &std::io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EROFS | libc::EACCES | libc::EPERM))
}

/// Removes the snapshots a killed process left half-written, if no process has the database.
///
/// sled 0.34 writes a snapshot to `snap.LSN.generating` and then renames it, but when it
/// opens it reads the newest `snap.*` file, `.generating` ones included: a process killed
/// between the two (a `kill -9` during a session's close) leaves a store that no longer opens
/// ("Read corrupted data"). The snapshot only summarises the log, so the torn file is dropped
/// and sled replays the log from the previous one. This happens under sled's own lock (an
/// exclusive `flock` of `db/db`), so no live process's snapshot is touched.
fn clear_torn_snapshots(db_path: &Path) -> Torn {
    use std::os::fd::AsRawFd;
    let Ok(lock) = std::fs::File::open(db_path.join("db")) else { return Torn::None };
    // SAFETY: flock only reads the descriptor, which `lock` keeps open until it is dropped.
    if unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        return Torn::Held;
    }
    let Ok(entries) = std::fs::read_dir(db_path) else { return Torn::None };
    let mut removed = false;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.starts_with("snap.") && name.ends_with(".generating") {
            removed |= std::fs::remove_file(entry.path()).is_ok();
        }
    }
    if removed { Torn::Cleared } else { Torn::None } // the lock goes with `lock`
}

/// sled reports the lock as an I/O error "could not acquire lock …".
fn is_lock_error(e: &std::io::Error) -> bool {
    e.kind() == std::io::ErrorKind::WouldBlock || e.to_string().contains("acquire lock")
}

pub(super) fn locked(path: &Path, waited: Duration) -> StoreError {
    let holder =
        std::fs::read_to_string(path.join(HOLDER_FILE)).map(|h| format!(" ({})", h.trim())).unwrap_or_default();
    StoreError::Locked { path: PathBuf::from(path), holder, waited_secs: waited.as_secs_f64() }
}

fn holder_line() -> String {
    let args: Vec<String> = std::env::args().collect();
    format!("pid {}: {}", std::process::id(), args.join(" "))
}
