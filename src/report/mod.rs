//! Turning stored runs into tables (pure: no I/O).

pub mod numbers;
pub mod results;
pub mod runs_table;
