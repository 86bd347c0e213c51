//! Integration tests, one binary (each test binary links candle; one is faster to build).
//!
//! - `training`: specs train through the library API (fixed-batch overfitting, failures).
//! - `cli`: the `memctl` binary end to end against a temporary store.
//! - `gradients`: memctl's reverse mode against candle's autograd on whole training steps.

mod cli;
mod gradients;
mod support;
mod sweeps;
mod tasks_fit_models;
mod training;
