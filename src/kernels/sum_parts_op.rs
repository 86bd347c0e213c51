//! The sum of many tensors of one shape in one pass: a parameter's gradient from the
//! gradients of its uses at every time step (`compile::StepWeights`).
//!
//! candle's backward adds the gradient of each use of a tensor to the sum so far, one addition
//! (on a GPU a kernel, with an output to allocate and free) per use after the first: for a
//! recurrent model, every parameter at every time step, some six hundred kernels in STM config
//! A's 20-step training step. Here the parts are summed by one kernel per 32
//! (`src/kernels/cuda/sum_parts.cu`), left to right; on the CPU in one pass, in the same order
//! as adding them one by one. Where it runs is `kernels::fused`'s rule
//! ([`fused::STEP_GRADS`](super::fused::STEP_GRADS)); otherwise the parts are added pairwise
//! with candle's `add`.

use candle_core::{CpuStorage, CustomOp1, Layout, Result, Shape, Storage, Tensor, bail};

use super::fused::{self, RealKernel, run_cpu};
use super::real::Real;
#[cfg(feature = "cuda")]
use candle_core::CudaStorage;

/// `parts[0] + parts[1] + …`, without a gradient of its own.
pub fn sum(parts: &[&Tensor]) -> Result<Tensor> {
    let Some((first, rest)) = parts.split_first() else { bail!("a sum of no tensors") };
    if rest.is_empty() {
        return Ok((*first).clone());
    }
    if let Some(other) = rest.iter().find(|t| t.dims() != first.dims() || t.dtype() != first.dtype()) {
        bail!(
            "a sum of tensors of different shapes: {:?} {:?} and {:?} {:?}",
            first.dims(),
            first.dtype(),
            other.dims(),
            other.dtype()
        );
    }
    if !fused::used_for(first, fused::STEP_GRADS) {
        return rest.iter().try_fold((*first).clone(), |sum, t| sum.add(t));
    }
    let rest = rest.iter().map(|t| t.contiguous()).collect::<Result<Vec<_>>>()?;
    first.contiguous()?.apply_op1_no_bwd(&SumRest { rest })
}

/// The op on the first part: adds the others to it.
struct SumRest {
    rest: Vec<Tensor>,
}

/// Sums its operands element by element, left to right.
struct SumKernel;

impl RealKernel for SumKernel {
    fn run<T: Real>(&self, operands: &[&[T]]) -> Vec<T> {
        let mut out = operands[0].to_vec();
        for part in &operands[1..] {
            for (o, &v) in out.iter_mut().zip(part.iter()) {
                *o += v;
            }
        }
        out
    }
}

impl CustomOp1 for SumRest {
    fn name(&self) -> &'static str {
        "sum_parts"
    }

    fn cpu_fwd(&self, s: &CpuStorage, l: &Layout) -> Result<(CpuStorage, Shape)> {
        let guards: Vec<_> = self.rest.iter().map(|t| t.storage_and_layout()).collect();
        let mut operands = vec![(s, l)];
        for (storage, layout) in &guards {
            let Storage::Cpu(cpu) = &**storage else { bail!("a sum of tensors on different devices") };
            operands.push((cpu, layout));
        }
        Ok((run_cpu(&SumKernel, &operands, "the sum of a parameter's gradients")?, l.shape().clone()))
    }

    #[cfg(feature = "cuda")]
    fn cuda_fwd(&self, s: &CudaStorage, l: &Layout) -> Result<(CudaStorage, Shape)> {
        let out = super::cuda_kernels::sum_parts((s, l), &self.rest)?;
        fused::record_launch("sum_parts");
        Ok((out, l.shape().clone()))
    }
}

#[cfg(test)]
mod tests {
    use candle_core::{DType, Device};

    use super::*;

    #[test]
    fn sums_any_number_of_parts_as_adding_them_one_by_one() -> Result<()> {
        for count in [1, 2, 3, 40] {
            // Every other part a transposed view, read as laid out.
            let parts = (0..count)
                .map(|k| match k % 2 {
                    0 => Tensor::randn(0f32, 1.0, (3, 5), &Device::Cpu),
                    _ => Tensor::randn(0f32, 1.0, (5, 3), &Device::Cpu)?.t(),
                })
                .collect::<Result<Vec<_>>>()?;
            let refs: Vec<&Tensor> = parts.iter().collect();
            let expected = parts[1..].iter().try_fold(parts[0].clone(), |s, t| s.add(t))?;
            let got = sum(&refs)?;
            assert_eq!(got.dims(), [3, 5]);
            assert_eq!(got.to_vec2::<f32>()?, expected.to_vec2::<f32>()?, "{count} parts");
        }
        Ok(())
    }

    #[test]
    fn parts_of_different_shapes_are_an_error() -> Result<()> {
        let (a, b) = (Tensor::zeros(3, DType::F32, &Device::Cpu)?, Tensor::zeros(4, DType::F32, &Device::Cpu)?);
        assert!(sum(&[&a, &b]).is_err_and(|e| e.to_string().contains("different shapes")));
        assert!(sum(&[]).is_err());
        Ok(())
    }
}
