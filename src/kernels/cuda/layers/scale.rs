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
//! Where it runs is its switch's rule (`kernels::cuda::switches`: the CPU always; on CUDA by its
//! standing, `SCALE`); the CUDA kernels are `src/kernels/cuda/layers/scale.cu`.

use candle_core::{Layout, Result, Shape, Tensor, bail};

use crate::kernels::cpu::real::Real;
use crate::kernels::cuda::kernel::{Fused, FusedKernel, Launch, entries, two_passes};
use crate::kernels::cuda::launch_shape::LaunchShape;
use crate::kernels::cuda::switches::Switch;

/// STM B 30.70 → 24.52 ms a step (H200, 2026-11-26).
pub const SCALE: Switch = Switch::on("scale");
inventory::submit! { SCALE }

/// How many partial sums the backward writes for `n` elements (its blocks).
fn partials(n: usize) -> usize {
    launch_shape(true, n).blocks as usize
}

/// `a ⊙ b` broadcast, as `mul` computes it: this op where one operand is a single number and
/// memctl's fused ops run, `scale_rows` where it is one number per row, `broadcast_mul`
/// elsewhere. The operands have the same rank
/// (`kernels::cpu::broadcast::align`).
pub fn mul(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    let (x, alpha) = if b.elem_count() == 1 { (a, b) } else { (b, a) };
    if alpha.elem_count() == 1 && alpha.rank() <= x.rank() && crate::kernels::cuda::switches::used_for(x, SCALE) {
        return Fused(Scale::Forward).apply(&[x, alpha]);
    }
    if let Some(scaled) = super::scale_rows::per_row(a, b).or_else(|| super::scale_rows::per_row(b, a)) {
        return scaled;
    }
    a.broadcast_mul(b)
}

two_passes! {
    /// The two passes: `(x, α) → α x` and, for its backward, `(x, α, g) → [α g | partial sums of g
    /// ⊙ x]` (flat, `n + partials(n)` elements).
    pub enum Scale
}

impl FusedKernel for Scale {
    /// The elements of `x`.
    type Sizes = usize;

    entries! { SCALE: Scale::Forward => "scale_fwd", Scale::Backward => "scale_bwd" }

    /// `x` and `α` (one element), and backward `g` of `x`'s size.
    fn sizes(&self, operands: &[&Layout]) -> Result<(Shape, usize)> {
        let (x, alpha, g) = match (self, operands) {
            (Scale::Forward, &[x, alpha]) => (x, alpha, None),
            (Scale::Backward, &[x, alpha, g]) => (x, alpha, Some(g)),
            _ => bail!("the fused scale: {} operands for {}", operands.len(), self.entry()),
        };
        let n = x.shape().elem_count();
        if alpha.shape().elem_count() != 1 {
            bail!("the fused scale takes a single number, got {:?}", alpha.dims());
        }
        if g.is_some_and(|g| g.shape().elem_count() != n) {
            bail!("the fused scale takes operands of one size");
        }
        let shape = match self {
            Scale::Forward => x.shape().clone(),
            Scale::Backward => Shape::from(n + partials(n)),
        };
        Ok((shape, n))
    }

    fn cpu<T: Real>(&self, n: usize, operands: &[&[T]]) -> Vec<T> {
        let (x, alpha) = (operands[0], operands[1][0]);
        match self {
            Scale::Forward => x.iter().map(|&v| alpha * v).collect(),
            Scale::Backward => {
                let g = operands[2];
                let mut out: Vec<T> = g.iter().map(|&v| alpha * v).collect();
                let share = n.div_ceil(partials(n)).max(1);
                let mut sums: Vec<T> = x.chunks(share).zip(g.chunks(share)).map(|(x, g)| dot(x, g)).collect();
                sums.resize(partials(n), T::zero());
                out.extend(sums);
                out
            }
        }
    }

    /// Blocks of 256 threads ([`launch_shape`]); `n` as the kernel's int.
    fn launch(&self, n: usize) -> Result<Launch> {
        Launch::with_ints(self.entry(), launch_shape(matches!(self, Scale::Backward), n), &[n])
    }

    fn backward(&self, operands: &[&Tensor], _y: &Tensor, grad: &Tensor) -> Result<Vec<Option<Tensor>>> {
        let (Scale::Forward, &[x, alpha]) = (self, operands) else {
            bail!("the fused scale's backward has no gradient of its own")
        };
        let n = x.elem_count();
        let all = x.apply_op3_no_bwd(alpha, &grad.contiguous()?, &Fused(Scale::Backward))?;
        let dx = all.narrow(0, 0, n)?.reshape(x.shape())?;
        let dalpha = all.narrow(0, n, partials(n))?.sum_all()?.reshape(alpha.shape())?;
        Ok(vec![Some(dx), Some(dalpha)])
    }
}

fn dot<T: Real>(x: &[T], g: &[T]) -> T {
    x.iter().zip(g).fold(T::zero(), |s, (&x, &g)| s + x * g)
}

/// Elements per partial sum of the backward's `Σ g ⊙ x` (one CUDA block's share, 8 per
/// thread of its 256). At 8 192 (32 per thread), config B's `α1 · M^r` (2.36 M elements) ran on
/// 288 blocks, too few to keep an H200's memory busy: 27.9 µs, about 1 TB/s (Nsight Compute,
/// 2026-11-26). Now it takes the most blocks, 1 024.
pub const SCALE_PER_PARTIAL: usize = 2048;

/// `scale.cu`: blocks of 256 threads, the forward's grid-stride over at most 65 535 of them, the
/// backward's one partial sum of `Σ g ⊙ x` per block, at least one and at most 1 024.
fn launch_shape(backward: bool, n: usize) -> LaunchShape {
    let blocks = if backward { n.div_ceil(SCALE_PER_PARTIAL).clamp(1, 1024) } else { n.div_ceil(256).clamp(1, 65_535) };
    LaunchShape::blocks_of_256(blocks as u32)
}

#[cfg(test)]
mod tests {
    use candle_core::{Device, Var};

    use super::*;
    use crate::kernels::cuda::fused::testing::{assert_fused_matches, var};

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
