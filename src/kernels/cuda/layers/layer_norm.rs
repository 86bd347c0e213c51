//! Layer normalisation over the last axis as one candle op with its own backward, for the
//! device-generic path (candle's autograd: the GPU, and evaluation on the CPU).
//!
//! Written as candle ops (`kernels::blocks::layer_norm`'s reference form) the normalisation is about a
//! dozen kernels forward and three times as many backward; here it is one kernel forward and
//! one backward (`[d x; g ⊙ x̂]`, whose second half summed over the rows is `d w`). With `x̂ =
//! (x − mean) / σ` and `σ = sqrt(var + eps)` per row:
//!
//! - `y = x̂ ⊙ w + b`;
//! - `d x = (g ⊙ w − mean(g ⊙ w) − x̂ · mean(g ⊙ w ⊙ x̂)) / σ`, `d w = Σ_rows g ⊙ x̂`, `d b =
//!   Σ_rows g` (over the rows of each block, for a gain and bias per block).
//!
//! The gain and bias are one `[n]` for every row, or `[G, n]`: one row each for `G` equal blocks
//! of the rows (a pack's trials, each with its own), so that a pack normalises and maps every
//! trial's rows in the same one kernel each way.
//!
//! Where it runs is its switch's rule (`kernels::cuda::switches`: the CPU always; on CUDA by its
//! standing, `LAYER_NORM`); the CUDA kernels are `src/kernels/cuda/layers/layer_norm.cu`, a block
//! per row.

use candle_core::{D, Layout, Result, Shape, Tensor, bail};

use crate::kernels::cpu::real::Real;
use crate::kernels::cpu::row_norm::EPS;
use crate::kernels::cuda::kernel::{Fused, FusedKernel, Launch, entries, two_passes};
use crate::kernels::cuda::launch_shape::LaunchShape;
use crate::kernels::cuda::switches::Switch;

/// The LSTM's step 2.97 → 2.06 ms with `lstm_cell` (H200, 2026-11-26).
pub const LAYER_NORM: Switch = Switch::on("layer_norm");
inventory::submit! { LAYER_NORM }

/// `(x − mean) / sqrt(var + eps) ⊙ w + b` over the last axis of `x`, `w` and `b` being `[n]`,
/// or `[G, n]` for `G` equal blocks of `x`'s rows, in order.
pub fn layer_norm(x: &Tensor, w: &Tensor, b: &Tensor) -> Result<Tensor> {
    Fused(Norm::Forward).apply(&[x, w, b])
}

two_passes! {
    /// The two passes, each one op of three operands: `(x, w, b) → y` and, for its backward,
    /// `(x, w, g) → [d x; g ⊙ x̂]` (`[2 · rows, n]`: every row's `d x`, then every row's `g ⊙ x̂`, so
    /// that `d x` is a contiguous view).
    pub enum Norm
}

/// What the passes index: `rows` rows of `n`, each block of `per` rows with its own gain and
/// bias (`per = rows` for one of each).
#[derive(Clone, Copy, Debug)]
pub struct Groups {
    rows: usize,
    n: usize,
    per: usize,
}

impl FusedKernel for Norm {
    type Sizes = Groups;

    entries! { LAYER_NORM: Norm::Forward => "layer_norm_fwd", Norm::Backward => "layer_norm_bwd" }

    /// `x`, then `w` `[n]` or `[G, n]`, then `b` shaped as `w` (forward) or `g` shaped as `x`
    /// (backward); `G` divides the rows.
    fn sizes(&self, operands: &[&Layout]) -> Result<(Shape, Groups)> {
        let &[x, w, third] = operands else { bail!("layer norm's fused op takes three operands") };
        let n = x.dims().last().copied().unwrap_or(1);
        let rows = x.shape().elem_count().checked_div(n).unwrap_or(0);
        let groups = match w.dims() {
            [width] if *width == n => Some(1),
            [g, width] if *width == n && *g > 0 && rows % g == 0 => Some(*g),
            _ => None,
        };
        let third_fits = match self {
            Norm::Forward => third.dims() == w.dims(),
            Norm::Backward => third.dims() == x.dims(),
        };
        let (Some(groups), true) = (groups, third_fits) else {
            bail!("layer norm: {:?} and {:?} do not fit an input of {:?}", w.dims(), third.dims(), x.dims());
        };
        let shape = match self {
            Norm::Forward => x.shape().clone(),
            Norm::Backward => Shape::from((2 * rows, n)),
        };
        Ok((shape, Groups { rows, n, per: rows / groups }))
    }

    fn cpu<T: Real>(&self, sizes: Groups, operands: &[&[T]]) -> Vec<T> {
        match self {
            Norm::Forward => forward_slices(sizes, operands[0], operands[1], operands[2]),
            Norm::Backward => backward_slices(sizes, operands[0], operands[1], operands[2]),
        }
    }

    /// A block of 256 threads per row; `rows`, `n`, `per` and `eps` as the kernel's scalars.
    fn launch(&self, Groups { rows, n, per }: Groups) -> Result<Launch> {
        let Ok(blocks) = u32::try_from(rows.max(1)) else { bail!("{}: {rows} rows", self.entry()) };
        let launch = Launch::with_ints(self.entry(), LaunchShape::blocks_of_256(blocks), &[rows, n, per.max(1)])?;
        Ok(Launch { floats: vec![EPS as f32], ..launch })
    }

    fn backward(&self, operands: &[&Tensor], _y: &Tensor, grad: &Tensor) -> Result<Vec<Option<Tensor>>> {
        let (Norm::Forward, &[x, w, _b]) = (self, operands) else {
            bail!("layer norm's backward pass has no gradient of its own")
        };
        let n = w.dim(D::Minus1)?;
        let groups = w.elem_count() / n.max(1);
        let grad = grad.contiguous()?;
        let both = x.apply_op3_no_bwd(w, &grad, &Fused(Norm::Backward))?;
        let rows = both.elem_count() / (2 * n).max(1);
        let dx = both.narrow(0, 0, rows)?.reshape(x.shape())?;
        // Each block's rows summed into its gain's and bias's row.
        let blocks = |t: &Tensor| t.reshape((groups, rows / groups.max(1), n))?.sum(1)?.reshape(w.shape());
        let dw = blocks(&both.narrow(0, rows, rows)?)?;
        let db = blocks(&grad)?;
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

/// The gain's (or bias's) row of block `row / per` (`w` holds one row of `n`, or one per block).
fn group_row<T>(w: &[T], Groups { n, per, .. }: Groups, row: usize) -> &[T] {
    let g = if w.len() == n { 0 } else { row / per.max(1) };
    &w[g * n..][..n]
}

fn forward_slices<T: Real>(sizes: Groups, x: &[T], w: &[T], b: &[T]) -> Vec<T> {
    let n = sizes.n;
    let mut y = Vec::with_capacity(x.len());
    for (r, row) in x.chunks_exact(n.max(1)).enumerate() {
        let (mean, rstd) = moments(row);
        let (w, b) = (group_row(w, sizes, r), group_row(b, sizes, r));
        y.extend(row.iter().zip(w).zip(b).map(|((&v, &w), &b)| (v - mean) * rstd * w + b));
    }
    y
}

fn backward_slices<T: Real>(sizes: Groups, x: &[T], w: &[T], g: &[T]) -> Vec<T> {
    let n = sizes.n;
    let mut out = vec![T::zero(); 2 * x.len()];
    let nf = T::from_f64(n as f64);
    let (all_dx, all_gx) = out.split_at_mut(x.len());
    let outs = all_dx.chunks_exact_mut(n.max(1)).zip(all_gx.chunks_exact_mut(n.max(1)));
    let rows = x.chunks_exact(n.max(1)).zip(g.chunks_exact(n.max(1))).zip(outs);
    for (r, ((row, g), (dx, gx))) in rows.enumerate() {
        let w = group_row(w, sizes, r);
        let (mean, rstd) = moments(row);
        let (mut a, mut c) = (T::zero(), T::zero());
        for ((&v, &w), &g) in row.iter().zip(w).zip(g) {
            a += g * w;
            c += g * w * (v - mean) * rstd;
        }
        let (a, c) = (a / nf, c / nf);
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
    fn each_block_of_rows_takes_its_own_gain_and_bias_with_their_gradients() -> Result<()> {
        // Two blocks (a pack of two trials) of 3 · 2 rows each, against each block alone.
        let x = Var::from_tensor(&(var(&[4, 3, 7], 2.0)?.as_tensor() + 3.0)?)?;
        let (w, b) = (var(&[2, 7], 1.5)?, var(&[2, 7], 1.0)?);
        let blocks = x.reshape((2, 6, 7))?;
        let plain: Vec<Tensor> = (0..2)
            .map(|g| {
                let (w, b) = (w.get(g)?, b.get(g)?);
                crate::kernels::blocks::layer_norm::reference(&blocks.get(g)?, &w, &b)
            })
            .collect::<Result<_>>()?;
        let plain = Tensor::stack(&plain, 0)?.reshape(x.shape())?;
        assert_fused_matches(&[&x, &w, &b], &[layer_norm(&x, &w, &b)?], &[plain], 1e-12)
    }

    #[test]
    fn gains_for_blocks_that_do_not_divide_the_rows_are_an_error() -> Result<()> {
        let dev = Device::Cpu;
        let x = Tensor::zeros((3, 4), DType::F32, &dev)?;
        let (w, b) = (Tensor::ones((2, 4), DType::F32, &dev)?, Tensor::zeros((2, 4), DType::F32, &dev)?);
        assert!(layer_norm(&x, &w, &b).is_err_and(|e| e.to_string().contains("do not fit an input of [3, 4]")));
        Ok(())
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
