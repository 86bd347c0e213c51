//! `layerNorm(x)`: layer normalisation over the last axis with a learned gain and bias
//! (weight 1, bias 0 at init; eps 1e-5), written out so that candle differentiates it.

use candle_core::Tensor;

use super::define::primitive;
use super::*;
use crate::kernels::layer_norm::layer_norm;

primitive! {
    LayerNorm = "layerNorm",
    "layer normalisation over the last axis, learned gain and bias",
    args: [tensor("x")],
    examples: [[("x", t(&[2, 4]))]],
}

fn configure(args: &Args) -> Result<(impl Op + 'static, Inferred), PrimError> {
    let x = args.shape("x")?.clone();
    let Some(&n) = x.last() else {
        return Err(PrimError::new(PrimErrorKind::Scalar {
            needs: "layerNorm normalises the last axis of a vector (or larger)",
        })
        .on("x"));
    };
    let mut params = ParamList::new();
    let op = LayerNormOp { norm: params.norm("", n) };
    let flops = 8 * x.iter().product::<usize>() as u64;
    Ok((op, Inferred::new(vec![Ty::Tensor(x)], params.into_decls(), flops)))
}

struct LayerNormOp {
    norm: Norm,
}

impl Op for LayerNormOp {
    fn forward(&self, inputs: &[&Tensor], params: &[&Tensor]) -> candle_core::Result<Vec<Tensor>> {
        let [x] = op::inputs("layerNorm", inputs)?;
        Ok(vec![layer_norm(x, self.norm.weight.of(params), self.norm.bias.of(params))?])
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
    }
}
