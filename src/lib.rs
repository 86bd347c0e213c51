//! memctl: a declarative experiment language and orchestrator for memory-augmented networks.
//!
//! Pipeline: [`lang`] parses `.mem` files, [`check`] resolves and type/shape-checks them into
//! trial configurations and step graphs, [`compile`] lowers a graph to candle, [`train`] runs
//! a trial, [`store`] records it, [`sweep`] runs many, and [`cli`] is the command line.

pub mod bench;
pub mod build_info;
pub mod check;
pub mod cli;
pub mod compile;
pub mod device;
pub mod diag;
pub mod ftz;
pub mod graph;
pub mod kernels;
pub mod lang;
pub mod pool;
pub mod prims;
pub mod query;
pub mod report;
pub mod search;
pub mod signature;
pub mod slurm;
pub mod source;
pub mod store;
pub mod suggest;
pub mod sweep;
pub mod tasks;
pub mod train;
pub mod train_config;
pub mod ty;
pub mod value;
