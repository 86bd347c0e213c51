//! Each run of a tensor's elements times a number of its own, as one candle op with its own
//! backward: a pack's learned scalars (STM's α1–α3, one per trial, spread over the trial's rows)
//! times a memory of `[P·B, …]`, or a gate per example times the example.
//!
//! As candle ops, `x.broadcast_mul(α)` with `α: [R, 1, …]` reads `α` through a broadcast view,
//! and its backward is two more broadcast products over `x`'s size and a sum into `α`: for a
//! pack of 16 STM A trials, `α1 · M^r` is 2 M elements each. Here the forward is one kernel and
//! the backward one kernel that writes `d x = α g` and a few partial sums of `g ⊙ x` per run,
//! which candle sums per run where there is more than one.
//!
//! Where it runs is its switch's rule (`kernels::cuda::switches`: the CPU always; on CUDA by its
//! standing, [`SCALE_ROWS`]); the CUDA kernels are `scale_rows_fwd` and `scale_rows_bwd` in
//! `src/kernels/cuda/layers/scale.cu`.

use candle_core::{Layout, Result, Shape, Tensor, bail};

use crate::kernels::cpu::real::Real;
use crate::kernels::cpu::reduce::dot;
use crate::kernels::cuda::kernel::{Fused, FusedKernel, Launch, two_passes};
use crate::kernels::cuda::launch_shape::LaunchShape;
use crate::kernels::cuda::switches::Switch;

/// Off until a GPU measures a pack's step with and without it.
pub const SCALE_ROWS: Switch = Switch::awaits_gpu(
    "scale_rows",
    "16 packed STM A trials' step with and without it (`bench specs/bench/stm.mem stm_a --device cuda --pack 16`)",
);
inventory::submit! { SCALE_ROWS }

/// Elements per partial sum of the backward's `Σ g ⊙ x` (one CUDA block's share, 8 per thread
/// of its 256), as `scale`'s.
const PER_PARTIAL: usize = 2048;

/// `α ⊙ x` where `α` holds one number per row of `x` (`[R, 1, …]` against `[R, …]`, same rank)
/// and this op runs, else `None`.
pub fn per_row(x: &Tensor, alpha: &Tensor) -> Option<Result<Tensor>> {
    let rows = *x.dims().first()?;
    let one_per_row = alpha.rank() == x.rank()
        && alpha.dims().first() == Some(&rows)
        && alpha.dims()[1..].iter().all(|&d| d == 1)
        && rows > 1
        && x.elem_count() > rows;
    let runs = Runs { n: x.elem_count(), per: x.elem_count() / rows.max(1) };
    let fits = i32::try_from(runs.n).is_ok() && u32::try_from(runs.runs() * runs.parts()).is_ok();
    (one_per_row && fits && crate::kernels::cuda::switches::used_for(x, SCALE_ROWS))
        .then(|| Fused(ScaleRows::Forward).apply(&[x, alpha]))
}

two_passes! {
    /// The two passes: `(x, α) → α x` and, for its backward, `(x, α, g) → [α g | partial sums of g
    /// ⊙ x, `parts` per run]` (flat).
    pub enum ScaleRows
}

/// `n` elements in runs of `per`, each with its number.
#[derive(Clone, Copy, Debug)]
pub struct Runs {
    n: usize,
    per: usize,
}

impl Runs {
    fn runs(self) -> usize {
        self.n.checked_div(self.per).unwrap_or(0)
    }

    /// The backward's partial sums per run (its blocks per run): at most 1 024.
    fn parts(self) -> usize {
        self.per.div_ceil(PER_PARTIAL).clamp(1, 1024)
    }
}

impl FusedKernel for ScaleRows {
    type Sizes = Runs;

    // Beside `scale`'s kernels, whose block sum they share.
    crate::kernels::cuda::kernel::entries! {
        SCALE: ScaleRows::Forward => "scale_rows_fwd", ScaleRows::Backward => "scale_rows_bwd"
    }

    /// `x` and `α` (one number per run: its count divides `x`'s), and backward `g` of `x`'s size.
    fn sizes(&self, operands: &[&Layout]) -> Result<(Shape, Runs)> {
        let (x, alpha, g) = match (self, operands) {
            (ScaleRows::Forward, &[x, alpha]) => (x, alpha, None),
            (ScaleRows::Backward, &[x, alpha, g]) => (x, alpha, Some(g)),
            _ => bail!("the fused scale by rows: {} operands for {}", operands.len(), self.entry()),
        };
        let (n, runs) = (x.shape().elem_count(), alpha.shape().elem_count());
        if runs == 0 || n % runs != 0 {
            bail!("the fused scale by rows: {:?} numbers for {:?}", alpha.dims(), x.dims());
        }
        if g.is_some_and(|g| g.shape().elem_count() != n) {
            bail!("the fused scale by rows takes a gradient of the input's size");
        }
        let sizes = Runs { n, per: n / runs };
        let shape = match self {
            ScaleRows::Forward => x.shape().clone(),
            ScaleRows::Backward => Shape::from(n + runs * sizes.parts()),
        };
        Ok((shape, sizes))
    }

    fn cpu<T: Real>(&self, sizes: Runs, operands: &[&[T]]) -> Vec<T> {
        let (x, alpha, per) = (operands[0], operands[1], sizes.per.max(1));
        let scaled = |v: &[T]| v.chunks(per).zip(alpha).flat_map(|(v, &a)| v.iter().map(move |&v| a * v)).collect();
        match self {
            ScaleRows::Forward => scaled(x),
            ScaleRows::Backward => {
                let g = operands[2];
                let mut out: Vec<T> = scaled(g);
                let share = per.div_ceil(sizes.parts());
                for (x, g) in x.chunks(per).zip(g.chunks(per)) {
                    let mut sums: Vec<T> = x.chunks(share).zip(g.chunks(share)).map(|(x, g)| dot(x, g)).collect();
                    sums.resize(sizes.parts(), T::zero());
                    out.extend(sums);
                }
                out
            }
        }
    }

    /// Blocks of 256 threads: forward grid-stride over at most 65 535, backward `parts` per
    /// run; `n`, `per` (and `parts`) as the kernel's ints.
    fn launch(&self, sizes: Runs) -> Result<Launch> {
        let Runs { n, per } = sizes;
        let (blocks, ints) = match self {
            ScaleRows::Forward => (n.div_ceil(256).clamp(1, 65_535), vec![n, per.max(1)]),
            ScaleRows::Backward => (sizes.runs() * sizes.parts(), vec![n, per.max(1), sizes.parts()]),
        };
        let Ok(blocks) = u32::try_from(blocks.max(1)) else { bail!("{}: {blocks} blocks", self.entry()) };
        Launch::with_ints(self.entry(), LaunchShape::blocks_of_256(blocks), &ints)
    }

    fn backward(&self, operands: &[&Tensor], _y: &Tensor, grad: &Tensor) -> Result<Vec<Option<Tensor>>> {
        let (ScaleRows::Forward, &[x, alpha]) = (self, operands) else {
            bail!("the fused scale by rows' backward has no gradient of its own")
        };
        let sizes = Runs { n: x.elem_count(), per: x.elem_count() / alpha.elem_count().max(1) };
        let (n, runs, parts) = (sizes.n, sizes.runs(), sizes.parts());
        let all = x.apply_op3_no_bwd(alpha, &grad.contiguous()?, &Fused(ScaleRows::Backward))?;
        let dx = all.narrow(0, 0, n)?.reshape(x.shape())?;
        let partials = all.narrow(0, n, runs * parts)?;
        let dalpha = match parts {
            1 => partials,
            _ => partials.reshape((runs, parts))?.sum(1)?,
        };
        Ok(vec![Some(dx), Some(dalpha.reshape(alpha.shape())?)])
    }
}

#[cfg(test)]
mod tests {
    use candle_core::{DType, Device};

    use super::*;
    use crate::kernels::cuda::fused::testing::{assert_fused_matches, var};

    #[test]
    fn a_number_per_row_and_its_gradients_equal_candle_ops_and_autograd() -> Result<()> {
        // Rows of more elements than one partial sum holds (several per row), and of a few.
        for (dims, alpha_dims) in [(&[3usize, 2, 40, 70][..], &[3usize, 1, 1, 1][..]), (&[5, 3][..], &[5, 1][..])] {
            let (x, alpha) = (var(dims, 1.0)?, var(alpha_dims, 1.0)?);
            let fused = per_row(&x, &alpha).expect("one number per row")?;
            assert_fused_matches(&[&x, &alpha], &[fused], &[x.broadcast_mul(&alpha)?], 1e-9)?;
        }
        Ok(())
    }

    #[test]
    fn only_one_number_per_row_takes_the_fused_op() -> Result<()> {
        let dev = Device::Cpu;
        let x = Tensor::zeros((4, 3), DType::F32, &dev)?;
        for other in [&[4usize, 3][..], &[1, 3], &[1, 1], &[2, 1], &[4]] {
            let alpha = Tensor::zeros(other, DType::F32, &dev)?;
            assert!(per_row(&x, &alpha).is_none(), "{other:?}");
        }
        assert!(per_row(&x, &Tensor::zeros((4, 1), DType::F32, &dev)?).is_some());
        Ok(())
    }

    #[test]
    fn a_run_has_a_partial_sum_per_share_of_per_partial_elements_at_most_1024() {
        let parts = |per| Runs { n: 3 * per, per }.parts();
        assert_eq!(parts(1), 1);
        assert_eq!(parts(PER_PARTIAL), 1);
        assert_eq!(parts(PER_PARTIAL + 1), 2);
        assert_eq!(parts(usize::MAX / 4), 1024);
    }
}
