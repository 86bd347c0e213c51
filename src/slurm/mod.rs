//! Sweeps on a Slurm cluster. memctl keeps its own sweep logic, dedupe and store; Slurm does
//! the scheduling, with one job array per submission.
//!
//! Layout of a sweep's directory on the shared file system (`--shared-dir`):
//!
//! ```text
//! <shared>/<spec>-<experiment>/
//!     manifests/<n>.json     one per submission: the spec files, overrides, trials (index → identity)
//!     shards/<trial>.json    one finished run record per trial, written atomically by the worker
//!     checkpoints/<trial>.ckpt  the latest checkpoint of each unfinished trial
//!     tasks/<n>.<task>       the trials a packed array task has ended, for its requeued attempts
//!     logs/<job>_<task>.log  Slurm's output of each array task
//! ```
//!
//! `memctl worker` runs one array task: it re-checks the spec from the manifest's copy of its
//! files, runs the trial with the identity the manifest names, and writes the run record to a
//! temporary file that it renames into `shards/`. A task stopped early (time limit near,
//! `scancel`, preemption: see [`signals`]) leaves no shard, only its trial's checkpoint in
//! `checkpoints/`: a requeued or resubmitted task resumes from it. A settled trial submitted
//! again (`--force`, `--retry-failed`) starts afresh: the submission removes its checkpoint.
//! `memctl sync` merges shards into the local store (the sled store never lives on the shared
//! file system): a shard whose run is its trial's latest in the store, or older than the
//! latest done run, is not added again, so syncing twice adds nothing; a run started after
//! the trial's latest done one (a trial submitted again) is added.

pub mod manifest;
pub mod scheduler;
pub mod shard;
pub mod signals;

use std::path::{Path, PathBuf};

/// The directory of one sweep (spec file and experiment) under the shared root.
pub fn sweep_dir(shared: &Path, spec: &Path, experiment: Option<&str>) -> PathBuf {
    let stem = spec.file_stem().and_then(|s| s.to_str()).unwrap_or("spec");
    let safe = |s: &str| {
        s.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '_' }).collect::<String>()
    };
    shared.join(format!("{}-{}", safe(stem), safe(experiment.unwrap_or("all"))))
}
