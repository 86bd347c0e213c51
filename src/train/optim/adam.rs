//! Adam as candle-nn's AdamW computes it (with `weight_decay = 0` it is exactly Adam):
//! `m ← β1 m + (1 − β1) g`, `v ← β2 v + (1 − β2) g²`, `θ ← θ (1 − lr λ) − lr m̂ / (√v̂ + ε)`.

use candle_core::{Result, Tensor, Var};

use super::{OptimState, Optimizer, restore_buffers};
use crate::train_config::TrainConfig;

pub struct Adam {
    vars: Vec<Var>,
    m: Vec<Tensor>,
    v: Vec<Tensor>,
    step_t: i32,
    lr: f64,
    beta1: f64,
    beta2: f64,
    eps: f64,
    weight_decay: f64,
}

impl Adam {
    pub fn new(vars: Vec<Var>, c: &TrainConfig) -> Result<Adam> {
        let m = vars.iter().map(|v| v.as_tensor().zeros_like()).collect::<Result<_>>()?;
        let v = vars.iter().map(|v| v.as_tensor().zeros_like()).collect::<Result<_>>()?;
        Ok(Adam {
            vars,
            m,
            v,
            step_t: 0,
            lr: c.lr,
            beta1: c.beta1,
            beta2: c.beta2,
            eps: c.eps,
            weight_decay: c.weight_decay,
        })
    }
}

impl Optimizer for Adam {
    fn step(&mut self, grads: &[Option<Tensor>]) -> Result<()> {
        self.step_t += 1;
        let (b1, b2) = (self.beta1, self.beta2);
        let scale_m = 1.0 / (1.0 - b1.powi(self.step_t));
        let scale_v = 1.0 / (1.0 - b2.powi(self.step_t));
        for (i, theta) in self.vars.iter().enumerate() {
            let Some(g) = &grads[i] else { continue };
            let next_m = ((&self.m[i] * b1)? + (g * (1.0 - b1))?)?;
            let next_v = ((&self.v[i] * b2)? + (g.sqr()? * (1.0 - b2))?)?;
            let m_hat = (&next_m * scale_m)?;
            let v_hat = (&next_v * scale_v)?;
            let next_theta = (theta.as_tensor() * (1.0 - self.lr * self.weight_decay))?;
            let adjusted = (m_hat / (v_hat.sqrt()? + self.eps)?)?;
            theta.set(&(next_theta - (adjusted * self.lr)?)?)?;
            self.m[i] = next_m;
            self.v[i] = next_v;
        }
        Ok(())
    }

    fn state(&self) -> OptimState {
        let some = |ts: &[Tensor]| ts.iter().cloned().map(Some).collect();
        OptimState { updates: self.step_t as u64, buffers: vec![some(&self.m), some(&self.v)] }
    }

    fn restore(&mut self, state: OptimState) -> Result<()> {
        self.step_t = i32::try_from(state.updates).unwrap_or(i32::MAX);
        restore_buffers(state, &self.vars, &mut [&mut self.m, &mut self.v])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::Device;
    use candle_nn::Optimizer as _;

    /// The same updates as candle-nn's AdamW, which memctl used before.
    #[test]
    fn matches_candle_nn_adamw() -> Result<()> {
        let mut c = crate::train::test_config();
        c.weight_decay = 0.01;
        let init = [1.0f64, -2.0, 0.5];
        let (a, b) = (Var::new(&init, &Device::Cpu)?, Var::new(&init, &Device::Cpu)?);
        let mut ours = Adam::new(vec![a.clone()], &c)?;
        let params =
            candle_nn::ParamsAdamW { lr: c.lr, beta1: c.beta1, beta2: c.beta2, eps: c.eps, weight_decay: 0.01 };
        let mut theirs = candle_nn::AdamW::new(vec![b.clone()], params)?;
        for _ in 0..3 {
            let ga = a.as_tensor().powf(3.0)?.sum_all()?.backward()?;
            ours.step(&super::super::from_store(&ga, std::slice::from_ref(&a)))?;
            theirs.step(&b.as_tensor().powf(3.0)?.sum_all()?.backward()?)?;
        }
        assert_eq!(a.as_tensor().to_vec1::<f64>()?, b.as_tensor().to_vec1::<f64>()?);
        Ok(())
    }
}
