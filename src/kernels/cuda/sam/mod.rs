//! SAM's and STM's fused ops: the outer product attention of `samRead` and the element-wise
//! half of `itemWrite`'s gated write.

pub mod item_gate;
pub mod sam_attend;
