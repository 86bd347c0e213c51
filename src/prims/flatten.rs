//! `flatten(x)`: all per-example axes as one, `[a, b, ...] → [a·b·...]` (row-major); a scalar
//! becomes `[1]`. The batch axis is kept.

use candle_core::Tensor;

use super::backward::forward_saving_nothing;
use super::define::primitive;
use super::*;

primitive! {
    Flatten = "flatten",
    "all per-example axes flattened into one (row-major)",
    args: [tensor("x")],
    examples: [[("x", t(&[2, 3]))]],
}

fn configure(args: &Args) -> Result<(impl Op + 'static, Inferred), PrimError> {
    let n = args.shape("x")?.iter().product::<usize>();
    Ok((FlattenOp { n }, Inferred::new(vec![Ty::Tensor(vec![n])], vec![], 0)))
}

struct FlattenOp {
    n: usize,
}

impl Op for FlattenOp {
    fn forward(&self, inputs: &[&Tensor], _params: &[&Tensor]) -> candle_core::Result<Vec<Tensor>> {
        let [x] = op::inputs("flatten", inputs)?;
        Ok(vec![x.reshape((x.dim(0)?, self.n))?])
    }

    fn manual(&self) -> Option<&dyn TrainOp> {
        Some(self)
    }
}

/// A shape op: the backward moves the gradient back to where the elements came from.
impl ManualBackward for FlattenOp {
    type Saved = ();

    fn forward_train(&self, inputs: &[&Tensor], params: &[&Tensor]) -> candle_core::Result<(Vec<Tensor>, ())> {
        forward_saving_nothing(self, inputs, params)
    }

    fn backward(
        &self,
        b: &Backward<'_, ()>,
        _param_grads: &mut [ParamGrad],
    ) -> candle_core::Result<Vec<Option<Tensor>>> {
        let [x] = b.inputs_of()?;
        Ok(vec![b.grads[0].as_ref().map(|g| g.reshape(x.dims())).transpose()?])
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;

    #[test]
    fn values_shapes_and_gradients() {
        assert_eq!(out_shapes("flatten", &[("x", t(&[2, 3, 4]))]), vec![vec![24]]);
        assert_eq!(out_shapes("flatten", &[("x", t(&[]))]), vec![vec![1]]);
        assert_eq!(run("flatten", &[("x", t(&[2, 2]))], &[vec![1.0, 2.0, 3.0, 4.0]]), vec![1.0, 2.0, 3.0, 4.0]);
    }
}
