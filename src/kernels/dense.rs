//! `y = x Wᵀ + b` over the last axis of `x`, for any number of leading axes.

use candle_core::{Result, Tensor};

/// `x`: `[..., fan_in]`, `w`: `[fan_out, fan_in]`, `b`: `[fan_out]` → `[..., fan_out]`.
/// The leading axes are folded into one so that the product is a single GEMM.
pub fn dense(x: &Tensor, w: &Tensor, b: Option<&Tensor>) -> Result<Tensor> {
    let dims = x.dims();
    let fan_in = *dims.last().unwrap_or(&1);
    let rows: usize = dims[..dims.len().saturating_sub(1)].iter().product();
    let (fan_out, _) = w.dims2()?;
    let y = x.reshape((rows, fan_in))?.matmul(&w.t()?)?;
    let y = match b {
        Some(b) => y.broadcast_add(b)?,
        None => y,
    };
    let mut out_dims = dims[..dims.len().saturating_sub(1)].to_vec();
    out_dims.push(fan_out);
    y.reshape(out_dims)
}
