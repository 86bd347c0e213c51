//! What runs on the CPU with no CUDA kernel of its own, on plain slices: the machinery of the
//! manual backward passes (`gemm`, `par`, `real`, `view`, `width`, `reduce`, `row_norm`,
//! `elementwise`, `broadcast`, `cholesky`; `dense` for tensors) and the models' own kernels
//! (`gru`, `lstm`, `nam_manual`, `kanerva_manual`). It imports neither `cuda` nor `blocks`.

pub mod broadcast;
pub mod cholesky;
pub mod dense;
pub mod elementwise;
pub mod gemm;
pub mod gru;
pub mod kanerva_manual;
pub mod lstm;
pub mod nam_manual;
pub mod par;
pub mod real;
pub mod reduce;
pub mod row_norm;
pub mod view;
pub mod width;
