//! The fused ops of the controller layers and the tensor glue: the LSTM and GRU cells' element-
//! wise halves, layer normalisation, softmax, a scale (by one number, or one per row), the outer product, a gated write
//! (`lerp`), `tanh`, and the sum of a parameter's gradient parts.

pub mod gru_cell;
pub mod layer_norm;
pub mod lerp;
pub mod lstm_cell;
pub mod outer;
pub mod scale;
pub mod scale_rows;
pub mod softmax;
pub mod sum_parts;
pub mod tanh;
