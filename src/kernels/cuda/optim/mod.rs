//! The optimisers' fused updates (CUDA only, in place).

pub mod optim_update;
