//! The only place sled tree names and keys are encoded.

/// Run records, keyed by [`run_key`].
pub const RUNS: &str = "runs";
/// Trial identity → id of its latest run, keyed by the identity's bytes.
pub const TRIALS: &str = "trials";
/// Ids of runs in flight (`running`), so that a later process can find and mark them
/// `interrupted` without scanning every run.
pub const RUNNING: &str = "running";
/// Store metadata (schema version).
pub const META: &str = "meta";
pub const SCHEMA_KEY: &[u8] = b"schema";

/// Big-endian, so that sled iterates runs in id order.
pub fn run_key(id: u64) -> [u8; 8] {
    id.to_be_bytes()
}

pub fn run_id(key: &[u8]) -> Option<u64> {
    Some(u64::from_be_bytes(key.try_into().ok()?))
}
