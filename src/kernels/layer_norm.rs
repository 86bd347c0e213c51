//! Layer normalisation over the last axis, written out so candle differentiates it.
//!
//! candle's fused `layer_norm` and the `LayerNorm` module on contiguous input produce no
//! gradient (measured with candle 0.11), so memctl never uses them.

use candle_core::{D, Result, Tensor};

/// PyTorch's default epsilon.
pub const EPS: f64 = 1e-5;

/// `(x - mean) / sqrt(var + eps) * w + b` over the last axis (biased variance, as PyTorch).
pub fn layer_norm(x: &Tensor, w: &Tensor, b: &Tensor) -> Result<Tensor> {
    let mean = x.mean_keepdim(D::Minus1)?;
    let centred = x.broadcast_sub(&mean)?;
    let var = centred.sqr()?.mean_keepdim(D::Minus1)?;
    let normed = centred.broadcast_div(&(var + EPS)?.sqrt()?)?;
    normed.broadcast_mul(w)?.broadcast_add(b)
}
