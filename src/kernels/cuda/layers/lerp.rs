//! A gated write `a + w (b − a)` (PKM's `R + w * (Rn - R)`, written only on write steps) as one
//! candle op with its own backward, for the device-generic path (candle's autograd: the GPU).
//!
//! As the spec's three primitives it is a subtraction, a broadcast product and an addition
//! forward, and backward a product and a subtraction's accumulation beside the addition's, on a
//! GPU some six kernels with their allocations for each of PKM's two gated states at every
//! time step. Here it is one kernel each way (`src/kernels/cuda/layers/lerp.cu`); the weights' own
//! gradient, where they need one (PKM's come from the input and need none), is candle's ops.
//! `compile::lerp` finds the pattern in a model's graph; where it runs is its switch's rule
//! (`kernels::cuda::switches`) ([`LERP`](LERP)).

use candle_core::{Layout, Result, Shape, Tensor, bail};

use crate::kernels::cpu::real::Real;
use crate::kernels::cuda::kernel::{Fused, FusedKernel, Launch, entries, two_passes};
use crate::kernels::cuda::launch_shape::LaunchShape;
use crate::kernels::cuda::switches::Switch;

/// PKM (k = 4) 2.12 → 1.97 ms a step, 1.45 with `kanerva_address` (H200, 2026-11-30).
pub const LERP: Switch = Switch::on("lerp");
inventory::submit! { LERP }

/// How errors name the op.
const WHAT: &str = "the fused gated write";

/// Whether the fused op takes these operands: `a` and `b` of one shape and type, and `w` one
/// number, or one per example (`a`'s first axis). Otherwise the spec's primitives run.
pub fn fits(a: &Tensor, b: &Tensor, w: &Tensor) -> bool {
    let examples = a.dims().first().copied().unwrap_or(1);
    a.dims() == b.dims()
        && a.dtype() == b.dtype()
        && a.dtype() == w.dtype()
        && a.device().same_device(b.device())
        && a.device().same_device(w.device())
        && (w.elem_count() == 1 || (w.elem_count() == examples && w.dims().first() == Some(&examples)))
        && a.elem_count() > 0
        // The CUDA kernels index the elements in 32 bits.
        && (a.device().is_cpu() || i32::try_from(2 * a.elem_count()).is_ok())
}

/// `a + w (b − a)` for operands that [`fits`] takes, the result shaped as `a`.
pub fn lerp(a: &Tensor, b: &Tensor, w: &Tensor) -> Result<Tensor> {
    if !fits(a, b, w) {
        bail!("{WHAT} takes a, b of one shape and w one number or one per example, got {a:?}, {b:?}, {w:?}");
    }
    Fused(Lerp::Forward).apply(&[a, b, w])
}

two_passes! {
    /// The two passes: `(a, b, w) → a + w (b − a)` and, for its backward, `(w, g) → [d a | d b]`
    /// (flat).
    pub enum Lerp
}

/// `n` elements, `per` of them to a weight.
#[derive(Clone, Copy, Debug)]
pub struct Elements {
    n: usize,
    per: usize,
}

impl FusedKernel for Lerp {
    type Sizes = Elements;

    entries! { LERP: Lerp::Forward => "lerp_fwd", Lerp::Backward => "lerp_bwd" }

    /// Forward: `a`, `b` and `w` (one weight, or one per run of `per` elements); backward: `w`
    /// and the output's gradient.
    fn sizes(&self, operands: &[&Layout]) -> Result<(Shape, Elements)> {
        let (values, w) = match (self, operands) {
            (Lerp::Forward, &[a, b, w]) if a.dims() == b.dims() => (a, w),
            (Lerp::Backward, &[w, g]) => (g, w),
            _ => bail!(
                "{WHAT}: operands {:?} for {}",
                operands.iter().map(|l| l.dims()).collect::<Vec<_>>(),
                self.entry()
            ),
        };
        let (n, weights) = (values.shape().elem_count(), w.shape().elem_count().max(1));
        if n % weights != 0 {
            bail!("{WHAT}: {weights} weights for {n} elements");
        }
        let shape = match self {
            Lerp::Forward => values.shape().clone(),
            Lerp::Backward => Shape::from(2 * n),
        };
        Ok((shape, Elements { n, per: n / weights }))
    }

    fn cpu<T: Real>(&self, Elements { per, .. }: Elements, o: &[&[T]]) -> Vec<T> {
        let per = per.max(1);
        if let Lerp::Forward = self {
            let (a, b, w) = (o[0], o[1], o[2]);
            return a.iter().zip(b).enumerate().map(|(i, (&x, &y))| x + w[i / per] * (y - x)).collect();
        }
        let (w, g) = (o[0], o[1]);
        let wg: Vec<T> = g.iter().enumerate().map(|(i, &gi)| w[i / per] * gi).collect();
        let mut out: Vec<T> = g.iter().zip(&wg).map(|(&gi, &x)| gi - x).collect();
        out.extend(wg);
        out
    }

    /// A thread per element both ways; `n` and `per` as the kernel's ints.
    fn launch(&self, Elements { n, per }: Elements) -> Result<Launch> {
        let Ok(count) = u32::try_from(n) else { bail!("{}: {n} elements", self.entry()) };
        Launch::with_ints(self.entry(), LaunchShape::per_element(count.max(1)), &[n, per.max(1)])
    }

    fn backward(&self, operands: &[&Tensor], _out: &Tensor, grad: &Tensor) -> Result<Vec<Option<Tensor>>> {
        let (Lerp::Forward, &[a, b, w]) = (self, operands) else {
            bail!("{WHAT}'s backward has no gradient of its own")
        };
        let n = a.elem_count();
        let both = w.apply_op2_no_bwd(&grad.contiguous()?, &Fused(Lerp::Backward))?;
        let (ga, gb) = (both.narrow(0, 0, n)?.reshape(a.shape())?, both.narrow(0, n, n)?.reshape(b.shape())?);
        // d w = Σ g ⊙ (b − a) over each weight's elements, only where w needs it.
        let gw = if w.track_op() {
            let each = ((b - a)? * grad)?.reshape((w.elem_count(), n / w.elem_count()))?.sum(1)?;
            Some(each.reshape(w.shape())?)
        } else {
            None
        };
        Ok(vec![Some(ga), Some(gb), gw])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::cuda::fused::testing::{assert_fused_matches, var};

    /// The spec's `a + w * (b - a)` in candle's ops, `w` broadcast over each example.
    fn with_candle_ops(a: &Tensor, b: &Tensor, w: &Tensor) -> Result<Tensor> {
        let w = w.reshape(if w.elem_count() == 1 { vec![1; a.rank()] } else { aligned(w, a) })?;
        a.broadcast_add(&w.broadcast_mul(&(b - a)?)?)
    }

    /// `w`'s per-example shape padded with axes of one to `a`'s rank.
    fn aligned(w: &Tensor, a: &Tensor) -> Vec<usize> {
        let mut dims = vec![w.elem_count()];
        dims.resize(a.rank(), 1);
        dims
    }

    #[test]
    fn the_fused_gated_write_and_its_gradients_equal_candle_ops_and_autograd() -> Result<()> {
        // PKM's shapes in small: a batch of 3 memories of 2 × 4 × 5, a weight per example.
        let (a, b, w) = (var(&[3, 2, 4, 5], 1.0)?, var(&[3, 2, 4, 5], 1.0)?, var(&[3, 1], 1.0)?);
        assert_fused_matches(&[&a, &b, &w], &[lerp(&a, &b, &w)?], &[with_candle_ops(&a, &b, &w)?], 1e-12)?;
        // One weight for the whole batch.
        let one = var(&[], 1.0)?;
        assert_fused_matches(&[&a, &b, &one], &[lerp(&a, &b, &one)?], &[with_candle_ops(&a, &b, &one)?], 1e-12)
    }

    #[test]
    fn a_weight_of_zero_keeps_a_and_of_one_takes_b() -> Result<()> {
        let (a, b) = (var(&[2, 3], 1.0)?, var(&[2, 3], 2.0)?);
        let w = Tensor::new(&[[0.0f64], [1.0]], &candle_core::Device::Cpu)?;
        let out = lerp(&a, &b, &w)?;
        assert_eq!(out.get(0)?.to_vec1::<f64>()?, a.get(0)?.to_vec1::<f64>()?);
        // a + 1 · (b − a) rounds to b within an ulp or so.
        let off = (out.get(1)? - b.get(1)?)?.abs()?.max_all()?.to_scalar::<f64>()?;
        assert!(off < 1e-12, "{off}");
        Ok(())
    }

    #[test]
    fn operands_it_does_not_take_are_refused() -> Result<()> {
        let t = |dims: &[usize]| var(dims, 1.0).map(|v| v.as_tensor().clone());
        let a = t(&[3, 4])?;
        assert!(!fits(&a, &t(&[3, 5])?, &t(&[3, 1])?), "b of another shape");
        assert!(!fits(&a, &t(&[3, 4])?, &t(&[3, 4])?), "a weight per element");
        assert!(!fits(&a, &t(&[3, 4])?, &t(&[1, 3])?), "weights along another axis");
        assert!(fits(&a, &t(&[3, 4])?, &t(&[3, 1])?) && fits(&a, &t(&[3, 4])?, &t(&[])?));
        assert!(lerp(&a, &t(&[3, 5])?, &t(&[3, 1])?).is_err());
        Ok(())
    }
}
