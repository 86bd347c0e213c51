//! `μ(x) = x / max(‖x‖₂, eps)` over the last axis (PyTorch's `F.normalize`, NAM's unit keys and
//! queries) as one candle op with its own backward, for the device-generic path (candle's
//! autograd: the GPU, and evaluation on the CPU).
//!
//! As candle ops (`kernels::nam::l2_normalize_with_candle_ops`) that is five kernels forward
//! (square, sum, clamp, root, division) and some ten backward, twice per LSAM time step and
//! once per NAM-TM one; here it is one kernel each way (`src/kernels/cuda/l2_normalize.cu`, a
//! warp per row). The backward, `d x = (g − μ ⟨μ, g⟩) / ‖x‖` (or `g / eps` where the norm was
//! clamped), recomputes the norm from `x`. The per-row arithmetic is the tape's
//! (`kernels::nam_manual::clamped_norm`, `normalize` and `normalize_backward`), except that
//! the forward divides by the norm, as candle's ops did, where the tape multiplies by its
//! inverse (the last bit can differ). Where it runs
//! is `kernels::fused`'s rule ([`fused::L2_NORMALIZE`](super::fused::L2_NORMALIZE)).

use candle_core::{CpuStorage, CustomOp1, CustomOp2, Layout, Result, Shape, Tensor, bail};

use super::fused::{RealKernel, run_cpu};
use super::nam_manual::{clamped_norm, normalize, normalize_backward};
use super::real::Real;
#[cfg(feature = "cuda")]
use candle_core::CudaStorage;

/// `x / max(‖x‖₂, eps)` over the last axis, differentiable.
pub fn l2_normalize(x: &Tensor) -> Result<Tensor> {
    x.contiguous()?.apply_op1(Forward)
}

/// `x → μ(x)`.
struct Forward;

/// `(x, g) → d x`.
struct Backward;

/// Rows and width of a contiguous operand with at least one axis.
fn rows_of(l: &Layout) -> Result<(usize, usize)> {
    let Some(&n) = l.dims().last() else { bail!("normalising the last axis of a scalar") };
    if !l.is_contiguous() {
        bail!("the fused normalisation takes contiguous operands");
    }
    Ok((l.shape().elem_count().checked_div(n).unwrap_or(0), n))
}

/// The CPU computation of one pass over rows of `n`.
struct NormalizeKernel {
    backward: bool,
    n: usize,
}

impl RealKernel for NormalizeKernel {
    fn run<T: Real>(&self, operands: &[&[T]]) -> Vec<T> {
        let n = self.n.max(1);
        let x = operands[0];
        let mut out = vec![T::zero(); x.len()];
        let mut unit = vec![T::zero(); n];
        for (r, (xr, o)) in x.chunks(n).zip(out.chunks_mut(n)).enumerate() {
            if !self.backward {
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
}

impl CustomOp1 for Forward {
    fn name(&self) -> &'static str {
        "l2_normalize_fwd"
    }

    fn cpu_fwd(&self, s: &CpuStorage, l: &Layout) -> Result<(CpuStorage, Shape)> {
        let (_, n) = rows_of(l)?;
        let kernel = NormalizeKernel { backward: false, n };
        Ok((run_cpu(&kernel, &[(s, l)], "the fused normalisation")?, l.shape().clone()))
    }

    #[cfg(feature = "cuda")]
    fn cuda_fwd(&self, s: &CudaStorage, l: &Layout) -> Result<(CudaStorage, Shape)> {
        let (rows, n) = rows_of(l)?;
        let out = super::cuda_kernels::l2_normalize("l2_normalize_fwd", &[(s, l)], rows, n)?;
        super::fused::record_launch("l2_normalize_fwd");
        Ok((out, l.shape().clone()))
    }

    fn bwd(&self, x: &Tensor, _y: &Tensor, grad: &Tensor) -> Result<Option<Tensor>> {
        Ok(Some(x.apply_op2_no_bwd(&grad.contiguous()?, &Backward)?))
    }
}

impl CustomOp2 for Backward {
    fn name(&self) -> &'static str {
        "l2_normalize_bwd"
    }

    fn cpu_fwd(&self, s1: &CpuStorage, l1: &Layout, s2: &CpuStorage, l2: &Layout) -> Result<(CpuStorage, Shape)> {
        let (_, n) = rows_of(l1)?;
        same_shape(l1, l2)?;
        let kernel = NormalizeKernel { backward: true, n };
        Ok((run_cpu(&kernel, &[(s1, l1), (s2, l2)], "the fused normalisation")?, l1.shape().clone()))
    }

    #[cfg(feature = "cuda")]
    fn cuda_fwd(&self, s1: &CudaStorage, l1: &Layout, s2: &CudaStorage, l2: &Layout) -> Result<(CudaStorage, Shape)> {
        let (rows, n) = rows_of(l1)?;
        same_shape(l1, l2)?;
        let out = super::cuda_kernels::l2_normalize("l2_normalize_bwd", &[(s1, l1), (s2, l2)], rows, n)?;
        super::fused::record_launch("l2_normalize_bwd");
        Ok((out, l1.shape().clone()))
    }
}

fn same_shape(a: &Layout, b: &Layout) -> Result<()> {
    if a.dims() != b.dims() || !b.is_contiguous() {
        bail!("the fused normalisation's backward: gradient {:?} for an input {:?}", b.dims(), a.dims());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use candle_core::{Device, Var};

    use super::*;
    use crate::kernels::fused::testing::{assert_fused_matches, var};
    use crate::kernels::nam::l2_normalize_with_candle_ops as reference;

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
