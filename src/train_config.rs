//! Training settings: the `train { ... }` block of an experiment, resolved.
//!
//! Settings are flat `key = value` pairs so that any of them can be swept (`lr in [1e-3, 1e-4]`).
//! `optimizer = rmsprop(lr = 1e-4, momentum = 0.9)` is shorthand for `optimizer = "rmsprop"`
//! plus the settings given as arguments.

use serde::{Deserialize, Serialize};

use crate::value::{Kind, Value};

/// One known setting.
pub struct SettingSpec {
    pub name: &'static str,
    pub kind: Kind,
    /// `None`: off unless given.
    pub default: Option<SettingDefault>,
    pub doc: &'static str,
}

/// A setting's default, as a constant.
#[derive(Clone, Copy, Debug)]
pub enum SettingDefault {
    Int(i64),
    Float(f64),
    Bool(bool),
    Str(&'static str),
}

impl SettingDefault {
    pub fn value(self) -> Value {
        match self {
            SettingDefault::Int(i) => Value::Int(i),
            SettingDefault::Float(f) => Value::Float(f),
            SettingDefault::Bool(b) => Value::Bool(b),
            SettingDefault::Str(s) => Value::Str(s.into()),
        }
    }
}

impl SettingSpec {
    const fn float(name: &'static str, default: f64, doc: &'static str) -> SettingSpec {
        SettingSpec { name, kind: Kind::Float, default: Some(SettingDefault::Float(default)), doc }
    }
    const fn int(name: &'static str, default: i64, doc: &'static str) -> SettingSpec {
        SettingSpec { name, kind: Kind::Int, default: Some(SettingDefault::Int(default)), doc }
    }
    const fn flag(name: &'static str, default: bool, doc: &'static str) -> SettingSpec {
        SettingSpec { name, kind: Kind::Bool, default: Some(SettingDefault::Bool(default)), doc }
    }
    const fn string(name: &'static str, default: &'static str, doc: &'static str) -> SettingSpec {
        SettingSpec { name, kind: Kind::Str, default: Some(SettingDefault::Str(default)), doc }
    }
    /// A setting that is off unless given.
    const fn unset(name: &'static str, kind: Kind, doc: &'static str) -> SettingSpec {
        SettingSpec { name, kind, default: None, doc }
    }
}

/// Every setting a `train` block accepts (besides `stop_when` and `select`).
pub static SETTINGS: &[SettingSpec] = &[
    SettingSpec::string("optimizer", "adam", "adam, rmsprop or sgd"),
    SettingSpec::float("lr", 1e-3, "learning rate"),
    SettingSpec::float("momentum", 0.0, "rmsprop and sgd momentum"),
    SettingSpec::float("alpha", 0.99, "rmsprop smoothing constant"),
    SettingSpec::float("beta1", 0.9, "adam β1"),
    SettingSpec::float("beta2", 0.999, "adam β2"),
    SettingSpec::float("eps", 1e-8, "optimizer epsilon"),
    SettingSpec::float("weight_decay", 0.0, "decoupled weight decay (adam)"),
    SettingSpec::int("batch", 32, "sequences per training step"),
    SettingSpec::int("steps", 1000, "maximum training steps"),
    SettingSpec::int("eval_every", 100, "steps between validations"),
    SettingSpec::unset("eval_size", Kind::Int, "validation examples per evaluation (default: all)"),
    SettingSpec::unset("clip_value", Kind::Float, "clamp each gradient element to ±value"),
    SettingSpec::unset("clip_norm", Kind::Float, "rescale gradients to this global L2 norm"),
    SettingSpec::unset("max_time", Kind::Float, "seconds of training before stopping"),
    SettingSpec::string("device", "cpu", "cpu or cuda[:N]"),
    SettingSpec::float(
        "checkpoint_every",
        DEFAULT_CHECKPOINT_MINUTES,
        "minutes of training between checkpoints (0: only when stopped)",
    ),
    SettingSpec::flag("keep_checkpoint", false, "keep a checkpoint of a finished run's trained weights"),
];

/// Minutes of training between checkpoints, by default: a trial killed loses at most this much.
pub const DEFAULT_CHECKPOINT_MINUTES: f64 = 10.0;

/// Settings that change how a trial is run, not what it computes: they are not part of its
/// identity (`sweep::identity`), so changing them re-runs nothing.
pub const NOT_IN_IDENTITY: &[&str] = &["device", "checkpoint_every", "keep_checkpoint"];

pub fn setting(name: &str) -> Option<&'static SettingSpec> {
    SETTINGS.iter().find(|s| s.name == name)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum OptimizerKind {
    Adam,
    RmsProp,
    Sgd,
}

impl OptimizerKind {
    pub fn parse(s: &str) -> Option<OptimizerKind> {
        match s {
            "adam" => Some(OptimizerKind::Adam),
            "rmsprop" => Some(OptimizerKind::RmsProp),
            "sgd" => Some(OptimizerKind::Sgd),
            _ => None,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Comparison {
    Ge,
    Gt,
    Le,
    Lt,
}

impl Comparison {
    pub fn holds(self, value: f64, threshold: f64) -> bool {
        match self {
            Comparison::Ge => value >= threshold,
            Comparison::Gt => value > threshold,
            Comparison::Le => value <= threshold,
            Comparison::Lt => value < threshold,
        }
    }
    pub fn symbol(self) -> &'static str {
        match self {
            Comparison::Ge => ">=",
            Comparison::Gt => ">",
            Comparison::Le => "<=",
            Comparison::Lt => "<",
        }
    }
}

/// `stop_when = accuracy >= 0.99`: checked on the validation metrics at every evaluation.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StopWhen {
    pub metric: String,
    pub op: Comparison,
    pub threshold: f64,
}

impl std::fmt::Display for StopWhen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {} {}", self.metric, self.op.symbol(), self.threshold)
    }
}

/// `select = best(od_easy_seq_accuracy)`: which evaluation a run reports besides its last.
///
/// At every evaluation the metric is read (a validation metric, `val_*`, or a metric of one of
/// the task's extra test splits, `<split>_*`, which is then evaluated too); when it is better
/// than every earlier value, the test splits are evaluated there and kept as the run's
/// `selected_*` metrics. NAM Table 1 reports each run this way ("the epochs of the best
/// OD-easy validation accuracies", NAM §5.1).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Select {
    /// The metric as written: `val_accuracy`, `od_easy_seq_accuracy`.
    pub metric: String,
    /// `None`: a validation metric; `Some(i)`: a metric of test split `i` (never 0, the
    /// reported test set).
    pub split: Option<usize>,
    /// The metric's name within its split's metrics (`accuracy`, `loss`).
    pub base: String,
    /// Accuracies are better higher; losses, errors and lengths lower.
    pub higher_is_better: bool,
}

impl Select {
    pub fn improves(&self, value: f64, best: Option<f64>) -> bool {
        value.is_finite() && best.is_none_or(|b| if self.higher_is_better { value > b } else { value < b })
    }
}

impl std::fmt::Display for Select {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "best({})", self.metric)
    }
}

/// Resolved training settings of one trial.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TrainConfig {
    pub optimizer: OptimizerKind,
    pub lr: f64,
    pub momentum: f64,
    pub alpha: f64,
    pub beta1: f64,
    pub beta2: f64,
    pub eps: f64,
    pub weight_decay: f64,
    pub batch: usize,
    pub steps: usize,
    pub eval_every: usize,
    pub eval_size: Option<usize>,
    pub clip_value: Option<f64>,
    pub clip_norm: Option<f64>,
    pub max_time: Option<f64>,
    pub device: String,
    pub stop_when: Option<StopWhen>,
    pub select: Option<Select>,
    /// Minutes of training between checkpoints; 0: only when stopped from outside.
    pub checkpoint_every: f64,
    /// Whether a finished run keeps its last checkpoint (by default it is deleted).
    pub keep_checkpoint: bool,
}

impl TrainConfig {
    /// Settings with `optimizer` at learning rate `lr` and PyTorch's defaults for its other
    /// constants; batch 8, 10 steps, evaluations every 5, no clipping, on the CPU: for the
    /// checks and tests that train without a spec.
    pub fn plain(optimizer: OptimizerKind, lr: f64) -> TrainConfig {
        TrainConfig {
            optimizer,
            lr,
            momentum: 0.0,
            alpha: 0.99,
            beta1: 0.9,
            beta2: 0.999,
            eps: 1e-8,
            weight_decay: 0.0,
            batch: 8,
            steps: 10,
            eval_every: 5,
            eval_size: None,
            clip_value: None,
            clip_norm: None,
            max_time: None,
            device: "cpu".into(),
            stop_when: None,
            select: None,
            checkpoint_every: DEFAULT_CHECKPOINT_MINUTES,
            keep_checkpoint: false,
        }
    }
}
