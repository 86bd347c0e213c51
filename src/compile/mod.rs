//! Lowering a checked step graph to candle.

pub mod init;
