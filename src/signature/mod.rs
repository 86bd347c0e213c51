//! What the checker knows about a primitive, without any tensor library: its name, its
//! arguments, and its shape inference — given the shapes and options of one call, the output
//! types, the parameters the call site owns, and its FLOPs ([`Inferred`]).
//!
//! This is one half of a primitive. The other half, building the op that runs it on a batch
//! (candle), lives with the implementation in `crate::prims` and is used only by the compiler.
//! The checker reaches primitives through a [`Catalog`] it is given, so `check` depends on
//! this module and never on `prims` (or on candle).

mod args;
mod example;
mod param_decl;
mod prim_error;

pub use args::{ArgKind, ArgSpec, ArgVal, Args, Default, MAX_SIZE, arg};
pub use example::{Example, ExampleArg, example_args};
pub use param_decl::{Dense, Norm, ParamDecl, ParamList, Slot};
pub use prim_error::{Combine, HeadLayout, Hint, PrimError, PrimErrorKind};

use crate::ty::Ty;

/// A building block of a step, as the checker sees it.
pub trait Primitive: Send + Sync {
    /// The name used in `.mem` files (the papers' names: `samRead`, `itemWrite`, ...).
    fn name(&self) -> &'static str;
    /// One line: what it computes and the paper equation.
    fn summary(&self) -> &'static str;
    /// Arguments, in positional order.
    fn signature(&self) -> &'static [ArgSpec];
    /// Names of the outputs (most primitives have one).
    fn outputs(&self) -> &'static [&'static str] {
        &["out"]
    }
    /// Checks one call's shapes and options: its outputs, parameters and cost.
    fn infer(&self, args: &Args) -> Result<Inferred, PrimError>;
    /// Calls that fit, covering each way the primitive computes (options, optional inputs).
    /// Every primitive's gradient tests run on these, so a primitive without examples
    /// fails the registry test.
    fn examples(&self) -> Vec<Example>;
    /// Whether gradients flow back through it. `false` only for a primitive whose purpose is
    /// to block them (`stopGradient`): the gradient tests then assert that none flows, in
    /// place of the finite-difference check.
    fn passes_gradients(&self) -> bool {
        true
    }
}

/// The shape inference of one call.
#[derive(Clone, Debug, PartialEq)]
pub struct Inferred {
    pub outputs: Vec<Ty>,
    /// The parameters the call site owns, in the order its op receives them.
    pub params: Vec<ParamDecl>,
    /// Forward FLOPs per example per time step (multiply-add = 2).
    pub flops: u64,
    /// Elements per example per time step that the op keeps for its backward besides its
    /// outputs, where they are of a larger order (attention weights over a memory's slots):
    /// the memory estimate counts them.
    pub saved: u64,
}

impl Inferred {
    pub fn new(outputs: Vec<Ty>, params: impl Into<Vec<ParamDecl>>, flops: u64) -> Inferred {
        Inferred { outputs, params: params.into(), flops, saved: 0 }
    }

    /// The op keeps `elements` for its backward (see [`Inferred::saved`]).
    pub fn saving(self, elements: u64) -> Inferred {
        Inferred { saved: elements, ..self }
    }
}

/// The primitives a spec may call, by name: how the checker is given them.
pub trait Catalog: Sync {
    fn primitive(&self, name: &str) -> Option<&'static dyn Primitive>;
    /// Every name, for "did you mean" suggestions.
    fn primitive_names(&self) -> Vec<&'static str>;
}
