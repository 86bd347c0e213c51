//! `concat(a, b)` = `[a : b]`: concatenation along the last axis (the papers' `:` operator,
//! e.g. LSAM's `[x_t : h_{t−1}]`, NAM §3.2). `[..., n] , [..., m] → [..., n + m]`, leading
//! axes equal. A value shared by the batch (batch axis 1) is repeated over the batch.
//! Two operands: nest calls for more (`concat(a, concat(b, c))`).

use candle_core::{D, Tensor};

use super::*;
use crate::kernels::nam::{batch_of, expand_batch};

pub struct Concat;

static SIGNATURE: [ArgSpec; 2] = [ArgSpec::tensor("a"), ArgSpec::tensor("b")];

impl Primitive for Concat {
    fn name(&self) -> &'static str {
        "concat"
    }
    fn summary(&self) -> &'static str {
        "concatenation [a : b] along the last axis"
    }
    fn signature(&self) -> &'static [ArgSpec] {
        &SIGNATURE
    }
    fn instantiate(&self, args: &Args) -> Result<Instance, PrimError> {
        let (a, b) = (args.shape("a")?, args.shape("b")?);
        let (Some((&n, lead_a)), Some((&m, lead_b))) = (a.split_last(), b.split_last()) else {
            let arg = if a.is_empty() { "a" } else { "b" };
            return Err(PrimError::new(format!("`{arg}` is a scalar; concat joins vectors (or larger)"))
                .on(arg)
                .hint("make it a vector with `reshape(x, [1])`"));
        };
        if lead_a != lead_b {
            return Err(PrimError::new(format!(
                "leading axes differ: concat({}, {})",
                ShapeDisplay(a),
                ShapeDisplay(b)
            ))
            .on("b")
            .hint("both operands must have the same shape except for the last axis"));
        }
        let mut out = lead_a.to_vec();
        out.push(n + m);
        Ok(Instance::new(ConcatOp, vec![Ty::Tensor(out)], vec![], 0))
    }
}

struct ConcatOp;

impl Op for ConcatOp {
    fn forward(&self, inputs: &[&Tensor], _params: &[&Tensor]) -> candle_core::Result<Vec<Tensor>> {
        let batch = batch_of(inputs)?;
        let a = expand_batch(inputs[0], batch)?;
        let b = expand_batch(inputs[1], batch)?;
        Ok(vec![Tensor::cat(&[&a, &b], D::Minus1)?])
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;

    #[test]
    fn values_shapes_and_gradients() {
        assert_eq!(run("concat", &[("a", t(&[2])), ("b", t(&[1]))], &[vec![1.0, 2.0], vec![3.0]]), vec![1.0, 2.0, 3.0]);
        assert_eq!(out_shapes("concat", &[("a", t(&[3, 2])), ("b", t(&[3, 4]))]), vec![vec![3, 6]]);
        assert!(error("concat", &[("a", t(&[3, 2])), ("b", t(&[2, 4]))]).contains("leading axes differ"));
        assert!(error("concat", &[("a", t(&[])), ("b", t(&[2]))]).contains("`a` is a scalar"));
        grad_check("concat", &[("a", t(&[2, 3])), ("b", t(&[2, 2]))]);
    }

    #[test]
    fn a_shared_operand_is_repeated_over_the_batch() {
        use candle_core::{Device, Tensor};
        let inst = instance("concat", &[("a", t(&[1])), ("b", t(&[2]))]).unwrap();
        let dev = Device::Cpu;
        let a = Tensor::new(&[[7.0f64]], &dev).unwrap();
        let b = Tensor::new(&[[1.0f64, 2.0], [3.0, 4.0]], &dev).unwrap();
        let out = inst.op.forward(&[&a, &b], &[]).unwrap();
        assert_eq!(out[0].to_vec2::<f64>().unwrap(), vec![vec![7.0, 1.0, 2.0], vec![7.0, 3.0, 4.0]]);
    }
}
