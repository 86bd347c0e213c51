//! `y = x Wᵀ + b` over the last axis of `x`, for any number of leading axes.

use candle_core::{Result, Tensor};

use super::gemm::{Mat, MatMut, Par, matmul, matmul_new};
use super::real::Real;

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

/// The dense layer on plain slices for the manual backward passes: `x` `[rows, fan_in]`,
/// `w` `[fan_out, fan_in]`, `b` `[fan_out]` → `y = x wᵀ + b`, `[rows, fan_out]`.
pub fn forward_slices<T: Real>(
    x: &[T],
    rows: usize,
    w: &[T],
    b: Option<&[T]>,
    fan_in: usize,
    fan_out: usize,
) -> Vec<T> {
    let mut y = match b {
        Some(b) => {
            let mut y = Vec::with_capacity(rows * fan_out);
            for _ in 0..rows {
                y.extend_from_slice(&b[..fan_out]);
            }
            y
        }
        None => Vec::new(),
    };
    if b.is_none() {
        return matmul_new(Mat::new(x, rows, fan_in), Mat::new(w, fan_out, fan_in).t(), Par::Pool);
    }
    matmul(
        MatMut::new(&mut y, rows, fan_out),
        Mat::new(x, rows, fan_in),
        Mat::new(w, fan_out, fan_in).t(),
        b.is_some(),
        Par::Pool,
    );
    y
}

/// The backward of [`forward_slices`] given `gy = d loss / d y` `[rows, fan_out]`: adds
/// `gyᵀ x` to `gw` and the column sums of `gy` to `gb`, and returns `gx = gy w` if `want_x`.
#[allow(clippy::too_many_arguments)]
pub fn backward_slices<T: Real>(
    gy: &[T],
    x: &[T],
    rows: usize,
    w: &[T],
    fan_in: usize,
    fan_out: usize,
    gw: Option<&mut [T]>,
    gb: Option<&mut [T]>,
    want_x: bool,
) -> Option<Vec<T>> {
    if let Some(gw) = gw {
        matmul(
            MatMut::new(gw, fan_out, fan_in),
            Mat::new(gy, rows, fan_out).t(),
            Mat::new(x, rows, fan_in),
            true,
            Par::Pool,
        );
    }
    if let Some(gb) = gb {
        column_sums_into(gy, fan_out, gb);
    }
    want_x.then(|| matmul_new(Mat::new(gy, rows, fan_out), Mat::new(w, fan_out, fan_in), Par::Pool))
}

/// `acc[j] += Σ_r m[r, j]` for a row-major `m` with `cols` columns.
pub fn column_sums_into<T: Real>(m: &[T], cols: usize, acc: &mut [T]) {
    let acc = &mut acc[..cols];
    for row in m.chunks_exact(cols) {
        for (a, v) in acc.iter_mut().zip(row) {
            *a += *v;
        }
    }
}
