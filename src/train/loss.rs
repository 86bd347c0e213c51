//! Loss and metrics for each kind of target.
//!
//! - Classes: mean cross-entropy over the scored steps; `accuracy` = fraction of scored
//!   positions whose arg-max is the target; `seq_accuracy` = fraction of sequences with every
//!   scored position right (NAM's sequence accuracy; equal to `accuracy` with one scored step).
//! - Bits: mean binary cross-entropy with logits; `bit_error` = wrong bits (threshold 0.5)
//!   per sequence, as the SAM paper's "bit error per sequence"; `accuracy` = fraction of
//!   sequences with no wrong bit.

use candle_core::{D, DType, Result, Tensor};

use crate::tasks::Target;

/// Differentiable mean loss of `logits` `[S, B, n]` against `targets`.
pub fn loss(target: Target, logits: &Tensor, targets: &Tensor) -> Result<Tensor> {
    match target {
        Target::Classes(n) => {
            // log Σ exp(z) − z_y, with the max subtracted for stability.
            let max = logits.max_keepdim(D::Minus1)?.detach();
            let shifted = logits.broadcast_sub(&max)?;
            let lse = shifted.exp()?.sum_keepdim(D::Minus1)?.log()?;
            let classes = Tensor::arange(0u32, n as u32, logits.device())?;
            let onehot = targets.unsqueeze(D::Minus1)?.broadcast_eq(&classes)?.to_dtype(logits.dtype())?;
            let picked = (shifted * onehot)?.sum_keepdim(D::Minus1)?;
            (lse - picked)?.mean_all()
        }
        Target::Bits(_) => {
            // max(z, 0) − z·y + log(1 + e^{−|z|})
            let y = targets.to_dtype(logits.dtype())?;
            let softplus = (logits.abs()?.neg()?.exp()? + 1.0)?.log()?;
            (logits.relu()? - (logits * y)?)?.add(&softplus)?.mean_all()
        }
    }
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
