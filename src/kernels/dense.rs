//! `y = x Wᵀ + b` over the last axis of `x`, for any number of leading axes.

use std::sync::Mutex;

use candle_core::{Result, Tensor, TensorId};

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

/// A weight's transpose `wᵀ` (`[fan_in, fan_out]`, contiguous), kept by the op that uses it
/// for as long as the weight tensor is the same (one training step: the tape passes the same
/// detached weights to every time step). The product `x wᵀ` with `wᵀ` laid out row-major
/// runs up to 1.6× faster than through a transposed view (the gemm crate repacks the view
/// at every call; measured on STM's `distill`, [256 × 9216] · [9216 × 96]).
///
/// A pack of trials runs one op with each trial's weight in turn, so one transpose is kept
/// per weight in use: an entry not asked for within twice as many calls as there are entries
/// belongs to a weight of an earlier step, and goes.
#[derive(Default)]
pub struct Transposed(Mutex<TransposeCache>);

#[derive(Default)]
struct TransposeCache {
    calls: u64,
    /// `(weight, its transpose, the call that last asked for it)`.
    kept: Vec<(TensorId, Tensor, u64)>,
}

impl Transposed {
    /// `w`'s transpose (computed on the first call for this tensor).
    pub fn of(&self, w: &Tensor) -> Result<Tensor> {
        let mut cache = self.0.lock().unwrap_or_else(|e| e.into_inner());
        cache.calls += 1;
        let now = cache.calls;
        if let Some((_, wt, last)) = cache.kept.iter_mut().find(|(id, ..)| *id == w.id()) {
            *last = now;
            return Ok(wt.clone());
        }
        let wt = match (w.device(), w.dtype()) {
            (candle_core::Device::Cpu, candle_core::DType::F32) => transpose::<f32>(w)?,
            (candle_core::Device::Cpu, candle_core::DType::F64) => transpose::<f64>(w)?,
            _ => w.t()?.contiguous()?,
        };
        let window = 2 * (cache.kept.len() as u64 + 1);
        cache.kept.retain(|(.., last)| now - *last <= window);
        cache.kept.push((w.id(), wt.clone(), now));
        Ok(wt)
    }
}

/// `wᵀ` of a CPU matrix, copied in square tiles so that both the reads and the writes stay
/// within a few cache lines (candle's strided copy goes element by element: 2 % of an LSTM
/// step for its two weights).
fn transpose<T: Real>(w: &Tensor) -> Result<Tensor> {
    const TILE: usize = 16;
    let (rows, cols) = w.dims2()?;
    let wr = super::view::Read::new(w)?;
    let src = wr.slice::<T>()?;
    let mut out = vec![T::zero(); rows * cols];
    for i0 in (0..rows).step_by(TILE) {
        for j0 in (0..cols).step_by(TILE) {
            for i in i0..(i0 + TILE).min(rows) {
                for j in j0..(j0 + TILE).min(cols) {
                    out[j * rows + i] = src[i * cols + j];
                }
            }
        }
    }
    super::view::tensor(out, (cols, rows))
}

/// The dense layer on plain slices for the manual backward passes: `x` `[rows, fan_in]`,
/// `wt` the weight transposed, `[fan_in, fan_out]` (see [`Transposed`]), `b` `[fan_out]` →
/// `y = x wᵀ + b`, `[rows, fan_out]`.
pub fn forward_slices<T: Real>(
    x: &[T],
    rows: usize,
    wt: &[T],
    b: Option<&[T]>,
    fan_in: usize,
    fan_out: usize,
) -> Vec<T> {
    let Some(b) = b else {
        return matmul_new(Mat::new(x, rows, fan_in), Mat::new(wt, fan_in, fan_out), Par::Pool);
    };
    let mut y = Vec::with_capacity(rows * fan_out);
    for _ in 0..rows {
        y.extend_from_slice(&b[..fan_out]);
    }
    matmul(
        MatMut::new(&mut y, rows, fan_out),
        Mat::new(x, rows, fan_in),
        Mat::new(wt, fan_in, fan_out),
        true,
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

#[cfg(test)]
mod tests {
    use candle_core::{Device, Tensor};

    use super::Transposed;

    #[test]
    fn transposes_like_candle_whatever_the_tiling() {
        for (rows, cols) in [(1, 1), (3, 40), (17, 16), (33, 5)] {
            let w = Tensor::arange(0f32, (rows * cols) as f32, &Device::Cpu).unwrap().reshape((rows, cols)).unwrap();
            let want: Vec<Vec<f32>> = w.t().unwrap().to_vec2().unwrap();
            let cache = Transposed::default();
            assert_eq!(cache.of(&w).unwrap().to_vec2::<f32>().unwrap(), want, "{rows}×{cols}");
            assert_eq!(cache.of(&w.to_dtype(candle_core::DType::F64).unwrap()).unwrap().dims(), [cols, rows]);
        }
    }
}
