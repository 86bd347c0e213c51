//! Batch-first tensor building blocks shared by primitives. Every function here is
//! differentiable through candle's autograd (no fused op that silently drops gradients).

pub mod broadcast;
pub mod dense;
pub mod kanerva;
pub mod layer_norm;
pub mod nam;
pub mod opa;
pub mod spd_solve;
