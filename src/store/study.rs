//! A search's state in the store: the configurations it has proposed and every pruning
//! decision, with what each was based on. Kept beside the runs (tree
//! [`keys::STUDIES`](super::keys::STUDIES)), one JSON value per study, and changed only by
//! [`Store::update_study`](super::Store::update_study): one exclusive session reads, changes
//! and writes it, so two sweeps on one study never propose the same configuration twice or
//! judge a rung twice, and a killed sweep leaves every decision it made.

use serde::{Deserialize, Serialize};

use crate::value::Value;

/// The layout this memctl writes.
pub const STUDY_VERSION: u32 = 1;

/// The sampler of a configuration known from its runs only (imported runs, say), not proposed
/// by the study in this store.
pub const FROM_RUNS: &str = "runs";

/// One search's state.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StudyRecord {
    pub version: u32,
    pub experiment: String,
    /// The configurations proposed, in order (a configuration's index is its position).
    pub configs: Vec<StudyConfig>,
    /// A trial's report at a rung, with the decision taken on it, in the order they came.
    pub reports: Vec<RungReport>,
}

/// A proposed configuration: a value per searched name.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StudyConfig {
    pub values: Vec<(String, Value)>,
    /// The sampler that chose it (`grid`, `random`, `tpe`).
    pub sampler: String,
    /// Unix seconds.
    pub proposed_at: f64,
}

impl StudyConfig {
    /// Its values in the order of `names` (the searched names; 0 for one it lacks).
    pub fn values_named<'a>(&self, names: impl IntoIterator<Item = &'a str>) -> Vec<Value> {
        names
            .into_iter()
            .map(|name| self.values.iter().find(|(n, _)| n == name).map_or(Value::Int(0), |(_, v)| v.clone()))
            .collect()
    }
}

/// What a trial (a configuration with a seed) reported when it reached a rung.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AtRung {
    pub config: usize,
    pub seed: u64,
    /// 0 for the first rung.
    pub rung: usize,
    /// The step of the evaluation that reached the rung.
    pub step: u64,
    /// The metric there.
    #[serde(with = "super::non_finite::number")]
    pub value: f64,
    /// The training loss there (the mean over the last evaluation interval).
    pub loss: Option<f64>,
    /// The training loss the guard's span earlier (`Pruning::guard_window` steps before
    /// `step`; the first evaluation's where the curve starts later).
    pub loss_before: Option<f64>,
}

/// A trial's report at a rung and the decision taken on it (one JSON object: the report's
/// fields beside `decision`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RungReport {
    #[serde(flatten)]
    pub at: AtRung,
    pub decision: Decision,
}

/// A pruner's decision at a rung.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Decision {
    /// Whether the trial goes on.
    pub keep: bool,
    /// The configuration's mean over the seeds that had reached the rung.
    #[serde(with = "super::non_finite::number")]
    pub mean: f64,
    /// The value the mean had to reach (none while the configuration has no competitors).
    pub cutoff: Option<f64>,
    /// Configurations compared at the rung (this one included).
    pub compared: usize,
    /// Kept by the plateau guard: the metric missed the cut-off, but the training loss still
    /// fell by more than `patience`.
    pub guarded: bool,
}

impl StudyRecord {
    pub fn new(experiment: &str) -> StudyRecord {
        StudyRecord { version: STUDY_VERSION, experiment: experiment.into(), configs: vec![], reports: vec![] }
    }

    /// The decision already taken for a trial at a rung.
    pub fn report(&self, config: usize, seed: u64, rung: usize) -> Option<&RungReport> {
        self.reports.iter().find(|r| r.at.config == config && r.at.seed == seed && r.at.rung == rung)
    }

    /// Whether configuration `c` is known from its runs only (`sweep::study_from_runs`): of
    /// its decisions, only those that pruned are known.
    pub fn from_runs(&self, c: usize) -> bool {
        self.configs.get(c).is_some_and(|c| c.sampler == FROM_RUNS)
    }

    /// The first rung at which a configuration (any of its seeds) was pruned.
    pub fn pruned_at(&self, config: usize) -> Option<&RungReport> {
        self.reports.iter().filter(|r| r.at.config == config && !r.decision.keep).min_by_key(|r| r.at.rung)
    }
}

pub fn encode(study: &StudyRecord) -> Result<Vec<u8>, serde_json::Error> {
    serde_json::to_vec(study)
}

pub fn decode(bytes: &[u8]) -> Result<StudyRecord, serde_json::Error> {
    serde_json::from_slice(bytes)
}

#[cfg(test)]
mod tests {
    use super::{StudyRecord, decode, encode};

    /// A report is one flat JSON object, as studies in existing stores hold it.
    #[test]
    fn a_report_reads_and_writes_as_one_flat_object() {
        let stored = br#"{"version":1,"experiment":"lrs","configs":[],"reports":[{"config":2,"seed":1,
            "rung":0,"step":20,"value":0.5,"loss":1.25,"loss_before":null,"decision":{"keep":false,
            "mean":0.5,"cutoff":0.75,"compared":3,"guarded":false}}]}"#;
        let study: StudyRecord = decode(stored).unwrap();
        let report = &study.reports[0];
        assert_eq!(
            (report.at.config, report.at.step, report.at.loss, report.decision.compared),
            (2, 20, Some(1.25), 3)
        );
        let written: serde_json::Value = serde_json::from_slice(&encode(&study).unwrap()).unwrap();
        let original: serde_json::Value = serde_json::from_slice(stored).unwrap();
        assert_eq!(written, original);
    }
}
