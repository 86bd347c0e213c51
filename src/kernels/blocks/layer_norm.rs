//! Layer normalisation over the last axis, differentiable by candle's autograd.
//!
//! candle's fused `layer_norm` and the `LayerNorm` module on contiguous input produce no
//! gradient (measured with candle 0.11), so memctl never uses them: where memctl's fused ops
//! run (`kernels::cuda::switches`) this is `cuda::layers::layer_norm`, one op with its own
//! backward; elsewhere it is written out as candle ops ([`reference`]).

use candle_core::{D, Result, Tensor};

use crate::kernels::cpu::row_norm::EPS;
use crate::kernels::cuda;

/// `(x - mean) / sqrt(var + eps) * w + b` over the last axis (biased variance, as PyTorch); `w`
/// and `b` are `[n]`, or `[G, n]` for `G` equal blocks of `x`'s rows in order (a pack's trials).
pub fn layer_norm(x: &Tensor, w: &Tensor, b: &Tensor) -> Result<Tensor> {
    if cuda::switches::used_for(x, cuda::layers::layer_norm::LAYER_NORM) {
        cuda::layers::layer_norm::layer_norm(x, w, b)
    } else {
        reference(x, w, b)
    }
}

/// [`layer_norm`] as candle ops, which candle's autograd differentiates node by node.
pub fn reference(x: &Tensor, w: &Tensor, b: &Tensor) -> Result<Tensor> {
    if let [groups, width] = *w.dims() {
        // A gain and a bias per block of rows: each block `[G, rows / G, n]` with its row of them.
        let blocks = x.reshape((groups, (), width))?;
        return reference(&blocks, &w.unsqueeze(1)?, &b.unsqueeze(1)?)?.reshape(x.dims());
    }
    let mean = x.mean_keepdim(D::Minus1)?;
    let centred = x.broadcast_sub(&mean)?;
    let var = centred.sqr()?.mean_keepdim(D::Minus1)?;
    let normed = centred.broadcast_div(&(var + EPS)?.sqrt()?)?;
    normed.broadcast_mul(w)?.broadcast_add(b)
}
