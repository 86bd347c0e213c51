//! Memory primitives and tensor glue: the building blocks a `.mem` step is wired from, and
//! the ops that run them.
//!
//! A primitive has two halves. Its shape inference ([`Primitive`], in `crate::signature`) is
//! what the checker sees: signature, argument checks, outputs, parameters, FLOPs, and example
//! calls — no candle. Lowering it ([`Lower`]) builds the [`Op`] that runs one checked call on
//! a batch; only the compiler does that. An op may also have its own reverse mode
//! ([`ManualBackward`], used by training on the CPU); without one, training differentiates
//! its `forward` with candle's autograd. Both halves sit in one file per primitive.
//!
//! # Adding a primitive
//!
//! One file in this folder, plus its `mod` line and one entry in [`PRIMS`]:
//! 1. a [`primitive!`](define) declaration: name, summary and arguments (from which the
//!    macro derives the unit struct, [`Primitive`] and [`Lower`]);
//! 2. `configure(args)`: checks the call and returns the op's configuration with its
//!    [`Inferred`]; parameters are declared with a [`ParamList`], whose [`Slot`]s the op keeps
//!    to read them by name;
//! 3. `examples()`: calls that fit (the registry tests run the primitive's finite-difference
//!    gradient check on each, and its manual backward check if it has one);
//! 4. the op: [`Op::forward`] on candle tensors (batch first), and optionally
//!    [`ManualBackward`] with a typed `Saved`, exposed through [`Op::manual`].
//!
//! The checker, compiler, tests and `memctl prims` read the registry; nothing else changes.
//! Mistakes in a call are [`PrimError`]s: a [`PrimErrorKind`] with typed fields, its text
//! written once in `crate::signature`.

use std::sync::Arc;

pub use crate::signature::{
    ArgKind, ArgSpec, ArgVal, Args, Catalog, Combine, Default, Dense, Example, ExampleArg, HeadLayout, Hint, Inferred,
    Norm, ParamDecl, ParamList, PrimError, PrimErrorKind, Primitive, Slot,
};
pub use crate::ty::{Init, Shape, ShapeDisplay, Ty};
pub use crate::value::{Kind, Value};

pub mod add;
pub mod affine;
pub mod backward;
mod binary;
pub mod concat;
pub(crate) mod define;
pub mod distill;
pub mod div;
pub mod embed;
mod embed_lstm;
pub mod embedding;
pub mod flatten;
pub mod fusion;
pub mod gru_cell;
pub mod head_move;
mod heads;
pub mod init;
pub mod item_write;
pub mod kanerva_read;
mod kanerva_read_update;
mod kanerva_train;
pub mod kanerva_update;
pub mod key_jump;
pub mod layer_norm;
pub mod linear;
pub mod lstm_cell;
pub mod matmul;
pub mod mhdpa;
pub mod mlp;
pub mod mul;
pub mod nam_attend;
pub mod nam_rd;
pub mod nam_wr;
pub mod normalize;
pub(crate) mod op;
pub mod opa_attend;
pub mod outer;
pub mod rel_read;
pub mod relu;
pub mod reshape;
pub mod rmc_gate;
pub mod sam_read;
pub mod scalar;
pub mod sigmoid;
pub mod slice;
pub mod softmax;
pub mod stop_gradient;
pub mod sub;
pub mod tanh;
pub mod tape_read;
pub mod tape_write;
pub mod transfer;
mod unary;

#[cfg(test)]
pub(crate) mod testing;

/// Every primitive, by name. Order is the order of `memctl prims`.
pub static PRIMS: &[&dyn Lower] = &[
    &item_write::ItemWrite,
    &rel_read::RelRead,
    &sam_read::SamRead,
    &opa_attend::OpaAttend,
    &transfer::Transfer,
    &distill::Distill,
    &nam_wr::NamWr,
    &nam_rd::NamRd,
    &nam_attend::NamAttend,
    &tape_write::TapeWrite,
    &tape_read::TapeRead,
    &key_jump::KeyJump,
    &head_move::HeadMove,
    &mhdpa::Mhdpa,
    &rmc_gate::RmcGate,
    &kanerva_update::KanervaUpdate,
    &kanerva_read::KanervaRead,
    &lstm_cell::LstmCell,
    &gru_cell::GruCell,
    &linear::Linear,
    &mlp::Mlp,
    &embed::Embed,
    &embedding::Embedding,
    &layer_norm::LayerNorm,
    &scalar::Scalar,
    &sigmoid::Sigmoid,
    &tanh::Tanh,
    &relu::Relu,
    &stop_gradient::StopGradient,
    &softmax::Softmax,
    &add::Add,
    &sub::Sub,
    &mul::Mul,
    &div::Div,
    &affine::Affine,
    &outer::Outer,
    &matmul::MatMul,
    &concat::Concat,
    &slice::Slice,
    &reshape::Reshape,
    &flatten::Flatten,
    &normalize::Normalize,
];

/// Looks a primitive up by name.
pub fn get(name: &str) -> Option<&'static dyn Lower> {
    PRIMS.iter().copied().find(|p| p.name() == name)
}

/// The building half of a primitive: the op that runs a checked call.
pub trait Lower: Primitive {
    /// The op for one call, whose arguments [`Primitive::infer`] accepted.
    fn lower(&self, args: &Args) -> Result<Arc<dyn Op>, PrimError>;
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

pub use backward::{Backward, Forward, InputGrads, ManualBackward, ParamGrad, SavedAny, SlicedBackward, TrainOp};
pub use op::Op;

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
