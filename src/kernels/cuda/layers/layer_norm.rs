//! Layer normalisation over the last axis as one candle op with its own backward, for the
//! device-generic path (candle's autograd: the GPU, and evaluation on the CPU).
//!
//! Written as candle ops (`kernels::blocks::layer_norm`'s reference form) the normalisation is about a
//! dozen kernels forward and three times as many backward; here it is one kernel forward and
//! one backward (`[d x | g ⊙ x̂]`, whose second half summed over the rows is `d w`). With `x̂ =
//! (x − mean) / σ` and `σ = sqrt(var + eps)` per row:
//!
//! - `y = x̂ ⊙ w + b`;
//! - `d x = (g ⊙ w − mean(g ⊙ w) − x̂ · mean(g ⊙ w ⊙ x̂)) / σ`, `d w = Σ_rows g ⊙ x̂`, `d b =
//!   Σ_rows g`.
//!
//! Where it runs is its switch's rule (`kernels::cuda::switches`: the CPU always; on CUDA by its
//! standing, `LAYER_NORM`); the CUDA kernels are `src/kernels/cuda/layers/layer_norm.cu`, a block
//! per row.

use candle_core::{Layout, Result, Shape, Tensor, bail};

use crate::kernels::cpu::real::Real;
use crate::kernels::cpu::row_norm::EPS;
use crate::kernels::cuda::kernel::{Fused, FusedKernel, Launch, Rows, entries};
use crate::kernels::cuda::launch_shape::LaunchShape;
use crate::kernels::cuda::switches::Switch;

/// The LSTM's step 2.97 → 2.06 ms with `lstm_cell` (H200, 2026-11-26).
pub const LAYER_NORM: Switch = Switch::on("layer_norm");
inventory::submit! { LAYER_NORM }

/// `(x − mean) / sqrt(var + eps) ⊙ w + b` over the last axis of `x`, `w` and `b` being `[n]`.
pub fn layer_norm(x: &Tensor, w: &Tensor, b: &Tensor) -> Result<Tensor> {
    x.contiguous()?.apply_op3(&w.contiguous()?, &b.contiguous()?, Fused(Norm::Forward))
}

/// The two passes, each one op of three operands: `(x, w, b) → y` and, for its backward,
/// `(x, w, g) → [d x | g ⊙ x̂]` (`[rows, 2n]`).
#[derive(Clone, Copy, Debug)]
pub enum Norm {
    Forward,
    Backward,
}

impl FusedKernel for Norm {
    /// `rows` rows of `n`.
    type Sizes = Rows;

    entries! { LAYER_NORM: Norm::Forward => "layer_norm_fwd", Norm::Backward => "layer_norm_bwd" }

    /// `x`, then `w` `[n]`, then `b` `[n]` (forward) or `g` shaped as `x` (backward).
    fn sizes(&self, operands: &[&Layout]) -> Result<(Shape, Rows)> {
        let &[x, w, third] = operands else { bail!("layer norm's fused op takes three operands") };
        let n = x.dims().last().copied().unwrap_or(1);
        let third_fits = match self {
            Norm::Forward => third.dims() == [n],
            Norm::Backward => third.dims() == x.dims(),
        };
        if w.dims() != [n] || !third_fits {
            bail!("layer norm: {:?} and {:?} do not fit an input of {:?}", w.dims(), third.dims(), x.dims());
        }
        let rows = x.shape().elem_count().checked_div(n).unwrap_or(0);
        let shape = match self {
            Norm::Forward => x.shape().clone(),
            Norm::Backward => Shape::from((rows, 2 * n)),
        };
        Ok((shape, Rows { rows, n }))
    }

    fn cpu<T: Real>(&self, _: Rows, operands: &[&[T]]) -> Vec<T> {
        match self {
            Norm::Forward => forward_slices(operands[0], operands[1], operands[2]),
            Norm::Backward => backward_slices(operands[0], operands[1], operands[2]),
        }
    }

    /// A block of 256 threads per row; `rows`, `n` and `eps` as the kernel's scalars.
    fn launch(&self, Rows { rows, n }: Rows) -> Result<Launch> {
        let Ok(blocks) = u32::try_from(rows.max(1)) else { bail!("{}: {rows} rows", self.entry()) };
        let launch = Launch::with_ints(self.entry(), LaunchShape::blocks_of_256(blocks), &[rows, n])?;
        Ok(Launch { floats: vec![EPS as f32], ..launch })
    }

    fn backward(&self, operands: &[&Tensor], _y: &Tensor, grad: &Tensor) -> Result<Vec<Option<Tensor>>> {
        let (Norm::Forward, &[x, w, _b]) = (self, operands) else {
            bail!("layer norm's backward pass has no gradient of its own")
        };
        let n = w.dim(0)?;
        let grad = grad.contiguous()?;
        let both = x.apply_op3_no_bwd(w, &grad, &Fused(Norm::Backward))?;
        let rows = both.elem_count() / (2 * n).max(1);
        let both = both.reshape((rows, 2 * n))?;
        let dx = both.narrow(1, 0, n)?.reshape(x.shape())?;
        let dw = both.narrow(1, n, n)?.sum(0)?;
        let db = grad.reshape((rows, n))?.sum(0)?;
        Ok(vec![Some(dx), Some(dw), Some(db)])
    }
}

/// A row's mean and `1/σ`.
fn moments<T: Real>(x: &[T]) -> (T, T) {
    let n = T::from_f64(x.len() as f64);
    let mean = x.iter().fold(T::zero(), |s, &v| s + v) / n;
    let var = x.iter().fold(T::zero(), |s, &v| s + (v - mean) * (v - mean)) / n;
    (mean, T::one() / (var + T::from_f64(EPS)).sqrt())
}

fn forward_slices<T: Real>(x: &[T], w: &[T], b: &[T]) -> Vec<T> {
    let n = w.len();
    let mut y = Vec::with_capacity(x.len());
    for row in x.chunks_exact(n.max(1)) {
        let (mean, rstd) = moments(row);
        y.extend(row.iter().zip(w).zip(b).map(|((&v, &w), &b)| (v - mean) * rstd * w + b));
    }
    y
}

fn backward_slices<T: Real>(x: &[T], w: &[T], g: &[T]) -> Vec<T> {
    let n = w.len();
    let mut out = vec![T::zero(); 2 * x.len()];
    let nf = T::from_f64(n as f64);
    for ((row, g), o) in x.chunks_exact(n.max(1)).zip(g.chunks_exact(n.max(1))).zip(out.chunks_exact_mut(2 * n.max(1)))
    {
        let (mean, rstd) = moments(row);
        let (mut a, mut c) = (T::zero(), T::zero());
        for ((&v, &w), &g) in row.iter().zip(w).zip(g) {
            a += g * w;
            c += g * w * (v - mean) * rstd;
        }
        let (a, c) = (a / nf, c / nf);
        let (dx, gx) = o.split_at_mut(n);
        for j in 0..n {
            let xhat = (row[j] - mean) * rstd;
            dx[j] = (g[j] * w[j] - a - xhat * c) * rstd;
            gx[j] = g[j] * xhat;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use candle_core::{DType, Device, Var};

    use super::*;
    use crate::kernels::cuda::fused::testing::{assert_fused_matches, var};

    #[test]
    fn the_fused_norm_and_its_gradients_equal_candle_ops_and_autograd() -> Result<()> {
        // Three leading axes' worth of rows, an offset mean, and weights far from 1.
        let x = Var::from_tensor(&(var(&[2, 3, 7], 2.0)?.as_tensor() + 3.0)?)?;
        let (w, b) = (var(&[7], 1.5)?, var(&[7], 1.0)?);
        let plain = crate::kernels::blocks::layer_norm::reference(&x, &w, &b)?;
        assert_fused_matches(&[&x, &w, &b], &[layer_norm(&x, &w, &b)?], &[plain], 1e-12)
    }

    #[test]
    fn a_weight_of_another_width_is_an_error() -> Result<()> {
        let dev = Device::Cpu;
        let x = Tensor::zeros((2, 4), DType::F32, &dev)?;
        let err = layer_norm(&x, &Tensor::ones(3, DType::F32, &dev)?, &Tensor::zeros(4, DType::F32, &dev)?);
        assert!(err.is_err_and(|e| e.to_string().contains("do not fit an input of [2, 4]")));
        Ok(())
    }
}
