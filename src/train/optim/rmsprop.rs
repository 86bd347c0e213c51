//! RMSprop with PyTorch's semantics (`torch.optim.RMSprop`, not centred):
//! `v ← α v + (1 − α) g²`; with momentum `b ← μ b + g / (√v + ε)`, `p ← p − lr · b`;
//! without, `p ← p − lr · g / (√v + ε)`. The SAM authors use lr 1e-4, α 0.95 or 0.99, μ 0.9.

use candle_core::backprop::GradStore;
use candle_core::{Result, Tensor, Var};

use super::Optimizer;
use crate::train::config::TrainConfig;

pub struct RmsProp {
    vars: Vec<Var>,
    square_avg: Vec<Tensor>,
    momentum_buf: Vec<Tensor>,
    lr: f64,
    alpha: f64,
    eps: f64,
    momentum: f64,
}

impl RmsProp {
    pub fn new(vars: Vec<Var>, c: &TrainConfig) -> Result<RmsProp> {
        let zeros = |v: &Var| v.as_tensor().zeros_like();
        let square_avg = vars.iter().map(zeros).collect::<Result<_>>()?;
        let momentum_buf = vars.iter().map(zeros).collect::<Result<_>>()?;
        Ok(RmsProp { vars, square_avg, momentum_buf, lr: c.lr, alpha: c.alpha, eps: c.eps, momentum: c.momentum })
    }
}

impl Optimizer for RmsProp {
    fn step(&mut self, grads: &GradStore) -> Result<()> {
        for (i, var) in self.vars.iter().enumerate() {
            let Some(g) = grads.get(var.as_tensor()) else {
                continue;
            };
            let v = ((&self.square_avg[i] * self.alpha)? + (g.sqr()? * (1.0 - self.alpha))?)?;
            let step = g.div(&(v.sqrt()? + self.eps)?)?;
            let update = if self.momentum > 0.0 {
                let b = ((&self.momentum_buf[i] * self.momentum)? + step)?;
                self.momentum_buf[i] = b.clone();
                b
            } else {
                step
            };
            self.square_avg[i] = v;
            var.set(&(var.as_tensor() - (update * self.lr)?)?)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::Device;

    fn config(momentum: f64) -> TrainConfig {
        let mut c = crate::train::test_config();
        c.lr = 0.01;
        c.alpha = 0.99;
        c.eps = 1e-8;
        c.momentum = momentum;
        c
    }

    /// Two steps on loss = Σ p², checked against the update rule by hand
    /// (the same numbers PyTorch's RMSprop gives for p = [1, -2]).
    #[test]
    fn matches_the_pytorch_update_rule() -> Result<()> {
        for momentum in [0.0, 0.9] {
            let p = Var::new(&[1.0f64, -2.0], &Device::Cpu)?;
            let mut opt = RmsProp::new(vec![p.clone()], &config(momentum))?;
            let (mut v, mut b, mut expected) = ([0.0f64; 2], [0.0f64; 2], [1.0f64, -2.0]);
            for _ in 0..2 {
                let grads = p.as_tensor().sqr()?.sum_all()?.backward()?;
                opt.step(&grads)?;
                for j in 0..2 {
                    let g = 2.0 * expected[j];
                    v[j] = 0.99 * v[j] + 0.01 * g * g;
                    let s = g / (v[j].sqrt() + 1e-8);
                    b[j] = momentum * b[j] + s;
                    expected[j] -= 0.01 * if momentum > 0.0 { b[j] } else { s };
                }
            }
            let got = p.as_tensor().to_vec1::<f64>()?;
            for j in 0..2 {
                assert!((got[j] - expected[j]).abs() < 1e-12, "momentum {momentum}: {got:?} vs {expected:?}");
            }
        }
        Ok(())
    }
}
