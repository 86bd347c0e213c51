//! `embed(x, size)`: the input layer that fits any task — a learned vector per token id for
//! token inputs (as `embedding`), a dense layer for vector inputs (as `linear`). Lets one model
//! spec run on token tasks (associative retrieval, NAM's digit tasks) and vector tasks (copy,
//! Nth-farthest) unchanged.

use std::sync::Arc;

use super::{embedding, linear};
use crate::prims::prelude::*;

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
    fn infer(&self, args: &Args) -> Result<Inferred, PrimError> {
        match layer(args)? {
            (Layer::Embedding, args) => embedding::Embedding.infer(&args),
            (Layer::Linear, args) => linear::Linear.infer(&args),
        }
    }
    fn examples(&self) -> Vec<Example> {
        use crate::signature::example_args::*;
        vec![Example::new([("x", t(&[4])), ("size", int(2))]), Example::new([("x", tokens(3)), ("size", int(2))])]
    }
}

impl Lower for Embed {
    fn lower(&self, args: &Args) -> Result<Arc<dyn Op>, PrimError> {
        match layer(args)? {
            (Layer::Embedding, args) => embedding::Embedding.lower(&args),
            (Layer::Linear, args) => linear::Linear.lower(&args),
        }
    }
}

enum Layer {
    Embedding,
    Linear,
}

/// The layer `x` needs, with the arguments for it: an embedding of token ids, or a dense
/// layer (with its bias) on vectors.
fn layer(args: &Args) -> Result<(Layer, Args), PrimError> {
    let (x, size) = (args.ty("x")?.clone(), args.value("size")?.clone());
    Ok(match x {
        Ty::Tokens(_) => {
            let signature = embedding::Embedding.signature();
            (Layer::Embedding, Args { signature, values: vec![ArgVal::Tensor(x), ArgVal::Value(size)] })
        }
        Ty::Tensor(_) => {
            let signature = linear::Linear.signature();
            let values = vec![ArgVal::Tensor(x), ArgVal::Value(size), ArgVal::Value(Value::Bool(true))];
            (Layer::Linear, Args { signature, values })
        }
    })
}

#[cfg(test)]
mod tests {
    use crate::prims::contract::testing::*;

    #[test]
    fn picks_the_layer_from_the_input_type() {
        assert_eq!(param_count("embed", &[("x", tokens(5)), ("size", int(3))]), 15);
        assert_eq!(param_count("embed", &[("x", t(&[5])), ("size", int(3))]), 18);
        assert_eq!(out_shapes("embed", &[("x", t(&[2, 5])), ("size", int(3))]), vec![vec![2, 3]]);
    }
}
