//! Building blocks on candle tensors, differentiable by candle's autograd on any device, each
//! taking the fused op of [`super::cuda`] where its switch runs it and candle's own ops
//! elsewhere: layer normalisation (`layer_norm`), outer product attention (`opa`), the NAM
//! memory's reads and writes (`nam`), the Kanerva machines' addressing (`kanerva`).
//!
//! The rooms of `kernels` import downwards only: `blocks` → `cuda` → `cpu`.

pub mod kanerva;
pub mod layer_norm;
pub mod nam;
pub mod opa;
