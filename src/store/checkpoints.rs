//! Checkpoints: one file per trial under `STORE/checkpoints/`, replaced atomically.
//!
//! A checkpoint is the bytes `train::checkpoint` makes of a trial in training (parameters,
//! optimiser state, step, curves so far). It lives beside the database rather than in it:
//! megabytes of floats written every few minutes would bloat sled's log and lengthen every
//! other process's session. A checkpoint is written to a temporary file, synced and renamed
//! over the old one, so a crash leaves either the old checkpoint or the new one, whole.

use std::io::Write;
use std::path::PathBuf;

use super::{Store, StoreError};

const DIR: &str = "checkpoints";

/// A directory of checkpoints, one file per trial: the store's `checkpoints/`, or a Slurm
/// sweep's on the shared file system.
#[derive(Clone, Debug)]
pub struct CheckpointDir {
    path: PathBuf,
}

impl CheckpointDir {
    pub fn new(path: impl Into<PathBuf>) -> CheckpointDir {
        CheckpointDir { path: path.into() }
    }

    fn file(&self, trial_key: &str) -> Result<PathBuf, StoreError> {
        // Trial keys are hex digests; refuse anything else rather than build odd paths.
        if trial_key.is_empty() || !trial_key.chars().all(|c| c.is_ascii_alphanumeric()) {
            return Err(StoreError::Checkpoint { trial: trial_key.into(), reason: "not a trial key".into() });
        }
        Ok(self.path.join(format!("{trial_key}.ckpt")))
    }

    /// Replaces the trial's checkpoint with `bytes`.
    pub fn save(&self, trial_key: &str, bytes: &[u8]) -> Result<(), StoreError> {
        super::cost::timed(|| self.write(trial_key, bytes))
    }

    fn write(&self, trial_key: &str, bytes: &[u8]) -> Result<(), StoreError> {
        let path = self.file(trial_key)?;
        let fail = |e: std::io::Error| StoreError::Checkpoint { trial: trial_key.into(), reason: e.to_string() };
        std::fs::create_dir_all(&self.path).map_err(fail)?;
        let tmp = self.path.join(format!("{trial_key}.{}.tmp", std::process::id()));
        let mut f = std::fs::File::create(&tmp).map_err(fail)?;
        f.write_all(bytes).map_err(fail)?;
        f.sync_all().map_err(fail)?;
        std::fs::rename(&tmp, &path).map_err(fail)?;
        // The rename itself is durable once the directory is synced.
        std::fs::File::open(&self.path).and_then(|d| d.sync_all()).map_err(fail)
    }

    /// The trial's checkpoint, if it has one.
    pub fn load(&self, trial_key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        match std::fs::read(self.file(trial_key)?) {
            Ok(bytes) => Ok(Some(bytes)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(StoreError::Checkpoint { trial: trial_key.into(), reason: e.to_string() }),
        }
    }

    /// Deletes the trial's checkpoint (a finished trial needs none); no checkpoint is fine.
    /// Temporary files that processes killed while writing one left behind go with it.
    pub fn remove(&self, trial_key: &str) -> Result<(), StoreError> {
        let removed = match std::fs::remove_file(self.file(trial_key)?) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                Err(StoreError::Checkpoint { trial: trial_key.into(), reason: e.to_string() })
            }
            _ => Ok(()),
        };
        let prefix = format!("{trial_key}.");
        for entry in std::fs::read_dir(&self.path).into_iter().flatten().flatten() {
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if name.starts_with(&prefix) && name.ends_with(".tmp") {
                // At worst, one a hung process still writes: its rename then fails, and it says so.
                let _ = std::fs::remove_file(entry.path());
            }
        }
        removed
    }
}

impl Store {
    /// The store's checkpoints.
    pub fn checkpoints(&self) -> CheckpointDir {
        CheckpointDir::new(self.path().join(DIR))
    }

    pub fn save_checkpoint(&self, trial_key: &str, bytes: &[u8]) -> Result<(), StoreError> {
        self.checkpoints().save(trial_key, bytes)
    }

    pub fn load_checkpoint(&self, trial_key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        self.checkpoints().load(trial_key)
    }

    pub fn remove_checkpoint(&self, trial_key: &str) -> Result<(), StoreError> {
        self.checkpoints().remove(trial_key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checkpoints_are_replaced_whole_and_removed() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        assert_eq!(store.load_checkpoint("abc123").unwrap(), None);
        store.save_checkpoint("abc123", b"first").unwrap();
        store.save_checkpoint("abc123", b"second").unwrap();
        assert_eq!(store.load_checkpoint("abc123").unwrap().as_deref(), Some(&b"second"[..]));
        store.remove_checkpoint("abc123").unwrap();
        store.remove_checkpoint("abc123").unwrap();
        assert_eq!(store.load_checkpoint("abc123").unwrap(), None);
        assert!(store.save_checkpoint("../escape", b"x").is_err());
    }

    #[test]
    fn removing_a_checkpoint_removes_what_killed_writers_left() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        store.save_checkpoint("abc123", b"whole").unwrap();
        store.save_checkpoint("other9", b"kept").unwrap();
        let folder = dir.path().join(DIR);
        for left in ["abc123.4242.tmp", "abc123.77.tmp", "other9.4242.tmp"] {
            std::fs::write(folder.join(left), b"half").unwrap();
        }
        store.remove_checkpoint("abc123").unwrap();
        let mut names: Vec<String> =
            std::fs::read_dir(&folder).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
        names.sort();
        assert_eq!(names, ["other9.4242.tmp", "other9.ckpt"]);
    }
}
