//! What the store keeps for each run: the store's own types, versioned.
//!
//! A record is written as JSON. Its layout belongs to the store, not to the checker: the
//! configuration is a [`StoredConfig`] built from the checker's `TrialConfig` by an explicit
//! conversion ([`StoredConfig::of`]), so renaming a field in the checker is a compile error
//! here, not a silent change on disk. Every record carries its [`RECORD_VERSION`]; [`decode`]
//! reads every version this memctl has written and brings older ones up to date
//! ([`migrate`]), and the test beside it reads a record written by version 1.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::check::TrialConfig;
use crate::train_config::{OptimizerKind, TrainConfig};
use crate::value::Value;

/// The record layout this memctl writes.
///
/// - 1: `config.train` was the checker's `TrainConfig`; no version field, no progress, no
///   process identity.
/// - 2: `config.train` is a map of named settings; `record_version`, `progress` and
///   `environment.process` added. Later, without a new version (older memctls ignore them, and
///   records without them read as empty): `environment.processor` and `environment.commit`.
pub const RECORD_VERSION: u32 = 2;

/// Where a run is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Running,
    Done,
    Failed,
    /// Stopped before it finished (Ctrl-C, a time limit, or found `running` with its process
    /// gone); the trial resumes from its last checkpoint when a sweep runs it again.
    Interrupted,
    /// Stopped early by a search's pruner ([`RunRecord::pruned`] says where and why); never
    /// resumed.
    Pruned,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Running => "running",
            Status::Done => "done",
            Status::Failed => "failed",
            Status::Interrupted => "interrupted",
            Status::Pruned => "pruned",
        }
    }
}

/// Which process, on which machine and boot, ran a run: enough to tell whether it is still
/// alive (a pid alone is reused).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessIdentity {
    pub hostname: String,
    /// `/proc/sys/kernel/random/boot_id`: pids restart at every boot.
    pub boot_id: String,
    pub pid: u32,
    /// The process's start time in clock ticks after boot (`/proc/PID/stat`, field 22).
    pub start_ticks: u64,
}

/// The machine and build a run ran on (`Default`: all empty, for runs made up by tests and
/// benchmarks).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Environment {
    pub hostname: String,
    pub os: String,
    pub arch: String,
    pub cpus: usize,
    /// Compute threads the trial was given.
    pub threads: usize,
    pub device: String,
    /// The processor behind `device` (`AMD EPYC 7B13`, `NVIDIA H100 80GB HBM3`); empty if
    /// unknown or recorded before memctl kept it.
    #[serde(default)]
    pub processor: String,
    pub memctl_version: String,
    /// The commit memctl was built from, `+changes` if its tracked files differed; empty if
    /// unknown or recorded before memctl kept it.
    #[serde(default)]
    pub commit: String,
    pub features: Vec<String>,
    /// PID of the process that ran it.
    pub pid: u32,
    /// The process that ran it (absent in version 1 records).
    #[serde(default)]
    pub process: Option<ProcessIdentity>,
}

/// A trial's resolved configuration as stored.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StoredConfig {
    pub experiment: String,
    pub model: String,
    pub params: BTreeMap<String, Value>,
    pub task: String,
    pub task_options: BTreeMap<String, Value>,
    /// Training settings by name (`lr`, `optimizer`, `batch`, …); unset optional ones absent.
    pub train: BTreeMap<String, Value>,
    pub seed: u64,
    /// The swept axes with this trial's values, in sweep order.
    pub swept: Vec<(String, Value)>,
}

impl StoredConfig {
    pub fn of(c: &TrialConfig) -> StoredConfig {
        StoredConfig {
            experiment: c.experiment.clone(),
            model: c.model.clone(),
            params: c.params.clone(),
            task: c.task.clone(),
            task_options: c.task_options.clone(),
            train: train_values(&c.train),
            seed: c.seed,
            swept: c.swept.clone(),
        }
    }

    /// A training setting as text (`"cpu"` for `device`), if set.
    pub fn train_str(&self, name: &str) -> Option<&str> {
        self.train.get(name).and_then(Value::as_str)
    }

    /// The validation metric the run stops on (`seq_accuracy` of `stop_when = seq_accuracy >=
    /// 0.995`), if it has a `stop_when`.
    pub fn stop_metric(&self) -> Option<&str> {
        stop_metric(&self.train)
    }
}

/// The metric a stored `stop_when` tests: its first word, as [`train_values`] writes it.
pub fn stop_metric(train: &BTreeMap<String, Value>) -> Option<&str> {
    train.get("stop_when").and_then(Value::as_str).and_then(|s| s.split_whitespace().next())
}

/// A trial's training settings as named values: the stored form of `TrainConfig`.
pub fn train_values(t: &TrainConfig) -> BTreeMap<String, Value> {
    let mut m = BTreeMap::new();
    let optimizer = match t.optimizer {
        OptimizerKind::Adam => "adam",
        OptimizerKind::RmsProp => "rmsprop",
        OptimizerKind::Sgd => "sgd",
    };
    m.insert("optimizer".into(), Value::Str(optimizer.into()));
    for (k, v) in [
        ("lr", t.lr),
        ("momentum", t.momentum),
        ("alpha", t.alpha),
        ("beta1", t.beta1),
        ("beta2", t.beta2),
        ("eps", t.eps),
        ("weight_decay", t.weight_decay),
    ] {
        m.insert(k.into(), Value::Float(v));
    }
    m.insert("batch".into(), Value::Int(t.batch as i64));
    m.insert("steps".into(), Value::Int(t.steps as i64));
    m.insert("eval_every".into(), Value::Int(t.eval_every as i64));
    if let Some(n) = t.eval_size {
        m.insert("eval_size".into(), Value::Int(n as i64));
    }
    for (k, v) in [("clip_value", t.clip_value), ("clip_norm", t.clip_norm), ("max_time", t.max_time)] {
        if let Some(v) = v {
            m.insert(k.into(), Value::Float(v));
        }
    }
    m.insert("device".into(), Value::Str(t.device.clone()));
    if let Some(s) = &t.stop_when {
        m.insert("stop_when".into(), Value::Str(s.to_string()));
    }
    if let Some(s) = &t.select {
        m.insert("select".into(), Value::Str(s.to_string()));
    }
    m.insert("checkpoint_every".into(), Value::Float(t.checkpoint_every));
    m.insert("keep_checkpoint".into(), Value::Bool(t.keep_checkpoint));
    m
}

/// A running trial's progress, rewritten as it trains (at evaluations, at most every few
/// seconds): what `runs`, `show` and the dashboard show of it while it trains.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Progress {
    /// The steps it will run at most (`steps`).
    pub steps_total: u64,
    /// Unix seconds of the last update (a heartbeat: a run whose process is on another machine
    /// is presumed dead when this is old).
    pub updated_at: f64,
    /// The step its checkpoint resumed it from, if it resumed.
    pub resumed_from: Option<u64>,
    /// The step of its latest checkpoint.
    pub checkpoint_step: Option<u64>,
    /// Its `max_time` budget in seconds, if any (bounds the estimate of the rest).
    pub max_time: Option<f64>,
    /// How many runs of this trial before it, in a row, lost their process before their
    /// first step (see `sweep::probe`).
    #[serde(default)]
    pub deaths: u32,
}

impl Progress {
    /// Seconds left, estimated from the pace so far (see [`seconds_left`]).
    pub fn eta_seconds(&self, steps_run: u64, train_seconds: f64) -> Option<f64> {
        seconds_left(steps_run, self.steps_total, train_seconds, self.max_time)
    }
}

/// Seconds left for a run at step `steps_run` of `steps_total`: the rest of the steps at the
/// mean seconds per step so far, or the rest of `max_time` if that ends it first.
/// `train_seconds` counts every step from the first, a run resumed from a checkpoint included
/// (its earlier slices' time travels in the checkpoint), so the pace is over all `steps_run`.
pub fn seconds_left(steps_run: u64, steps_total: u64, train_seconds: f64, max_time: Option<f64>) -> Option<f64> {
    if steps_run == 0 {
        return None;
    }
    let by_steps = train_seconds / steps_run as f64 * steps_total.saturating_sub(steps_run) as f64;
    Some(match max_time {
        Some(t) => by_steps.min((t - train_seconds).max(0.0)),
        None => by_steps,
    })
}

/// One run of one trial.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    /// The layout version ([`RECORD_VERSION`] when written by this memctl).
    pub record_version: u32,
    pub id: u64,
    /// The trial's identity: equal for runs of the same resolved trial.
    pub trial_key: String,
    pub status: Status,
    pub config: StoredConfig,
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
    #[serde(with = "super::non_finite::curves")]
    pub curves: BTreeMap<String, Vec<(u64, f64)>>,
    #[serde(with = "super::non_finite::metrics")]
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
    /// Live progress while running (kept once it ends, for the record).
    #[serde(default)]
    pub progress: Option<Progress>,
    /// Where and why a search's pruner stopped it (status `pruned`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pruned: Option<Pruned>,
}

/// A pruner's decision to stop a run: the rung and step, the metric there, and the cut-off
/// its configuration missed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Pruned {
    /// 1 for the first rung.
    pub rung: usize,
    pub step: u64,
    /// The metric judged (`val_accuracy`).
    pub metric: String,
    /// This run's value there.
    #[serde(with = "super::non_finite::number")]
    pub value: f64,
    /// Its configuration's mean over the seeds that had reached the rung: what was judged.
    #[serde(with = "super::non_finite::number")]
    pub mean: f64,
    /// The value the mean had to reach.
    #[serde(with = "super::non_finite::number")]
    pub cutoff: f64,
}

impl std::fmt::Display for Pruned {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "pruned at rung {} (step {}): {} {:.4} (mean over seeds {:.4}) missed the cut-off {:.4}",
            self.rung, self.step, self.metric, self.value, self.mean, self.cutoff
        )
    }
}

/// Why a stored record cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    #[error("not a run record: {0}")]
    Json(#[from] serde_json::Error),
    #[error("record version {0} is newer than this memctl reads ({RECORD_VERSION}); update memctl")]
    Newer(u32),
    #[error("record_version is {0}, not a layout version")]
    BadVersion(String),
    #[error("version {version} record: {reason}")]
    Migration { version: u32, reason: String },
}

impl RunRecord {
    /// Seconds this run took over every process that ran it. `wall_seconds` covers only the
    /// last one; a run resumed from a checkpoint (the next GPU slice, a preempted job) carries
    /// its earlier training and evaluation time in `train_seconds` and `eval_seconds`, which
    /// then exceed it.
    pub fn seconds_over_every_process(&self) -> f64 {
        let resumed = self.progress.as_ref().is_some_and(|p| p.resumed_from.is_some());
        if resumed { self.wall_seconds.max(self.train_seconds + self.eval_seconds) } else { self.wall_seconds }
    }
}

pub fn encode(record: &RunRecord) -> Result<Vec<u8>, serde_json::Error> {
    serde_json::to_vec(record)
}

/// Reads a record of any version this memctl knows, as the current layout.
pub fn decode(bytes: &[u8]) -> Result<RunRecord, DecodeError> {
    decode_value(serde_json::from_slice(bytes)?)
}

/// [`decode`] of run `id`'s record as the store holds it: one it cannot read is corrupt.
pub(super) fn decode_stored(id: u64, bytes: &[u8]) -> Result<RunRecord, super::error::StoreError> {
    decode(bytes).map_err(|e| super::error::StoreError::Corrupt { id, reason: e.to_string() })
}

/// [`decode`] of a record already parsed as JSON (an export's element).
pub fn decode_value(mut value: serde_json::Value) -> Result<RunRecord, DecodeError> {
    // Version 1 wrote no version; any other value must be a whole number.
    let version = match value.get("record_version") {
        None => 1,
        Some(v) => match v.as_u64().and_then(|v| u32::try_from(v).ok()) {
            Some(version) => version,
            None => return Err(DecodeError::BadVersion(v.to_string())),
        },
    };
    if version > RECORD_VERSION {
        return Err(DecodeError::Newer(version));
    }
    migrate(&mut value, version)?;
    Ok(serde_json::from_value(value)?)
}

/// Brings a record of layout `version` up to [`RECORD_VERSION`], one version at a time.
pub fn migrate(record: &mut serde_json::Value, version: u32) -> Result<(), DecodeError> {
    let fail = |reason: &str| DecodeError::Migration { version, reason: reason.into() };
    if version < 2 {
        // 1 → 2: the checker's TrainConfig becomes named settings, as `train_values` writes them.
        let train = record
            .pointer_mut("/config/train")
            .and_then(serde_json::Value::as_object_mut)
            .ok_or_else(|| fail("no config.train"))?;
        let mut named = serde_json::Map::new();
        for (key, v) in std::mem::take(train) {
            match (key.as_str(), v) {
                (_, serde_json::Value::Null) => {}
                ("optimizer", serde_json::Value::String(kind)) => {
                    named.insert(key, kind.to_lowercase().into());
                }
                ("stop_when", serde_json::Value::Object(s)) => {
                    let op = match s.get("op").and_then(serde_json::Value::as_str) {
                        Some("Ge") => ">=",
                        Some("Gt") => ">",
                        Some("Le") => "<=",
                        Some("Lt") => "<",
                        _ => return Err(fail("stop_when has an unknown comparison")),
                    };
                    let metric = s.get("metric").and_then(serde_json::Value::as_str).unwrap_or("?");
                    let threshold = s.get("threshold").and_then(serde_json::Value::as_f64).unwrap_or(f64::NAN);
                    named.insert(key, format!("{metric} {op} {threshold}").into());
                }
                (_, v) => {
                    named.insert(key, v);
                }
            }
        }
        *train = named;
        record["record_version"] = 2.into();
    }
    Ok(())
}

/// Unix seconds, as a record's times are kept.
pub fn now() -> f64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A record as memctl 0.1 wrote it (layout 1), before the store had a layout of its own.
    const V1: &str = include_str!("../../tests/fixtures/run_record_v1.json");

    #[test]
    fn a_resumed_runs_time_left_comes_from_its_pace_over_every_step() {
        // Resumed at step 2 000 of 10 000 and now at 4 000, after 400 s over all its slices:
        // 0.1 s a step, 6 000 steps to go.
        let p = Progress {
            steps_total: 10_000,
            updated_at: 0.0,
            resumed_from: Some(2_000),
            checkpoint_step: Some(4_000),
            max_time: None,
            deaths: 0,
        };
        assert_eq!(p.eta_seconds(4_000, 400.0), Some(600.0));
        // max_time counts the same seconds: 100 s of a 500 s budget are left.
        assert_eq!(Progress { max_time: Some(500.0), ..p.clone() }.eta_seconds(4_000, 400.0), Some(100.0));
        assert_eq!(p.eta_seconds(0, 0.0), None);
    }

    #[test]
    fn a_resumed_runs_time_counts_its_earlier_processes() {
        let mut r = decode(V1.as_bytes()).unwrap();
        (r.wall_seconds, r.train_seconds, r.eval_seconds) = (300.0, 260.0, 180.0);
        // Run once, its wall time holds its training and evaluation.
        assert_eq!(r.seconds_over_every_process(), 300.0);
        // Resumed, its 440 s of training and evaluation include an earlier slice's.
        r.progress = Some(Progress {
            steps_total: 10,
            updated_at: 0.0,
            resumed_from: Some(4),
            checkpoint_step: Some(8),
            max_time: None,
            deaths: 0,
        });
        assert_eq!(r.seconds_over_every_process(), 440.0);
    }

    #[test]
    fn a_version_1_record_reads_as_the_current_layout() {
        let r = decode(V1.as_bytes()).unwrap();
        assert_eq!(r.record_version, RECORD_VERSION);
        assert_eq!((r.id, r.status, r.config.model.as_str()), (1, Status::Done, "lstm"));
        assert_eq!(r.config.train["optimizer"], Value::Str("rmsprop".into()));
        assert_eq!(r.config.train["lr"], Value::Float(0.001));
        assert_eq!(r.config.train["batch"], Value::Int(8));
        assert_eq!(r.config.train["stop_when"], Value::Str("accuracy >= 0.99".into()));
        // Unset options (null in version 1) are absent, as `train_values` leaves them.
        assert!(!r.config.train.contains_key("clip_norm") && !r.config.train.contains_key("eval_size"));
        assert_eq!(r.environment.process, None);
        assert_eq!(r.progress, None);
        // And it round-trips in the new layout.
        assert_eq!(decode(&encode(&r).unwrap()).unwrap(), r);
    }

    #[test]
    fn stop_when_is_stored_as_the_checker_prints_it() {
        use crate::train_config::{Comparison, StopWhen};
        let mut t = crate::train::test_config();
        t.stop_when = Some(StopWhen { metric: "accuracy".into(), op: Comparison::Ge, threshold: 0.99 });
        // The migration of version 1 and the current conversion agree.
        assert_eq!(train_values(&t)["stop_when"], Value::Str("accuracy >= 0.99".into()));
        assert_eq!(stop_metric(&train_values(&t)), Some("accuracy"));
    }

    /// A run whose weights diverged keeps a NaN or infinite metric (a test loss after a
    /// `max_time` stop), which JSON has no number for: it reads back as it was, instead of
    /// making the record corrupt.
    #[test]
    fn a_record_with_nan_and_infinite_metrics_and_curve_points_reads_back() {
        let mut r = decode(V1.as_bytes()).unwrap();
        r.final_metrics.insert("loss".into(), f64::NAN);
        r.curves.insert("val_loss".into(), vec![(10, 1.5), (20, f64::INFINITY)]);
        let back = decode(&encode(&r).unwrap()).unwrap();
        assert!(back.final_metrics["loss"].is_nan());
        assert_eq!(back.curves["val_loss"][0], (10, 1.5));
        assert_eq!(back.curves["val_loss"][1], (20, f64::INFINITY));
    }

    #[test]
    fn a_record_from_a_newer_memctl_is_refused_with_a_reason() {
        let mut v: serde_json::Value = serde_json::from_str(V1).unwrap();
        v["record_version"] = 99.into();
        let err = decode(&serde_json::to_vec(&v).unwrap()).unwrap_err();
        assert!(err.to_string().contains("record version 99 is newer"), "{err}");
    }
}
