//! `softmax(x)` over the last axis, in the composed form candle differentiates
//! (`softmax_last_dim` produces no gradient in candle 0.11), with a manual backward from the
//! output: `gx = y ⊙ (g − ⟨y, g⟩)` per row.

use candle_core::Tensor;

use crate::kernels::cpu::{real::Real, view};
use crate::prims::prelude::*;

primitive! {
    Softmax = "softmax",
    "softmax over the last axis",
    args: [tensor("x")],
    examples: [[("x", t(&[2, 3]))]],
}

fn configure(args: &Args) -> Result<(SoftmaxOp, Inferred), PrimError> {
    let x = args.shape("x")?.clone();
    let flops = 5 * x.iter().product::<usize>() as u64;
    Ok((SoftmaxOp, Inferred::new(vec![Ty::Tensor(x)], vec![], flops)))
}

struct SoftmaxOp;

impl Op for SoftmaxOp {
    fn forward(&self, inputs: &[&Tensor], _params: &[&Tensor]) -> candle_core::Result<Vec<Tensor>> {
        let [x] = op::inputs("softmax", inputs)?;
        Ok(vec![crate::kernels::cuda::layers::softmax::softmax_last(x)?])
    }

    fn manual(&self) -> Option<&dyn TrainOp> {
        Some(self)
    }
}

impl ManualBackward for SoftmaxOp {
    type Saved = ();

    fn forward_train(&self, inputs: &[&Tensor], params: &[&Tensor]) -> Forward<()> {
        Ok((vec![self.forward(inputs, params)?.remove(0).contiguous()?], ()))
    }

    fn backward(&self, b: &Backward<'_, ()>, _param_grads: &mut [ParamGrad]) -> InputGrads {
        if !b.needs[0] {
            return Ok(vec![None]);
        }
        let (y, g) = (&b.outputs[0], b.grad_or_zeros(0)?);
        with_real!(y.dtype(), T => Ok(vec![Some(rows_backward::<T>(y, &g)?)]))
    }
}

/// `gx = y ⊙ (g − ⟨y, g⟩)` for every row of the last axis.
fn rows_backward<T: Real>(y: &Tensor, g: &Tensor) -> candle_core::Result<Tensor> {
    let width = y.dims().last().copied().unwrap_or(1).max(1);
    let (yr, gr) = (view::Read::new(y)?, view::Read::new(g)?);
    let mut gx = vec![T::zero(); y.elem_count()];
    let rows = yr.slice::<T>()?.chunks_exact(width).zip(gr.slice::<T>()?.chunks_exact(width));
    for ((ys, gs), out) in rows.zip(gx.chunks_exact_mut(width)) {
        let dot = ys.iter().zip(gs).fold(T::zero(), |acc, (&y, &g)| acc + y * g);
        for ((o, &y), &g) in out.iter_mut().zip(ys).zip(gs) {
            *o = y * (g - dot);
        }
    }
    view::tensor(gx, y.dims())
}

#[cfg(test)]
mod tests {
    use crate::prims::contract::testing::*;

    #[test]
    fn values() {
        assert_eq!(run("softmax", &[("x", t(&[2]))], &[vec![1.0, 1.0]]), vec![0.5, 0.5]);
    }
}
