//! Batch-first tensor building blocks shared by primitives, in three rooms, each importing only
//! the rooms below it:
//!
//! - [`cpu`]: the plain-slice CPU machinery of the manual backward passes (`gemm`, `par`,
//!   `real`, `view`, `cholesky`, ...; `prims::contract::backward`, used by training), the
//!   models' slice kernels (`gru`, `lstm`, `nam_manual`, `kanerva_manual`), and `dense`, the
//!   dense layer on tensors;
//! - [`cuda`]: memctl's fused ops, each a CUDA kernel (its `.cu` beside its module) and its
//!   CPU twin (on `cpu`'s machinery), by family, with their contract (`FusedKernel`), launch
//!   shapes and switches;
//! - [`blocks`]: the candle-level functions (`layer_norm`, `opa`, `nam`, `kanerva`),
//!   differentiable through candle's autograd; all but `opa` take a fused op of `cuda` where
//!   its switch runs it.

pub mod blocks;
pub mod cpu;
pub mod cuda;
