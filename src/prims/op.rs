//! The runtime half of a primitive: one checked call, run on a batch with candle.

use candle_core::{Result, Tensor};

use super::TrainOp;

/// Runs one call. `inputs` are the present tensor arguments in signature order, each with a
/// leading batch dimension (which may be 1 for values shared by the whole batch, such as a
/// learned scalar); `params` are the call site's parameters in declared order (an op reads
/// them through the [`Slot`](super::Slot)s its configuration kept). Any device: this is the
/// formulation every device runs, and the one candle's autograd differentiates.
pub trait Op: Send + Sync {
    fn forward(&self, inputs: &[&Tensor], params: &[&Tensor]) -> Result<Vec<Tensor>>;

    /// The op's own reverse mode, if it has one (see [`ManualBackward`](super::ManualBackward));
    /// without it, training differentiates [`Op::forward`] with candle's autograd.
    fn manual(&self) -> Option<&dyn TrainOp> {
        None
    }
}

/// The tensors of a call's inputs, exactly `N` of them (an op's own arity, fixed by its
/// configuration; a different count is a bug in memctl, reported as an error).
pub fn inputs<'a, const N: usize>(op: &str, inputs: &[&'a Tensor]) -> Result<[&'a Tensor; N]> {
    <[&Tensor; N]>::try_from(inputs).map_err(|_| {
        candle_core::Error::Msg(format!("internal: `{op}` expects {N} tensor inputs, got {}", inputs.len()))
    })
}
