//! Building blocks on candle tensors, differentiable by candle's autograd on any device: layer
//! normalisation (`layer_norm`), the NAM memory's reads and writes (`nam`) and the Kanerva
//! machines' addressing (`kanerva`), each taking the fused op of [`super::cuda`] where its
//! switch runs it and candle's own ops elsewhere; outer product attention (`opa`) and a table's
//! rows by token id (`lookup`), candle's ops only.
//!
//! The rooms of `kernels` import downwards only: `blocks` → `cuda` → `cpu`.

pub mod kanerva;
pub mod layer_norm;
pub mod lookup;
pub mod nam;
pub mod opa;
