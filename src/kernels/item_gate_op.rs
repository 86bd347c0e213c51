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
//! Where it runs is `kernels::fused`'s rule (the CPU always; on CUDA by its standing there, `fused::ITEM_GATE`); the CUDA
//! kernels are `src/kernels/cuda/item_gate.cu`.

use candle_core::{CpuStorage, CustomOp3, Layout, Result, Shape, Tensor, bail};

use super::fused::{RealKernel, run_cpu};
use super::real::Real;
#[cfg(feature = "cuda")]
use candle_core::CudaStorage;

/// `σ(g[.., :d]) ⊙ tanh(x) + σ(g[.., d:]) ⊙ m`, `g` being `[.., 2d]` and `x`, `m` `[.., d]` of
/// the same leading axes (here `[B, d, ·]`: one row per memory row).
pub fn gated_write(g: &Tensor, x: &Tensor, m: &Tensor) -> Result<Tensor> {
    g.contiguous()?.apply_op3(&x.contiguous()?, &m.contiguous()?, Gate::Forward)
}

/// The two passes: `(g, x, m) → out` and, for its backward, `(g, [x; m], g_out) → [d g | d x |
/// d m]` (flat, `4·rows·d` elements).
#[derive(Clone, Copy)]
enum Gate {
    Forward,
    Backward,
}

impl Gate {
    fn kernel(self) -> &'static str {
        match self {
            Gate::Forward => "item_gate_fwd",
            Gate::Backward => "item_gate_bwd",
        }
    }

    /// `(rows, d)` and the output's shape, from the three operands' layouts (each contiguous).
    fn geometry(self, g: &Layout, second: &Layout, third: &Layout) -> Result<(usize, usize, Shape)> {
        let Some((&width, lead)) = g.dims().split_last() else { bail!("itemWrite's fused gate takes [.., 2d] gates") };
        let d = width / 2;
        let rows: usize = lead.iter().product();
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
        if !g.is_contiguous() || !second.is_contiguous() || !third.is_contiguous() {
            bail!("itemWrite's fused gate takes contiguous operands");
        }
        let shape = match self {
            Gate::Forward => third.shape().clone(),
            Gate::Backward => Shape::from(4 * cells),
        };
        Ok((rows, d, shape))
    }
}

/// The CPU computation of one pass over `d`-wide rows.
struct GateKernel {
    pass: Gate,
    d: usize,
}

impl RealKernel for GateKernel {
    fn run<T: Real>(&self, operands: &[&[T]]) -> Vec<T> {
        match self.pass {
            Gate::Forward => forward_slices(operands[0], operands[1], operands[2], self.d),
            Gate::Backward => backward_slices(operands[0], operands[1], operands[2], self.d),
        }
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

impl CustomOp3 for Gate {
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
        let (_, d, shape) = self.geometry(l1, l2, l3)?;
        let kernel = GateKernel { pass: *self, d };
        Ok((run_cpu(&kernel, &[(s1, l1), (s2, l2), (s3, l3)], "itemWrite's fused gate")?, shape))
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
        let (rows, d, shape) = self.geometry(l1, l2, l3)?;
        let kernel = self.kernel();
        let out = super::cuda_kernels::item_gate(kernel, &[(s1, l1), (s2, l2), (s3, l3)], rows, d, shape.elem_count())?;
        super::fused::record_launch(kernel);
        Ok((out, shape))
    }

    fn bwd(
        &self,
        g: &Tensor,
        x: &Tensor,
        m: &Tensor,
        _out: &Tensor,
        grad: &Tensor,
    ) -> Result<(Option<Tensor>, Option<Tensor>, Option<Tensor>)> {
        if matches!(self, Gate::Backward) {
            bail!("itemWrite's fused gate backward has no gradient of its own");
        }
        let cells = m.elem_count();
        let xm = Tensor::cat(&[&x.flatten_all()?, &m.flatten_all()?], 0)?;
        let all = g.apply_op3_no_bwd(&xm, &grad.contiguous()?, &Gate::Backward)?;
        // Each part is a contiguous run of the flat buffer: no copies.
        let dg = all.narrow(0, 0, 2 * cells)?.reshape(g.shape())?;
        let dx = all.narrow(0, 2 * cells, cells)?.reshape(x.shape())?;
        let dm = all.narrow(0, 3 * cells, cells)?.reshape(m.shape())?;
        Ok((Some(dg), Some(dx), Some(dm)))
    }
}

#[cfg(test)]
mod tests {
    use candle_core::{D, DType, Device};

    use super::*;
    use crate::kernels::fused::testing::{assert_fused_matches, var};

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
