//! A tensor times a single number (STM's `α1 · M^r`, `α2 · …`, `α3 · …`, the learned scalars) as
//! one candle op with its own backward, for the device-generic path (candle's autograd: the
//! GPU, and evaluation on the CPU).
//!
//! As candle ops, `x.broadcast_mul(α)` reads `α` through a broadcast view of `x`'s shape, and
//! its backward sums `g ⊙ x` over every element into `α`'s one, which candle's CUDA backend runs
//! on one block: for STM config B's `α1 · M^r` (32 · 8 · 96 · 96 elements) 237 µs on an H200,
//! besides three strided products of 48 µs each (Nsight Compute, 2026-11-26). Here the forward is one kernel, and the backward one kernel that writes `d x = α g`
//! and, per block of the launch, a partial sum of `g ⊙ x`; candle sums the partial sums.
//!
//! Where it runs is its switch's rule (`kernels::switches`: the CPU always; on CUDA by its standing, `SCALE`); the CUDA
//! kernels are `src/kernels/cuda/scale.cu`.

use candle_core::{CpuStorage, CustomOp2, CustomOp3, Layout, Result, Shape, Tensor, bail};

use super::fused::{RealKernel, run_cpu};
use super::launch_shape::LaunchShape;
use super::real::Real;
use super::switches::Switch;
#[cfg(feature = "cuda")]
use candle_core::CudaStorage;

/// STM B 30.70 → 24.52 ms a step (H200, 2026-11-26).
pub const SCALE: Switch = Switch::on("scale");
inventory::submit! { SCALE }

/// How many partial sums the backward writes for `n` elements (its blocks).
fn partials(n: usize) -> usize {
    launch_shape(true, n).blocks as usize
}

/// `a ⊙ b` broadcast, as `mul` computes it: this op where one operand is a single number and
/// memctl's fused ops run, `broadcast_mul` elsewhere. The operands have the same rank
/// (`kernels::broadcast::align`).
pub fn mul(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    let (x, alpha) = if b.elem_count() == 1 { (a, b) } else { (b, a) };
    if alpha.elem_count() == 1 && alpha.rank() <= x.rank() && super::switches::used_for(x, SCALE) {
        return x.contiguous()?.apply_op2(&alpha.contiguous()?, Scale::Forward);
    }
    a.broadcast_mul(b)
}

/// The two passes: `(x, α) → α x` and, for its backward, `(x, α, g) → [α g | partial sums of g
/// ⊙ x]` (flat, `n + partials(n)` elements).
#[derive(Clone, Copy)]
enum Scale {
    Forward,
    Backward,
}

impl Scale {
    fn kernel(self) -> &'static str {
        match self {
            Scale::Forward => "scale_fwd",
            Scale::Backward => "scale_bwd",
        }
    }
}

/// Checks the operands' layouts: `x` and `g` contiguous of the same size, `α` one element.
fn operands(x: &Layout, alpha: &Layout, g: Option<&Layout>) -> Result<usize> {
    let n = x.shape().elem_count();
    if alpha.shape().elem_count() != 1 {
        bail!("the fused scale takes a single number, got {:?}", alpha.dims());
    }
    if g.is_some_and(|g| g.shape().elem_count() != n || !g.is_contiguous()) || !x.is_contiguous() {
        bail!("the fused scale takes contiguous operands of one size");
    }
    Ok(n)
}

/// The CPU computation of one pass.
struct ScaleKernel(Scale);

impl RealKernel for ScaleKernel {
    fn run<T: Real>(&self, operands: &[&[T]]) -> Vec<T> {
        let (x, alpha) = (operands[0], operands[1][0]);
        match self.0 {
            Scale::Forward => x.iter().map(|&v| alpha * v).collect(),
            Scale::Backward => {
                let g = operands[2];
                let mut out: Vec<T> = g.iter().map(|&v| alpha * v).collect();
                let share = x.len().div_ceil(partials(x.len())).max(1);
                let mut sums: Vec<T> = x.chunks(share).zip(g.chunks(share)).map(|(x, g)| dot(x, g)).collect();
                sums.resize(partials(x.len()), T::zero());
                out.extend(sums);
                out
            }
        }
    }
}

fn dot<T: Real>(x: &[T], g: &[T]) -> T {
    x.iter().zip(g).fold(T::zero(), |s, (&x, &g)| s + x * g)
}

impl CustomOp2 for Scale {
    fn name(&self) -> &'static str {
        self.kernel()
    }

    fn cpu_fwd(&self, s1: &CpuStorage, l1: &Layout, s2: &CpuStorage, l2: &Layout) -> Result<(CpuStorage, Shape)> {
        operands(l1, l2, None)?;
        Ok((run_cpu(&ScaleKernel(Scale::Forward), &[(s1, l1), (s2, l2)], "the fused scale")?, l1.shape().clone()))
    }

    #[cfg(feature = "cuda")]
    fn cuda_fwd(&self, s1: &CudaStorage, l1: &Layout, s2: &CudaStorage, l2: &Layout) -> Result<(CudaStorage, Shape)> {
        let n = operands(l1, l2, None)?;
        let blocks = launch_shape(false, n).blocks as usize;
        let out = cuda::scale("scale_fwd", &[(s1, l1), (s2, l2)], n, n, blocks)?;
        super::fused::record_launch("scale_fwd");
        Ok((out, l1.shape().clone()))
    }

    fn bwd(&self, x: &Tensor, alpha: &Tensor, _y: &Tensor, grad: &Tensor) -> Result<(Option<Tensor>, Option<Tensor>)> {
        if matches!(self, Scale::Backward) {
            bail!("the fused scale's backward has no gradient of its own");
        }
        let n = x.elem_count();
        let all = x.apply_op3_no_bwd(alpha, &grad.contiguous()?, &Scale::Backward)?;
        let dx = all.narrow(0, 0, n)?.reshape(x.shape())?;
        let dalpha = all.narrow(0, n, partials(n))?.sum_all()?.reshape(alpha.shape())?;
        Ok((Some(dx), Some(dalpha)))
    }
}

impl CustomOp3 for Scale {
    fn name(&self) -> &'static str {
        self.kernel()
    }

    fn cpu_fwd(
        &self,
        s1: &CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
        s3: &CpuStorage,
        l3: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        let n = operands(l1, l2, Some(l3))?;
        let out = run_cpu(&ScaleKernel(Scale::Backward), &[(s1, l1), (s2, l2), (s3, l3)], "the fused scale")?;
        Ok((out, Shape::from(n + partials(n))))
    }

    #[cfg(feature = "cuda")]
    fn cuda_fwd(
        &self,
        s1: &CudaStorage,
        l1: &Layout,
        s2: &CudaStorage,
        l2: &Layout,
        s3: &CudaStorage,
        l3: &Layout,
    ) -> Result<(CudaStorage, Shape)> {
        let n = operands(l1, l2, Some(l3))?;
        let blocks = partials(n);
        let out = cuda::scale("scale_bwd", &[(s1, l1), (s2, l2), (s3, l3)], n, n + blocks, blocks)?;
        super::fused::record_launch("scale_bwd");
        Ok((out, Shape::from(n + blocks)))
    }
}

/// Elements per partial sum of the backward's `Σ g ⊙ x` (one CUDA block's share, 8 per
/// thread of its 256). At 8 192 (32 per thread), config B's `α1 · M^r` (2.36 M elements) ran on
/// 288 blocks, too few to keep an H200's memory busy: 27.9 µs, about 1 TB/s (Nsight Compute,
/// 2026-11-26). Now it takes the most blocks, 1 024.
pub const SCALE_PER_PARTIAL: usize = 2048;

/// `scale.cu`: blocks of 256 threads, the forward's grid-stride over at most 65 535 of them, the
/// backward's one partial sum of `Σ g ⊙ x` per block, at least one and at most 1 024.
pub fn launch_shape(backward: bool, n: usize) -> LaunchShape {
    let blocks = if backward { n.div_ceil(SCALE_PER_PARTIAL).clamp(1, 1024) } else { n.div_ceil(256).clamp(1, 65_535) };
    LaunchShape::blocks_of_256(blocks as u32)
}

/// The launch of its CUDA kernels, with the `cuda` feature.
#[cfg(feature = "cuda")]
mod cuda {
    use crate::kernels::cuda_kernels::{SCALE, launch_config, run};
    use crate::kernels::launch_shape::LaunchShape;
    use candle_core::{CudaStorage, Layout, Result};

    /// Runs `kernel` of `scale.cu` on its f32 operands (`n` elements each but the one-element `α`,
    /// contiguous, as laid out) with `blocks` blocks of 256 threads, into a new buffer of `len`
    /// elements (the forward's `n`; the backward's `n + blocks`, one partial sum per block).
    pub(super) fn scale(
        kernel: &str,
        operands: &[(&CudaStorage, &Layout)],
        n: usize,
        len: usize,
        blocks: usize,
    ) -> Result<CudaStorage> {
        let (Ok(count), Ok(grid)) = (i32::try_from(n), u32::try_from(blocks.max(1))) else {
            candle_core::bail!("{kernel}: {n} elements are more than the kernel indexes")
        };
        let config = launch_config(LaunchShape::blocks_of_256(grid));
        // SAFETY: scale.cu's kernels take their operands, the output and n, in this order; the
        // forward's grid-stride loop writes every element below n, and the backward's blocks each
        // write their share of the first n and their own partial sum at n + block (len = n + blocks).
        unsafe { run(&SCALE, kernel, operands, len, config, &[count], &[]) }
    }
}

#[cfg(test)]
mod tests {
    use candle_core::{Device, Var};

    use super::*;
    use crate::kernels::fused::testing::{assert_fused_matches, var};

    #[test]
    fn the_fused_scale_and_its_gradients_equal_candle_ops_and_autograd() -> Result<()> {
        // More elements than one partial sum holds, in a shape of STM's relational memory; the
        // single number on either side.
        for (dims, alpha_dims) in [(&[3usize, 2, 40, 70][..], &[1usize, 1, 1, 1][..]), (&[5][..], &[1][..])] {
            let (x, alpha) =
                (var(dims, 1.0)?, Var::from_tensor(&Tensor::new(&[0.7f64], &Device::Cpu)?.reshape(alpha_dims)?)?);
            for (a, b) in [(x.as_tensor(), alpha.as_tensor()), (alpha.as_tensor(), x.as_tensor())] {
                assert_fused_matches(&[&x, &alpha], &[mul(a, b)?], &[a.broadcast_mul(b)?], 1e-9)?;
            }
        }
        Ok(())
    }

    #[test]
    fn there_is_a_partial_sum_per_share_of_per_partial_elements_at_most_1024() {
        assert_eq!(partials(1), 1);
        assert_eq!(partials(SCALE_PER_PARTIAL), 1);
        assert_eq!(partials(SCALE_PER_PARTIAL + 1), 2);
        assert_eq!(partials(usize::MAX / 2), 1024);
    }
}
