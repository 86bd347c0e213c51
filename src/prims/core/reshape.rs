//! `reshape(x, shape)`: the same elements (row-major) in a new per-example shape, e.g. a
//! controller's `[4·H]` move logits as `[H, 4]`. `shape` is a list of sizes whose product
//! must equal the number of elements of `x`; the batch axis is kept.

use candle_core::Tensor;

use crate::prims::prelude::*;

primitive! {
    Reshape = "reshape",
    "the same elements in a new per-example shape (a list of sizes)",
    args: [tensor("x"), list("shape")],
    examples: [[("x", t(&[2, 3])), ("shape", ints(&[3, 2]))]],
}

fn configure(args: &Args) -> Result<(impl Op + 'static, Inferred), PrimError> {
    let x = args.shape("x")?;
    let shape = args.sizes("shape")?;
    let (have, want) = (x.iter().product::<usize>(), shape.iter().product::<usize>());
    if have != want {
        return Err(PrimError::new(PrimErrorKind::Reshape { from: x.clone(), to: shape })
            .on("shape")
            .hint(Hint::SameElements));
    }
    Ok((ReshapeOp::to(shape.clone()), Inferred::new(vec![Ty::Tensor(shape)], vec![], 0)))
}

/// Every example's elements in `shape` (also `flatten`'s op).
pub(super) struct ReshapeOp {
    shape: Vec<usize>,
}

impl ReshapeOp {
    pub(super) fn to(shape: Vec<usize>) -> ReshapeOp {
        ReshapeOp { shape }
    }
}

impl Op for ReshapeOp {
    fn forward(&self, inputs: &[&Tensor], _params: &[&Tensor]) -> candle_core::Result<Vec<Tensor>> {
        let [x] = op::inputs("reshape", inputs)?;
        let mut dims = vec![x.dim(0)?];
        dims.extend(&self.shape);
        Ok(vec![x.reshape(dims)?])
    }

    fn manual(&self) -> Option<&dyn TrainOp> {
        Some(self)
    }
}

// A shape op: the backward moves the gradient back to where the elements came from.
backward_from_inputs!(ReshapeOp, |_op, b, _param_grads| {
    let [x] = b.inputs_of()?;
    Ok(vec![b.grads[0].as_ref().map(|g| g.reshape(x.dims())).transpose()?])
});

#[cfg(test)]
mod tests {
    use crate::prims::contract::testing::*;

    #[test]
    fn values_shapes_and_gradients() {
        let args = [("x", t(&[6])), ("shape", ints(&[2, 3]))];
        assert_eq!(out_shapes("reshape", &args), vec![vec![2, 3]]);
        assert_eq!(run("reshape", &args, &[vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]]), vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
        assert_eq!(out_shapes("reshape", &[("x", t(&[2, 3])), ("shape", int(6))]), vec![vec![6]]);
        assert!(
            error("reshape", &[("x", t(&[6])), ("shape", ints(&[4, 2]))]).contains("cannot reshape [6] (6 elements)")
        );
        assert!(error("reshape", &[("x", t(&[6])), ("shape", ints(&[6, 0]))]).contains("`shape` must be a size"));
    }
}
