//! Batch-first tensor building blocks shared by primitives. The candle-level functions
//! (`dense`, `layer_norm`, `opa`, ...) are differentiable through candle's autograd (no fused
//! op that silently drops gradients). `gemm`, `par`, `real` and `view` are the plain-slice
//! CPU machinery of the manual backward passes (`prims::backward`), used by training.

pub mod broadcast;
#[cfg(feature = "cuda")]
mod cuda_kernels;
pub mod dense;
pub mod elementwise;
pub mod fused;
pub mod fused_op;
pub mod gemm;
pub mod gru;
pub mod gru_cell_op;
pub mod head_move_op;
pub mod item_gate_op;
pub mod kanerva;
pub mod kanerva_address_op;
pub mod kanerva_manual;
pub mod kanerva_write_op;
pub mod l2_normalize_op;
pub mod launch_shape;
pub mod layer_norm;
pub mod layer_norm_op;
pub mod lerp_op;
pub mod lstm;
pub mod lstm_cell_op;
pub mod nam;
pub mod nam_manual;
pub mod nam_write_op;
pub mod opa;
pub mod optim_update;
pub mod outer_op;
pub mod par;
pub mod real;
pub mod reduce;
pub mod rel_read_op;
pub mod row_norm;
pub mod sam_attend_op;
pub mod scale_op;
pub mod softmax_op;
pub mod spd_solve;
pub mod sum_parts_op;
pub mod switches;
pub mod view;
pub mod width;
