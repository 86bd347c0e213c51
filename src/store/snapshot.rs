//! Reading a store that this process cannot write.
//!
//! sled opens a database only to write it: it takes an exclusive lock and appends to its log
//! even when asked to read. A store in a folder one may read but not write (a colleague's
//! store, a read-only mount, an archived copy) therefore cannot be opened where it is. memctl
//! reads it from a private copy instead: the database folder is copied into a temporary
//! folder under a shared lock on sled's lock file, so that no writer is between its open and
//! its close (writers hold the exclusive lock for their whole session), and copied again
//! whenever the original has changed since. Commands that write (sweeps, `rm`, `tag`,
//! `import`) are refused with [`StoreError::ReadOnly`].

use std::fs;
use std::os::fd::AsRawFd;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use super::backoff::LockBackoff;
use super::error::StoreError;

/// A private, refreshable copy of a store's database.
#[derive(Debug)]
pub(super) struct Snapshot {
    /// Holds the copy as `dir/db`; removed when the last clone of the store goes.
    dir: tempfile::TempDir,
    /// The original's files (name, length, modification time) when last copied.
    copied: Mutex<Option<Vec<FileState>>>,
}

type FileState = (PathBuf, u64, Option<SystemTime>);

impl Snapshot {
    pub fn new() -> std::io::Result<Snapshot> {
        Ok(Snapshot { dir: tempfile::Builder::new().prefix("memctl-store-copy-").tempdir()?, copied: Mutex::new(None) })
    }

    /// The copy's store folder, brought up to date with the store at `store` (waiting up to
    /// `wait` while a writer has it).
    pub fn refresh(&self, store: &Path, wait: Duration) -> Result<PathBuf, StoreError> {
        let source = store.join("db");
        let open_error =
            |e: std::io::Error| StoreError::Open { path: store.into(), reason: super::session::io_reason(&e) };
        let lock_file = fs::File::open(source.join("db")).map_err(open_error)?;
        let _shared = shared_lock(&lock_file, store, wait)?;
        let state = file_states(&source).map_err(open_error)?;
        let mut copied = self.copied.lock().unwrap_or_else(|e| e.into_inner());
        if copied.as_ref() != Some(&state) {
            let target = self.dir.path().join("db");
            let _ = fs::remove_dir_all(&target);
            copy_dir(&source, &target).map_err(|e| StoreError::Open {
                path: store.into(),
                reason: format!("it cannot be written here, and copying it to read it failed: {e}"),
            })?;
            *copied = Some(state);
        }
        Ok(self.dir.path().to_path_buf())
    }
}

/// A shared `flock` on sled's lock file, released when dropped. sled's writers take it
/// exclusively, so while this is held none of them is between its open and its close.
struct SharedLock<'a>(&'a fs::File);

impl Drop for SharedLock<'_> {
    fn drop(&mut self) {
        // SAFETY: flock only reads the descriptor, which the borrowed file keeps open.
        unsafe { libc::flock(self.0.as_raw_fd(), libc::LOCK_UN) };
    }
}

fn shared_lock<'a>(file: &'a fs::File, store: &Path, wait: Duration) -> Result<SharedLock<'a>, StoreError> {
    let mut backoff = LockBackoff::new(wait);
    loop {
        // SAFETY: flock only reads the descriptor, which `file` keeps open.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_SH | libc::LOCK_NB) } == 0 {
            return Ok(SharedLock(file));
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::WouldBlock {
            return Err(StoreError::Open { path: store.into(), reason: super::session::io_reason(&e) });
        }
        if !backoff.pause() {
            return Err(super::session::locked(store, wait));
        }
    }
}

/// Every file under `dir` with its length and modification time, in a stable order.
fn file_states(dir: &Path) -> std::io::Result<Vec<FileState>> {
    let mut out = vec![];
    let mut pending = vec![dir.to_path_buf()];
    while let Some(d) = pending.pop() {
        for entry in fs::read_dir(&d)? {
            let entry = entry?;
            let meta = entry.metadata()?;
            if meta.is_dir() {
                pending.push(entry.path());
            } else {
                let name = entry.path().strip_prefix(dir).unwrap_or(&entry.path()).to_path_buf();
                out.push((name, meta.len(), meta.modified().ok()));
            }
        }
    }
    out.sort();
    Ok(out)
}

fn copy_dir(from: &Path, to: &Path) -> std::io::Result<()> {
    fs::create_dir_all(to)?;
    for entry in fs::read_dir(from)? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        if entry.metadata()?.is_dir() {
            copy_dir(&entry.path(), &target)?;
        } else {
            fs::copy(entry.path(), &target)?;
            // `copy` keeps the original's mode, read-only most likely; sled opens its files to write.
            fs::set_permissions(&target, fs::Permissions::from_mode(0o600))?;
        }
    }
    Ok(())
}
