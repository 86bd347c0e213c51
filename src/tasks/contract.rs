//! What every task implements, and what the trainer gets from it: a [`TaskKind`] (the name
//! and options a spec calls), the configured [`Task`] (sizes, metrics), its [`TaskData`] (the
//! batches of a seed) and the [`Batch`]es themselves.

use std::path::Path;

use candle_core::{Device, Tensor};

use crate::graph::Ty;
use crate::signature::{ArgSpec, PrimError};
use crate::value::Value;

/// A task generator as named in specs: `assocRetrieval(pairs = 13)`.
pub trait TaskKind: Send + Sync {
    fn name(&self) -> &'static str;
    fn summary(&self) -> &'static str;
    /// Options (all values; no tensors).
    fn signature(&self) -> &'static [ArgSpec];
    /// Configures the task; `options` are aligned with the signature, defaults filled in.
    /// A task that reads files resolves a relative path against the working directory here.
    fn instantiate(&self, options: &[Value]) -> Result<Box<dyn Task>, PrimError>;
    /// Configures the task, resolving relative paths in its options against `dir` (the checker
    /// passes the directory of the spec file the path is written in, as `use` paths are).
    /// Tasks that read no files ignore `dir`.
    fn instantiate_in(&self, options: &[Value], dir: &Path) -> Result<Box<dyn Task>, PrimError> {
        let _ = dir;
        self.instantiate(options)
    }
    /// What each option accepts, in words (aligned with the signature): `1 to 4096`,
    /// `one of none, linear`.
    fn accepted(&self) -> Vec<String> {
        vec![]
    }
    /// Whether a trial's identity (`sweep::identity`) hashes the option `option` set to
    /// `value`: every option is, except one added after trials were recorded, while it is at
    /// its default.
    fn in_identity(&self, option: &str, value: &Value) -> bool {
        let _ = (option, value);
        true
    }
    /// For a task that reads a data set: the files it reads and what it reports, in one line
    /// (`memctl tasks` shows it, since such a task has no data to configure it by default).
    fn reads(&self) -> Option<&'static str> {
        None
    }
    /// What a model that has learnt nothing of the task scores for these options (aligned
    /// with the signature, defaults filled in): the configured task's [`Task::trivial_levels`].
    /// Empty where the options fail their checks, and for a task that reads a data set
    /// (configuring it would read the files, and none states levels).
    fn trivial_levels(&self, options: &[Value]) -> Vec<TrivialLevel> {
        if self.reads().is_some() {
            return vec![];
        }
        self.instantiate(options).map_or_else(|_| vec![], |task| task.trivial_levels())
    }
}

/// A score reachable without the task's memory: `value` of `metric` by the strategy `name`.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct TrivialLevel {
    pub name: String,
    pub metric: &'static str,
    pub value: f64,
}

impl TrivialLevel {
    pub fn new(name: impl Into<String>, metric: &'static str, value: f64) -> TrivialLevel {
        TrivialLevel { name: name.into(), metric, value }
    }
}

/// What the model is scored on at the scored time steps.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Target {
    /// One of `n` classes: logits `[n]`, cross-entropy, metric `accuracy`.
    Classes(usize),
    /// `n` independent bits: logits `[n]`, binary cross-entropy, metrics `bit_error`, `accuracy`.
    Bits(usize),
}

impl Target {
    pub fn size(self) -> usize {
        match self {
            Target::Classes(n) | Target::Bits(n) => n,
        }
    }

    /// Metrics recorded for this kind of target, besides `loss`.
    pub fn metrics(self) -> &'static [&'static str] {
        match self {
            Target::Classes(_) => &["accuracy", "seq_accuracy"],
            Target::Bits(_) => &["bit_error", "accuracy"],
        }
    }
}

/// A configured task.
pub trait Task: Send + Sync {
    /// The per-step input type (`tokens(V)` or a float vector).
    fn input(&self) -> Ty;
    fn target(&self) -> Target;
    /// Names of the held-out test sets. The first is the main one: its metrics are reported
    /// as `accuracy`, `loss`, ...; the others as `<split>_accuracy` (e.g. NAM's `od_easy`).
    fn test_splits(&self) -> &'static [&'static str] {
        &["test"]
    }
    /// What an evaluation of a split reports: `loss`, the target's metrics, the task's own.
    fn metric_names(&self) -> Vec<&'static str> {
        let mut names = vec!["loss"];
        names.extend(self.target().metrics());
        names.extend(self.task_metric_names());
        names
    }
    /// Metrics of the task's own, beyond its target's, from one evaluation batch and the
    /// model's logits for it (`[S, B, n]`): `(name, sum, count)`, averaged over the split as
    /// Σ sum / Σ count (e.g. the TSP's predicted tour length). Most tasks have none.
    /// The names [`Task::task_metrics`] reports.
    fn task_metric_names(&self) -> &'static [&'static str] {
        &[]
    }
    fn task_metrics(&self, _batch: &Batch, _logits: &Tensor) -> candle_core::Result<Vec<(&'static str, f64, f64)>> {
        Ok(vec![])
    }
    /// The value of a task metric from its average over a split (Σ sum / Σ count); most are
    /// the average itself, a perplexity is `exp` of the averaged cross-entropy.
    fn task_metric_value(&self, _name: &'static str, mean: f64) -> f64 {
        mean
    }
    /// For a task that reads data files, a hash of what it read ([`super::data_digest`]):
    /// part of its trials' identity.
    fn data_digest(&self) -> Option<&str> {
        None
    }
    /// Generates the task's data for one trial, deterministically from `seed`.
    fn data(&self, seed: u64, device: &Device) -> candle_core::Result<Box<dyn TaskData>>;
    /// The most time steps one example can have (its input and answer steps), from the
    /// options alone: the memory estimate bounds the data sets by it before generating any.
    /// `None` where the options do not bound it (the estimate then generates a sample).
    fn max_steps(&self) -> Option<usize> {
        None
    }
    /// What a model that has learnt nothing of the task scores: chance, and the best shortcut
    /// from the input alone, so that a result can be read against them. Empty where the task
    /// has no level worth stating (or none worked out yet).
    fn trivial_levels(&self) -> Vec<TrivialLevel> {
        vec![]
    }
}

/// Whether a higher value of a metric (or of its curve, `val_*`, `<split>_*`) is better:
/// accuracies and the share of valid answers (`valid_tours`) are; losses, errors, lengths and
/// perplexities are not. One rule for `select = best(…)`, curve summaries and reports.
pub fn higher_is_better(metric: &str) -> bool {
    metric.ends_with("accuracy") || metric.ends_with("valid_tours")
}

/// Which held-out set to evaluate on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Split {
    Validation,
    /// The `i`-th of [`Task::test_splits`].
    Test(usize),
}

/// A batch of sequences, time-major.
#[derive(Clone, Debug)]
pub struct Batch {
    /// `[T, B]` u32 token ids, or `[T, B, n]` floats.
    pub inputs: Tensor,
    /// The time steps whose output is scored, in increasing order (`S` of them).
    pub scored: Vec<usize>,
    /// `[S, B]` u32 class ids, or `[S, B, n]` float bits.
    pub targets: Tensor,
}

impl Batch {
    pub fn batch_size(&self) -> candle_core::Result<usize> {
        self.inputs.dim(1)
    }
    pub fn steps(&self) -> candle_core::Result<usize> {
        self.inputs.dim(0)
    }
}

/// One trial's data.
pub trait TaskData: Send {
    /// The next training batch (fixed datasets sample from their training set).
    fn train_batch(&mut self, batch_size: usize) -> candle_core::Result<Batch>;
    /// A held-out set, in batches of at most `batch_size`.
    fn eval_batches(&self, split: Split, batch_size: usize) -> candle_core::Result<Vec<Batch>>;
    /// Size of the training set, if fixed (for epochs); `None` for fresh data every batch.
    fn train_size(&self) -> Option<usize>;
    /// The most time steps a training batch can have, for data whose batches differ in length
    /// (the memory estimate plans for it); `None`: as long as any batch.
    fn longest_train_steps(&self) -> Option<usize> {
        None
    }
}
