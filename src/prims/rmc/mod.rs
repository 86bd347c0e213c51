//! The Relational Memory Core (RMC paper): the multi-head dot-product attention over the
//! memory ([`mhdpa`], with its manual backward in `mhdpa_train.rs`) and the LSTM-style gating
//! ([`rmc_gate`]).

pub mod mhdpa;
pub mod rmc_gate;
