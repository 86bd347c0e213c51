//! `outer(a, b)` = `a ⊗ b`: `[..., n] ⊗ [..., m] → [..., n, m]`, leading axes equal.

use candle_core::{D, Tensor};

use super::*;

pub struct Outer;

static SIGNATURE: [ArgSpec; 2] = [ArgSpec::tensor("a"), ArgSpec::tensor("b")];

impl Primitive for Outer {
    fn name(&self) -> &'static str {
        "outer"
    }
    fn summary(&self) -> &'static str {
        "outer product a ⊗ b over the last axes (the `⊗` operator)"
    }
    fn signature(&self) -> &'static [ArgSpec] {
        &SIGNATURE
    }
    fn instantiate(&self, args: &Args) -> Result<Instance, PrimError> {
        let (a, b) = (args.shape("a")?, args.shape("b")?);
        let (Some((&n, lead_a)), Some((&m, lead_b))) = (a.split_last(), b.split_last()) else {
            return Err(PrimError::new("outer products need vectors (or larger), not scalars").on("a"));
        };
        if lead_a != lead_b {
            return Err(PrimError::new(format!("leading axes differ: {} ⊗ {}", ShapeDisplay(a), ShapeDisplay(b)))
                .on("b")
                .hint("both operands must have the same shape except for the last axis"));
        }
        let mut out = lead_a.to_vec();
        out.extend([n, m]);
        let flops = out.iter().product::<usize>() as u64;
        Ok(Instance::new(OuterOp, vec![Ty::Tensor(out)], vec![], flops))
    }
}

struct OuterOp;

impl Op for OuterOp {
    fn forward(&self, inputs: &[&Tensor], _params: &[&Tensor]) -> candle_core::Result<Vec<Tensor>> {
        let a = inputs[0].unsqueeze(D::Minus1)?;
        let b = inputs[1].unsqueeze(inputs[1].rank() - 1)?;
        Ok(vec![a.broadcast_mul(&b)?])
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;

    #[test]
    fn values_shapes_and_gradients() {
        assert_eq!(
            run("outer", &[("a", t(&[2])), ("b", t(&[2]))], &[vec![1.0, 2.0], vec![3.0, 4.0]]),
            vec![3.0, 4.0, 6.0, 8.0]
        );
        assert_eq!(out_shapes("outer", &[("a", t(&[3, 2])), ("b", t(&[3, 4]))]), vec![vec![3, 2, 4]]);
        assert!(error("outer", &[("a", t(&[3, 2])), ("b", t(&[2, 4]))]).contains("leading axes differ"));
        grad_check("outer", &[("a", t(&[2, 3])), ("b", t(&[2, 2]))]);
    }
}
