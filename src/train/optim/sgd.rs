//! SGD with optional momentum (PyTorch: `b ← μ b + g`, `p ← p − lr · b`).

use candle_core::{Result, Tensor, Var};

use super::{OptimState, Optimizer, check_state, clamped, keep};
use crate::kernels::cuda::optim::optim_update;
use crate::train_config::TrainConfig;

pub struct Sgd {
    vars: Vec<Var>,
    buf: Vec<Option<Tensor>>,
    lr: f64,
    momentum: f64,
}

impl Sgd {
    /// With momentum, the buffers start at zeros, so that the first update makes each the
    /// gradient (`μ·0 + g = g`, PyTorch's first step) by the same operations as every later one.
    pub fn new(vars: Vec<Var>, c: &TrainConfig) -> Result<Sgd> {
        let buf = match c.momentum > 0.0 {
            true => vars.iter().map(|v| v.as_tensor().zeros_like().map(Some)).collect::<Result<_>>()?,
            false => vec![None; vars.len()],
        };
        Ok(Sgd { vars, buf, lr: c.lr, momentum: c.momentum })
    }
}

impl Optimizer for Sgd {
    fn update(&mut self, grads: &[Option<Tensor>], clamp: Option<f64>) -> Result<()> {
        for (i, var) in self.vars.iter().enumerate() {
            let Some(g) = &grads[i] else {
                continue;
            };
            if let (Some(b), true) = (&self.buf[i], self.momentum > 0.0)
                && optim_update::applies(var)
                && optim_update::sgd_momentum(g, var, b, self.lr, self.momentum, clamp)?
            {
                continue;
            }
            let g = &clamped(g, clamp)?;
            let update = match (&self.buf[i], self.momentum > 0.0) {
                (Some(b), true) => ((b * self.momentum)? + g)?,
                _ => g.clone(),
            };
            if let (Some(b), true) = (&self.buf[i], self.momentum > 0.0) {
                keep(b, update.clone())?;
            }
            var.set(&(var.as_tensor() - (update * self.lr)?)?)?;
        }
        Ok(())
    }

    fn state(&self) -> OptimState {
        OptimState { updates: 0, buffers: vec![self.buf.clone()] }
    }

    fn restore(&mut self, state: OptimState) -> Result<()> {
        check_state(&state, 1, &self.vars)?;
        // A parameter with no saved buffer (saved before its first update) keeps its current one.
        for (current, saved) in self.buf.iter_mut().zip(state.buffers.into_iter().next().unwrap_or_default()) {
            if saved.is_some() {
                *current = saved;
            }
        }
        Ok(())
    }

    fn rebind(&mut self, vars: &[Var]) -> Result<()> {
        super::rebound(&mut self.vars, vars)
    }
}
