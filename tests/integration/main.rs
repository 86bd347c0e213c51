//! Integration tests, one binary (each test binary links candle; one is faster to build).
//!
//! - `check_errors`: a catalogue of malformed specs, each with its exact located message.
//! - `check_props`, `check_robustness`: random and hostile inputs never panic the checker.
//! - `cli`, `cli_check`: the `memctl` binary end to end against a temporary store.
//! - `grammar_doc`: GRAMMAR.md's complete example checks.
//! - `slurm`: the Slurm executor against a real one-node cluster (without one: fails under CI,
//!   skipped elsewhere, saying so).
//! - `sweeps`: SIGKILL at random moments, failing trials, command-line overrides.
//! - `sharing`: one store, many processes: concurrent sweeps, live progress, checkpoints.
//! - `tasks_fit_models`: every task against a tiny model.
//! - `training`: specs train through the library API (fixed-batch overfitting, failures).
//! - `models`: the model library in `specs/models/` and every shipped spec.
//! - `querying`: `runs` filters, grouping and formats, `show`, `diff`, `plot`, `tag`, `rm`, `ablate`.
//! - `dashboard`: `memctl ui` over HTTP and in headless Chromium (`synthetic` stores).
//! - `packs`: trials trained as one pack against the same trials alone, every model family.
//! - `gradients`: memctl's reverse mode against candle's autograd on whole training steps.
//! - `cuda_emulation`: the CUDA kernels run on the CPU (tests/cuda_emulation/) against the CPU ops.
//! - `candle_backward`: the patched candle backward (vendor/README.md) sums gradients right.

mod candle_backward;
mod check_errors;
mod check_props;
mod check_robustness;
mod cli;
mod cli_check;
mod cuda_emulation;
mod dashboard;
mod file_circles;
mod gradients;
mod grammar_doc;
mod layering;
mod made_up_run;
mod models;
mod packs;
mod querying;
mod read_only_store;
mod readme_tables;
mod searches;
mod sharing;
mod slurm;
mod slurm_failures;
mod snapshots;
mod support;
mod sweeps;
mod synthetic;
mod tasks_fit_models;
mod training;
