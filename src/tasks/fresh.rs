//! Tasks with fresh random data every training batch (the SAM toy tasks) and fixed held-out sets.
//!
//! A generator implements [`Fresh`]; [`FreshData`] turns it into a trial's [`TaskData`]:
//! training batches are drawn from one random stream, the validation set and each test set are
//! generated once from streams of their own (so their contents do not depend on how many
//! training batches were drawn, nor on the other sets' sizes).
//!
//! Held-out sets whose examples differ in shape (copy lengths, RAR item counts) are stored as
//! *groups* of equal-shape examples; [`Batch`]es are cut from one group at a time.

use candle_core::{Device, Tensor};
use rand_chacha::ChaCha8Rng;

use super::streams::{Stream, stream};
use super::*;

/// A generator of fresh batches.
pub(super) trait Fresh: Send + Sync + 'static {
    /// One training batch of `batch` examples.
    fn train_batch(&self, rng: &mut ChaCha8Rng, batch: usize, device: &Device) -> candle_core::Result<Batch>;
    /// A held-out set of `n` examples, as groups of equal-shape examples.
    fn held_out(&self, rng: &mut ChaCha8Rng, n: usize, device: &Device) -> candle_core::Result<Vec<Batch>>;
}

/// A trial's data for a [`Fresh`] generator.
pub(super) struct FreshData<G: Fresh> {
    generator: G,
    rng: ChaCha8Rng,
    validation: Vec<Batch>,
    test: Vec<Batch>,
    device: Device,
}

impl<G: Fresh> FreshData<G> {
    pub(super) fn new(
        generator: G,
        seed: u64,
        validation: usize,
        test: usize,
        device: &Device,
    ) -> candle_core::Result<FreshData<G>> {
        let val = generator.held_out(&mut stream(seed, Stream::Validation), validation, device)?;
        let test = generator.held_out(&mut stream(seed, Stream::Test(0)), test, device)?;
        Ok(FreshData { generator, rng: stream(seed, Stream::Train), validation: val, test, device: device.clone() })
    }
}

impl<G: Fresh> TaskData for FreshData<G> {
    fn train_batch(&mut self, batch_size: usize) -> candle_core::Result<Batch> {
        self.generator.train_batch(&mut self.rng, batch_size, &self.device)
    }

    fn eval_batches(&self, split: Split, batch_size: usize) -> candle_core::Result<Vec<Batch>> {
        match split {
            Split::Validation => cut(&self.validation, batch_size),
            Split::Test(_) => cut(&self.test, batch_size),
        }
    }

    fn train_size(&self) -> Option<usize> {
        None
    }
}

/// Cuts each group (batch axis 1 of inputs and targets) into batches of at most `batch_size`.
pub(super) fn cut(groups: &[Batch], batch_size: usize) -> candle_core::Result<Vec<Batch>> {
    let bs = batch_size.max(1);
    let mut out = vec![];
    for g in groups {
        let n = g.batch_size()?;
        if n <= bs {
            out.push(g.clone());
            continue;
        }
        for start in (0..n).step_by(bs) {
            let len = bs.min(n - start);
            out.push(Batch {
                inputs: g.inputs.narrow(1, start, len)?.contiguous()?,
                scored: g.scored.clone(),
                targets: g.targets.narrow(1, start, len)?.contiguous()?,
            });
        }
    }
    Ok(out)
}

/// Splits `n` examples evenly over `configs` shapes: example `i` gets shape `i·configs / n`
/// (so every shape is equally represented, as NAM's digit schedule). Returns the count per shape.
pub(super) fn stratify(n: usize, configs: usize) -> Vec<usize> {
    let mut counts = vec![0; configs];
    for i in 0..n {
        counts[i * configs / n] += 1;
    }
    counts
}

/// A time-major float sequence `[T, B, W]` being filled in on the host.
pub(super) struct Seq {
    steps: usize,
    batch: usize,
    width: usize,
    data: Vec<f32>,
}

impl Seq {
    pub(super) fn zeros(steps: usize, batch: usize, width: usize) -> Seq {
        Seq { steps, batch, width, data: vec![0.0; steps * batch * width] }
    }

    pub(super) fn set(&mut self, t: usize, b: usize, c: usize, v: f32) {
        self.data[(t * self.batch + b) * self.width + c] = v;
    }

    /// The `width`-long slot at step `t` of example `b`.
    pub(super) fn row_mut(&mut self, t: usize, b: usize) -> &mut [f32] {
        let at = (t * self.batch + b) * self.width;
        &mut self.data[at..at + self.width]
    }

    pub(super) fn into_tensor(self, device: &Device) -> candle_core::Result<Tensor> {
        Tensor::from_vec(self.data, (self.steps, self.batch, self.width), device)
    }
}
