//! NAM's and NAM-TM's fused ops: the write rule, the head transition and the unit keys'
//! normalisation.

pub mod head_move;
pub mod l2_normalize;
pub mod nam_write;
