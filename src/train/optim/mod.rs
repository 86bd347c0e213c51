//! Optimisers over a cell's `Var`s, with PyTorch's update rules (Adam as candle-nn's AdamW,
//! which with `weight_decay = 0` is exactly Adam). They take one gradient per `Var` (`None`:
//! no gradient, no update), as memctl's reverse mode (`compile::tape`) produces them;
//! [`from_store`] lines candle's `GradStore` up the same way.

use candle_core::backprop::GradStore;
use candle_core::{Result, Tensor, Var};

use super::config::{OptimizerKind, TrainConfig};

mod adam;
mod rmsprop;
mod sgd;

/// One update from the gradients in `grads` (one per `Var`, in the order given to [`build`]).
pub trait Optimizer: Send + Sync {
    fn step(&mut self, grads: &[Option<Tensor>]) -> Result<()>;
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
