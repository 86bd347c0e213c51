//! The contract every primitive implements, and nothing specific to one of them: the
//! `primitive!` declaration (`define`), the runtime [`Op`] and the building half
//! [`Lower`], the manual reverse mode ([`backward`]: [`ManualBackward`], [`SlicedBackward`],
//! the [`TrainOp`] the tape drives), the fused ops' [`FusedOp`], deterministic parameter
//! initialisation ([`init`]) and, for tests, the checks every primitive passes (`testing`:
//! finite-difference and manual-backward gradient checks).
//!
//! The contract imports no primitive and no family: the families build on it.

pub mod backward;
pub(crate) mod define;
pub mod init;
pub mod op;
#[cfg(test)]
pub(crate) mod testing;

pub use backward::{
    Backward, Forward, InputGrads, ManualBackward, ParamGrad, SavedAny, SlicedBackward, TrainOp,
    forward_saving_nothing, via_autograd,
};
pub use op::{Alone, FusedOp, Lower, Op, Outputs, Pack, PackedForward, Products, WithProducts};
