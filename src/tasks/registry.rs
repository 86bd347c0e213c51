//! Every task a spec can call, by name: [`TASKS`] and the lookups over it.

use super::contract::{TaskKind, TrivialLevel};
use super::{
    addition, assoc_retrieval, babi, convex_hull, copy, corpus, jsonl, learn_to_execute, listops, nth_farthest,
    palindrome, pattern_completion, priority_sort, random_sequence, rar, reduce, rgb_binding, shortest_path,
    spanning_tree, tsp,
};
use crate::value::Value;

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
    &rgb_binding::RgbBindingKind,
    &babi::BabiKind,
    &corpus::CorpusKind,
    &jsonl::JsonlKind,
    &learn_to_execute::LearnToExecuteKind,
];

/// The task generator called `name` in specs.
pub fn get(name: &str) -> Option<&'static dyn TaskKind> {
    TASKS.iter().copied().find(|t| t.name() == name)
}

/// The trivial levels of task `name` with options by name (as a run record stores them);
/// options it does not give take their defaults. Empty for an unknown task.
pub fn trivial_levels(name: &str, options: &std::collections::BTreeMap<String, Value>) -> Vec<TrivialLevel> {
    let Some(kind) = get(name) else { return vec![] };
    let aligned: Option<Vec<Value>> =
        kind.signature().iter().map(|s| options.get(s.name).cloned().or_else(|| s.default.value())).collect();
    aligned.map_or_else(Vec::new, |o| kind.trivial_levels(&o))
}
