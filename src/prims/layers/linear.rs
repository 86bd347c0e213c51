//! `linear(x, size, bias = true)`: a dense layer `y = W x + b` on the last axis of `x`.
//!
//! Shapes: `x: [..., n]` → `[..., size]`. Parameters `weight: [size, n]`, `bias: [size]`,
//! initialised U(±1/√n) like PyTorch's `nn.Linear` (which the papers' code uses).

use candle_core::Tensor;

use crate::kernels::cpu::dense::{Transposed, backward_slices, forward_slices};
use crate::kernels::cpu::{real::Real, view};
use crate::prims::prelude::*;

primitive! {
    Linear = "linear",
    "dense layer y = W x + b on the last axis",
    args: [tensor("x"), int("size"), bool_or("bias", true)],
    examples: [[("x", t(&[3, 5])), ("size", int(4))], [("x", t(&[5])), ("size", int(4)), ("bias", boolean(false))]],
    op: |layer| LinearOp { layer, wt: Transposed::default() },
}

/// A dense layer's parameters: its weight, and its bias unless left out.
#[derive(Clone, Copy)]
struct Layer {
    weight: Slot,
    bias: Option<Slot>,
}

fn configure(args: &Args) -> Result<(Layer, Inferred), PrimError> {
    let (fan_in, lead) = args.last_axis("x", "a dense layer maps the last axis of a vector (or larger)")?;
    let size = args.size("size")?;
    let mut params = ParamList::new();
    let layer = if args.bool("bias")? {
        let dense = params.dense("", fan_in, size);
        Layer { weight: dense.weight, bias: Some(dense.bias) }
    } else {
        Layer { weight: params.dense_weight("", fan_in, size), bias: None }
    };
    let mut out = lead.to_vec();
    out.push(size);
    let rows: usize = lead.iter().product();
    let flops = (2 * fan_in * size * rows) as u64;
    Ok((layer, Inferred::new(vec![Ty::Tensor(out)], params.into_decls(), flops)))
}

struct LinearOp {
    layer: Layer,
    wt: Transposed,
}

impl WithProducts for LinearOp {
    fn with_products(&self, inputs: &[&Tensor], params: &[&Tensor], products: &dyn Products) -> Outputs {
        let [x] = op::inputs("linear", inputs)?;
        Ok(vec![products.dense(x, self.layer.weight.of(params), self.layer.bias.map(|b| b.of(params)))?])
    }
}

impl SlicedBackward for LinearOp {
    type Saved = ();

    fn forward_typed<T: Real>(&self, inputs: &[&Tensor], params: &[&Tensor]) -> Forward<()> {
        let [x] = op::inputs("linear", inputs)?;
        let (w, b) = (self.layer.weight.of(params), self.layer.bias.map(|b| b.of(params)));
        Ok((vec![linear_forward::<T>(x, w, b, &self.wt)?], ()))
    }

    fn backward_typed<T: Real>(&self, b: &Backward<'_, ()>, param_grads: &mut [ParamGrad]) -> InputGrads {
        let [x] = b.inputs_of()?;
        let w = self.layer.weight.of(b.params);
        let (gw, gb) = match self.layer.bias {
            Some(bias) => {
                let (gw, gb) = Slot::pair_mut(self.layer.weight, bias, param_grads);
                (gw, Some(gb))
            }
            None => (self.layer.weight.of_mut(param_grads), None),
        };
        let gy = b.grad_or_zeros(0)?;
        Ok(vec![linear_backward::<T>(x, w, &gy, gw, gb, b.needs[0])?])
    }
}

/// `x Wᵀ + b` over the last axis, as one GEMM.
fn linear_forward<T: Real>(x: &Tensor, w: &Tensor, b: Option<&Tensor>, wt: &Transposed) -> candle_core::Result<Tensor> {
    let (fan_out, fan_in) = w.dims2()?;
    let rows = x.elem_count() / fan_in.max(1);
    let wt = wt.of(w)?;
    let (xr, wr) = (view::Read::new(x)?, view::Read::new(&wt)?);
    let br = b.map(view::Read::new).transpose()?;
    let bias = br.as_ref().map(|b| b.slice::<T>()).transpose()?;
    let y = forward_slices(xr.slice::<T>()?, rows, wr.slice::<T>()?, bias, fan_in, fan_out);
    let mut dims = x.dims().to_vec();
    if let Some(last) = dims.last_mut() {
        *last = fan_out;
    }
    view::tensor(y, dims)
}

/// The input gradient (if `need_x`) of [`linear_forward`] given `gy`; adds the weight and
/// bias gradients.
fn linear_backward<T: Real>(
    x: &Tensor,
    w: &Tensor,
    gy: &Tensor,
    gw: &mut ParamGrad,
    gb: Option<&mut ParamGrad>,
    need_x: bool,
) -> candle_core::Result<Option<Tensor>> {
    let (fan_out, fan_in) = w.dims2()?;
    let rows = x.elem_count() / fan_in.max(1);
    let (gyr, xr, wr) = (view::Read::new(gy)?, view::Read::new(x)?, view::Read::new(w)?);
    let gb = match gb {
        Some(g) => Some(g.slice_mut::<T>(fan_out)?),
        None => None,
    };
    let gx = backward_slices(
        gyr.slice::<T>()?,
        xr.slice::<T>()?,
        rows,
        wr.slice::<T>()?,
        fan_in,
        fan_out,
        Some(gw.slice_mut::<T>(fan_out * fan_in)?),
        gb,
        need_x,
    );
    gx.map(|g| view::tensor(g, x.dims())).transpose()
}

#[cfg(test)]
mod tests {
    use crate::prims::contract::testing::*;

    #[test]
    fn shapes() {
        assert_eq!(out_shapes("linear", &[("x", t(&[3, 5])), ("size", int(7))]), vec![vec![3, 7]]);
        assert_eq!(param_count("linear", &[("x", t(&[5])), ("size", int(7))]), 5 * 7 + 7);
        assert_eq!(param_count("linear", &[("x", t(&[5])), ("size", int(7)), ("bias", boolean(false))]), 35);
        assert!(error("linear", &[("x", t(&[])), ("size", int(7))]).contains("scalar"));
    }
}
