//! `affine(x, scale = 1.0, shift = 0.0)` = `scale · x + shift` with constants: what a tensor
//! combined with a number (`0.5 * M`, `x - 1`, `-x`) becomes.

use candle_core::Tensor;

use crate::prims::prelude::*;

primitive! {
    Affine = "affine",
    "scale · x + shift with constant scale and shift (tensor-number arithmetic)",
    args: [tensor("x"), float_or("scale", 1.0), float_or("shift", 0.0)],
    examples: [
        [("x", t(&[3])), ("scale", float(-0.5))],
        [("x", t(&[3])), ("scale", float(-0.5)), ("shift", float(2.0))],
    ],
}

fn configure(args: &Args) -> Result<(AffineOp, Inferred), PrimError> {
    let x = args.shape("x")?.clone();
    let (scale, shift) = (args.float("scale")?, args.float("shift")?);
    let flops = 2 * x.iter().product::<usize>() as u64;
    Ok((AffineOp { scale, shift }, Inferred::new(vec![Ty::Tensor(x)], vec![], flops)))
}

struct AffineOp {
    scale: f64,
    shift: f64,
}

impl Op for AffineOp {
    fn forward(&self, inputs: &[&Tensor], _params: &[&Tensor]) -> candle_core::Result<Vec<Tensor>> {
        let [x] = op::inputs("affine", inputs)?;
        Ok(vec![x.affine(self.scale, self.shift)?])
    }

    fn manual(&self) -> Option<&dyn TrainOp> {
        Some(self)
    }
}

backward_from_inputs!(AffineOp, |op, b, _param_grads| {
    Ok(vec![match &b.grads[0] {
        Some(g) if b.needs[0] => Some((g * op.scale)?),
        _ => None,
    }])
});

#[cfg(test)]
mod tests {
    use crate::prims::contract::testing::*;

    #[test]
    fn values() {
        assert_eq!(
            run("affine", &[("x", t(&[2])), ("scale", float(2.0)), ("shift", float(1.0))], &[vec![1.0, -1.0]]),
            vec![3.0, -1.0]
        );
    }
}
