//! `embed(x, size)`: the input layer that fits any task — a learned vector per token id for
//! token inputs (as `embedding`), a dense layer for vector inputs (as `linear`). Lets one model
//! spec run on token tasks (associative retrieval, NAM's digit tasks) and vector tasks (copy,
//! Nth-farthest) unchanged.

use super::*;

pub struct Embed;

static SIGNATURE: [ArgSpec; 2] = [ArgSpec::tensor("x"), ArgSpec::value("size", Kind::Int, Default::Required)];

impl Primitive for Embed {
    fn name(&self) -> &'static str {
        "embed"
    }
    fn summary(&self) -> &'static str {
        "input layer: embedding for token ids, linear for vectors"
    }
    fn signature(&self) -> &'static [ArgSpec] {
        &SIGNATURE
    }
    fn instantiate(&self, args: &Args) -> Result<Instance, PrimError> {
        match args.ty("x")? {
            Ty::Tokens(_) => embedding::Embedding.instantiate(args),
            Ty::Tensor(_) => {
                let linear_args = Args {
                    signature: linear::Linear.signature(),
                    values: vec![
                        args.values[0].clone(),
                        args.values[1].clone(),
                        ArgVal::Value(crate::value::Value::Bool(true)),
                    ],
                };
                linear::Linear.instantiate(&linear_args)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;

    #[test]
    fn picks_the_layer_from_the_input_type() {
        assert_eq!(param_count("embed", &[("x", tokens(5)), ("size", int(3))]), 15);
        assert_eq!(param_count("embed", &[("x", t(&[5])), ("size", int(3))]), 18);
        assert_eq!(out_shapes("embed", &[("x", t(&[2, 5])), ("size", int(3))]), vec![vec![2, 3]]);
        grad_check("embed", &[("x", t(&[4])), ("size", int(2))]);
    }
}
