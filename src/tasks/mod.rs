//! Tasks: seeded data generators, and readers of data sets on disk (`babi`, `corpus`, `jsonl`),
//! with the sizes and metrics the checker and trainer need.
//!
//! # Rooms
//!
//! - `contract`: what every task implements ([`TaskKind`], [`Task`], [`TaskData`]) and the
//!   [`Batch`]es the trainer gets; it imports no task.
//! - the tasks, one file each, and what several share (`fresh`, `held_out`, `options`,
//!   `define`'s `task_kind!`, …); a task file starts with `use super::prelude::*;`.
//! - `registry`: [`TASKS`] and the lookups; nothing below it imports it.
//!
//! Adding a task: one file here implementing [`TaskKind`] (its options) and [`Task`] (its data),
//! its `mod` line, and one entry in [`TASKS`] (`registry.rs`).

pub mod addition;
mod answers;
pub mod assoc_retrieval;
pub mod babi;
mod contract;
pub mod convex_hull;
pub mod copy;
pub mod corpus;
mod data_digest;
mod data_file;
mod define;
#[cfg(test)]
mod every_task;
mod fresh;
mod geometry;
mod graphs;
mod held_out;
pub mod jsonl;
pub mod learn_to_execute;
pub mod listops;
mod lte_curriculum;
mod lte_program;
mod lte_sonnet;
mod nam;
pub mod nth_farthest;
mod options;
pub mod palindrome;
pub mod pattern_completion;
mod prelude;
pub mod priority_sort;
pub mod random_sequence;
pub mod rar;
mod recall;
pub mod reduce;
mod registry;
pub mod rgb_binding;
pub mod shortest_path;
pub mod spanning_tree;
mod streams;
mod token_examples;
pub mod tsp;
mod vocab;

pub use contract::{Batch, Split, Target, Task, TaskData, TaskKind, TrivialLevel, higher_is_better};
pub use data_file::resolve as resolve_path;
pub use registry::{TASKS, get, trivial_levels};
