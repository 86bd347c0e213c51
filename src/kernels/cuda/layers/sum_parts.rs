//! The sum of many tensors of one shape in one pass: a parameter's gradient from the
//! gradients of its uses at every time step (`compile::StepWeights`).
//!
//! candle's backward adds the gradient of each use of a tensor to the sum so far, one addition
//! (on a GPU a kernel, with an output to allocate and free) per use after the first: for a
//! recurrent model, every parameter at every time step, some six hundred kernels in STM config
//! A's 20-step training step. Here the parts are summed by one kernel per 32
//! (`src/kernels/cuda/layers/sum_parts.cu`), left to right, reading each as laid out (a transposed
//! view too, so that the backward need not copy it); on the CPU in one pass, in the same order
//! as adding them one by one. Where it runs is its switch's rule (`kernels::cuda::switches`)
//! ([`STEP_GRADS`](STEP_GRADS)); otherwise the parts are added pairwise
//! with candle's `add`.
//!
//! Not a `FusedKernel` (`cuda::kernel`): its parts are read as laid out (strided views too, which
//! the trait's contiguous operands would copy), any number of them, passed to the kernel as a
//! struct of 32 pointers a launch and launched once per 32.

use candle_core::{CpuStorage, CustomOp1, Layout, Result, Shape, Storage, Tensor, bail};

use crate::kernels::cpu::real::Real;
use crate::kernels::cuda::switches::Switch;
#[cfg(feature = "cuda")]
use candle_core::CudaStorage;

/// STM A 10.98 → 10.07 ms a step, LSAM 14.33 → 13.73 (H100, 2026-11-26).
pub const STEP_GRADS: Switch = Switch::on("step_grads");
inventory::submit! { STEP_GRADS }

/// `parts[0] + parts[1] + …`, without a gradient of its own, contiguous. The parts may be
/// strided views (a weight read transposed at every time step has transposed gradients):
/// where they share one layout, contiguous or of two or three axes (a pack's stack of
/// matrices), they are read as laid out.
pub fn sum(parts: &[&Tensor]) -> Result<Tensor> {
    let Some((first, rest)) = parts.split_first() else { bail!("a sum of no tensors") };
    if rest.is_empty() {
        return first.contiguous();
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
    if !crate::kernels::cuda::switches::used_for(first, STEP_GRADS) {
        return rest.iter().try_fold((*first).contiguous()?, |sum, t| sum.add(t));
    }
    // Contiguous parts share their layout whatever the strides of axes of one say (candle
    // ignores those); strided ones must be matrices, or a stack of them, of one set of strides.
    let contiguous = parts.iter().all(|t| t.is_contiguous());
    let shared = contiguous || (matches!(first.rank(), 2 | 3) && parts.iter().all(|t| t.stride() == first.stride()));
    let parts: Vec<Tensor> = match shared {
        true => parts.iter().map(|t| (*t).clone()).collect(),
        false => parts.iter().map(|t| t.contiguous()).collect::<Result<_>>()?,
    };
    parts[0].apply_op1_no_bwd(&SumRest { rest: parts[1..].to_vec() })
}

/// The op on the first part: adds the others to it.
struct SumRest {
    rest: Vec<Tensor>,
}

/// The sum of `parts` (each a storage's elements and its layout), element by element in the
/// layouts' logical order, left to right.
fn strided_sum<T: Real>(parts: &[(&[T], &Layout)]) -> Vec<T> {
    let Some(((first, layout), rest)) = parts.split_first() else { return vec![] };
    let mut out = vec![T::zero(); layout.shape().elem_count()];
    for (o, i) in out.iter_mut().zip(offsets(layout)) {
        *o = first[i];
    }
    for (part, layout) in rest {
        match layout.contiguous_offsets() {
            Some((start, end)) => out.iter_mut().zip(&part[start..end]).for_each(|(o, &v)| *o += v),
            None => out.iter_mut().zip(offsets(layout)).for_each(|(o, i)| *o += part[i]),
        }
    }
    out
}

/// Where each element of `layout` sits in its storage, in logical (row-major) order: a
/// counter over the axes, carried like an odometer (no division per element).
fn offsets(layout: &Layout) -> impl Iterator<Item = usize> + '_ {
    let (dims, strides) = (layout.dims(), layout.stride());
    let mut index = vec![0usize; dims.len()];
    let mut at = layout.start_offset();
    (0..layout.shape().elem_count()).map(move |_| {
        let here = at;
        for k in (0..dims.len()).rev() {
            index[k] += 1;
            at += strides[k];
            if index[k] < dims[k] {
                break;
            }
            at -= strides[k] * dims[k];
            index[k] = 0;
        }
        here
    })
}

impl CustomOp1 for SumRest {
    fn name(&self) -> &'static str {
        "sum_parts"
    }

    fn cpu_fwd(&self, s: &CpuStorage, l: &Layout) -> Result<(CpuStorage, Shape)> {
        let guards: Vec<_> = self.rest.iter().map(|t| t.storage_and_layout()).collect();
        let mut storages = vec![(s, l)];
        for (storage, layout) in &guards {
            let Storage::Cpu(cpu) = &**storage else { bail!("a sum of tensors on different devices") };
            storages.push((cpu, *layout));
        }
        fn typed<'a, T: Real>(storages: &[(&'a CpuStorage, &'a Layout)]) -> Result<Vec<T>> {
            let parts = storages
                .iter()
                .map(|(s, l)| match T::as_slice(s) {
                    Some(v) => Ok((v, *l)),
                    None => bail!("a sum of tensors of mixed types"),
                })
                .collect::<Result<Vec<_>>>()?;
            Ok(strided_sum(&parts))
        }
        let out = match s {
            CpuStorage::F32(_) => CpuStorage::F32(typed::<f32>(&storages)?),
            CpuStorage::F64(_) => CpuStorage::F64(typed::<f64>(&storages)?),
            other => {
                bail!("a sum of {:?} tensors (f32 or f64 only)", candle_core::backend::BackendStorage::dtype(other))
            }
        };
        Ok((out, l.shape().clone()))
    }

    #[cfg(feature = "cuda")]
    fn cuda_fwd(&self, s: &CudaStorage, l: &Layout) -> Result<(CudaStorage, Shape)> {
        let out = cuda::sum_parts((s, l), &self.rest)?;
        crate::kernels::cuda::fused::record_launch("sum_parts");
        Ok((out, l.shape().clone()))
    }
}

/// The launch of its CUDA kernels, with the `cuda` feature.
#[cfg(feature = "cuda")]
mod cuda {
    use crate::kernels::cuda::launch_shape::LaunchShape;
    use crate::kernels::cuda::modules::{SUM_PARTS, launch_config};
    use candle_core::cuda_backend::WrapErr;
    use candle_core::cuda_backend::cudarc::driver::PushKernelArg;
    use candle_core::{CudaStorage, Layout, Result, Storage, Tensor};

    /// `sum_parts.cu`'s first argument: up to 32 device pointers, by value.
    #[repr(C, align(8))]
    struct Parts([u64; PARTS_PER_LAUNCH]);

    const PARTS_PER_LAUNCH: usize = 32;

    // SAFETY: plain old data, laid out as sum_parts.cu's `struct Parts`.
    unsafe impl candle_core::cuda_backend::cudarc::driver::DeviceRepr for Parts {}

    /// `first` plus every tensor of `rest` (f32, each of `first`'s elements and layout: contiguous,
    /// or a strided matrix or stack of matrices), into a new contiguous buffer: one launch of
    /// `sum_parts` per 32 parts, each after the first adding to the buffer.
    pub(super) fn sum_parts((first, layout): (&CudaStorage, &Layout), rest: &[Tensor]) -> Result<CudaStorage> {
        use candle_core::cuda_backend::cudarc::driver::DevicePtr;
        let n = layout.shape().elem_count();
        // Where element i sits, with j = i % mat: i / mat · sm + j / cols · s0 + j % cols · s1,
        // within `span` elements of the start.
        let last = |d: usize, s: usize| (d.max(1) - 1) * s;
        let (cols, s0, s1, mat, sm, span) = match (layout.is_contiguous(), layout.dims(), layout.stride()) {
            (true, _, _) => (n, n, 1, n, n, n),
            (false, &[rows, cols], &[s0, s1]) => (cols, s0, s1, n, n, last(rows, s0) + last(cols, s1) + 1),
            (false, &[m, rows, cols], &[sm, s0, s1]) => {
                (cols, s0, s1, rows * cols, sm, last(m, sm) + last(rows, s0) + last(cols, s1) + 1)
            }
            _ => {
                candle_core::bail!("sum_parts: parts laid out as {:?} (contiguous, two or three axes)", layout.stride())
            }
        };
        let ints = [n, cols, s0, s1, mat, sm].map(i32::try_from);
        let [Ok(count), Ok(cols), Ok(s0), Ok(s1), Ok(mat), Ok(sm)] = ints else {
            candle_core::bail!("sum_parts: {n} elements are more than the kernel indexes")
        };
        let dev = first.device.clone();
        // SAFETY: every element is written by the first launch (accumulate = 0).
        let out = unsafe { dev.alloc::<f32>(n)? };
        if n == 0 {
            return Ok(CudaStorage::wrap_cuda_slice(out, dev));
        }
        let stream = dev.cuda_stream();
        let start = layout.start_offset();
        let guards: Vec<_> = rest.iter().map(|t| t.storage_and_layout()).collect();
        let mut views = vec![first.as_cuda_slice::<f32>()?.slice(start..start + span)];
        for (storage, l) in &guards {
            let Storage::Cuda(s) = &**storage else { candle_core::bail!("sum_parts: a part is not on a CUDA device") };
            // Contiguous parts agree whatever the strides of axes of one (candle ignores those).
            let same = l.dims() == layout.dims()
                && if layout.is_contiguous() { l.is_contiguous() } else { l.stride() == layout.stride() };
            if !same {
                candle_core::bail!(
                    "sum_parts: a part laid out as {:?} for a sum laid out as {:?}",
                    l.stride(),
                    layout.stride()
                );
            }
            views.push(s.as_cuda_slice::<f32>()?.slice(l.start_offset()..l.start_offset() + span));
        }
        let func = SUM_PARTS.function(&dev, "sum_parts")?;
        for (launch, chunk) in views.chunks(PARTS_PER_LAUNCH).enumerate() {
            let mut parts = Parts([0; PARTS_PER_LAUNCH]);
            // Event tracking is off (`device::open`): the pointers carry no synchronisation to keep.
            for (slot, view) in parts.0.iter_mut().zip(chunk) {
                *slot = view.device_ptr(&stream).0;
            }
            let (parts_in_chunk, accumulate) = (chunk.len() as i32, i32::from(launch > 0));
            let mut builder = func.builder();
            builder
                .arg(&parts)
                .arg(&out)
                .arg(&parts_in_chunk)
                .arg(&count)
                .arg(&cols)
                .arg(&s0)
                .arg(&s1)
                .arg(&mat)
                .arg(&sm)
                .arg(&accumulate);
            // SAFETY: sum_parts takes the pointers, the output, the number of pointers, n, cols, s0,
            // s1, mat, sm and the accumulate flag, in this order; each pointer's view spans every
            // element the layout reaches (checked above), and the grid-stride loop stays below n.
            unsafe { builder.launch(launch_config(LaunchShape::per_element(count as u32))) }.w()?;
        }
        Ok(CudaStorage::wrap_cuda_slice(out, dev))
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
            assert!(got.is_contiguous());
            assert_eq!(got.to_vec2::<f32>()?, expected.to_vec2::<f32>()?, "{count} parts");
        }
        Ok(())
    }

    /// Parts that share a transposed layout are read in place, as the backward of a weight read
    /// through `w.t()` at every time step leaves them.
    #[test]
    fn parts_of_one_transposed_layout_sum_as_laid_out() -> Result<()> {
        let parts = (0..3).map(|_| Tensor::randn(0f64, 1.0, (4, 2), &Device::Cpu)?.t()).collect::<Result<Vec<_>>>()?;
        let refs: Vec<&Tensor> = parts.iter().collect();
        let expected = parts[0].add(&parts[1])?.add(&parts[2])?;
        assert_eq!(sum(&refs)?.to_vec2::<f64>()?, expected.to_vec2::<f64>()?);
        Ok(())
    }

    /// A pack's stacked weight read transposed leaves a stack of transposed matrices per step.
    #[test]
    fn parts_of_one_stack_of_transposed_matrices_sum_as_laid_out() -> Result<()> {
        let stack = || Tensor::randn(0f64, 1.0, (3, 4, 2), &Device::Cpu)?.transpose(1, 2);
        let parts = (0..3).map(|_| stack()).collect::<Result<Vec<_>>>()?;
        assert!(!parts[0].is_contiguous());
        let refs: Vec<&Tensor> = parts.iter().collect();
        let expected = parts[0].add(&parts[1])?.add(&parts[2])?;
        let got = sum(&refs)?;
        assert!(got.is_contiguous());
        assert_eq!(got.to_vec3::<f64>()?, expected.to_vec3::<f64>()?);
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
