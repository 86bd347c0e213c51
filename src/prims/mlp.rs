//! `mlp(x, sizes, final_relu = true)`: dense layers of the given sizes with ReLU between them
//! (and after the last unless `final_relu = false`). STM's output head is `mlp(o, [128, 128])`
//! (ReLU after both layers, as the authors' code; reference.md §1.2).

use candle_core::Tensor;

use super::*;
use crate::kernels::dense::dense;

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
        let op = MlpOp { layers: sizes.len(), final_relu: args.bool("final_relu")? };
        Ok(Instance::new(op, vec![Ty::Tensor(out)], params, flops))
    }
}

struct MlpOp {
    layers: usize,
    final_relu: bool,
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
}
