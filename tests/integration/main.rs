//! Integration tests, one binary (each test binary links candle; one is faster to build).
//!
//! - `training`: specs train through the library API (fixed-batch overfitting, failures).
//! - `cli`: the `memctl` binary end to end against a temporary store.
//! - `querying`: `runs` filters, grouping and formats, `show`, `diff`, `plot`, `tag`, `rm`, `ablate`.

mod cli;
mod querying;
mod support;
mod sweeps;
mod tasks_fit_models;
mod training;
