//! What the store keeps for each run.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::check::TrialConfig;

/// Where a run is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Running,
    Done,
    Failed,
    /// Was running when its process stopped (Ctrl-C, or found `running` by a later process).
    Interrupted,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Running => "running",
            Status::Done => "done",
            Status::Failed => "failed",
            Status::Interrupted => "interrupted",
        }
    }
}

/// The machine and build a run ran on.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Environment {
    pub hostname: String,
    pub os: String,
    pub arch: String,
    pub cpus: usize,
    /// Compute threads the trial was given.
    pub threads: usize,
    pub device: String,
    pub memctl_version: String,
    pub features: Vec<String>,
    /// PID of the process that ran it (to detect runs left `running` by a dead process).
    pub pid: u32,
}

/// One run of one trial.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    pub id: u64,
    /// The trial's identity: equal for runs of the same resolved trial.
    pub trial_key: String,
    pub status: Status,
    pub config: TrialConfig,
    /// Path of the spec file as given on the command line.
    pub spec_path: String,
    /// The text of the spec and every file it uses.
    pub spec_text: String,
    /// SHA-256 of `spec_text`.
    pub spec_hash: String,
    pub environment: Environment,
    /// Unix seconds.
    pub started_at: f64,
    pub ended_at: Option<f64>,
    pub curves: BTreeMap<String, Vec<(u64, f64)>>,
    pub final_metrics: BTreeMap<String, f64>,
    pub steps_run: u64,
    pub steps_to_converge: Option<u64>,
    pub epochs_to_converge: Option<f64>,
    pub stop_reason: String,
    pub param_count: u64,
    pub flops_per_step: u64,
    pub wall_seconds: f64,
    pub train_seconds: f64,
    pub eval_seconds: f64,
    pub error: Option<String>,
    #[serde(default)]
    pub tags: Vec<String>,
}
