//! A submission's manifest: everything a worker needs to rebuild exactly the submitted trials.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::lang::{Disk, SourceReader};

/// Version of the manifest layout.
pub const MANIFEST_VERSION: u32 = 1;

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Manifest {
    pub version: u32,
    /// The spec path as given at submission (workers load it from `files`, not from disk).
    pub spec_path: String,
    /// Every file the spec loaded: requested path → (canonical path, text).
    pub files: BTreeMap<String, (PathBuf, String)>,
    pub experiment: Option<String>,
    /// Command-line overrides (`d=48,96`), re-applied by workers.
    pub overrides: Vec<String>,
    /// The folder the submission ran in (absolute). Workers work there, wherever Slurm starts
    /// them (`--sbatch-arg=--chdir=…`), so that relative paths (a task's data file) resolve as
    /// they did at submission.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workdir: Option<PathBuf>,
    /// The trials submitted (identity, and a label for humans), each trained by the array task
    /// of its index, or of its pack (`packs`); empty for a search's workers.
    pub trials: Vec<ManifestTrial>,
    /// Array index → the trials that task trains as one pack (indices into `trials`), when
    /// the sweep packs (`--pack N`); empty: one trial per task.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub packs: Vec<Vec<usize>>,
    /// A search's workers: every array task runs the search against the store, instead of
    /// one trial each.
    #[serde(default)]
    pub search: Option<ManifestSearch>,
    /// Compute threads per trial.
    pub threads: usize,
    pub device: Option<String>,
    /// The Slurm job id, once submitted.
    pub job: Option<String>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ManifestTrial {
    pub trial_key: String,
    pub label: String,
}

/// A search submitted as workers: each array task takes the study's next trial from the store
/// (and proposes the next configuration when none is left), as a local sweep's workers do.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ManifestSearch {
    /// The experiment with the `search` block.
    pub experiment: String,
    /// The store the workers share (absolute; on a file system the compute nodes reach).
    pub store: PathBuf,
    /// Array tasks (workers) submitted.
    pub workers: usize,
}

impl Manifest {
    /// Its array tasks still known to `squeue` (none before it was submitted).
    pub fn queued_tasks(&self) -> Result<Vec<(usize, String)>, super::scheduler::SlurmError> {
        self.job.as_deref().map_or(Ok(vec![]), super::scheduler::queued_tasks)
    }

    /// How many array tasks train the manifest's trials.
    pub fn tasks(&self) -> usize {
        if self.packs.is_empty() { self.trials.len() } else { self.packs.len() }
    }

    /// The trials (indices into `trials`) that array task `task` trains.
    pub fn trials_of_task(&self, task: usize) -> Vec<usize> {
        match self.packs.is_empty() {
            true => (task < self.trials.len()).then_some(task).into_iter().collect(),
            false => self.packs.get(task).cloned().unwrap_or_default(),
        }
    }

    /// The array task that trains trial `trial` (an index into `trials`).
    pub fn task_of_trial(&self, trial: usize) -> Option<usize> {
        match self.packs.is_empty() {
            true => (trial < self.trials.len()).then_some(trial),
            false => self.packs.iter().position(|p| p.contains(&trial)),
        }
    }

    /// Reads a manifest, refusing one whose packs name trials it does not list (a damaged or
    /// hand-edited file).
    pub fn read(path: &Path) -> std::io::Result<Manifest> {
        let bytes = std::fs::read(path)?;
        let manifest: Manifest = serde_json::from_slice(&bytes).map_err(std::io::Error::other)?;
        let trials = manifest.trials.len();
        for (task, pack) in manifest.packs.iter().enumerate() {
            if let Some(i) = pack.iter().find(|&&i| i >= trials) {
                let why = format!("array task {task}'s pack names trial {i}, but the manifest lists {trials}");
                return Err(std::io::Error::new(std::io::ErrorKind::InvalidData, why));
            }
        }
        Ok(manifest)
    }

    /// Writes the manifest (atomically: temporary file, then rename).
    pub fn write(&self, path: &Path) -> std::io::Result<()> {
        super::shard::write_atomic(path, &serde_json::to_vec_pretty(self).map_err(std::io::Error::other)?)
    }
}

/// Reads spec files from disk and remembers them, to put in a manifest.
#[derive(Default)]
pub struct Recorder {
    pub files: RefCell<BTreeMap<String, (PathBuf, String)>>,
}

impl SourceReader for Recorder {
    fn read(&self, path: &Path) -> std::io::Result<(PathBuf, Vec<u8>)> {
        let (canonical, bytes) = Disk.read(path)?;
        let text = String::from_utf8_lossy(&bytes).into_owned();
        self.files.borrow_mut().insert(path.display().to_string(), (canonical.clone(), text));
        Ok((canonical, bytes))
    }
}

/// Serves the files a manifest recorded.
pub struct Snapshot<'a>(pub &'a BTreeMap<String, (PathBuf, String)>);

impl SourceReader for Snapshot<'_> {
    fn read(&self, path: &Path) -> std::io::Result<(PathBuf, Vec<u8>)> {
        match self.0.get(&path.display().to_string()) {
            Some((canonical, text)) => Ok((canonical.clone(), text.clone().into_bytes())),
            None => Err(std::io::Error::new(std::io::ErrorKind::NotFound, "not in the manifest")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest(packs: Vec<Vec<usize>>) -> Manifest {
        let trial = |k: &str| ManifestTrial { trial_key: k.into(), label: String::new() };
        Manifest {
            version: MANIFEST_VERSION,
            spec_path: "s.mem".into(),
            files: BTreeMap::new(),
            experiment: None,
            overrides: vec![],
            workdir: None,
            trials: vec![trial("a"), trial("b")],
            packs,
            search: None,
            threads: 1,
            device: None,
            job: None,
        }
    }

    #[test]
    fn a_manifest_whose_pack_names_a_trial_it_does_not_list_is_refused_with_the_reason() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("1.json");
        manifest(vec![vec![0, 1]]).write(&path).unwrap();
        assert_eq!(Manifest::read(&path).unwrap().trials_of_task(0), vec![0, 1]);
        manifest(vec![vec![0, 7]]).write(&path).unwrap();
        let err = Manifest::read(&path).unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::InvalidData);
        assert!(err.to_string().contains("array task 0's pack names trial 7, but the manifest lists 2"), "{err}");
    }
}
