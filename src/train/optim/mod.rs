//! Optimisers over a cell's `Var`s, with PyTorch's update rules (Adam as candle-nn's AdamW,
//! which with `weight_decay = 0` is exactly Adam). They take one gradient per `Var` (`None`:
//! no gradient, no update), as memctl's reverse mode (`compile::tape`) produces them;
//! [`from_store`] lines candle's `GradStore` up the same way.

use candle_core::backprop::GradStore;
use candle_core::{Result, Tensor, Var};

use crate::train_config::{OptimizerKind, TrainConfig};

mod adam;
mod rmsprop;
mod sgd;

/// One update from the gradients in `grads` (one per `Var`, in the order given to [`build`]).
///
/// An update is split in two so that a GPU can replay it from a captured CUDA graph
/// (`train::graph_step`): [`Optimizer::prepare`] does the host-side bookkeeping of one update
/// (Adam's step count), outside the graph; [`Optimizer::update`] launches device work only and
/// keeps every state buffer at its address (see [`keep`]), on every device.
pub trait Optimizer: Send + Sync {
    /// Host-side work before each update; nothing here may be captured.
    fn prepare(&mut self) -> Result<()> {
        Ok(())
    }
    /// The update itself: tensor operations only, no reads back to the host. With `clamp`,
    /// each gradient is clamped to `[-clamp, clamp]` first (clipping by value, as
    /// [`clip::before_update`](super::clip::before_update) leaves it to the update).
    fn update(&mut self, grads: &[Option<Tensor>], clamp: Option<f64>) -> Result<()>;
    /// One whole update.
    fn step(&mut self, grads: &[Option<Tensor>], clamp: Option<f64>) -> Result<()> {
        self.prepare()?;
        self.update(grads, clamp)
    }
    /// Everything the next updates depend on besides the parameters (for checkpoints).
    fn state(&self) -> OptimState;
    /// Continues from a saved state (of an optimiser of the same kind over the same `Var`s).
    fn restore(&mut self, state: OptimState) -> Result<()>;
    /// Updates `vars` from now on: the same parameters, with the same values, held elsewhere
    /// (a pack's stacks, `compile::stacked_params`); the state buffers stay.
    fn rebind(&mut self, vars: &[Var]) -> Result<()>;
}

/// `vars` in place of `current`, after checking they are as many, shaped alike.
fn rebound(current: &mut Vec<Var>, vars: &[Var]) -> Result<()> {
    if vars.len() != current.len() {
        candle_core::bail!("internal: an optimiser's {} parameters rebound to {}", current.len(), vars.len());
    }
    if let Some((v, c)) = vars.iter().zip(current.iter()).find(|(v, c)| v.dims() != c.dims()) {
        candle_core::bail!("internal: an optimiser's parameter of shape {:?} rebound to {:?}", c.dims(), v.dims());
    }
    *current = vars.to_vec();
    Ok(())
}

/// An optimiser's state: its update count and its per-parameter buffers (Adam: `m` and `v`;
/// RMSprop: the square average and the momentum buffer; SGD: the momentum buffer, absent
/// without momentum), each one tensor per `Var` in order.
#[derive(Clone, Debug)]
pub struct OptimState {
    pub updates: u64,
    pub buffers: Vec<Vec<Option<Tensor>>>,
}

/// Checks `state` has `kinds` buffers of one tensor per `Var` each, shaped like the `Var`s.
fn check_state(state: &OptimState, kinds: usize, vars: &[Var]) -> Result<()> {
    if state.buffers.len() != kinds || state.buffers.iter().any(|b| b.len() != vars.len()) {
        candle_core::bail!(
            "optimiser state does not fit: {} buffers of {:?} tensors",
            state.buffers.len(),
            state.buffers.iter().map(Vec::len).collect::<Vec<_>>()
        );
    }
    for buffer in &state.buffers {
        for (t, v) in buffer.iter().zip(vars) {
            if let Some(t) = t
                && t.dims() != v.dims()
            {
                candle_core::bail!("optimiser state of shape {:?} for a parameter of shape {:?}", t.dims(), v.dims());
            }
        }
    }
    Ok(())
}

/// Puts a saved state's buffers back, in order, after checking that they fit `vars`; a
/// parameter with no saved tensor keeps its current one.
fn restore_buffers(state: OptimState, vars: &[Var], current: &mut [&mut Vec<Tensor>]) -> Result<()> {
    check_state(&state, current.len(), vars)?;
    for (buffer, saved) in current.iter_mut().zip(state.buffers) {
        for (c, s) in buffer.iter_mut().zip(saved) {
            if let Some(s) = s {
                *c = s;
            }
        }
    }
    Ok(())
}

/// Stores `value` as a state buffer's new content, in the buffer's memory: a captured CUDA graph
/// has recorded its address, and in a pack that updates as one (`train::pack_update`) the
/// buffer is a view of the pack's stacked state.
fn keep(buffer: &Tensor, value: Tensor) -> Result<()> {
    // A flat view shares the buffer's storage; `slice_set` copies in place.
    buffer.flatten_all()?.slice_set(&value.flatten_all()?, 0, 0)
}

/// `g` clamped to `[-limit, limit]` where a limit is given, for an update on tensor operations.
fn clamped(g: &Tensor, clamp: Option<f64>) -> Result<Tensor> {
    match clamp {
        Some(limit) => super::clip::clamped(g, limit),
        None => Ok(g.clone()),
    }
}

/// The gradients of `vars` in `store`, in order.
pub fn from_store(store: &GradStore, vars: &[Var]) -> Vec<Option<Tensor>> {
    vars.iter().map(|v| store.get(v.as_tensor()).cloned()).collect()
}

/// The optimiser a trial's settings ask for.
pub fn build(config: &TrainConfig, vars: Vec<Var>) -> Result<Box<dyn Optimizer>> {
    Ok(match config.optimizer {
        OptimizerKind::Adam => Box::new(adam::Adam::new(vars, config)?),
        OptimizerKind::RmsProp => Box::new(rmsprop::RmsProp::new(vars, config)?),
        OptimizerKind::Sgd => Box::new(sgd::Sgd::new(vars, config)?),
    })
}
