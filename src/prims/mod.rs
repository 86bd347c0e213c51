//! Memory primitives and tensor glue: the building blocks a `.mem` step is wired from, and
//! the ops that run them.
//!
//! A primitive has two halves. Its shape inference ([`Primitive`](crate::signature::Primitive),
//! in `crate::signature`) is what the checker sees: signature, argument checks, outputs,
//! parameters, FLOPs, and example calls — no candle. Lowering it ([`Lower`]) builds the
//! [`Op`](contract::Op) that runs one checked call on a batch; only the compiler does that. An
//! op may also have its own reverse mode ([`ManualBackward`](contract::ManualBackward), used by
//! training on the CPU); without one, training differentiates its `forward` with candle's
//! autograd. Both halves sit in one file per primitive.
//!
//! # Rooms
//!
//! - [`contract`]: what every primitive implements (`primitive!`, [`Op`](contract::Op),
//!   [`Lower`], the manual backward, parameter initialisation, the test checks); it imports
//!   no primitive.
//! - the families, one folder each: [`sam`], [`nam`], [`rmc`], [`kanerva`] (the memory
//!   models), [`layers`] (learned controller layers) and [`core`] (tensor glue);
//! - [`fusion`]: the pairs of calls training runs as one op, across families;
//! - [`registry`]: [`PRIMS`] and the lookups; `prelude`: what a primitive file imports.
//!
//! The arrows run one way: a primitive imports the prelude (the contract), siblings of its own
//! family by `super::`, and another family's file by its full path; the registry and the
//! fusions import the families; nothing in a family imports the registry.
//!
//! # Adding a primitive
//!
//! One file in its family's folder, plus its `mod` line in that folder's `mod.rs` and one
//! entry in [`PRIMS`] (`registry.rs`). The file starts with `use crate::prims::prelude::*;`
//! and has:
//! 1. a `primitive!` declaration (`contract/define.rs`): name, summary and arguments (from which
//!    the macro derives the unit struct, `Primitive` and [`Lower`]);
//! 2. `configure(args)`: checks the call and returns the op's configuration with its
//!    `Inferred`; parameters are declared with a `ParamList`, whose `Slot`s the op keeps to
//!    read them by name;
//! 3. `examples()`: calls that fit (the registry tests run the primitive's finite-difference
//!    gradient check on each, and its manual backward check if it has one);
//! 4. the op: [`Op::forward`](contract::Op::forward) on candle tensors (batch first), and
//!    optionally [`ManualBackward`](contract::ManualBackward) with a typed `Saved`, exposed
//!    through [`Op::manual`](contract::Op::manual);
//! 5. its tests, with `use crate::prims::contract::testing::*;`.
//!
//! The checker, compiler, tests and `memctl prims` read the registry; nothing else changes.
//! Mistakes in a call are `PrimError`s: a `PrimErrorKind` with typed fields, its text written
//! once in `crate::signature`.

pub mod contract;
pub mod fusion;
pub(crate) mod prelude;
pub mod registry;

pub mod core;
pub mod kanerva;
pub mod layers;
pub mod nam;
pub mod rmc;
pub mod sam;

pub use contract::Lower;
pub use registry::{PRIMS, Primitives, get, registry_problems};
