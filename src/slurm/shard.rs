//! Shards: finished run records written by workers, one file per trial.

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::store::RunRecord;

/// Writes `bytes` to `path` atomically: a temporary file in the same directory, flushed to
/// disk, then renamed over `path`. A process killed part-way leaves only a `.tmp` file.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let tmp = dir.join(format!(
        ".{}.{}.tmp",
        path.file_name().and_then(|n| n.to_str()).unwrap_or("shard"),
        std::process::id()
    ));
    let mut f = std::fs::File::create(&tmp)?;
    f.write_all(bytes)?;
    f.sync_all()?;
    drop(f);
    std::fs::rename(&tmp, path)
}

/// Path of a trial's shard.
pub fn path(sweep_dir: &Path, trial_key: &str) -> PathBuf {
    sweep_dir.join("shards").join(format!("{trial_key}.json"))
}

pub fn write(sweep_dir: &Path, record: &RunRecord) -> std::io::Result<()> {
    let bytes = serde_json::to_vec(record).map_err(std::io::Error::other)?;
    write_atomic(&path(sweep_dir, &record.trial_key), &bytes)
}

/// Why a shard cannot be read: the file, or the record in it.
#[derive(Debug, thiserror::Error)]
pub enum ShardError {
    #[error(transparent)]
    Read(#[from] std::io::Error),
    #[error(transparent)]
    Record(#[from] serde_json::Error),
}

/// Every shard of a sweep directory (unreadable ones are returned as errors with their path).
pub fn read_all(sweep_dir: &Path) -> Vec<(PathBuf, Result<RunRecord, ShardError>)> {
    let Ok(entries) = std::fs::read_dir(sweep_dir.join("shards")) else { return vec![] };
    let mut out: Vec<(PathBuf, Result<RunRecord, ShardError>)> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .map(|p| {
            let r = read(&p);
            (p, r)
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// The shard at `path`.
pub fn read(path: &Path) -> Result<RunRecord, ShardError> {
    Ok(serde_json::from_slice(&std::fs::read(path)?)?)
}
