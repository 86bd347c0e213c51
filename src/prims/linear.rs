//! `linear(x, size, bias = true)`: a dense layer `y = W x + b` on the last axis of `x`.
//!
//! Shapes: `x: [..., n]` → `[..., size]`. Parameters `weight: [size, n]`, `bias: [size]`,
//! initialised U(±1/√n) like PyTorch's `nn.Linear` (which the papers' code uses).

use candle_core::Tensor;

use super::*;
use crate::kernels::dense::dense;

pub struct Linear;

static SIGNATURE: [ArgSpec; 3] = [
    ArgSpec::tensor("x"),
    ArgSpec::value("size", Kind::Int, Default::Required),
    ArgSpec::value("bias", Kind::Bool, Default::Bool(true)),
];

impl Primitive for Linear {
    fn name(&self) -> &'static str {
        "linear"
    }
    fn summary(&self) -> &'static str {
        "dense layer y = W x + b on the last axis"
    }
    fn signature(&self) -> &'static [ArgSpec] {
        &SIGNATURE
    }
    fn instantiate(&self, args: &Args) -> Result<Instance, PrimError> {
        let x = args.shape("x")?;
        let Some((&fan_in, lead)) = x.split_last() else {
            return Err(PrimError::new("`x` must be a vector or larger, but is a scalar").on("x"));
        };
        let size = args.size("size")?;
        let bias = args.bool("bias")?;
        let mut params = ParamDecl::dense("", fan_in, size).to_vec();
        if !bias {
            params.pop();
        }
        let mut out = lead.to_vec();
        out.push(size);
        let rows: usize = lead.iter().product();
        let flops = (2 * fan_in * size * rows) as u64;
        Ok(Instance::new(LinearOp, vec![Ty::Tensor(out)], params, flops))
    }
}

struct LinearOp;

impl Op for LinearOp {
    fn forward(&self, inputs: &[&Tensor], params: &[&Tensor]) -> candle_core::Result<Vec<Tensor>> {
        Ok(vec![dense(inputs[0], params[0], params.get(1).copied())?])
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;

    #[test]
    fn shapes() {
        assert_eq!(out_shapes("linear", &[("x", t(&[3, 5])), ("size", int(7))]), vec![vec![3, 7]]);
        assert_eq!(param_count("linear", &[("x", t(&[5])), ("size", int(7))]), 5 * 7 + 7);
        assert_eq!(param_count("linear", &[("x", t(&[5])), ("size", int(7)), ("bias", boolean(false))]), 35);
        assert!(error("linear", &[("x", t(&[])), ("size", int(7))]).contains("scalar"));
    }

    #[test]
    fn gradients_match_finite_differences() {
        grad_check("linear", &[("x", t(&[3, 5])), ("size", int(4))]);
    }
}
