//! Integration tests, one binary (each test binary links candle; one is faster to build).
//!
//! - `training`: specs train through the library API (fixed-batch overfitting, failures).
//! - `cli`: the `memctl` binary end to end against a temporary store.
//! - `models`: the model library in `specs/models/` and every shipped spec.

mod cli;
mod models;
mod support;
mod sweeps;
mod tasks_fit_models;
mod training;
