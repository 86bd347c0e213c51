//! What a primitive file imports: `use crate::prims::prelude::*;`. The contract (the
//! [`primitive!`](crate::prims::contract::define) declaration, [`Op`], [`Lower`], the manual
//! backward traits and helpers) and the shape-inference types of `crate::signature`, `crate::ty`
//! and `crate::value` a declaration and its `configure` are written with. Nothing of a family:
//! a primitive names what it takes from another primitive by its path.

pub(crate) use crate::prims::contract::backward::{backward_from_inputs, with_real};
pub(crate) use crate::prims::contract::define::primitive;
pub use crate::prims::contract::op;
pub use crate::prims::contract::{
    Backward, Forward, FusedOp, InputGrads, Lower, ManualBackward, Op, Outputs, ParamGrad, Products, SavedAny,
    SlicedBackward, TrainOp, WithProducts, forward_saving_nothing, via_autograd,
};
pub use crate::signature::{
    ArgSpec, ArgVal, Args, Combine, Default, Dense, Example, HeadLayout, Hint, Inferred, Norm, ParamList, PrimError,
    PrimErrorKind, Primitive, Slot,
};
pub use crate::ty::{Init, Ty};
pub use crate::value::{Kind, Value};
