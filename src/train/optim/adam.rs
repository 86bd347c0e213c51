//! Adam, via candle-nn's AdamW (with `weight_decay = 0` it is exactly Adam).

use candle_core::backprop::GradStore;
use candle_core::{Result, Var};
use candle_nn::Optimizer as _;

use super::Optimizer;
use crate::train::config::TrainConfig;

pub struct Adam(candle_nn::AdamW);

impl Adam {
    pub fn new(vars: Vec<Var>, c: &TrainConfig) -> Result<Adam> {
        let params = candle_nn::ParamsAdamW {
            lr: c.lr,
            beta1: c.beta1,
            beta2: c.beta2,
            eps: c.eps,
            weight_decay: c.weight_decay,
        };
        Ok(Adam(candle_nn::AdamW::new(vars, params)?))
    }
}

impl Optimizer for Adam {
    fn step(&mut self, grads: &GradStore) -> Result<()> {
        self.0.step(grads)
    }
}
