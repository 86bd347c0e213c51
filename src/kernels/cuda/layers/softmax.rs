//! Softmax over the last axis as one candle op with its own backward, for the device-generic
//! path (candle's autograd: the GPU, and evaluation on the CPU).
//!
//! candle's fused `softmax_last_dim` has no gradient, and `candle_nn::ops::softmax` is five ops
//! (max, subtract, exp, sum, divide) whose backward is some fifteen kernels; here it is one
//! kernel each way. With `y = softmax(x)` per row and `g = d loss / d y`:
//! `d x = y ⊙ (g − Σ_j g_j y_j)`.
//!
//! Where it runs is its switch's rule (`kernels::cuda::switches`: the CPU always; on CUDA by its
//! standing, `SOFTMAX`); elsewhere it is `candle_nn::ops::softmax`. The CUDA kernels are
//! `src/kernels/cuda/layers/softmax.cu`, a warp per row.

use candle_core::{D, Layout, Result, Shape, Tensor, bail};

use crate::kernels::cpu::real::Real;
use crate::kernels::cuda::kernel::{Fused, FusedKernel, Launch, Rows, entries, two_passes};
use crate::kernels::cuda::switches::Switch;

/// The RMC's step 2.51 → 2.35 ms (H200, 2026-11-26).
pub const SOFTMAX: Switch = Switch::on("softmax");
inventory::submit! { SOFTMAX }

/// `exp(x − max) / Σ exp(x − max)` over the last axis, differentiable: this op where memctl's
/// fused ops run, candle's ops elsewhere.
pub fn softmax_last(x: &Tensor) -> Result<Tensor> {
    if crate::kernels::cuda::switches::used_for(x, SOFTMAX) {
        Fused(Softmax::Forward).apply(&[x])
    } else {
        candle_nn::ops::softmax(x, D::Minus1)
    }
}

two_passes! {
    /// The two passes: `x → y` and, for its backward, `(y, g) → d x`.
    pub enum Softmax
}

impl FusedKernel for Softmax {
    type Sizes = Rows;

    entries! { SOFTMAX: Softmax::Forward => "softmax_fwd", Softmax::Backward => "softmax_bwd" }

    fn sizes(&self, operands: &[&Layout]) -> Result<(Shape, Rows)> {
        Rows::sizes("the fused softmax", operands)
    }

    fn cpu<T: Real>(&self, Rows { n, .. }: Rows, operands: &[&[T]]) -> Vec<T> {
        let n = n.max(1);
        let mut out = Vec::with_capacity(operands[0].len());
        if let Softmax::Backward = self {
            for (y, g) in operands[0].chunks(n).zip(operands[1].chunks(n)) {
                let dot = y.iter().zip(g).fold(T::zero(), |s, (&y, &g)| s + y * g);
                out.extend(y.iter().zip(g).map(|(&y, &g)| y * (g - dot)));
            }
        } else {
            for x in operands[0].chunks(n) {
                let max = x.iter().fold(T::from_f64(f64::NEG_INFINITY), |m, &v| if v > m { v } else { m });
                let start = out.len();
                out.extend(x.iter().map(|&v| (v - max).exp()));
                let sum = out[start..].iter().fold(T::zero(), |s, &e| s + e);
                out[start..].iter_mut().for_each(|e| *e /= sum);
            }
        }
        out
    }

    fn launch(&self, rows: Rows) -> Result<Launch> {
        rows.warp_per_row(self.entry())
    }

    /// The backward reads the forward's output.
    fn backward(&self, _operands: &[&Tensor], y: &Tensor, grad: &Tensor) -> Result<Vec<Option<Tensor>>> {
        let Softmax::Forward = self else { bail!("the fused softmax's backward has no gradient of its own") };
        Ok(vec![Some(y.apply_op2_no_bwd(&grad.contiguous()?, &Fused(Softmax::Backward))?)])
    }
}

#[cfg(test)]
mod tests {
    use candle_core::{Device, Var};

    use super::*;
    use crate::kernels::cuda::fused::testing::{assert_fused_matches, var};

    #[test]
    fn the_fused_softmax_and_its_gradient_equal_candle_ops_and_autograd() -> Result<()> {
        // Large offsets (the max is subtracted) and rows of two widths' worth of leading axes.
        let x = Var::from_tensor(&(var(&[2, 3, 5], 3.0)?.as_tensor() + 40.0)?)?;
        let fused = Fused(Softmax::Forward).apply(&[&x])?;
        assert_fused_matches(&[&x], &[fused], &[candle_nn::ops::softmax(&x, D::Minus1)?], 1e-12)
    }

    #[test]
    fn a_row_of_minus_infinities_but_one_puts_all_weight_there() -> Result<()> {
        let x = Tensor::new(&[[f32::NEG_INFINITY, 0.0, f32::NEG_INFINITY]], &Device::Cpu)?;
        let y = softmax_last(&x)?.to_vec2::<f32>()?.remove(0);
        // The CPU's f32 exp stops at e^−87.3 (kernels::cpu::real), a weight of about 1e-38.
        assert!(y[1] == 1.0 && y[0] < 1e-30 && y[2] < 1e-30, "{y:?}");
        Ok(())
    }
}
