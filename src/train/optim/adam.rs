//! Adam as candle-nn's AdamW computes it (with `weight_decay = 0` it is exactly Adam):
//! `m ← β1 m + (1 − β1) g`, `v ← β2 v + (1 − β2) g²`, `θ ← θ (1 − lr λ) − lr m̂ / (√v̂ + ε)`.

use candle_core::{Result, Tensor, Var};

use super::{OptimState, Optimizer, clamped, keep, restore_buffers};
use crate::kernels::cuda::optim::optim_update::{self, AdamRule};
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
    /// The bias corrections `1 / (1 − β1ᵗ)` and `1 / (1 − β2ᵗ)` of the coming update, as a
    /// device tensor off the CPU: they change every step, and a captured CUDA graph reads
    /// them from memory instead of baking in the values of the step it was captured at.
    corrections: Option<Tensor>,
}

impl Adam {
    pub fn new(vars: Vec<Var>, c: &TrainConfig) -> Result<Adam> {
        let m = vars.iter().map(|v| v.as_tensor().zeros_like()).collect::<Result<_>>()?;
        let v = vars.iter().map(|v| v.as_tensor().zeros_like()).collect::<Result<_>>()?;
        let corrections = match vars.first() {
            Some(p) if !p.device().is_cpu() => Some(Tensor::zeros(2, p.dtype(), p.device())?),
            _ => None,
        };
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
            corrections,
        })
    }

    /// The bias corrections of update `step_t`.
    fn scales(&self) -> (f64, f64) {
        (1.0 / (1.0 - self.beta1.powi(self.step_t)), 1.0 / (1.0 - self.beta2.powi(self.step_t)))
    }
}

impl Optimizer for Adam {
    fn prepare(&mut self) -> Result<()> {
        self.step_t += 1;
        let (scale_m, scale_v) = self.scales();
        if let Some(c) = &self.corrections {
            let values = Tensor::new(&[scale_m, scale_v], c.device())?.to_dtype(c.dtype())?;
            c.slice_set(&values, 0, 0)?;
        }
        Ok(())
    }

    fn update(&mut self, grads: &[Option<Tensor>], clamp: Option<f64>) -> Result<()> {
        let (b1, b2) = (self.beta1, self.beta2);
        let (scale_m, scale_v) = self.scales();
        let rule = AdamRule { lr: self.lr, beta1: b1, beta2: b2, eps: self.eps, weight_decay: self.weight_decay };
        for (i, theta) in self.vars.iter().enumerate() {
            let Some(g) = &grads[i] else { continue };
            if let Some(c) = &self.corrections
                && optim_update::applies(theta)
                && optim_update::adam(g, c, theta, &self.m[i], &self.v[i], &rule, clamp)?
            {
                continue;
            }
            let g = &clamped(g, clamp)?;
            let next_m = ((&self.m[i] * b1)? + (g * (1.0 - b1))?)?;
            let next_v = ((&self.v[i] * b2)? + (g.sqr()? * (1.0 - b2))?)?;
            let (m_hat, v_hat) = match &self.corrections {
                None => ((&next_m * scale_m)?, (&next_v * scale_v)?),
                Some(c) => (next_m.broadcast_mul(&c.get(0)?)?, next_v.broadcast_mul(&c.get(1)?)?),
            };
            let next_theta = (theta.as_tensor() * (1.0 - self.lr * self.weight_decay))?;
            let adjusted = (m_hat / (v_hat.sqrt()? + self.eps)?)?;
            theta.set(&(next_theta - (adjusted * self.lr)?)?)?;
            keep(&self.m[i], next_m)?;
            keep(&self.v[i], next_v)?;
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

    fn rebind(&mut self, vars: &[Var]) -> Result<()> {
        super::rebound(&mut self.vars, vars)
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
            ours.step(&super::super::from_store(&ga, std::slice::from_ref(&a)), None)?;
            theirs.step(&b.as_tensor().powf(3.0)?.sum_all()?.backward()?)?;
        }
        assert_eq!(a.as_tensor().to_vec1::<f64>()?, b.as_tensor().to_vec1::<f64>()?);
        Ok(())
    }

    /// The bias corrections read from a device tensor (as on a GPU, for graph replay) give
    /// the updates of the host-side scalars, and the moment buffers stay at their addresses.
    #[test]
    fn device_side_corrections_update_like_host_scalars() -> Result<()> {
        let c = crate::train::test_config();
        let init = [1.0f64, -2.0, 0.5];
        let (a, b) = (Var::new(&init, &Device::Cpu)?, Var::new(&init, &Device::Cpu)?);
        let mut host = Adam::new(vec![a.clone()], &c)?;
        let mut device = Adam::new(vec![b.clone()], &c)?;
        device.corrections = Some(Tensor::zeros(2, candle_core::DType::F64, &Device::Cpu)?);
        for _ in 0..4 {
            let ga = a.as_tensor().powf(3.0)?.sum_all()?.backward()?;
            host.step(&super::super::from_store(&ga, std::slice::from_ref(&a)), None)?;
            let gb = b.as_tensor().powf(3.0)?.sum_all()?.backward()?;
            device.step(&super::super::from_store(&gb, std::slice::from_ref(&b)), None)?;
        }
        for (x, y) in a.as_tensor().to_vec1::<f64>()?.iter().zip(b.as_tensor().to_vec1::<f64>()?) {
            assert!((x - y).abs() < 1e-15, "{x} against {y}");
        }
        Ok(())
    }
}
