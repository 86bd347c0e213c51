//! The switches on CUDA that are not a kernel of memctl's: changes to the vendored candle-core
//! (vendor/README.md), rewrites of a model's step graph, how kernel modules load and steps
//! replay, and two options. Each is a [`Switch`] (`kernels::cuda::switches`: one environment
//! variable, `MEMCTL_CUDA`, changes them all; `memctl doctor` lists them); each kernel's own
//! switch sits in its module.

use crate::kernels::cuda::switches::Switch;

/// candle's float sums with few outputs split over many blocks, two passes
/// (`candle_core::cuda_backend::set_split_sums`): STM A 16.26 → 11.71 ms a step, B 30.70 → 22.49
/// (H200, 2026-11-26).
pub const SPLIT_SUMS: Switch = Switch::on("split_sums");
inventory::submit! { SPLIT_SUMS }

/// A tensor's slices' gradients assembled once into one fill of the whole
/// (`candle_core::backprop::set_lean_narrow_grads`): NAM-TM 30.24 → 26.57 ms a step, LSAM
/// 14.33 → 13.64 (H100, 2026-11-26).
pub const NARROW_GRADS: Switch = Switch::on("narrow_grads");
inventory::submit! { NARROW_GRADS }

/// No gradient for an operand that needs none, such as a batch's inputs
/// (`candle_core::backprop::set_skip_untracked_grads`): STM A 10.98 → 10.69 ms a step, B 19.59 →
/// 19.21 (H100, 2026-11-26).
pub const UNTRACKED_GRADS: Switch = Switch::on("untracked_grads");
inventory::submit! { UNTRACKED_GRADS }

/// The output head run once over every scored step, stacked (`compile::head`): STM A 10.98 →
/// 8.60 ms a step, LSAM 14.33 → 10.21 (H100, 2026-11-26).
pub const BATCHED_HEAD: Switch = Switch::on("batched_head");
inventory::submit! { BATCHED_HEAD }

/// The nodes that read only the step's input run once over all time steps (`compile::hoist`):
/// NAM-TM 30.24 → 26.88 ms a step, STM A 10.98 → 10.33 (H100, 2026-11-26).
pub const HOISTED_INPUTS: Switch = Switch::on("hoisted_inputs");
inventory::submit! { HOISTED_INPUTS }

/// `embedding`'s lookup while training as a product of one-hot rows with the table
/// (`prims::embedding`), for vocabularies of at most 1 024: NAM-TM's example 12.26 → 11.62 ms a
/// step, LSAM's 5.36 → 4.78 (H100, 2026-11-27).
pub const ONE_HOT_EMBEDDING: Switch = Switch::on("one_hot_embedding");
inventory::submit! { ONE_HOT_EMBEDDING }

/// A training step replayed from a CUDA graph (`train::graph_step`), captured at its second
/// step; `-cuda_graphs` runs every step eagerly. STM A 134.2 → 27.7 ms a step (H100, 2026-11-22).
pub const CUDA_GRAPHS: Switch = Switch::on("cuda_graphs");
inventory::submit! { CUDA_GRAPHS }

/// An evaluation's forward replayed from a CUDA graph, one per batch shape
/// (`train::graph_eval`), where it would run eagerly. SAM Table 1's four length-30 trials of a
/// seed at once, two validations and the test each: 16.97 → 15.56 s of evaluation, means of
/// three runs (H200, 2026-11-30).
pub const EVAL_GRAPH: Switch = Switch::on("eval_graph");
inventory::submit! { EVAL_GRAPH }

/// Kernel modules loaded from the machine code (SASS) built for the card beside their PTX
/// (`candle_core::cuda_backend::set_prebuilt_sass`), where the driver would compile the PTX at
/// the first load; a card of another architecture loads the PTX. STM A's first step on a
/// machine whose driver has compiled none of memctl's PTX 14.9 s → 0.13 s (H200, 2026-11-30).
pub const PREBUILT_SASS: Switch = Switch::on("prebuilt_sass");
inventory::submit! { PREBUILT_SASS }

/// f32 products on TF32 tensor cores: 2–7 % faster on an H100, but the products' inputs are
/// rounded to 10 mantissa bits (results differ from the CPU's up to 1e-1; docs/performance.md,
/// "CUDA changes"), so only when asked.
pub const TF32: Switch = Switch::option("tf32");
inventory::submit! { TF32 }

/// Prints each captured CUDA graph's nodes by kind (`train::graph_profile`).
pub const GRAPH_PROFILE: Switch = Switch::option("graph_profile");
inventory::submit! { GRAPH_PROFILE }
