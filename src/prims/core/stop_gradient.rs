//! `stopGradient(x)`: `x` in the forward pass, no gradient back to `x` in the backward pass.
//!
//! For ablations that keep a quantity's value but stop it from being trained through one
//! path: the Product Kanerva Machine paper's control "a stop gradient on the assignment
//! weights r" (PKM §4, Fig. 2C) shows that the assignment is optimised, because its
//! advantage goes away without the gradient.

use candle_core::Tensor;

use crate::prims::prelude::*;

primitive! {
    StopGradient = "stopGradient",
    "x, with no gradient flowing back to x (ablations: PKM's stop-gradient on the assignment)",
    args: [tensor("x")],
    examples: [[("x", t(&[3]))], [("x", t(&[2, 3]))]],
    passes_gradients: false,
}

fn configure(args: &Args) -> Result<(StopGradientOp, Inferred), PrimError> {
    Ok((StopGradientOp, Inferred::new(vec![Ty::Tensor(args.shape("x")?.clone())], vec![], 0)))
}

struct StopGradientOp;

impl Op for StopGradientOp {
    fn forward(&self, inputs: &[&Tensor], _params: &[&Tensor]) -> candle_core::Result<Vec<Tensor>> {
        let [x] = op::inputs("stopGradient", inputs)?;
        Ok(vec![x.detach()])
    }

    fn manual(&self) -> Option<&dyn TrainOp> {
        Some(self)
    }
}

impl ManualBackward for StopGradientOp {
    type Saved = ();

    fn forward_train(&self, inputs: &[&Tensor], params: &[&Tensor]) -> Forward<()> {
        let [x] = op::inputs("stopGradient", inputs)?;
        forward_saving_nothing(self, &[&x.contiguous()?], params)
    }

    fn backward(&self, _b: &Backward<'_, ()>, _param_grads: &mut [ParamGrad]) -> InputGrads {
        Ok(vec![None])
    }
}

#[cfg(test)]
mod tests {
    use crate::prims::contract::testing::*;

    #[test]
    fn the_value_passes_unchanged() {
        assert_eq!(run("stopGradient", &[("x", t(&[3]))], &[vec![1.5, -2.0, 0.0]]), vec![1.5, -2.0, 0.0]);
    }
}
