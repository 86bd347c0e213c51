//! `gruCell`'s element-wise half as one candle op with its own backward, for the
//! device-generic path (candle's autograd: the GPU, and evaluation on the CPU):
//! `(gi, gh, h) → h' = n + z ⊙ (h − n)`, with `r = σ(gi_r + gh_r)`, `z = σ(gi_z + gh_z)`,
//! `n = tanh(gi_n + r ⊙ gh_n)`; `gi = W_ih x + b_ih` and `gh = W_hh h + b_hh` are
//! `[batch, 3·hidden]` (PyTorch's `nn.GRUCell`, gates `[r, z, n]`).
//!
//! As candle ops that is ten kernels forward and some twenty-five backward at every time step
//! (NAM-TM's controller); here it is one kernel each way (`src/kernels/cuda/layers/gru_cell.cu`, a
//! thread per unit). The backward writes `[d gi | d gh | d h]`, flat, each part contiguous.
//! The arithmetic is `kernels::cpu::gru`'s (the tape's manual backward, which the CPU side of this
//! op calls): one formulation. Where it runs is its switch's rule (`kernels::cuda::switches`)
//! ([`GRU_CELL`](GRU_CELL)).

use candle_core::{Layout, Result, Shape, Tensor, bail};

use crate::kernels::cpu::gru::{gru_backward, gru_forward};
use crate::kernels::cpu::real::Real;
use crate::kernels::cuda::kernel::{Fused, FusedKernel, Launch, entries, two_passes};
use crate::kernels::cuda::launch_shape::LaunchShape;
use crate::kernels::cuda::switches::Switch;

/// NAM-TM 30.24 → 28.00 ms a step (H100, 2026-11-26).
pub const GRU_CELL: Switch = Switch::on("gru_cell");
inventory::submit! { GRU_CELL }

/// `h'` of the cell from the input half `gi`, the recurrent half `gh` (`[batch, 3·hidden]`
/// each) and the state `h` (`[batch, hidden]`); any of them may be shared by the batch (a
/// leading axis of 1, or `[hidden]` for the state), as candle's ops broadcast them.
pub fn gru_cell(gi: &Tensor, gh: &Tensor, h: &Tensor) -> Result<Tensor> {
    let (gates, hidden) = (gi.dim(candle_core::D::Minus1)?, h.dim(candle_core::D::Minus1)?);
    if gh.dim(candle_core::D::Minus1)? != gates || gates != 3 * hidden {
        bail!("gruCell's fused op: halves {:?} and {:?} do not fit a state {:?}", gi.dims(), gh.dims(), h.dims());
    }
    let batch = [gi, gh, h]
        .iter()
        .map(|t| if t.rank() == 2 { t.dim(0) } else { Ok(1) })
        .try_fold(1, |b, n| n.map(|n| b.max(n)))?;
    let each = |t: &Tensor, width: usize| t.broadcast_as((batch, width))?.contiguous();
    each(gi, gates)?.apply_op3(&each(gh, gates)?, &each(h, hidden)?, Fused(Gru::Forward))
}

two_passes! {
    /// The two passes: `(gi, gh, h) → h'` and, for its backward, `(gi, gh, h, g) → [d gi | d gh |
    /// d h]` (flat).
    pub enum Gru
}

/// A cell of `batch` examples of `hidden` units.
#[derive(Clone, Copy, Debug)]
pub struct Units {
    batch: usize,
    hidden: usize,
}

impl FusedKernel for Gru {
    type Sizes = Units;

    entries! { GRU_CELL: Gru::Forward => "gru_cell_fwd", Gru::Backward => "gru_cell_bwd" }

    /// `gi`, `gh` `[batch, 3·hidden]`, `h` `[batch, hidden]`, and for the backward `g` shaped
    /// as `h`.
    fn sizes(&self, operands: &[&Layout]) -> Result<(Shape, Units)> {
        let (gi, gh, h, g) = match (self, operands) {
            (Gru::Forward, &[gi, gh, h]) => (gi, gh, h, None),
            (Gru::Backward, &[gi, gh, h, g]) => (gi, gh, h, Some(g)),
            _ => bail!("gruCell's fused op {} takes other operands, not {}", self.entry(), operands.len()),
        };
        let (&[batch, gates], &[b, hidden]) = (gi.dims(), h.dims()) else {
            bail!(
                "gruCell's fused op takes [batch, 3·hidden] halves and a [batch, hidden] state, got {:?} and {:?}",
                gi.dims(),
                h.dims()
            )
        };
        if b != batch || gates != 3 * hidden || gh.dims() != gi.dims() {
            bail!("gruCell's fused op: halves {:?} and {:?} do not fit a state {:?}", gi.dims(), gh.dims(), h.dims());
        }
        if let Some(g) = g.filter(|g| g.dims() != h.dims()) {
            bail!("gruCell's fused op: a gradient {:?} for an output {:?}", g.dims(), h.dims());
        }
        let shape = match self {
            Gru::Forward => h.shape().clone(),
            Gru::Backward => Shape::from(7 * batch * hidden),
        };
        Ok((shape, Units { batch, hidden }))
    }

    /// Forward: `(gi, gh, h)`; backward: `(gi, gh, h, g)`.
    fn cpu<T: Real>(&self, Units { hidden: hd, .. }: Units, o: &[&[T]]) -> Vec<T> {
        let (gi, gh, h) = (o[0], o[1], o[2]);
        if hd == 0 {
            return Vec::new();
        }
        let mut saved = vec![T::zero(); h.len() / hd.max(1) * 4 * hd];
        let mut h_next = vec![T::zero(); h.len()];
        gru_forward(gi, gh, h, hd, &mut saved, &mut h_next);
        if *self == Gru::Forward {
            return h_next;
        }
        let mut out = vec![T::zero(); 2 * gi.len() + h.len()];
        let (g_gi, rest) = out.split_at_mut(gi.len());
        let (g_gh, g_h) = rest.split_at_mut(gi.len());
        gru_backward(&saved, h, o[3], hd, g_gi, g_gh, g_h);
        out
    }

    /// A thread per `(example, unit)`; `batch` and `hidden` as the kernel's ints.
    fn launch(&self, Units { batch, hidden }: Units) -> Result<Launch> {
        let Ok(threads) = u32::try_from(batch * hidden) else {
            bail!("{}: {batch} × {hidden} units are more than the kernel indexes", self.entry())
        };
        Launch::with_ints(self.entry(), LaunchShape::per_element(threads.max(1)), &[batch, hidden])
    }

    fn backward(&self, operands: &[&Tensor], _out: &Tensor, grad: &Tensor) -> Result<Vec<Option<Tensor>>> {
        let (Gru::Forward, &[gi, gh, h]) = (self, operands) else {
            bail!("gruCell's backward pass has no gradient of its own")
        };
        let all = Fused(Gru::Backward).apply_no_bwd(&[gi, gh, h, &grad.contiguous()?])?;
        let (n, m) = (gi.elem_count(), h.elem_count());
        let g_gi = all.narrow(0, 0, n)?.reshape(gi.shape())?;
        let g_gh = all.narrow(0, n, n)?.reshape(gh.shape())?;
        let g_h = all.narrow(0, 2 * n, m)?.reshape(h.shape())?;
        Ok(vec![Some(g_gi), Some(g_gh), Some(g_h)])
    }
}

#[cfg(test)]
mod tests {
    use candle_core::{D, DType, Device};

    use super::*;
    use crate::kernels::cuda::fused::testing::{assert_fused_matches, var};

    /// The cell as plain candle ops (`gruCell`'s forward without the fused op), differentiated
    /// by candle's autograd.
    fn reference(gi: &Tensor, gh: &Tensor, h: &Tensor) -> Result<Tensor> {
        let n = h.dim(D::Minus1)?;
        let part = |g: &Tensor, i: usize| g.narrow(D::Minus1, i * n, n);
        let sig = candle_nn::ops::sigmoid;
        let r = sig(&part(gi, 0)?.add(&part(gh, 0)?)?)?;
        let z = sig(&part(gi, 1)?.add(&part(gh, 1)?)?)?;
        let cand = part(gi, 2)?.add(&r.mul(&part(gh, 2)?)?)?.tanh()?;
        cand.add(&z.mul(&h.sub(&cand)?)?)
    }

    #[test]
    fn the_fused_cell_and_its_gradients_equal_candle_ops_and_autograd() -> Result<()> {
        let (gi, gh, h) = (var(&[3, 12], 1.5)?, var(&[3, 12], 1.5)?, var(&[3, 4], 1.0)?);
        assert_fused_matches(&[&gi, &gh, &h], &[gru_cell(&gi, &gh, &h)?], &[reference(&gi, &gh, &h)?], 1e-12)
    }

    #[test]
    fn a_state_shared_by_the_batch_broadcasts_and_a_misfit_is_an_error() -> Result<()> {
        let dev = Device::Cpu;
        let (gi, gh) = (Tensor::randn(0f32, 1.0, (2, 9), &dev)?, Tensor::randn(0f32, 1.0, (2, 9), &dev)?);
        let h = Tensor::randn(0f32, 1.0, 3, &dev)?;
        let shared = gru_cell(&gi, &gh, &h)?;
        let each = gru_cell(&gi, &gh, &h.unsqueeze(0)?.repeat((2, 1))?)?;
        assert_eq!(shared.to_vec2::<f32>()?, each.to_vec2::<f32>()?);
        assert!(gru_cell(&gi, &gh, &Tensor::zeros((2, 4), DType::F32, &dev)?).is_err());
        // An input half shared by the batch (one input for all) broadcasts too.
        let x_shared = gru_cell(&gi.narrow(0, 0, 1)?, &gh, &h)?;
        let x_each = gru_cell(&gi.narrow(0, 0, 1)?.repeat((2, 1))?, &gh, &h)?;
        assert_eq!(x_shared.to_vec2::<f32>()?, x_each.to_vec2::<f32>()?);
        assert!(gru_cell(&gi, &gh.narrow(1, 0, 6)?, &h).is_err_and(|e| e.to_string().contains("do not fit")));
        Ok(())
    }
}
