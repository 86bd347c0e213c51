//! memctl's fused ops: each a CUDA kernel and its CPU twin (the [`kernel::FusedKernel`]
//! contract), its `.rs` beside its `.cu` of the same stem, by family (`sam/`, `nam/`,
//! `kanerva/`, `layers/`, `optim/`). At the top, what they share: the contract and the one
//! candle op that runs any of them (`kernel`), launch counts and the CPU computation's float
//! types (`fused`), launch geometry (`launch_shape`), the module table `build.rs` writes
//! (`modules`, with the `cuda` feature) and the switches that say where each runs
//! (`switches`).

pub mod fused;
pub mod kernel;
pub mod launch_shape;
#[cfg(feature = "cuda")]
mod modules;
pub mod switches;

pub mod kanerva;
pub mod layers;
pub mod nam;
pub mod optim;
pub mod sam;
