//! The building half of a primitive ([`Lower`]: the op for a checked call) and the runtime
//! half ([`Op`]: one checked call, run on a batch with candle).

use std::sync::Arc;

use candle_core::{Result, Tensor};

use super::backward::TrainOp;
use crate::kernels::cpu::dense::{dense, dense_packed};
use crate::signature::{Args, PrimError, Primitive};

/// The building half of a primitive: the op that runs a checked call.
pub trait Lower: Primitive {
    /// The op for one call, whose arguments [`Primitive::infer`] accepted.
    fn lower(&self, args: &Args) -> std::result::Result<Arc<dyn Op>, PrimError>;
}

/// Runs one call. `inputs` are the present tensor arguments in signature order, each with a
/// leading batch dimension (which may be 1 for values shared by the whole batch, such as a
/// learned scalar); `params` are the call site's parameters in declared order (an op reads
/// them through the [`Slot`](crate::signature::Slot)s its configuration kept). Any device: this is the
/// formulation every device runs, and the one candle's autograd differentiates.
pub trait Op: Send + Sync {
    fn forward(&self, inputs: &[&Tensor], params: &[&Tensor]) -> Result<Vec<Tensor>>;

    /// The op's own reverse mode, if it has one (see [`ManualBackward`](super::ManualBackward));
    /// without it, training differentiates [`Op::forward`] with candle's autograd.
    fn manual(&self) -> Option<&dyn TrainOp> {
        None
    }

    /// The op over a whole pack of trials in one go, if it has such a form (see
    /// [`PackedForward`]); without it a pack runs [`Op::forward`] once per trial, with each
    /// trial's parameters on its rows.
    fn packed(&self) -> Option<&dyn PackedForward> {
        None
    }
}

/// An op's form for a pack of trials (`compile::packed_run`): one product over the trial axis
/// where the pack would otherwise run the op once per trial (on a GPU, a launch per trial).
pub trait PackedForward {
    /// `inputs` hold every trial's rows, one trial after another (`[P·R, ...]`, trial `p`'s at
    /// `p·R..(p+1)·R`), and `params` each parameter stacked over the trials (`[P, ...]`, in
    /// declared order); the outputs are laid out as the inputs, trial `p`'s rows computed
    /// with trial `p`'s parameters alone.
    fn forward_packed(&self, inputs: &[&Tensor], params: &[&Tensor], trials: usize) -> Result<Vec<Tensor>>;
}

/// An op's outputs, as its forward returns them.
pub type Outputs = Result<Vec<Tensor>>;

/// A dense product `v Wᵀ + b` on the last axis of `v`: `kernels::cpu::dense::dense` for one
/// trial, `dense_packed` for a pack.
pub type Product<'a> = dyn Fn(&Tensor, &Tensor, Option<&Tensor>) -> Result<Tensor> + 'a;

/// An op whose parameters enter only through dense products (`linear`, `mlp`, `lstmCell`,
/// `distill`, `transfer`), written once over the product: it runs alone with `dense`, and for a
/// pack with `dense_packed`, one product batched over the trial axis (its [`Op`] and
/// [`PackedForward`] come with it). Its manual backward is its own.
pub trait DenseProducts: TrainOp + Send + Sync {
    /// The op's outputs, each of its products computed by `product(v, weight, bias)`.
    fn with_products(&self, inputs: &[&Tensor], params: &[&Tensor], product: &Product<'_>) -> Outputs;
}

impl<T: DenseProducts> Op for T {
    fn forward(&self, inputs: &[&Tensor], params: &[&Tensor]) -> Result<Vec<Tensor>> {
        self.with_products(inputs, params, &dense)
    }

    fn manual(&self) -> Option<&dyn TrainOp> {
        Some(self)
    }

    fn packed(&self) -> Option<&dyn PackedForward> {
        Some(self)
    }
}

impl<T: DenseProducts> PackedForward for T {
    fn forward_packed(&self, inputs: &[&Tensor], params: &[&Tensor], trials: usize) -> Result<Vec<Tensor>> {
        self.with_products(inputs, params, &|v, w, b| dense_packed(v, w, b, trials))
    }
}

/// The tensors of a call's inputs, exactly `N` of them (an op's own arity, fixed by its
/// configuration; a different count is a bug in memctl, reported as an error).
pub fn inputs<'a, const N: usize>(op: &str, inputs: &[&'a Tensor]) -> Result<[&'a Tensor; N]> {
    <[&Tensor; N]>::try_from(inputs).map_err(|_| {
        candle_core::Error::Msg(format!("internal: `{op}` expects {N} tensor inputs, got {}", inputs.len()))
    })
}

/// A fused op: it runs (`Op`) and has its own reverse mode (`TrainOp`), which is why it exists
/// (`prims::fusion` pairs the calls that run as one).
pub trait FusedOp: Op + TrainOp {}

impl<T: Op + TrainOp> FusedOp for T {}
