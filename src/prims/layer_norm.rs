//! `layerNorm(x)`: layer normalisation over the last axis with a learned gain and bias
//! (weight 1, bias 0 at init; eps 1e-5), written out so that candle differentiates it.

use candle_core::Tensor;

use super::*;
use crate::kernels::layer_norm::layer_norm;

pub struct LayerNorm;

static SIGNATURE: [ArgSpec; 1] = [ArgSpec::tensor("x")];

impl Primitive for LayerNorm {
    fn name(&self) -> &'static str {
        "layerNorm"
    }
    fn summary(&self) -> &'static str {
        "layer normalisation over the last axis, learned gain and bias"
    }
    fn signature(&self) -> &'static [ArgSpec] {
        &SIGNATURE
    }
    fn instantiate(&self, args: &Args) -> Result<Instance, PrimError> {
        let x = args.shape("x")?.clone();
        let Some(&n) = x.last() else {
            return Err(PrimError::new("`x` must be a vector or larger, but is a scalar").on("x"));
        };
        let params = vec![
            ParamDecl::new("weight", vec![n], Init::Constant(1.0)),
            ParamDecl::new("bias", vec![n], Init::Constant(0.0)),
        ];
        let flops = 8 * x.iter().product::<usize>() as u64;
        Ok(Instance::new(LayerNormOp, vec![Ty::Tensor(x)], params, flops))
    }
}

struct LayerNormOp;

impl Op for LayerNormOp {
    fn forward(&self, inputs: &[&Tensor], params: &[&Tensor]) -> candle_core::Result<Vec<Tensor>> {
        Ok(vec![layer_norm(inputs[0], params[0], params[1])?])
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;

    #[test]
    fn normalises_and_has_gradients() {
        let out = run("layerNorm", &[("x", t(&[2]))], &[vec![1.0, 3.0]]);
        // mean 2, variance 1: (±1)/sqrt(1 + 1e-5).
        assert!((out[0] + 1.0).abs() < 1e-4 && (out[1] - 1.0).abs() < 1e-4, "{out:?}");
        grad_check("layerNorm", &[("x", t(&[2, 4]))]);
    }
}
