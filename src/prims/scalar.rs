//! `scalar(init = 0.0)`: one learned number, shared by the whole batch (e.g. STM's α1–α3,
//! which the authors' code initialises to 0 and trains unconstrained; reference.md §1.2).

use candle_core::Tensor;

use super::*;

pub struct Scalar;

static SIGNATURE: [ArgSpec; 1] = [ArgSpec::value("init", Kind::Float, Default::Float(0.0))];

impl Primitive for Scalar {
    fn name(&self) -> &'static str {
        "scalar"
    }
    fn summary(&self) -> &'static str {
        "a learned scalar, initialised to `init`"
    }
    fn signature(&self) -> &'static [ArgSpec] {
        &SIGNATURE
    }
    fn instantiate(&self, args: &Args) -> Result<Instance, PrimError> {
        let init = args.float("init")?;
        let params = vec![ParamDecl::new("value", vec![1], Init::Constant(init))];
        Ok(Instance::new(ScalarOp, vec![Ty::Tensor(vec![])], params, 0))
    }
}

struct ScalarOp;

impl Op for ScalarOp {
    /// Batch axis of size 1: broadcasting spreads it over the batch.
    fn forward(&self, _inputs: &[&Tensor], params: &[&Tensor]) -> candle_core::Result<Vec<Tensor>> {
        Ok(vec![params[0].clone()])
    }

    fn has_backward(&self) -> bool {
        true
    }

    fn backward(&self, b: &Backward<'_>, param_grads: &mut [ParamGrad]) -> candle_core::Result<Vec<Option<Tensor>>> {
        if let Some(g) = &b.grads[0] {
            param_grads[0].add(g)?;
        }
        Ok(vec![])
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;

    #[test]
    fn is_one_learned_number() {
        assert_eq!(param_count("scalar", &[]), 1);
        assert_eq!(run("scalar", &[("init", float(0.25))], &[]), vec![0.25]);
        manual_backward_check("scalar", &[]);
    }
}
