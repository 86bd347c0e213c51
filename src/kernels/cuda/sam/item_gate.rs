//! The element-wise half of `itemWrite`'s gated write (SAM Eq. 10, the authors' form) as one
//! candle op with its own backward, for the device-generic path (candle's autograd: the GPU,
//! and evaluation on the CPU).
//!
//! With `g` the gates' pre-activations (`[rows, 2d]`, each row `[input | forget]`, biases
//! added), `x = a ⊗ b` and the old memory `m` (both `[rows, d]`):
//!
//! - `out = σ(g_in) ⊙ tanh(x) + σ(g_f) ⊙ m`;
//! - from `g_out = d loss / d out`, with `I = σ(g_in)`, `F = σ(g_f)`, `t = tanh(x)`:
//!   `d g_in = g_out ⊙ t ⊙ I (1 − I)`, `d g_f = g_out ⊙ m ⊙ F (1 − F)`,
//!   `d x = g_out ⊙ I ⊙ (1 − t²)`, `d m = g_out ⊙ F`.
//!
//! Written as candle ops this is two sigmoids, two slices, a tanh and three products and sums
//! forward (about ten kernels) and some thirty backward; here it is one kernel forward and,
//! backward, one that writes `[d g | d x | d m]` into one flat buffer (each part a contiguous
//! view of it) after stacking `x` and `m` (the backward op, like every candle custom op, takes
//! three operands). The formulas are `prims::item_write`'s manual backward, per element.
//!
//! Where it runs is its switch's rule (`kernels::cuda::switches`: the CPU always; on CUDA by its
//! standing, `ITEM_GATE`); the CUDA kernels are `src/kernels/cuda/sam/item_gate.cu`, a thread per
//! cell.

use candle_core::{Layout, Result, Shape, Tensor, bail};

use crate::kernels::cpu::real::Real;
use crate::kernels::cuda::kernel::{Fused, FusedKernel, Launch, entries, two_passes};
use crate::kernels::cuda::launch_shape::LaunchShape;
use crate::kernels::cuda::switches::Switch;

/// STM A 16.26 → 15.64 ms a step, B 30.70 → 29.48 (H200, 2026-11-26).
pub const ITEM_GATE: Switch = Switch::on("item_gate");
inventory::submit! { ITEM_GATE }

/// `σ(g[.., :d]) ⊙ tanh(x) + σ(g[.., d:]) ⊙ m`, `g` being `[.., 2d]` and `x`, `m` `[.., d]` of
/// the same leading axes (here `[B, d, ·]`: one row per memory row).
pub fn gated_write(g: &Tensor, x: &Tensor, m: &Tensor) -> Result<Tensor> {
    Fused(Gate::Forward).apply(&[g, x, m])
}

two_passes! {
    /// The two passes: `(g, x, m) → out` and, for its backward, `(g, [x; m], g_out) → [d g | d x |
    /// d m]` (flat, `4·rows·d` elements).
    pub enum Gate
}

/// `rows` rows of `d` cells.
#[derive(Clone, Copy, Debug)]
pub struct Cells {
    rows: usize,
    d: usize,
}

impl FusedKernel for Gate {
    type Sizes = Cells;

    entries! { ITEM_GATE: Gate::Forward => "item_gate_fwd", Gate::Backward => "item_gate_bwd" }

    fn sizes(&self, operands: &[&Layout]) -> Result<(Shape, Cells)> {
        let &[g, second, third] = operands else { bail!("itemWrite's fused gate takes three operands") };
        let Some((&width, lead)) = g.dims().split_last() else { bail!("itemWrite's fused gate takes [.., 2d] gates") };
        let (d, rows) = (width / 2, lead.iter().product::<usize>());
        let cells = rows * d;
        // The backward's second operand is x and m stacked: twice the cells.
        let stacked = match self {
            Gate::Forward => 1,
            Gate::Backward => 2,
        };
        if width % 2 != 0 || second.shape().elem_count() != stacked * cells || third.shape().elem_count() != cells {
            bail!(
                "itemWrite's fused gate: gates {:?} do not fit operands {:?} and {:?}",
                g.dims(),
                second.dims(),
                third.dims()
            );
        }
        let shape = match self {
            Gate::Forward => third.shape().clone(),
            Gate::Backward => Shape::from(4 * cells),
        };
        Ok((shape, Cells { rows, d }))
    }

    fn cpu<T: Real>(&self, Cells { d, .. }: Cells, operands: &[&[T]]) -> Vec<T> {
        match self {
            Gate::Forward => forward_slices(operands[0], operands[1], operands[2], d),
            Gate::Backward => backward_slices(operands[0], operands[1], operands[2], d),
        }
    }

    /// A thread per cell, both ways; the kernels index cells with C ints.
    fn launch(&self, Cells { rows, d }: Cells) -> Result<Launch> {
        let Ok(cells) = i32::try_from(rows * d) else { bail!("{}: {rows} × {d} cells", self.entry()) };
        Launch::with_ints(self.entry(), LaunchShape::per_element(cells.max(1) as u32), &[rows, d])
    }

    fn backward(&self, operands: &[&Tensor], _out: &Tensor, grad: &Tensor) -> Result<Vec<Option<Tensor>>> {
        let (&[g, x, m], Gate::Forward) = (operands, self) else {
            bail!("itemWrite's fused gate backward has no gradient of its own")
        };
        let cells = m.elem_count();
        let xm = Tensor::cat(&[&x.flatten_all()?, &m.flatten_all()?], 0)?;
        let all = g.apply_op3_no_bwd(&xm, &grad.contiguous()?, &Fused(Gate::Backward))?;
        // Each part is a contiguous run of the flat buffer: no copies.
        let dg = all.narrow(0, 0, 2 * cells)?.reshape(g.shape())?;
        let dx = all.narrow(0, 2 * cells, cells)?.reshape(x.shape())?;
        let dm = all.narrow(0, 3 * cells, cells)?.reshape(m.shape())?;
        Ok(vec![Some(dg), Some(dx), Some(dm)])
    }
}

fn forward_slices<T: Real>(g: &[T], x: &[T], m: &[T], d: usize) -> Vec<T> {
    let mut out = Vec::with_capacity(m.len());
    for (k, (&x, &m)) in x.iter().zip(m).enumerate() {
        let (row, j) = (&g[k / d * 2 * d..][..2 * d], k % d);
        out.push(row[j].sigmoid() * x.tanh() + row[d + j].sigmoid() * m);
    }
    out
}

fn backward_slices<T: Real>(g: &[T], xm: &[T], g_out: &[T], d: usize) -> Vec<T> {
    let one = T::one();
    let cells = g_out.len();
    let (x, m) = xm.split_at(cells);
    let mut out = vec![T::zero(); 4 * cells];
    let (dg, rest) = out.split_at_mut(2 * cells);
    let (dx, dm) = rest.split_at_mut(cells);
    for (k, &go) in g_out.iter().enumerate() {
        let (base, j) = (k / d * 2 * d, k % d);
        let (i, f, t) = (g[base + j].sigmoid(), g[base + d + j].sigmoid(), x[k].tanh());
        dg[base + j] = go * t * i * (one - i);
        dg[base + d + j] = go * m[k] * f * (one - f);
        dx[k] = go * i * (one - t * t);
        dm[k] = go * f;
    }
    out
}

#[cfg(test)]
mod tests {
    use candle_core::{D, DType, Device};

    use super::*;
    use crate::kernels::cuda::fused::testing::{assert_fused_matches, var};

    /// The gate as the plain candle ops `prims::item_write` otherwise runs.
    fn reference(g: &Tensor, x: &Tensor, m: &Tensor) -> Result<Tensor> {
        let d = m.dim(D::Minus1)?;
        let input = candle_nn::ops::sigmoid(&g.narrow(D::Minus1, 0, d)?)?;
        let forget = candle_nn::ops::sigmoid(&g.narrow(D::Minus1, d, d)?)?;
        input.mul(&x.tanh()?)?.add(&forget.mul(m)?)
    }

    #[test]
    fn the_fused_gate_and_its_gradients_equal_candle_ops_and_autograd() -> Result<()> {
        // Two examples of a 3 × 3 memory: the rows of both examples and both gate halves count.
        let (g, x, m) = (var(&[2, 3, 6], 2.0)?, var(&[2, 3, 3], 1.5)?, var(&[2, 3, 3], 1.0)?);
        assert_fused_matches(&[&g, &x, &m], &[gated_write(&g, &x, &m)?], &[reference(&g, &x, &m)?], 1e-12)
    }

    #[test]
    fn gates_of_another_width_are_an_error() -> Result<()> {
        let dev = Device::Cpu;
        let m = Tensor::zeros((2, 3, 3), DType::F32, &dev)?;
        let err = gated_write(&Tensor::zeros((2, 3, 4), DType::F32, &dev)?, &m, &m);
        assert!(err.is_err_and(|e| e.to_string().contains("do not fit operands")));
        Ok(())
    }
}
