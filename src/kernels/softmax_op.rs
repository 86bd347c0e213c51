//! Softmax over the last axis as one candle op with its own backward, for the device-generic
//! path (candle's autograd: the GPU, and evaluation on the CPU).
//!
//! candle's fused `softmax_last_dim` has no gradient, and `candle_nn::ops::softmax` is five ops
//! (max, subtract, exp, sum, divide) whose backward is some fifteen kernels; here it is one
//! kernel each way. With `y = softmax(x)` per row and `g = d loss / d y`:
//! `d x = y ⊙ (g − Σ_j g_j y_j)`.
//!
//! Where it runs is `kernels::fused`'s rule (the CPU always; on CUDA by its standing there, `fused::SOFTMAX`); elsewhere
//! it is `candle_nn::ops::softmax`. The CUDA kernels are `src/kernels/cuda/softmax.cu`.

use candle_core::{CpuStorage, CustomOp1, CustomOp2, D, Layout, Result, Shape, Tensor, bail};

use super::fused::{RealKernel, run_cpu};
use super::real::Real;
#[cfg(feature = "cuda")]
use candle_core::CudaStorage;

/// `exp(x − max) / Σ exp(x − max)` over the last axis, differentiable: this op where memctl's
/// fused ops run, candle's ops elsewhere.
pub fn softmax_last(x: &Tensor) -> Result<Tensor> {
    if super::fused::used_for(x, super::fused::SOFTMAX) {
        x.contiguous()?.apply_op1(Forward)
    } else {
        candle_nn::ops::softmax(x, D::Minus1)
    }
}

/// `x → y`.
struct Forward;

/// `(y, g) → d x`.
struct Backward;

/// Rows and width of a contiguous operand with at least one axis.
fn rows_of(l: &Layout) -> Result<(usize, usize)> {
    let Some(&n) = l.dims().last() else { bail!("softmax over the last axis of a scalar") };
    if !l.is_contiguous() {
        bail!("the fused softmax takes contiguous operands");
    }
    Ok((l.shape().elem_count().checked_div(n).unwrap_or(0), n))
}

/// The CPU computation of one pass over rows of `n`.
struct SoftmaxKernel {
    backward: bool,
    n: usize,
}

impl RealKernel for SoftmaxKernel {
    fn run<T: Real>(&self, operands: &[&[T]]) -> Vec<T> {
        let n = self.n.max(1);
        let mut out = Vec::with_capacity(operands[0].len());
        if self.backward {
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
}

impl CustomOp1 for Forward {
    fn name(&self) -> &'static str {
        "softmax_fwd"
    }

    fn cpu_fwd(&self, s: &CpuStorage, l: &Layout) -> Result<(CpuStorage, Shape)> {
        let (_, n) = rows_of(l)?;
        let kernel = SoftmaxKernel { backward: false, n };
        Ok((run_cpu(&kernel, &[(s, l)], "softmax")?, l.shape().clone()))
    }

    #[cfg(feature = "cuda")]
    fn cuda_fwd(&self, s: &CudaStorage, l: &Layout) -> Result<(CudaStorage, Shape)> {
        let (rows, n) = rows_of(l)?;
        let out = super::cuda_kernels::softmax("softmax_fwd", &[(s, l)], rows, n)?;
        super::fused::record_launch("softmax_fwd");
        Ok((out, l.shape().clone()))
    }

    fn bwd(&self, _x: &Tensor, y: &Tensor, grad: &Tensor) -> Result<Option<Tensor>> {
        Ok(Some(y.apply_op2_no_bwd(&grad.contiguous()?, &Backward)?))
    }
}

impl CustomOp2 for Backward {
    fn name(&self) -> &'static str {
        "softmax_bwd"
    }

    fn cpu_fwd(&self, s1: &CpuStorage, l1: &Layout, s2: &CpuStorage, l2: &Layout) -> Result<(CpuStorage, Shape)> {
        let (_, n) = rows_of(l1)?;
        same_shape(l1, l2)?;
        let kernel = SoftmaxKernel { backward: true, n };
        Ok((run_cpu(&kernel, &[(s1, l1), (s2, l2)], "softmax")?, l1.shape().clone()))
    }

    #[cfg(feature = "cuda")]
    fn cuda_fwd(&self, s1: &CudaStorage, l1: &Layout, s2: &CudaStorage, l2: &Layout) -> Result<(CudaStorage, Shape)> {
        let (rows, n) = rows_of(l1)?;
        same_shape(l1, l2)?;
        let out = super::cuda_kernels::softmax("softmax_bwd", &[(s1, l1), (s2, l2)], rows, n)?;
        super::fused::record_launch("softmax_bwd");
        Ok((out, l1.shape().clone()))
    }
}

fn same_shape(a: &Layout, b: &Layout) -> Result<()> {
    if a.dims() != b.dims() || !b.is_contiguous() {
        bail!("the fused softmax's backward: gradient {:?} for an output {:?}", b.dims(), a.dims());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use candle_core::{Device, Var};

    use super::*;
    use crate::kernels::fused::testing::{assert_fused_matches, var};

    #[test]
    fn the_fused_softmax_and_its_gradient_equal_candle_ops_and_autograd() -> Result<()> {
        // Large offsets (the max is subtracted) and rows of two widths' worth of leading axes.
        let x = Var::from_tensor(&(var(&[2, 3, 5], 3.0)?.as_tensor() + 40.0)?)?;
        let fused = x.contiguous()?.apply_op1(Forward)?;
        assert_fused_matches(&[&x], &[fused], &[candle_nn::ops::softmax(&x, D::Minus1)?], 1e-12)
    }

    #[test]
    fn a_row_of_minus_infinities_but_one_puts_all_weight_there() -> Result<()> {
        let x = Tensor::new(&[[f32::NEG_INFINITY, 0.0, f32::NEG_INFINITY]], &Device::Cpu)?;
        let y = softmax_last(&x)?.to_vec2::<f32>()?.remove(0);
        // The CPU's f32 exp stops at e^−87.3 (kernels::real), a weight of about 1e-38.
        assert!(y[1] == 1.0 && y[0] < 1e-30 && y[2] < 1e-30, "{y:?}");
        Ok(())
    }
}
