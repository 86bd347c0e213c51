//! Batch-first tensor building blocks shared by primitives, in two rooms by contract:
//!
//! - [`cpu`]: the plain-slice CPU machinery of the manual backward passes (`gemm`, `par`,
//!   `real`, `view`, ...; `prims::contract::backward`, used by training) and the candle-level
//!   functions (`dense`, `layer_norm`, `opa`, `nam`, `kanerva`, ...), differentiable through
//!   candle's autograd (no fused op that silently drops gradients);
//! - [`cuda`]: memctl's fused ops, each a CUDA kernel (its `.cu` beside its module) and its
//!   CPU twin, by family, with their contract (`FusedKernel`), launch shapes and switches.

pub mod cpu;
pub mod cuda;
