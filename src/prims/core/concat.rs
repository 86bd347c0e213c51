//! `concat(a, b)` = `[a : b]`: concatenation along the last axis (the papers' `:` operator,
//! e.g. LSAM's `[x_t : h_{t−1}]`, NAM §3.2). `[..., n] , [..., m] → [..., n + m]`, leading
//! axes equal. A value shared by the batch (batch axis 1) is repeated over the batch.
//! Two operands: nest calls for more (`concat(a, concat(b, c))`).

use candle_core::{D, Tensor};

use crate::kernels::blocks::nam::{batch_of, expand_batch};
use crate::prims::prelude::*;

primitive! {
    Concat = "concat",
    "concatenation [a : b] along the last axis",
    args: [tensor("a"), tensor("b")],
    examples: [[("a", t(&[2, 3])), ("b", t(&[2, 2]))], [("a", shared(&[2, 3])), ("b", t(&[2, 2]))]],
}

fn configure(args: &Args) -> Result<(impl Op + 'static, Inferred), PrimError> {
    let (a, b) = (args.shape("a")?, args.shape("b")?);
    let (Some((&n, lead_a)), Some((&m, lead_b))) = (a.split_last(), b.split_last()) else {
        let arg = if a.is_empty() { "a" } else { "b" };
        return Err(PrimError::new(PrimErrorKind::Scalar { needs: "concat joins vectors (or larger)" })
            .on(arg)
            .hint(Hint::MakeVector));
    };
    if lead_a != lead_b {
        return Err(PrimError::leading_axes_differ("concat", a, b));
    }
    let mut out = lead_a.to_vec();
    out.push(n + m);
    Ok((ConcatOp, Inferred::new(vec![Ty::Tensor(out)], vec![], 0)))
}

struct ConcatOp;

impl Op for ConcatOp {
    fn forward(&self, inputs: &[&Tensor], _params: &[&Tensor]) -> candle_core::Result<Vec<Tensor>> {
        let batch = batch_of(inputs)?;
        let [a, b] = op::inputs("concat", inputs)?;
        let (a, b) = (expand_batch(a, batch)?, expand_batch(b, batch)?);
        Ok(vec![Tensor::cat(&[&a, &b], D::Minus1)?])
    }

    fn manual(&self) -> Option<&dyn TrainOp> {
        Some(self)
    }
}

// A shape op: the backward moves the gradient back to where the elements came from.
backward_from_inputs!(ConcatOp, |_op, b, _param_grads| {
    let [a, _] = b.inputs_of()?;
    let Some(g) = &b.grads[0] else { return Ok(vec![None, None]) };
    let n = a.dim(D::Minus1)?;
    let parts = [(0, n), (n, g.dim(D::Minus1)? - n)];
    // A part shared by the batch (batch axis 1) was repeated: its gradient is the batch sum.
    let grad = |k: usize| -> candle_core::Result<Option<Tensor>> {
        if !b.needs[k] {
            return Ok(None);
        }
        let (start, len) = parts[k];
        let part = g.narrow(D::Minus1, start, len)?.contiguous()?;
        let shared = b.inputs[k].dim(0)? != part.dim(0)?;
        Ok(Some(if shared { part.sum_keepdim(0)? } else { part }))
    };
    Ok(vec![grad(0)?, grad(1)?])
});

#[cfg(test)]
mod tests {
    use crate::prims::contract::testing::*;

    #[test]
    fn values_and_shapes() {
        assert_eq!(run("concat", &[("a", t(&[2])), ("b", t(&[1]))], &[vec![1.0, 2.0], vec![3.0]]), vec![1.0, 2.0, 3.0]);
        assert_eq!(out_shapes("concat", &[("a", t(&[3, 2])), ("b", t(&[3, 4]))]), vec![vec![3, 6]]);
        assert!(error("concat", &[("a", t(&[3, 2])), ("b", t(&[2, 4]))]).contains("leading axes differ"));
        assert!(error("concat", &[("a", t(&[])), ("b", t(&[2]))]).contains("`a` is a scalar"));
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
