//! `μ(x) = x / max(‖x‖₂, eps)` over the last axis (PyTorch's `F.normalize`, NAM's unit keys and
//! queries) as one candle op with its own backward, for the device-generic path (candle's
//! autograd: the GPU, and evaluation on the CPU).
//!
//! As candle ops (`kernels::blocks::nam::l2_normalize_with_candle_ops`) that is five kernels forward
//! (square, sum, clamp, root, division) and some ten backward, twice per LSAM time step and
//! once per NAM-TM one; here it is one kernel each way (`src/kernels/cuda/nam/l2_normalize.cu`, a
//! warp per row). The backward, `d x = (g − μ ⟨μ, g⟩) / ‖x‖` (or `g / eps` where the norm was
//! clamped), recomputes the norm from `x`. The per-row arithmetic is the tape's
//! (`kernels::cpu::nam_manual::clamped_norm`, `normalize` and `normalize_backward`), except that
//! the forward divides by the norm, as candle's ops did, where the tape multiplies by its
//! inverse (the last bit can differ). Where it runs
//! is its switch's rule (`kernels::cuda::switches`) ([`L2_NORMALIZE`](L2_NORMALIZE)).

use candle_core::{Layout, Result, Shape, Tensor, bail};

use crate::kernels::cpu::nam_manual::{clamped_norm, normalize, normalize_backward};
use crate::kernels::cpu::real::Real;
use crate::kernels::cuda::kernel::{Fused, FusedKernel, Launch, Rows, entries, two_passes};
use crate::kernels::cuda::switches::Switch;

/// LSAM 14.33 → 11.42 ms a step, NAM-TM 30.24 → 27.37 (H100, 2026-11-26).
pub const L2_NORMALIZE: Switch = Switch::on("l2_normalize");
inventory::submit! { L2_NORMALIZE }

/// `x / max(‖x‖₂, eps)` over the last axis, differentiable.
pub fn l2_normalize(x: &Tensor) -> Result<Tensor> {
    Fused(Normalize::Forward).apply(&[x])
}

two_passes! {
    /// The two passes: `x → μ(x)` and, for its backward, `(x, g) → d x`.
    pub enum Normalize
}

impl FusedKernel for Normalize {
    type Sizes = Rows;

    entries! { L2_NORMALIZE: Normalize::Forward => "l2_normalize_fwd", Normalize::Backward => "l2_normalize_bwd" }

    fn sizes(&self, operands: &[&Layout]) -> Result<(Shape, Rows)> {
        Rows::sizes("the fused normalisation", operands)
    }

    fn cpu<T: Real>(&self, Rows { n, .. }: Rows, operands: &[&[T]]) -> Vec<T> {
        let n = n.max(1);
        let x = operands[0];
        let mut out = vec![T::zero(); x.len()];
        let mut unit = vec![T::zero(); n];
        for (r, (xr, o)) in x.chunks(n).zip(out.chunks_mut(n)).enumerate() {
            if let Normalize::Forward = self {
                // A division, as candle's ops and PyTorch's (the tape multiplies by the
                // inverse, which can differ in the last bit: 3 / 5 against 3 · (1 / 5)).
                let norm = clamped_norm(xr);
                o.iter_mut().zip(xr).for_each(|(o, &v)| *o = v / norm);
                continue;
            }
            let norm = normalize(xr, &mut unit[..xr.len()]);
            normalize_backward(&unit[..xr.len()], norm, &operands[1][r * n..][..xr.len()], o);
        }
        out
    }

    fn launch(&self, rows: Rows) -> Result<Launch> {
        rows.warp_per_row(self.entry())
    }

    /// The backward recomputes the norm from the input.
    fn backward(&self, operands: &[&Tensor], _y: &Tensor, grad: &Tensor) -> Result<Vec<Option<Tensor>>> {
        let (Normalize::Forward, &[x]) = (self, operands) else {
            bail!("the fused normalisation's backward has no gradient of its own")
        };
        Ok(vec![Some(x.apply_op2_no_bwd(&grad.contiguous()?, &Fused(Normalize::Backward))?)])
    }
}

#[cfg(test)]
mod tests {
    use candle_core::{Device, Var};

    use super::*;
    use crate::kernels::blocks::nam::l2_normalize_with_candle_ops as reference;
    use crate::kernels::cuda::fused::testing::{assert_fused_matches, var};

    #[test]
    fn the_fused_normalisation_and_its_gradient_equal_candle_ops_and_autograd() -> Result<()> {
        let x = var(&[3, 2, 7], 1.0)?;
        assert_fused_matches(&[&x], &[l2_normalize(&x)?], &[reference(&x)?], 1e-12)
    }

    #[test]
    fn a_zero_row_gets_pytorchs_finite_gradient() -> Result<()> {
        // A zero row and a row of norm 5, f64.
        let x = Var::from_tensor(&Tensor::new(&[[0.0f64, 0.0], [3.0, 4.0]], &Device::Cpu)?)?;
        let (fused, plain) = (l2_normalize(&x)?, reference(&x)?);
        assert_eq!(fused.to_vec2::<f64>()?, plain.to_vec2::<f64>()?);
        let gf = fused.sum_all()?.backward()?.get(&x).expect("gradient").to_vec2::<f64>()?;
        let gp = plain.sum_all()?.backward()?.get(&x).expect("gradient").to_vec2::<f64>()?;
        assert_eq!(gf[0], vec![1e12, 1e12]);
        assert!(gf.iter().flatten().zip(gp.iter().flatten()).all(|(a, b)| (a - b).abs() < 1e-12), "{gf:?} {gp:?}");
        Ok(())
    }
}
