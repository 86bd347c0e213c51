//! The only place sled tree names and keys are encoded.

/// Run records, keyed by [`run_key`].
pub const RUNS: &str = "runs";
/// Trial identity → id of its latest run, keyed by the identity's bytes.
pub const TRIALS: &str = "trials";
/// Ids of runs in flight (`running`), so that a later process can find and mark them
/// `interrupted` without scanning every run.
pub const RUNNING: &str = "running";
/// Compact run summaries (`summary::RunSummary`), keyed by [`run_key`], written with the record.
pub const SUMMARIES: &str = "summaries";
/// Search studies (`study::StudyRecord`), keyed by the study's identity.
pub const STUDIES: &str = "studies";
/// Runs deleted with `memctl rm`, keyed by [`origin_key`], so that `memctl sync` does not add a
/// deleted run back from its Slurm shard (the value: the id it had). About 80 bytes a run,
/// kept until `memctl import` brings the run back.
pub const DELETED: &str = "deleted";
/// Store metadata (schema version, summary layout version).
pub const META: &str = "meta";
pub const SCHEMA_KEY: &[u8] = b"schema";
/// The store layout's version, in [`META`] under [`SCHEMA_KEY`]; bumped when it changes
/// incompatibly.
pub const SCHEMA: u32 = 1;
/// In [`META`]: the layout version of the summaries in [`SUMMARIES`] (absent: none built yet).
pub const SUMMARY_VERSION_KEY: &[u8] = b"summary_version";
/// In [`META`]: the highest run id ever issued ([`run_key`] bytes), so that ids are not reused
/// after the newest runs are deleted.
pub const LAST_ISSUED_ID_KEY: &[u8] = b"last_issued_id";

/// Big-endian, so that sled iterates runs in id order.
pub fn run_key(id: u64) -> [u8; 8] {
    id.to_be_bytes()
}

/// A run's origin: its trial's identity and the moment it started, which a shard, an export
/// and the store's copy of one run share (ids differ between stores).
pub fn origin_key(trial_key: &str, started_at: f64) -> Vec<u8> {
    let mut key = Vec::with_capacity(trial_key.len() + 9);
    key.extend_from_slice(trial_key.as_bytes());
    key.push(0);
    key.extend_from_slice(&started_at.to_bits().to_be_bytes());
    key
}

pub fn run_id(key: &[u8]) -> Option<u64> {
    Some(u64::from_be_bytes(key.try_into().ok()?))
}
