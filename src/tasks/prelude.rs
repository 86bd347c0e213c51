//! What a task file imports: the contract it implements and the types the contract speaks in.

pub use candle_core::{Device, Tensor};

pub use super::contract::*;
pub use crate::graph::Ty;
pub use crate::signature::{ArgSpec, PrimError};
pub use crate::value::Value;
