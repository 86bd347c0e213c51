//! `lstmCell`'s element-wise half as two candle ops with their own backward, for the
//! device-generic path (candle's autograd: the GPU, and evaluation on the CPU):
//!
//! - `state`: `(pre, c) → c' = σ(f) ⊙ c + σ(i) ⊙ tanh(g)`;
//! - `out`: `(pre, c') → h' = σ(o) ⊙ tanh(c')`,
//!
//! where `pre` is `[batch, 4·hidden]`, the gates' pre-activations per example as `[i, f, g, o]`.
//! Each is one kernel forward and one backward, where the same cell as candle ops is about a
//! dozen forward and three times as many backward, each gradient starting as zeros. The
//! backward of each writes `[d pre | d c]` (`[batch, 5·hidden]`, the other half's gates zero).
//! The formulas are `kernels::cpu::lstm`'s (the tape's manual backward), written per element.
//!
//! Where they run is their switch's rule (`kernels::cuda::switches`: the CPU always; on CUDA by
//! their standing, `LSTM_CELL`); the CUDA kernels are `src/kernels/cuda/layers/lstm_cell.cu`, a
//! thread per unit.

use candle_core::{Layout, Result, Shape, Tensor, bail};

use crate::kernels::cpu::real::Real;
use crate::kernels::cuda::kernel::{Fused, FusedKernel, Launch, entries};
use crate::kernels::cuda::launch_shape::LaunchShape;
use crate::kernels::cuda::switches::Switch;

/// The LSTM's step 2.97 → 2.06 ms with `layer_norm` (H200, 2026-11-26).
pub const LSTM_CELL: Switch = Switch::on("lstm_cell");
inventory::submit! { LSTM_CELL }

/// Which half of the cell an op computes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Half {
    /// `c'` from `(pre, c)`.
    State,
    /// `h'` from `(pre, c')`.
    Out,
}

/// The four passes: each half forward, `(pre, c or c') → c' or h'`, and backward, `(pre, c or
/// c', g) → [d pre | d c]` (`[batch, 5·hidden]`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lstm {
    Forward(Half),
    Backward(Half),
}

/// `(c', h')` of the cell from its pre-activations `pre` (`[batch, 4·hidden]`) and old cell
/// `c` (`[batch, hidden]`, or `[hidden]` shared by the batch).
pub fn cell(pre: &Tensor, c: &Tensor) -> Result<(Tensor, Tensor)> {
    let (batch, gates) = pre.dims2()?;
    let c = c.broadcast_as((batch, gates / 4))?.contiguous()?;
    let pre = pre.contiguous()?;
    let c_next = pre.apply_op2(&c, Fused(Lstm::Forward(Half::State)))?;
    let h_next = pre.apply_op2(&c_next, Fused(Lstm::Forward(Half::Out)))?;
    Ok((c_next, h_next))
}

/// A cell of `batch` examples of `hidden` units.
#[derive(Clone, Copy, Debug)]
pub struct Units {
    batch: usize,
    hidden: usize,
}

impl FusedKernel for Lstm {
    type Sizes = Units;

    entries! { LSTM_CELL:
        Lstm::Forward(Half::State) => "lstm_state_fwd",
        Lstm::Forward(Half::Out) => "lstm_out_fwd",
        Lstm::Backward(Half::State) => "lstm_state_bwd",
        Lstm::Backward(Half::Out) => "lstm_out_bwd",
    }

    /// `pre` `[batch, 4·hidden]`, then `[batch, hidden]` operands (`c` or `c'`, and the
    /// backward's `g`).
    fn sizes(&self, operands: &[&Layout]) -> Result<(Shape, Units)> {
        let count = match self {
            Lstm::Forward(_) => 2,
            Lstm::Backward(_) => 3,
        };
        let Some((pre, rest)) = operands.split_first().filter(|_| operands.len() == count) else {
            bail!("lstmCell's fused op {} takes {count} operands, got {}", self.entry(), operands.len())
        };
        let mut units = Units { batch: 0, hidden: 0 };
        for other in rest {
            let (&[batch, gates], &[b, hidden]) = (pre.dims(), other.dims()) else {
                bail!(
                    "lstmCell's fused op takes [batch, 4·hidden] and [batch, hidden], got {:?} and {:?}",
                    pre.dims(),
                    other.dims()
                )
            };
            if b != batch || gates != 4 * hidden {
                bail!("lstmCell's fused op: gates {:?} do not fit a cell of {:?}", pre.dims(), other.dims());
            }
            units = Units { batch, hidden };
        }
        let per_unit = match self {
            Lstm::Forward(_) => 1,
            Lstm::Backward(_) => 5,
        };
        Ok((Shape::from((units.batch, per_unit * units.hidden)), units))
    }

    fn cpu<T: Real>(&self, Units { hidden, .. }: Units, operands: &[&[T]]) -> Vec<T> {
        match *self {
            Lstm::Forward(half) => forward_slices(half, operands[0], operands[1], hidden),
            Lstm::Backward(half) => backward_slices(half, operands[0], operands[1], operands[2], hidden),
        }
    }

    /// A thread per `(example, unit)`; `batch` and `hidden` as the kernel's ints.
    fn launch(&self, Units { batch, hidden }: Units) -> Result<Launch> {
        let Ok(threads) = i32::try_from(batch * hidden) else {
            bail!("{}: {batch} × {hidden} elements are more than the kernel indexes", self.entry())
        };
        Launch::with_ints(self.entry(), LaunchShape::per_element(threads.max(1) as u32), &[batch, hidden])
    }

    fn backward(&self, operands: &[&Tensor], _out: &Tensor, grad: &Tensor) -> Result<Vec<Option<Tensor>>> {
        let (Lstm::Forward(half), &[pre, c]) = (*self, operands) else {
            bail!("lstmCell's backward pass has no gradient of its own")
        };
        let hidden = c.dim(1)?;
        let both = Fused(Lstm::Backward(half)).apply_no_bwd(&[pre, c, &grad.contiguous()?])?;
        Ok(vec![Some(both.narrow(1, 0, 4 * hidden)?), Some(both.narrow(1, 4 * hidden, hidden)?)])
    }
}

fn forward_slices<T: Real>(half: Half, pre: &[T], c: &[T], hidden: usize) -> Vec<T> {
    let mut out = Vec::with_capacity(c.len());
    for (k, &c) in c.iter().enumerate() {
        let (p, j) = (&pre[k / hidden * 4 * hidden..][..4 * hidden], k % hidden);
        out.push(match half {
            Half::State => p[hidden + j].sigmoid() * c + p[j].sigmoid() * p[2 * hidden + j].tanh(),
            Half::Out => p[3 * hidden + j].sigmoid() * c.tanh(),
        });
    }
    out
}

fn backward_slices<T: Real>(half: Half, pre: &[T], c: &[T], g: &[T], hidden: usize) -> Vec<T> {
    let (zero, one) = (T::zero(), T::one());
    let mut out = vec![zero; c.len() / hidden * 5 * hidden];
    for (k, (&c, &g)) in c.iter().zip(g).enumerate() {
        let (p, j) = (&pre[k / hidden * 4 * hidden..][..4 * hidden], k % hidden);
        let o = &mut out[k / hidden * 5 * hidden..][..5 * hidden];
        match half {
            Half::State => {
                let (i, f, t) = (p[j].sigmoid(), p[hidden + j].sigmoid(), p[2 * hidden + j].tanh());
                o[j] = g * t * i * (one - i);
                o[hidden + j] = g * c * f * (one - f);
                o[2 * hidden + j] = g * i * (one - t * t);
                o[4 * hidden + j] = g * f;
            }
            Half::Out => {
                let (og, t) = (p[3 * hidden + j].sigmoid(), c.tanh());
                o[3 * hidden + j] = g * t * og * (one - og);
                o[4 * hidden + j] = g * og * (one - t * t);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use candle_core::{D, DType, Device};

    use super::*;
    use crate::kernels::cuda::fused::testing::{assert_fused_matches, var};

    /// The cell as plain candle ops, differentiated by candle's autograd.
    fn reference(pre: &Tensor, c: &Tensor) -> Result<(Tensor, Tensor)> {
        let n = c.dim(1)?;
        let gate = |i: usize| pre.narrow(D::Minus1, i * n, n);
        let sig = |t: Tensor| candle_nn::ops::sigmoid(&t);
        let c_next = sig(gate(1)?)?.mul(c)?.add(&sig(gate(0)?)?.mul(&gate(2)?.tanh()?)?)?;
        let h_next = sig(gate(3)?)?.mul(&c_next.tanh()?)?;
        Ok((c_next, h_next))
    }

    #[test]
    fn the_fused_cell_and_its_gradients_equal_candle_ops_and_autograd() -> Result<()> {
        // A loss that weighs c' and h' differently, so that both backward halves count.
        let (pre, c) = (var(&[3, 8], 1.5)?, var(&[3, 2], 1.0)?);
        let ((cf, hf), (cp, hp)) = (cell(&pre, &c)?, reference(&pre, &c)?);
        assert_fused_matches(&[&pre, &c], &[cf, hf], &[cp, hp], 1e-12)
    }

    #[test]
    fn a_cell_shared_by_the_batch_broadcasts_and_a_misfit_is_an_error() -> Result<()> {
        let dev = Device::Cpu;
        let pre = Tensor::randn(0f32, 1.0, (2, 12), &dev)?;
        let c = Tensor::randn(0f32, 1.0, 3, &dev)?;
        let (shared, _) = cell(&pre, &c)?;
        let (each, _) = cell(&pre, &c.unsqueeze(0)?.repeat((2, 1))?)?;
        assert_eq!(shared.to_vec2::<f32>()?, each.to_vec2::<f32>()?);
        assert!(cell(&pre, &Tensor::zeros((2, 4), DType::F32, &dev)?).is_err());
        Ok(())
    }
}
