//! `layerNorm(x)`: layer normalisation over the last axis with a learned gain and bias
//! (weight 1, bias 0 at init; eps 1e-5), written out so that candle differentiates it.

use candle_core::Tensor;

use crate::kernels::cpu::row_norm::{backward_rows, forward_rows};
use crate::kernels::cpu::{real::Real, view};
use crate::prims::prelude::*;

primitive! {
    LayerNorm = "layerNorm",
    "layer normalisation over the last axis, learned gain and bias",
    args: [tensor("x")],
    examples: [[("x", t(&[2, 4]))]],
}

fn configure(args: &Args) -> Result<(impl Op + 'static, Inferred), PrimError> {
    let (n, _) = args.last_axis("x", "layerNorm normalises the last axis of a vector (or larger)")?;
    let x = args.shape("x")?.clone();
    let mut params = ParamList::new();
    let op = LayerNormOp { norm: params.norm("", n) };
    let flops = 8 * x.iter().product::<usize>() as u64;
    Ok((op, Inferred::new(vec![Ty::Tensor(x)], params.into_decls(), flops)))
}

struct LayerNormOp {
    norm: Norm,
}

impl WithProducts for LayerNormOp {
    fn with_products(&self, inputs: &[&Tensor], params: &[&Tensor], products: &dyn Products) -> Outputs {
        let [x] = op::inputs("layerNorm", inputs)?;
        Ok(vec![products.layer_norm(x, self.norm.weight.of(params), self.norm.bias.of(params))?])
    }
}

/// What the training forward keeps: the normalised rows and their `1/σ`.
struct Normalised {
    xhat: Tensor,
    rstd: Tensor,
}

impl SlicedBackward for LayerNormOp {
    type Saved = Normalised;

    /// Every row of the last axis at once (`forward_rows`), the formula of `layer_norm`.
    fn forward_typed<T: Real>(&self, inputs: &[&Tensor], params: &[&Tensor]) -> Forward<Normalised> {
        let [x] = op::inputs("layerNorm", inputs)?;
        let width = x.dims().last().copied().unwrap_or(1);
        let rows = x.elem_count() / width;
        let (xr, wr, br) = (
            view::Read::new(x)?,
            view::Read::new(self.norm.weight.of(params))?,
            view::Read::new(self.norm.bias.of(params))?,
        );
        let (mut xhat, mut y, mut rstd) =
            (vec![T::zero(); rows * width], vec![T::zero(); rows * width], vec![T::zero(); rows]);
        forward_rows(xr.slice::<T>()?, width, wr.slice::<T>()?, br.slice::<T>()?, &mut xhat, &mut y, &mut rstd);
        let saved = Normalised { xhat: view::tensor(xhat, x.dims())?, rstd: view::tensor(rstd, rows)? };
        Ok((vec![view::tensor(y, x.dims())?], saved))
    }

    fn backward_typed<T: Real>(&self, b: &Backward<'_, Normalised>, param_grads: &mut [ParamGrad]) -> InputGrads {
        let x = &b.inputs[0];
        let width = x.dims().last().copied().unwrap_or(1);
        let gy = b.grad_or_zeros(0)?;
        let (gr, hr, rr) = (view::Read::new(&gy)?, view::Read::new(&b.saved.xhat)?, view::Read::new(&b.saved.rstd)?);
        let wr = view::Read::new(self.norm.weight.of(b.params))?;
        let mut gx = vec![T::zero(); x.elem_count()];
        let (gw, gb) = Slot::pair_mut(self.norm.weight, self.norm.bias, param_grads);
        backward_rows(
            gr.slice::<T>()?,
            hr.slice::<T>()?,
            rr.slice::<T>()?,
            width,
            wr.slice::<T>()?,
            &mut gx,
            gw.slice_mut::<T>(width)?,
            gb.slice_mut::<T>(width)?,
        );
        b.input_grads([Some(gx)])
    }
}

#[cfg(test)]
mod tests {
    use crate::prims::contract::testing::*;

    #[test]
    fn normalises_and_has_gradients() {
        let out = run("layerNorm", &[("x", t(&[2]))], &[vec![1.0, 3.0]]);
        // mean 2, variance 1: (±1)/sqrt(1 + 1e-5).
        assert!((out[0] + 1.0).abs() < 1e-4 && (out[1] - 1.0).abs() < 1e-4, "{out:?}");
    }
}
