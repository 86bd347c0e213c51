//! `mlp(x, sizes, final_relu = true)`: dense layers of the given sizes with ReLU between them
//! (and after the last unless `final_relu = false`). STM's output head is `mlp(o, [128, 128])`
//! (ReLU after both layers, as the authors' code; docs/models.md, STM).

use candle_core::Tensor;

use crate::kernels::cpu::dense::{Transposed, forward_slices};
use crate::kernels::cpu::{real::Real, view};
use crate::prims::prelude::*;

primitive! {
    Mlp = "mlp",
    "dense layers of the given sizes with ReLU between them",
    args: [tensor("x"), list("sizes"), bool_or("final_relu", true)],
    examples: [
        [("x", t(&[3])), ("sizes", ints(&[4, 2])), ("final_relu", boolean(false))],
        [("x", t(&[2, 3])), ("sizes", ints(&[6, 5, 4]))],
    ],
    op: |config: Config| {
        let wts = config.layers.iter().map(|_| Transposed::default()).collect();
        MlpOp { config, wts }
    },
}

struct Config {
    /// `layer0`, `layer1`, … in order.
    layers: Vec<Dense>,
    final_relu: bool,
}

fn configure(args: &Args) -> Result<(Config, Inferred), PrimError> {
    let (fan_in, lead) = args.last_axis("x", "an mlp maps the last axis of a vector (or larger)")?;
    let sizes = args.sizes("sizes")?;
    if sizes.is_empty() {
        return Err(PrimError::new(PrimErrorKind::NoSizes).on("sizes"));
    }
    let rows: usize = lead.iter().product();
    let mut params = ParamList::new();
    let mut layers = vec![];
    let mut flops = 0;
    let mut prev = fan_in;
    for (i, &s) in sizes.iter().enumerate() {
        layers.push(params.dense(&format!("layer{i}"), prev, s));
        flops += (2 * prev * s * rows) as u64;
        prev = s;
    }
    let mut out = lead.to_vec();
    out.push(prev);
    let config = Config { layers, final_relu: args.bool("final_relu")? };
    Ok((config, Inferred::new(vec![Ty::Tensor(out)], params.into_decls(), flops)))
}

struct MlpOp {
    config: Config,
    /// Each layer's weight, transposed.
    wts: Vec<Transposed>,
}

impl WithProducts for MlpOp {
    fn with_products(&self, inputs: &[&Tensor], params: &[&Tensor], products: &dyn Products) -> Outputs {
        let [x] = op::inputs("mlp", inputs)?;
        let mut h = x.clone();
        for (i, layer) in self.config.layers.iter().enumerate() {
            h = products.dense(&h, layer.weight.of(params), Some(layer.bias.of(params)))?;
            if self.relu_after(i) {
                h = h.relu()?;
            }
        }
        Ok(vec![h])
    }
}

impl SlicedBackward for MlpOp {
    /// Every hidden layer's output (after its ReLU); the last layer's is the output itself.
    type Saved = Vec<Tensor>;

    fn forward_typed<T: Real>(&self, inputs: &[&Tensor], params: &[&Tensor]) -> Forward<Vec<Tensor>> {
        let [x] = op::inputs("mlp", inputs)?;
        let mut h = x.clone();
        let mut saved = vec![];
        let depth = self.config.layers.len();
        for (i, (layer, wt)) in self.config.layers.iter().zip(&self.wts).enumerate() {
            let (fan_out, fan_in) = layer.weight.of(params).dims2()?;
            let rows = h.elem_count() / fan_in.max(1);
            let mut y = {
                let wt = wt.of(layer.weight.of(params))?;
                let (hr, wr, br) =
                    (view::Read::new(&h)?, view::Read::new(&wt)?, view::Read::new(layer.bias.of(params))?);
                forward_slices(hr.slice::<T>()?, rows, wr.slice::<T>()?, Some(br.slice::<T>()?), fan_in, fan_out)
            };
            if self.relu_after(i) {
                for v in y.iter_mut() {
                    *v = v.max(T::zero());
                }
            }
            let mut dims = h.dims().to_vec();
            if let Some(last) = dims.last_mut() {
                *last = fan_out;
            }
            h = view::tensor(y, dims)?;
            if i + 1 < depth {
                saved.push(h.clone());
            }
        }
        Ok((vec![h], saved))
    }

    fn backward_typed<T: Real>(&self, b: &Backward<'_, Vec<Tensor>>, param_grads: &mut [ParamGrad]) -> InputGrads {
        let [x] = b.inputs_of()?;
        let mut g: Vec<T> = view::values(&b.grad_or_zeros(0)?)?;
        // Layer i reads layer i − 1's output (the input for the first) and writes its own
        // (the op's output for the last).
        let hidden = b.saved;
        for (i, layer) in self.config.layers.iter().enumerate().rev() {
            let out = hidden.get(i).unwrap_or(&b.outputs[0]);
            let input = if i == 0 { x } else { &hidden[i - 1] };
            if self.relu_after(i) {
                let outr = view::Read::new(out)?;
                for (gv, &y) in g.iter_mut().zip(outr.slice::<T>()?) {
                    if y <= T::zero() {
                        *gv = T::zero();
                    }
                }
            }
            let inr = view::Read::new(input)?;
            let gx = b.dense_backward(*layer, &g, inr.slice::<T>()?, i > 0 || b.needs[0], param_grads)?;
            match gx {
                Some(gx) => g = gx,
                None => return Ok(vec![None]),
            }
        }
        Ok(vec![Some(view::tensor(g, x.dims())?)])
    }
}

impl MlpOp {
    fn relu_after(&self, layer: usize) -> bool {
        layer + 1 < self.config.layers.len() || self.config.final_relu
    }
}

#[cfg(test)]
mod tests {
    use crate::prims::contract::testing::*;

    #[test]
    fn shapes() {
        assert_eq!(out_shapes("mlp", &[("x", t(&[5])), ("sizes", ints(&[4, 3]))]), vec![vec![3]]);
        assert_eq!(param_count("mlp", &[("x", t(&[5])), ("sizes", ints(&[4, 3]))]), 5 * 4 + 4 + 4 * 3 + 3);
        assert!(error("mlp", &[("x", t(&[5])), ("sizes", ints(&[]))]).contains("at least one"));
    }
}
