//! `mlp(x, sizes, final_relu = true)`: dense layers of the given sizes with ReLU between them
//! (and after the last unless `final_relu = false`). STM's output head is `mlp(o, [128, 128])`
//! (ReLU after both layers, as the authors' code; reference.md §1.2).

use candle_core::Tensor;

use super::backward::with_real;
use super::*;
use crate::kernels::dense::{Transposed, backward_slices, dense, forward_slices};
use crate::kernels::{real::Real, view};

pub struct Mlp;

static SIGNATURE: [ArgSpec; 3] = [
    ArgSpec::tensor("x"),
    ArgSpec::value("sizes", Kind::List, Default::Required),
    ArgSpec::value("final_relu", Kind::Bool, Default::Bool(true)),
];

impl Primitive for Mlp {
    fn name(&self) -> &'static str {
        "mlp"
    }
    fn summary(&self) -> &'static str {
        "dense layers of the given sizes with ReLU between them"
    }
    fn signature(&self) -> &'static [ArgSpec] {
        &SIGNATURE
    }
    fn instantiate(&self, args: &Args) -> Result<Instance, PrimError> {
        let x = args.shape("x")?;
        let Some((&fan_in, lead)) = x.split_last() else {
            return Err(PrimError::new("`x` must be a vector or larger, but is a scalar").on("x"));
        };
        let sizes = args.sizes("sizes")?;
        if sizes.is_empty() {
            return Err(PrimError::new("`sizes` must list at least one layer size").on("sizes"));
        }
        let rows: usize = lead.iter().product();
        let mut params = vec![];
        let mut flops = 0;
        let mut prev = fan_in;
        for (i, &s) in sizes.iter().enumerate() {
            params.extend(ParamDecl::dense(&format!("layer{i}"), prev, s));
            flops += (2 * prev * s * rows) as u64;
            prev = s;
        }
        let mut out = lead.to_vec();
        out.push(prev);
        let wts = (0..sizes.len()).map(|_| Transposed::default()).collect();
        let op = MlpOp { layers: sizes.len(), final_relu: args.bool("final_relu")?, wts };
        Ok(Instance::new(op, vec![Ty::Tensor(out)], params, flops))
    }
}

struct MlpOp {
    layers: usize,
    final_relu: bool,
    wts: Vec<Transposed>,
}

impl Op for MlpOp {
    fn forward(&self, inputs: &[&Tensor], params: &[&Tensor]) -> candle_core::Result<Vec<Tensor>> {
        let mut h = inputs[0].clone();
        for i in 0..self.layers {
            h = dense(&h, params[2 * i], Some(params[2 * i + 1]))?;
            if i + 1 < self.layers || self.final_relu {
                h = h.relu()?;
            }
        }
        Ok(vec![h])
    }

    fn has_backward(&self) -> bool {
        true
    }

    /// Saves every hidden layer's output (after its ReLU); the last is the output.
    fn forward_train(&self, inputs: &[&Tensor], params: &[&Tensor]) -> candle_core::Result<(Vec<Tensor>, Saved)> {
        with_real!(inputs[0].dtype(), T => self.train_forward::<T>(inputs[0], params))
    }

    fn backward(&self, b: &Backward<'_>, param_grads: &mut [ParamGrad]) -> candle_core::Result<Vec<Option<Tensor>>> {
        with_real!(b.inputs[0].dtype(), T => self.train_backward::<T>(b, param_grads))
    }
}

impl MlpOp {
    fn relu_after(&self, layer: usize) -> bool {
        layer + 1 < self.layers || self.final_relu
    }

    fn train_forward<T: Real>(&self, x: &Tensor, params: &[&Tensor]) -> candle_core::Result<(Vec<Tensor>, Saved)> {
        let mut h = x.clone();
        let mut saved = vec![];
        for i in 0..self.layers {
            let (fan_out, fan_in) = params[2 * i].dims2()?;
            let rows = h.elem_count() / fan_in.max(1);
            let mut y = {
                let wt = self.wts[i].of(params[2 * i])?;
                let (hr, wr, br) = (view::Read::new(&h)?, view::Read::new(&wt)?, view::Read::new(params[2 * i + 1])?);
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
            if i + 1 < self.layers {
                saved.push(h.clone());
            }
        }
        Ok((vec![h], saved))
    }

    fn train_backward<T: Real>(
        &self,
        b: &Backward<'_>,
        param_grads: &mut [ParamGrad],
    ) -> candle_core::Result<Vec<Option<Tensor>>> {
        let mut g: Vec<T> = view::values(&b.grad_or_zeros(0)?)?;
        for i in (0..self.layers).rev() {
            let out = if i + 1 == self.layers { &b.outputs[0] } else { &b.saved[i] };
            let input = if i == 0 { &b.inputs[0] } else { &b.saved[i - 1] };
            if self.relu_after(i) {
                let outr = view::Read::new(out)?;
                for (gv, &y) in g.iter_mut().zip(outr.slice::<T>()?) {
                    if y <= T::zero() {
                        *gv = T::zero();
                    }
                }
            }
            let (fan_out, fan_in) = b.params[2 * i].dims2()?;
            let rows = input.elem_count() / fan_in.max(1);
            let (gw, gb) = param_grads[2 * i..2 * i + 2].split_at_mut(1);
            let (inr, wr) = (view::Read::new(input)?, view::Read::new(&b.params[2 * i])?);
            let gx = backward_slices(
                &g,
                inr.slice::<T>()?,
                rows,
                wr.slice::<T>()?,
                fan_in,
                fan_out,
                Some(gw[0].slice_mut::<T>(fan_out * fan_in)?),
                Some(gb[0].slice_mut::<T>(fan_out)?),
                i > 0 || b.needs[0],
            );
            match gx {
                Some(gx) => g = gx,
                None => return Ok(vec![None]),
            }
        }
        Ok(vec![Some(view::tensor(g, b.inputs[0].dims())?)])
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;

    #[test]
    fn shapes_and_gradients() {
        assert_eq!(out_shapes("mlp", &[("x", t(&[5])), ("sizes", ints(&[4, 3]))]), vec![vec![3]]);
        assert_eq!(param_count("mlp", &[("x", t(&[5])), ("sizes", ints(&[4, 3]))]), 5 * 4 + 4 + 4 * 3 + 3);
        assert!(error("mlp", &[("x", t(&[5])), ("sizes", ints(&[]))]).contains("at least one"));
        grad_check("mlp", &[("x", t(&[3])), ("sizes", ints(&[4, 2])), ("final_relu", boolean(false))]);
    }

    #[test]
    fn manual_backward_matches_autograd() {
        manual_backward_check("mlp", &[("x", t(&[3])), ("sizes", ints(&[4, 2])), ("final_relu", boolean(false))]);
        manual_backward_check("mlp", &[("x", t(&[2, 3])), ("sizes", ints(&[5, 4, 3]))]);
    }
}
