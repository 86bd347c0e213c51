//! Loss and metrics for each kind of target.
//!
//! - Classes: mean cross-entropy over the scored steps; `accuracy` = fraction of scored
//!   positions whose arg-max is the target; `seq_accuracy` = fraction of sequences with every
//!   scored position right (NAM's sequence accuracy; equal to `accuracy` with one scored step).
//! - Bits: mean binary cross-entropy with logits; `bit_error` = wrong bits (threshold 0.5)
//!   per sequence, as the SAM paper's "bit error per sequence"; `accuracy` = fraction of
//!   sequences with no wrong bit.

use candle_core::{D, DType, Result, Tensor};

use crate::kernels::cpu::{real::Real, view};
use crate::prims::contract::backward::with_real;
use crate::tasks::Target;

/// Differentiable mean loss of `logits` `[S, B, n]` against `targets`.
pub fn loss(target: Target, logits: &Tensor, targets: &Tensor) -> Result<Tensor> {
    elementwise(target, logits, targets)?.mean_all()
}

/// Each trial's [`loss`] in a pack of `trials`, `[P]`: `logits` `[S, P·B, n]` and `targets`
/// hold trial `p`'s sequences at rows `p·B..(p+1)·B`. One pass over every trial's logits, where
/// a loss per trial would be a dozen small kernels each, forward and backward, on a GPU.
pub fn pack_losses(target: Target, logits: &Tensor, targets: &Tensor, trials: usize) -> Result<Tensor> {
    let each = elementwise(target, logits, targets)?;
    let steps = each.dim(0)?;
    let per_trial = each.elem_count() / (steps * trials).max(1);
    // `[S, P, B·k]`: trial p's elements of each step are one contiguous run.
    each.reshape((steps, trials, per_trial))?.sum(2)?.sum(0)? / (steps * per_trial) as f64
}

/// The loss of each scored position (`[S, B, 1]` for classes, `[S, B, n]` for bits), whose
/// mean is [`loss`].
fn elementwise(target: Target, logits: &Tensor, targets: &Tensor) -> Result<Tensor> {
    match target {
        Target::Classes(_) => {
            // log Σ exp(z) − z_y, with the max subtracted for stability.
            let max = logits.max_keepdim(D::Minus1)?.detach();
            let shifted = logits.broadcast_sub(&max)?;
            let lse = shifted.exp()?.sum_keepdim(D::Minus1)?.log()?;
            // z_y by index: no class-index tensor comes from the host, an upload a CUDA graph
            // cannot capture beyond 1024 classes (`train::graph_step`).
            let picked = shifted.gather(&targets.unsqueeze(D::Minus1)?.contiguous()?, D::Minus1)?;
            lse - picked
        }
        Target::Bits(_) => {
            // max(z, 0) − z·y + log(1 + e^{−|z|})
            let y = targets.to_dtype(logits.dtype())?;
            let softplus = (logits.abs()?.neg()?.exp()? + 1.0)?.log()?;
            (logits.relu()? - (logits * y)?)?.add(&softplus)
        }
    }
}

/// One scored step's share of [`loss`] and its gradient, without autograd (for the tape,
/// `compile::tape`): `logits` `[b, n]`, `targets` `[b, n]` bits or `[b]` class ids, for `b` of
/// the `sequences` the mean runs over (all of them, or one part of a batch split over
/// threads), `steps` the number of scored steps. Returns `(share of the mean loss,
/// d loss / d logits)`.
pub fn step_loss_and_grad(
    target: Target,
    logits: &Tensor,
    targets: &Tensor,
    steps: usize,
    sequences: usize,
) -> Result<(f64, Tensor)> {
    let (_, n) = logits.dims2()?;
    let batch = sequences;
    let logits = view::contiguous(logits)?;
    match target {
        Target::Bits(_) => {
            let y = targets.to_dtype(logits.dtype())?.contiguous()?;
            with_real!(logits.dtype(), T => bits_step::<T>(&logits, &y, steps * batch * n))
        }
        Target::Classes(_) => {
            let ids: Vec<u32> = targets.to_dtype(DType::U32)?.to_vec1()?;
            if let Some(bad) = ids.iter().find(|&&c| c as usize >= n) {
                candle_core::bail!("class id {bad} out of range for {n} classes");
            }
            with_real!(logits.dtype(), T => classes_step::<T>(&logits, &ids, n, steps * batch))
        }
    }
}

/// `max(z, 0) − z·y + log(1 + e^{−|z|})`, gradient `σ(z) − y`, both over `count`.
fn bits_step<T: Real>(logits: &Tensor, y: &Tensor, count: usize) -> Result<(f64, Tensor)> {
    let (lr, yr) = (view::Read::new(logits)?, view::Read::new(y)?);
    let (z, y) = (lr.slice::<T>()?, yr.slice::<T>()?);
    let scale = T::from_f64(1.0 / count as f64);
    let mut sum = 0.0f64;
    let mut grad = Vec::with_capacity(z.len());
    for (&z, &y) in z.iter().zip(y) {
        let softplus = (-z.abs()).exp().ln_1p();
        sum += (z.max(T::zero()) - z * y + softplus).to_f64();
        grad.push((z.sigmoid() - y) * scale);
    }
    Ok((sum / count as f64, view::tensor(grad, logits.dims())?))
}

/// `log Σ exp(z) − z_y`, gradient `softmax(z) − onehot(y)`, both over `count`.
fn classes_step<T: Real>(logits: &Tensor, ids: &[u32], n: usize, count: usize) -> Result<(f64, Tensor)> {
    let lr = view::Read::new(logits)?;
    let z = lr.slice::<T>()?;
    let scale = 1.0 / count as f64;
    let mut sum = 0.0f64;
    let mut grad = vec![T::zero(); z.len()];
    for ((row, g), &c) in z.chunks_exact(n).zip(grad.chunks_exact_mut(n)).zip(ids) {
        let max = row.iter().fold(row[0], |m, &v| m.max(v));
        let mut denom = 0.0f64;
        for (gi, &v) in g.iter_mut().zip(row) {
            let e = (v - max).to_f64().exp();
            *gi = T::from_f64(e);
            denom += e;
        }
        sum += denom.ln() - (row[c as usize] - max).to_f64();
        for gi in g.iter_mut() {
            *gi = T::from_f64(gi.to_f64() / denom * scale);
        }
        g[c as usize] -= T::from_f64(scale);
    }
    Ok((sum * scale, view::tensor(grad, logits.dims())?))
}

/// Metric sums over evaluation batches, accumulated on the device: nothing is read back to
/// the host until [`MetricSums::metrics`] (one transfer per evaluation, not per batch).
#[derive(Clone, Debug, Default)]
pub struct MetricSums {
    sequences: f64,
    positions: f64,
    /// `[loss · B, correct positions, exact sequences, wrong bits]`, summed over batches.
    sums: Option<Tensor>,
}

impl MetricSums {
    /// Adds one batch: `mean_loss` is the batch's mean loss (a scalar tensor on the device).
    pub fn add(&mut self, target: Target, logits: &Tensor, targets: &Tensor, mean_loss: &Tensor) -> Result<()> {
        let (s, b) = (logits.dim(0)?, logits.dim(1)?);
        self.sequences += b as f64;
        self.positions += (s * b) as f64;
        let zero = Tensor::zeros((), DType::F32, logits.device())?;
        let (correct, exact, wrong_bits) = match target {
            Target::Classes(_) => {
                let hit = logits.argmax(D::Minus1)?.eq(targets)?.to_dtype(DType::F32)?; // [S, B]
                let all = hit.min(0)?; // [B]: 1 if every position is right
                (hit.sum_all()?, all.sum_all()?, zero)
            }
            Target::Bits(_) => {
                let predicted = logits.ge(0.0)?.to_dtype(DType::F32)?;
                let wrong = predicted.ne(&targets.to_dtype(DType::F32)?)?.to_dtype(DType::F32)?; // [S, B, n]
                let per_sequence = wrong.sum(2)?.sum(0)?; // [B]
                let exact = per_sequence.eq(0.0)?.to_dtype(DType::F32)?.sum_all()?;
                (zero, exact, per_sequence.sum_all()?)
            }
        };
        let loss = (mean_loss.to_dtype(DType::F32)? * b as f64)?;
        let batch = Tensor::stack(&[loss, correct, exact, wrong_bits], 0)?;
        self.sums = Some(match self.sums.take() {
            Some(acc) => (acc + batch)?,
            None => batch,
        });
        Ok(())
    }

    /// `(name, value)` pairs: `loss` and the target's metrics (one read from the device).
    pub fn metrics(&self, target: Target) -> Result<Vec<(&'static str, f64)>> {
        let v = match &self.sums {
            Some(t) => t.to_dtype(DType::F64)?.to_vec1::<f64>()?,
            None => vec![0.0; 4],
        };
        let n = self.sequences.max(1.0);
        let mut m = vec![("loss", v[0] / n)];
        match target {
            Target::Classes(_) => {
                m.push(("accuracy", v[1] / self.positions.max(1.0)));
                m.push(("seq_accuracy", v[2] / n));
            }
            Target::Bits(_) => {
                m.push(("bit_error", v[3] / n));
                m.push(("accuracy", v[2] / n));
            }
        }
        Ok(m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::Device;

    /// Many classes (past the 1024 whose index tensor a CUDA graph could still have cached):
    /// the same value as candle-nn's cross entropy, and a gradient for every logit.
    #[test]
    fn cross_entropy_over_many_classes_matches_candle_nn() -> Result<()> {
        let dev = Device::Cpu;
        let logits = candle_core::Var::from_tensor(&Tensor::randn(0f64, 3.0, (2, 3, 1500), &dev)?)?;
        let targets = Tensor::new(&[[7u32, 1499, 0], [512, 1024, 1025]], &dev)?;
        let ours = loss(Target::Classes(1500), logits.as_tensor(), &targets)?.to_scalar::<f64>()?;
        let theirs = candle_nn::loss::cross_entropy(&logits.as_tensor().reshape((6, 1500))?, &targets.flatten_all()?)?
            .to_scalar::<f64>()?;
        assert!((ours - theirs).abs() < 1e-12, "{ours} against {theirs}");
        let grads = loss(Target::Classes(1500), logits.as_tensor(), &targets)?.backward()?;
        assert_eq!(grads.get(logits.as_tensor()).map(|g| g.dims().to_vec()), Some(vec![2, 3, 1500]));
        Ok(())
    }

    /// A pack's losses, one pass over its three trials' rows, are each trial's loss alone.
    #[test]
    fn a_pack_s_losses_are_each_trial_s_loss_on_its_rows() -> Result<()> {
        let dev = Device::Cpu;
        let (steps, trials, batch, n) = (4, 3, 5, 6);
        let logits = Tensor::randn(0f64, 2.0, (steps, trials * batch, n), &dev)?;
        let classes = Tensor::rand(0f64, n as f64, (steps, trials * batch), &dev)?.floor()?.to_dtype(DType::U32)?;
        let bits = Tensor::rand(0f64, 1.0, (steps, trials * batch, n), &dev)?.round()?;
        for (target, targets) in [(Target::Classes(n), &classes), (Target::Bits(n), &bits)] {
            let packed = pack_losses(target, &logits, targets, trials)?.to_vec1::<f64>()?;
            for (p, value) in packed.iter().enumerate() {
                let rows = |t: &Tensor| t.narrow(1, p * batch, batch);
                let alone = loss(target, &rows(&logits)?, &rows(targets)?)?.to_scalar::<f64>()?;
                assert!((value - alone).abs() <= 1e-12 * alone.abs(), "{target:?} trial {p}: {value} against {alone}");
            }
        }
        Ok(())
    }

    #[test]
    fn cross_entropy_and_accuracy_match_hand_values() -> Result<()> {
        let dev = Device::Cpu;
        // One step, two sequences, three classes.
        let logits = Tensor::new(&[[[0.0f32, 0.0, 0.0], [2.0, 0.0, 0.0]]], &dev)?;
        let targets = Tensor::new(&[[1u32, 0]], &dev)?;
        let lt = loss(Target::Classes(3), &logits, &targets)?;
        let l = lt.to_scalar::<f32>()?;
        let expected = (3f32.ln() + ((2f32).exp() + 2.0).ln() - 2.0) / 2.0;
        assert!((l - expected).abs() < 1e-6, "{l} vs {expected}");
        let mut sums = MetricSums::default();
        sums.add(Target::Classes(3), &logits, &targets, &lt)?;
        // The tie [0, 0, 0] picks class 0, so the first sequence is wrong.
        assert_eq!(sums.metrics(Target::Classes(3))?[1], ("accuracy", 0.5));
        Ok(())
    }

    /// The per-step losses and gradients add up to [`loss`] and its autograd gradient.
    #[test]
    fn step_losses_match_the_autograd_loss() -> Result<()> {
        let dev = Device::Cpu;
        let (s, b, n) = (3, 4, 5);
        let z = candle_core::Var::from_tensor(&Tensor::randn(0f64, 2.0, (s, b, n), &dev)?)?;
        let bits = Tensor::rand(0f64, 1.0, (s, b, n), &dev)?.ge(0.5)?.to_dtype(DType::F32)?;
        let classes = Tensor::new(&[[0u32, 4, 2, 1], [3, 3, 0, 1], [2, 1, 4, 0]], &dev)?;
        for (target, targets) in [(Target::Bits(n), bits), (Target::Classes(n), classes)] {
            let l = loss(target, z.as_tensor(), &targets)?;
            let expected = z.as_tensor().zeros_like()?.to_vec3::<f64>()?;
            let autograd = l.backward()?.get(z.as_tensor()).map_or(Ok(expected), |g| g.to_vec3::<f64>())?;
            let mut total = 0.0;
            for (step, autograd) in autograd.iter().enumerate() {
                let (v, g) = step_loss_and_grad(target, &z.as_tensor().get(step)?, &targets.get(step)?, s, b)?;
                total += v;
                let g = g.to_vec2::<f64>()?;
                for (row, expected) in g.iter().zip(autograd) {
                    for (a, e) in row.iter().zip(expected) {
                        assert!((a - e).abs() < 1e-14, "{target:?}: gradient {a} vs {e}");
                    }
                }
            }
            let l = l.to_scalar::<f64>()?;
            assert!((total - l).abs() < 1e-12, "{target:?}: {total} vs {l}");
        }
        Ok(())
    }

    #[test]
    fn bit_error_counts_wrong_bits_per_sequence() -> Result<()> {
        let dev = Device::Cpu;
        let logits = Tensor::new(&[[[1.0f32, -1.0], [1.0, 1.0]]], &dev)?; // [S=1, B=2, n=2]
        let targets = Tensor::new(&[[[1.0f32, 0.0], [0.0, 0.0]]], &dev)?;
        let lt = loss(Target::Bits(2), &logits, &targets)?;
        let l = lt.to_scalar::<f32>()?;
        let sp = |z: f32| (1.0 + z.exp()).ln();
        let expected = (sp(-1.0) + sp(-1.0) + sp(1.0) + sp(1.0)) / 4.0;
        assert!((l - expected).abs() < 1e-6);
        let mut sums = MetricSums::default();
        sums.add(Target::Bits(2), &logits, &targets, &lt)?;
        let m = sums.metrics(Target::Bits(2))?;
        assert_eq!(m[1], ("bit_error", 1.0)); // 0 + 2 wrong bits over 2 sequences
        assert_eq!(m[2], ("accuracy", 0.5));
        Ok(())
    }
}
