//! `normalize(x)`: `μ(x) = x / max(‖x‖₂, 1e-12)` along the last axis — the papers' unit
//! normalisation (NAM §3.1–3.3), PyTorch's `F.normalize`. On `[H, dh]` it normalises each
//! head's row. An all-zero vector stays zero (and has PyTorch's finite gradient, not NaN).

use candle_core::Tensor;

use crate::kernels::blocks::nam::l2_normalize;
use crate::kernels::cpu::nam_manual::{normalize, normalize_backward};
use crate::kernels::cpu::{real::Real, view};
use crate::prims::prelude::*;

primitive! {
    Normalize = "normalize",
    "unit L2 normalisation μ(x) along the last axis (F.normalize, eps 1e-12)",
    args: [tensor("x")],
    examples: [[("x", t(&[2, 3]))]],
}

fn configure(args: &Args) -> Result<(impl Op + 'static, Inferred), PrimError> {
    args.last_axis("x", "normalize works on vectors (or larger)")?;
    let x = args.shape("x")?.clone();
    let flops = 3 * x.iter().product::<usize>() as u64;
    Ok((NormalizeOp, Inferred::new(vec![Ty::Tensor(x)], vec![], flops)))
}

struct NormalizeOp;

impl Op for NormalizeOp {
    fn forward(&self, inputs: &[&Tensor], _params: &[&Tensor]) -> candle_core::Result<Vec<Tensor>> {
        let [x] = op::inputs("normalize", inputs)?;
        Ok(vec![l2_normalize(x)?])
    }

    fn manual(&self) -> Option<&dyn TrainOp> {
        Some(self)
    }
}

impl SlicedBackward for NormalizeOp {
    /// Each row's norm, `max(‖x‖₂, eps)` (the unit rows are the output).
    type Saved = Tensor;

    fn forward_typed<T: Real>(&self, inputs: &[&Tensor], _params: &[&Tensor]) -> Forward<Tensor> {
        let [x] = op::inputs("normalize", inputs)?;
        rows_forward::<T>(x)
    }

    fn backward_typed<T: Real>(&self, b: &Backward<'_, Tensor>, _param_grads: &mut [ParamGrad]) -> InputGrads {
        if !b.needs[0] {
            return Ok(vec![None]);
        }
        let (unit, g) = (&b.outputs[0], b.grad_or_zeros(0)?);
        Ok(vec![Some(rows_backward::<T>(unit, &g, b.saved)?)])
    }
}

/// Every row of the last axis made unit, and the norms used.
fn rows_forward<T: Real>(x: &Tensor) -> Forward<Tensor> {
    let width = x.dims().last().copied().unwrap_or(1).max(1);
    let xr = view::Read::new(x)?;
    let mut unit = vec![T::zero(); x.elem_count()];
    let norms: Vec<T> =
        xr.slice::<T>()?.chunks_exact(width).zip(unit.chunks_exact_mut(width)).map(|(x, u)| normalize(x, u)).collect();
    let rows = norms.len();
    Ok((vec![view::tensor(unit, x.dims())?], view::tensor(norms, rows)?))
}

/// The backward of [`rows_forward`] from the unit rows, the gradient and the norms.
fn rows_backward<T: Real>(unit: &Tensor, g: &Tensor, norms: &Tensor) -> candle_core::Result<Tensor> {
    let width = unit.dims().last().copied().unwrap_or(1).max(1);
    let (ur, gr, nr) = (view::Read::new(unit)?, view::Read::new(g)?, view::Read::new(norms)?);
    let mut gx = vec![T::zero(); unit.elem_count()];
    let rows = ur.slice::<T>()?.chunks_exact(width).zip(gr.slice::<T>()?.chunks_exact(width));
    for (((u, g), out), &norm) in rows.zip(gx.chunks_exact_mut(width)).zip(nr.slice::<T>()?) {
        normalize_backward(u, norm, g, out);
    }
    view::tensor(gx, unit.dims())
}

#[cfg(test)]
mod tests {
    use crate::prims::contract::testing::*;

    #[test]
    fn values_shapes_and_gradients() {
        assert_eq!(run("normalize", &[("x", t(&[2]))], &[vec![3.0, 4.0]]), vec![0.6, 0.8]);
        assert_eq!(run("normalize", &[("x", t(&[2, 2]))], &[vec![0.0, -2.0, 0.0, 0.0]]), vec![0.0, -1.0, 0.0, 0.0]);
        assert_eq!(out_shapes("normalize", &[("x", t(&[2, 3]))]), vec![vec![2, 3]]);
        assert!(error("normalize", &[("x", t(&[]))]).contains("scalar"));
    }
}
