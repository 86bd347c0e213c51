//! `scalar(init = 0.0)`: one learned number, shared by the whole batch (e.g. STM's α1–α3,
//! which the authors' code initialises to 0 and trains unconstrained; docs/models.md, STM).

use candle_core::Tensor;

use crate::prims::prelude::*;

primitive! {
    Scalar = "scalar",
    "a learned scalar, initialised to `init`",
    args: [float_or("init", 0.0)],
    op: |value| ScalarOp { value },
}

fn examples() -> Vec<Example> {
    vec![Example { args: vec![] }]
}

fn configure(args: &Args) -> Result<(Slot, Inferred), PrimError> {
    let mut params = ParamList::new();
    let value = params.push("value", vec![1], Init::Constant(args.float("init")?));
    Ok((value, Inferred::new(vec![Ty::Tensor(vec![])], params.into_decls(), 0)))
}

struct ScalarOp {
    value: Slot,
}

impl WithProducts for ScalarOp {
    /// Alone, a batch axis of size 1: broadcasting spreads it over the batch.
    fn with_products(&self, _inputs: &[&Tensor], params: &[&Tensor], products: &dyn Products) -> Outputs {
        Ok(vec![products.per_row(self.value.of(params))?.squeeze(1)?])
    }
}

backward_from_inputs!(ScalarOp, |op, b, param_grads| {
    if let Some(g) = &b.grads[0] {
        op.value.of_mut(param_grads).add(g)?;
    }
    Ok(vec![])
});

#[cfg(test)]
mod tests {
    use crate::prims::contract::testing::*;

    #[test]
    fn is_one_learned_number() {
        assert_eq!(param_count("scalar", &[]), 1);
        assert_eq!(run("scalar", &[("init", float(0.25))], &[]), vec![0.25]);
    }
}
