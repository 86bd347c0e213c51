//! What runs on the CPU with no CUDA kernel of its own: the plain-slice machinery of the
//! manual backward passes (`gemm`, `par`, `real`, `view`, `width`, `reduce`, `row_norm`,
//! `elementwise`, `broadcast`; the models' `gru`, `lstm`, `nam_manual`, `kanerva_manual`) and
//! the candle-level building blocks (`dense`, `layer_norm`, `opa`, `nam`, `kanerva`), which
//! take a fused op of [`super::cuda`] where its switch has it.

pub mod broadcast;
pub mod dense;
pub mod elementwise;
pub mod gemm;
pub mod gru;
pub mod kanerva;
pub mod kanerva_manual;
pub mod layer_norm;
pub mod lstm;
pub mod nam;
pub mod nam_manual;
pub mod opa;
pub mod par;
pub mod real;
pub mod reduce;
pub mod row_norm;
pub mod view;
pub mod width;
