//! RMSprop with PyTorch's semantics (`torch.optim.RMSprop`, not centred):
//! `v ← α v + (1 − α) g²`; with momentum `b ← μ b + g / (√v + ε)`, `p ← p − lr · b`;
//! without, `p ← p − lr · g / (√v + ε)`. The SAM authors use lr 1e-4, α 0.95 or 0.99, μ 0.9.

//!
//! On the CPU the update is one pass over each parameter (square average, momentum buffer and
//! parameter together); on CUDA one kernel (`kernels::cuda::optim::optim_update`, opt-in until
//! checked on a GPU); otherwise it is written with tensor operations. All compute the same
//! operations in the same order.

use candle_core::{Result, Tensor, Var};

use super::{OptimState, Optimizer, clamped, keep, restore_buffers};
use crate::kernels::cpu::par::multiversion;
use crate::kernels::cpu::{real::Real, view};
use crate::kernels::cuda::optim::optim_update::{self, RmsPropRule};
use crate::prims::contract::backward::with_real;
use crate::train_config::TrainConfig;

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
    fn update(&mut self, grads: &[Option<Tensor>], clamp: Option<f64>) -> Result<()> {
        for (i, g) in grads.iter().enumerate().take(self.vars.len()) {
            let var = self.vars[i].clone();
            let Some(g) = g else {
                continue;
            };
            if optim_update::applies(&var) {
                let rule = RmsPropRule { lr: self.lr, alpha: self.alpha, eps: self.eps, momentum: self.momentum };
                if optim_update::rmsprop(g, &var, &self.square_avg[i], &self.momentum_buf[i], &rule, clamp)? {
                    continue;
                }
            }
            let g = &clamped(g, clamp)?;
            if var.device().is_cpu() {
                with_real!(var.dtype(), T => self.fused::<T>(i, g)?);
                continue;
            }
            let v = ((&self.square_avg[i] * self.alpha)? + (g.sqr()? * (1.0 - self.alpha))?)?;
            let step = g.div(&(v.sqrt()? + self.eps)?)?;
            let update = if self.momentum > 0.0 {
                let b = ((&self.momentum_buf[i] * self.momentum)? + step)?;
                keep(&self.momentum_buf[i], b.clone())?;
                b
            } else {
                step
            };
            keep(&self.square_avg[i], v)?;
            var.set(&(var.as_tensor() - (update * self.lr)?)?)?;
        }
        Ok(())
    }

    fn state(&self) -> OptimState {
        let some = |ts: &[Tensor]| ts.iter().cloned().map(Some).collect();
        OptimState { updates: 0, buffers: vec![some(&self.square_avg), some(&self.momentum_buf)] }
    }

    fn restore(&mut self, state: OptimState) -> Result<()> {
        restore_buffers(state, &self.vars, &mut [&mut self.square_avg, &mut self.momentum_buf])
    }

    fn rebind(&mut self, vars: &[Var]) -> Result<()> {
        super::rebound(&mut self.vars, vars)
    }
}

impl RmsProp {
    /// The update of parameter `i` in one pass over its elements.
    fn fused<T: Real>(&mut self, i: usize, g: &Tensor) -> Result<()> {
        let var = self.vars[i].clone();
        let (alpha, one_minus_alpha) = (T::from_f64(self.alpha), T::from_f64(1.0 - self.alpha));
        let (eps, lr, mu) = (T::from_f64(self.eps), T::from_f64(self.lr), T::from_f64(self.momentum));
        let with_momentum = self.momentum > 0.0;
        let (g, p) = (view::contiguous(g)?, var.as_tensor().contiguous()?);
        let (sq, b) = (self.square_avg[i].contiguous()?, self.momentum_buf[i].contiguous()?);
        let n = p.elem_count();
        let (mut next_sq, mut next_b, mut next_p) = (vec![T::zero(); n], vec![T::zero(); n], vec![T::zero(); n]);
        {
            let (gr, pr, sr, br) =
                (view::Read::new(&g)?, view::Read::new(&p)?, view::Read::new(&sq)?, view::Read::new(&b)?);
            let (g, p, sq, b) = (gr.slice::<T>()?, pr.slice::<T>()?, sr.slice::<T>()?, br.slice::<T>()?);
            let rule = Rule { alpha, one_minus_alpha, eps, lr, mu, with_momentum };
            update(&rule, g, p, sq, b, &mut next_sq, &mut next_b, &mut next_p);
        }
        let shape = p.dims().to_vec();
        keep(&self.square_avg[i], view::tensor(next_sq, shape.clone())?)?;
        if with_momentum {
            keep(&self.momentum_buf[i], view::tensor(next_b, shape.clone())?)?;
        }
        var.set(&view::tensor(next_p, shape)?)
    }
}

/// RMSprop's constants in the element type.
struct Rule<T> {
    alpha: T,
    one_minus_alpha: T,
    eps: T,
    lr: T,
    mu: T,
    with_momentum: bool,
}

multiversion! {
    /// One update of every element: the new square average, momentum buffer and parameter
    /// from the gradient `g` and the old ones (all of one length). Multiversioned so that the
    /// square roots and divisions run 8 wide (as a scalar loop it was 10 % of an LSTM step).
    fn update[T: Real][T](
        rule: &Rule<T>,
        g: &[T],
        p: &[T],
        sq: &[T],
        b: &[T],
        next_sq: &mut [T],
        next_b: &mut [T],
        next_p: &mut [T],
    ) {
        let n = next_p.len();
        let (g, p, sq, b, next_sq, next_b) = (&g[..n], &p[..n], &sq[..n], &b[..n], &mut next_sq[..n], &mut next_b[..n]);
        for j in 0..n {
            let v = sq[j] * rule.alpha + g[j] * g[j] * rule.one_minus_alpha;
            let step = g[j] / (v.sqrt() + rule.eps);
            let update = if rule.with_momentum { b[j] * rule.mu + step } else { step };
            next_sq[j] = v;
            next_b[j] = update;
            next_p[j] = p[j] - update * rule.lr;
        }
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
                opt.step(&super::super::from_store(&grads, std::slice::from_ref(&p)), None)?;
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
