//! Synthetic tasks: seeded data generators with the sizes and metric the checker and trainer need.
//!
//! Adding a task: one file here implementing [`TaskKind`] (its options) and [`Task`] (its data),
//! its `mod` line, and one entry in [`TASKS`].

use candle_core::{Device, Tensor};

use crate::graph::Ty;
use crate::prims::{ArgSpec, PrimError};
use crate::value::Value;

pub mod addition;
mod answers;
pub mod assoc_retrieval;
pub mod convex_hull;
pub mod copy;
mod fresh;
mod geometry;
mod graphs;
pub mod learn_to_execute;
pub mod listops;
mod lte_program;
mod nam;
pub mod nth_farthest;
mod options;
pub mod palindrome;
pub mod pattern_completion;
pub mod priority_sort;
pub mod random_sequence;
pub mod rar;
pub mod reduce;
pub mod shortest_path;
pub mod spanning_tree;
mod streams;
pub mod tsp;

/// Every task generator, by name.
pub static TASKS: &[&dyn TaskKind] = &[
    &assoc_retrieval::AssocRetrievalKind,
    &nth_farthest::NthFarthestKind,
    &copy::CopyKind,
    &priority_sort::PrioritySortKind,
    &rar::RarKind,
    &addition::AdditionKind,
    &palindrome::PalindromeKind,
    &reduce::ReduceKind,
    &pattern_completion::PatternCompletionKind,
    &random_sequence::RandomSequenceKind,
    &convex_hull::ConvexHullKind,
    &tsp::TspKind,
    &shortest_path::ShortestPathKind,
    &spanning_tree::SpanningTreeKind,
    &listops::ListOpsKind,
    &learn_to_execute::LearnToExecuteKind,
];

pub fn get(name: &str) -> Option<&'static dyn TaskKind> {
    TASKS.iter().copied().find(|t| t.name() == name)
}

/// A task generator as named in specs: `assocRetrieval(pairs = 13)`.
pub trait TaskKind: Send + Sync {
    fn name(&self) -> &'static str;
    fn summary(&self) -> &'static str;
    /// Options (all values; no tensors).
    fn signature(&self) -> &'static [ArgSpec];
    /// Configures the task; `options` are aligned with the signature, defaults filled in.
    fn instantiate(&self, options: &[Value]) -> Result<Box<dyn Task>, PrimError>;
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
    /// Generates the task's data for one trial, deterministically from `seed`.
    fn data(&self, seed: u64, device: &Device) -> candle_core::Result<Box<dyn TaskData>>;
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
}
