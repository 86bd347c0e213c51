//! The registry: every primitive by name ([`PRIMS`]), the lookups the compiler and the checker
//! use ([`get`], [`Primitives`]), and what the registry checks of itself
//! ([`registry_problems`]).

use super::contract::Lower;
use super::{core, kanerva, layers, nam, rmc, sam};
use crate::signature::{Catalog, Primitive};

/// Every primitive, by name. Order is the order of `memctl prims`.
pub static PRIMS: &[&dyn Lower] = &[
    &sam::item_write::ItemWrite,
    &sam::rel_read::RelRead,
    &sam::sam_read::SamRead,
    &sam::opa_attend::OpaAttend,
    &sam::transfer::Transfer,
    &sam::distill::Distill,
    &nam::nam_wr::NamWr,
    &nam::nam_rd::NamRd,
    &nam::nam_attend::NamAttend,
    &nam::tape_write::TapeWrite,
    &nam::tape_read::TapeRead,
    &nam::key_jump::KeyJump,
    &nam::head_move::HeadMove,
    &rmc::mhdpa::Mhdpa,
    &rmc::rmc_gate::RmcGate,
    &kanerva::kanerva_update::KanervaUpdate,
    &kanerva::kanerva_read::KanervaRead,
    &layers::lstm_cell::LstmCell,
    &layers::gru_cell::GruCell,
    &layers::linear::Linear,
    &layers::mlp::Mlp,
    &layers::embed::Embed,
    &layers::embedding::Embedding,
    &layers::layer_norm::LayerNorm,
    &core::scalar::Scalar,
    &core::sigmoid::Sigmoid,
    &core::tanh::Tanh,
    &core::relu::Relu,
    &core::stop_gradient::StopGradient,
    &core::softmax::Softmax,
    &core::add::Add,
    &core::sub::Sub,
    &core::mul::Mul,
    &core::div::Div,
    &core::affine::Affine,
    &core::outer::Outer,
    &core::matmul::MatMul,
    &core::concat::Concat,
    &core::slice::Slice,
    &core::reshape::Reshape,
    &core::flatten::Flatten,
    &layers::normalize::Normalize,
];

/// Looks a primitive up by name.
pub fn get(name: &str) -> Option<&'static dyn Lower> {
    PRIMS.iter().copied().find(|p| p.name() == name)
}

/// The registry as the checker sees it: shape inference only.
pub struct Primitives;

impl Catalog for Primitives {
    fn primitive(&self, name: &str) -> Option<&'static dyn Primitive> {
        get(name).map(|p| p as &'static dyn Primitive)
    }

    fn primitive_names(&self) -> Vec<&'static str> {
        PRIMS.iter().map(|p| p.name()).collect()
    }
}

/// Problems with the registry itself: a name registered twice, a primitive without a summary
/// or without examples, an example that does not fit its primitive.
pub fn registry_problems() -> Vec<String> {
    problems_of(PRIMS)
}

fn problems_of(prims: &[&dyn Lower]) -> Vec<String> {
    let mut problems = vec![];
    for (i, p) in prims.iter().enumerate() {
        if prims[..i].iter().any(|q| q.name() == p.name()) {
            problems.push(format!("primitive `{}` is registered twice", p.name()));
        }
        if p.summary().is_empty() {
            problems.push(format!("primitive `{}` has no summary", p.name()));
        }
        let examples = p.examples();
        if examples.is_empty() {
            problems.push(format!("primitive `{}` has no examples, so no gradient check runs on it", p.name()));
        }
        for (k, e) in examples.iter().enumerate() {
            match e.bind(*p) {
                None => problems.push(format!("example {k} of `{}` names an argument it does not have", p.name())),
                Some(args) => {
                    if let Err(err) = p.infer(&args) {
                        problems.push(format!("example {k} of `{}` does not fit: {err}", p.name()));
                    }
                }
            }
        }
    }
    problems
}

/// The registry drives the gradient tests: every primitive's examples run through the finite-
/// difference check, and through the manual-backward check where the op has one. A primitive
/// registered without examples fails `registry_problems`.
#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::prims::contract::Op;
    use crate::prims::contract::testing::*;
    use crate::signature::{ArgSpec, Args, Example, Inferred, PrimError};

    #[test]
    fn the_registry_is_consistent() {
        assert_eq!(registry_problems(), Vec::<String>::new());
    }

    #[test]
    fn every_primitive_passes_its_gradient_checks_on_its_examples() {
        for p in PRIMS {
            for e in p.examples() {
                if !p.passes_gradients() {
                    assert_blocks_gradients(p.name(), &e.args);
                    continue;
                }
                grad_check(p.name(), &e.args);
                if instance(p.name(), &e.args).is_ok_and(|i| i.op.manual().is_some()) {
                    manual_backward_check(p.name(), &e.args);
                }
            }
        }
    }

    #[test]
    fn a_primitive_without_examples_is_a_registry_problem() {
        struct Bare;
        impl Primitive for Bare {
            fn name(&self) -> &'static str {
                "bare"
            }
            fn summary(&self) -> &'static str {
                "a primitive someone forgot to give examples"
            }
            fn signature(&self) -> &'static [ArgSpec] {
                &[]
            }
            fn infer(&self, _: &Args) -> Result<Inferred, PrimError> {
                Ok(Inferred::new(vec![], vec![], 0))
            }
            fn examples(&self) -> Vec<Example> {
                vec![]
            }
        }
        impl Lower for Bare {
            fn lower(&self, _: &Args) -> Result<Arc<dyn Op>, PrimError> {
                unreachable!("never lowered")
            }
        }
        let problems = problems_of(&[&Bare]);
        assert_eq!(problems, ["primitive `bare` has no examples, so no gradient check runs on it"]);
    }
}
