//! Optimisers over a cell's `Var`s. candle-nn has AdamW (used for Adam) and plain SGD;
//! RMSprop and SGD with momentum are written here with PyTorch's update rules.

use candle_core::backprop::GradStore;
use candle_core::{Result, Var};

use super::config::{OptimizerKind, TrainConfig};

mod adam;
mod rmsprop;
mod sgd;

/// One update from the gradients in `grads`.
pub trait Optimizer {
    fn step(&mut self, grads: &GradStore) -> Result<()>;
}

/// The optimiser a trial's settings ask for.
pub fn build(config: &TrainConfig, vars: Vec<Var>) -> Result<Box<dyn Optimizer>> {
    Ok(match config.optimizer {
        OptimizerKind::Adam => Box::new(adam::Adam::new(vars, config)?),
        OptimizerKind::RmsProp => Box::new(rmsprop::RmsProp::new(vars, config)?),
        OptimizerKind::Sgd => Box::new(sgd::Sgd::new(vars, config)?),
    })
}
