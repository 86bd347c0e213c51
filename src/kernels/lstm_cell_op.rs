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
//! The formulas are `kernels::lstm`'s (the tape's manual backward), written per element.
//!
//! Where they run is their switch's rule (`kernels::switches`: the CPU always; on CUDA by their standing, `LSTM_CELL`);
//! the CUDA kernels are `src/kernels/cuda/lstm_cell.cu`, launched by this module's `cuda`.

use candle_core::{CpuStorage, CustomOp2, CustomOp3, Layout, Result, Shape, Tensor, bail};

use super::fused::{RealKernel, run_cpu};
use super::real::Real;
use super::switches::Switch;
#[cfg(feature = "cuda")]
use candle_core::CudaStorage;

/// The LSTM's step 2.97 → 2.06 ms with `layer_norm` (H200, 2026-11-26).
pub const LSTM_CELL: Switch = Switch::on("lstm_cell");
inventory::submit! { LSTM_CELL }

/// Which half of the cell an op computes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Half {
    /// `c'` from `(pre, c)`.
    State,
    /// `h'` from `(pre, c')`.
    Out,
}

impl Half {
    fn kernel(self, backward: bool) -> &'static str {
        match (self, backward) {
            (Half::State, false) => "lstm_state_fwd",
            (Half::Out, false) => "lstm_out_fwd",
            (Half::State, true) => "lstm_state_bwd",
            (Half::Out, true) => "lstm_out_bwd",
        }
    }
}

/// `(c', h')` of the cell from its pre-activations `pre` (`[batch, 4·hidden]`) and old cell
/// `c` (`[batch, hidden]`, or `[hidden]` shared by the batch).
pub fn cell(pre: &Tensor, c: &Tensor) -> Result<(Tensor, Tensor)> {
    let (batch, gates) = pre.dims2()?;
    let c = c.broadcast_as((batch, gates / 4))?.contiguous()?;
    let pre = pre.contiguous()?;
    let c_next = pre.apply_op2(&c, Forward(Half::State))?;
    let h_next = pre.apply_op2(&c_next, Forward(Half::Out))?;
    Ok((c_next, h_next))
}

/// The forward op of one half.
struct Forward(Half);

/// The backward op of one half: `(pre, c or c', g) → [d pre | d c]`.
struct Backward(Half);

/// `(batch, hidden)` of a `pre` and a `[batch, hidden]` operand, both contiguous.
fn shape_of(pre: &Layout, other: &Layout) -> Result<(usize, usize)> {
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
    if !pre.is_contiguous() || !other.is_contiguous() {
        bail!("lstmCell's fused op takes contiguous operands");
    }
    Ok((batch, hidden))
}

/// The CPU computation of one half's forward or backward, on a cell of `hidden` units.
struct CellKernel {
    half: Half,
    backward: bool,
    hidden: usize,
}

impl RealKernel for CellKernel {
    fn run<T: Real>(&self, operands: &[&[T]]) -> Vec<T> {
        let (half, hidden) = (self.half, self.hidden);
        if self.backward {
            backward_slices(half, operands[0], operands[1], operands[2], hidden)
        } else {
            forward_slices(half, operands[0], operands[1], hidden)
        }
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

impl CustomOp2 for Forward {
    fn name(&self) -> &'static str {
        self.0.kernel(false)
    }

    fn cpu_fwd(&self, s1: &CpuStorage, l1: &Layout, s2: &CpuStorage, l2: &Layout) -> Result<(CpuStorage, Shape)> {
        let (batch, hidden) = shape_of(l1, l2)?;
        let kernel = CellKernel { half: self.0, backward: false, hidden };
        Ok((run_cpu(&kernel, &[(s1, l1), (s2, l2)], "lstmCell's fused op")?, Shape::from((batch, hidden))))
    }

    #[cfg(feature = "cuda")]
    fn cuda_fwd(&self, s1: &CudaStorage, l1: &Layout, s2: &CudaStorage, l2: &Layout) -> Result<(CudaStorage, Shape)> {
        launch(self.0.kernel(false), &[(s1, l1), (s2, l2)], 1)
    }

    fn bwd(&self, pre: &Tensor, c: &Tensor, _res: &Tensor, grad: &Tensor) -> Result<(Option<Tensor>, Option<Tensor>)> {
        let hidden = c.dim(1)?;
        let both = pre.apply_op3_no_bwd(c, &grad.contiguous()?, &Backward(self.0))?;
        Ok((Some(both.narrow(1, 0, 4 * hidden)?), Some(both.narrow(1, 4 * hidden, hidden)?)))
    }
}

impl CustomOp3 for Backward {
    fn name(&self) -> &'static str {
        self.0.kernel(true)
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
        let (batch, hidden) = shape_of(l1, l2)?;
        shape_of(l1, l3)?;
        let kernel = CellKernel { half: self.0, backward: true, hidden };
        let out = run_cpu(&kernel, &[(s1, l1), (s2, l2), (s3, l3)], "lstmCell's fused op")?;
        Ok((out, Shape::from((batch, 5 * hidden))))
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
        launch(self.0.kernel(true), &[(s1, l1), (s2, l2), (s3, l3)], 5)
    }
}

/// Runs `kernel` on the operands (`pre`, then `[batch, hidden]` ones): an output of
/// `[batch, per_unit · hidden]`.
#[cfg(feature = "cuda")]
fn launch(kernel: &'static str, operands: &[(&CudaStorage, &Layout)], per_unit: usize) -> Result<(CudaStorage, Shape)> {
    let Some((&(_, pre), rest)) = operands.split_first() else { bail!("{kernel}: no operands") };
    let mut shape = (0, 0);
    for (_, l) in rest {
        shape = shape_of(pre, l)?;
    }
    let (batch, hidden) = shape;
    let out = cuda::lstm_cell(kernel, operands, batch, hidden, per_unit * hidden)?;
    super::fused::record_launch(kernel);
    Ok((out, Shape::from((batch, per_unit * hidden))))
}

/// The launch of its CUDA kernels, with the `cuda` feature.
#[cfg(feature = "cuda")]
mod cuda {
    use crate::kernels::cuda_kernels::{LSTM_CELL, launch_config, run};
    use crate::kernels::launch_shape::LaunchShape;
    use candle_core::{CudaStorage, Layout, Result};

    /// Runs `kernel` of `lstm_cell.cu` on its f32 operands (contiguous, as laid out), one thread
    /// per `(example, unit)`, into a new buffer of `batch · width` elements.
    pub(super) fn lstm_cell(
        kernel: &str,
        operands: &[(&CudaStorage, &Layout)],
        batch: usize,
        hidden: usize,
        width: usize,
    ) -> Result<CudaStorage> {
        // The kernels index with C ints: the thread count must fit one.
        let (Ok(threads), Ok(b), Ok(h)) = (i32::try_from(batch * hidden), i32::try_from(batch), i32::try_from(hidden))
        else {
            candle_core::bail!("{kernel}: {batch} × {hidden} elements are more than the kernel indexes")
        };
        let config = launch_config(LaunchShape::per_element(threads.max(1) as u32));
        // SAFETY: lstm_cell.cu's kernels take their operands, the output, batch and hidden, in
        // this order, guard the threads past batch · hidden, and write every output element.
        unsafe { run(&LSTM_CELL, kernel, operands, batch * width, config, &[b, h], &[]) }
    }
}

#[cfg(test)]
mod tests {
    use candle_core::{D, DType, Device};

    use super::*;
    use crate::kernels::fused::testing::{assert_fused_matches, var};

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
