//! Tasks with fresh random data every training batch (the SAM toy tasks) and fixed held-out sets.
//!
//! A generator implements [`Fresh`]; the configured task is a [`FreshTask`] (the generator and
//! its held-out set sizes, parsed from the options), and [`FreshData`] a trial's [`TaskData`]:
//! training batches are drawn from one random stream, the validation set and each test set are
//! generated once from streams of their own (so their contents do not depend on how many
//! training batches were drawn, nor on the other sets' sizes).
//!
//! Held-out sets whose examples differ in shape (copy lengths, RAR item counts) are stored as
//! *groups* of equal-shape examples, in a random order; [`Batch`]es are cut from one group at a
//! time, visiting the groups in turn (see [`cut`]), so that a validation shortened by the
//! `eval_size` setting is not biased towards the first shapes.

use candle_core::{Device, Tensor};
use rand::seq::SliceRandom;
use rand_chacha::ChaCha8Rng;

use super::held_out::HeldOut;
use super::prelude::*;
use super::streams::{Stream, stream};

/// A generator of fresh batches.
pub(super) trait Fresh: Clone + Send + Sync + 'static {
    /// The per-step input type of its batches.
    fn input(&self) -> Ty;
    /// What its batches' targets are.
    fn target(&self) -> Target;
    /// One training batch of `batch` examples.
    fn train_batch(&self, rng: &mut ChaCha8Rng, batch: usize, device: &Device) -> candle_core::Result<Batch>;
    /// The training batch that `drawn` training batches of the trial precede, for a generator
    /// whose training data changes as training goes on (a curriculum); by default
    /// [`Fresh::train_batch`], the same at every point.
    fn train_batch_after(
        &self,
        rng: &mut ChaCha8Rng,
        drawn: usize,
        batch: usize,
        device: &Device,
    ) -> candle_core::Result<Batch> {
        let _ = drawn;
        self.train_batch(rng, batch, device)
    }
    /// A held-out set of `n` examples, as groups of equal-shape examples; by default one group,
    /// drawn as a training batch (for generators whose examples all share one shape).
    fn held_out(&self, rng: &mut ChaCha8Rng, n: usize, device: &Device) -> candle_core::Result<Vec<Batch>> {
        Ok(vec![self.train_batch(rng, n, device)?])
    }
    /// The task's [`Task::trivial_levels`]; by default none stated.
    fn trivial_levels(&self) -> Vec<TrivialLevel> {
        vec![]
    }
    /// The task's [`Task::max_steps`].
    fn max_steps(&self) -> Option<usize>;
}

/// A task of fresh data: a generator, configured by its options, and the sizes of its held-out
/// sets, the options `validation` and `test` that follow.
#[derive(Clone, Debug, serde::Deserialize)]
pub(super) struct FreshTask<G> {
    #[serde(flatten)]
    pub generator: G,
    #[serde(flatten)]
    pub held_out: HeldOut,
}

impl<G: Fresh> Task for FreshTask<G> {
    fn input(&self) -> Ty {
        self.generator.input()
    }
    fn target(&self) -> Target {
        self.generator.target()
    }
    fn data(&self, seed: u64, device: &Device) -> candle_core::Result<Box<dyn TaskData>> {
        Ok(Box::new(FreshData::new(self.generator.clone(), seed, self.held_out, device)?))
    }
    fn trivial_levels(&self) -> Vec<TrivialLevel> {
        self.generator.trivial_levels()
    }
    fn max_steps(&self) -> Option<usize> {
        self.generator.max_steps()
    }
}

/// A trial's data for a [`Fresh`] generator.
pub(super) struct FreshData<G: Fresh> {
    generator: G,
    rng: ChaCha8Rng,
    /// Training batches drawn so far (a resumed trial draws its earlier ones again).
    drawn: usize,
    validation: Vec<Batch>,
    test: Vec<Batch>,
    device: Device,
}

impl<G: Fresh> FreshData<G> {
    pub(super) fn new(generator: G, seed: u64, sizes: HeldOut, device: &Device) -> candle_core::Result<FreshData<G>> {
        let held_out = |which: Stream, n: usize| -> candle_core::Result<Vec<Batch>> {
            let mut rng = stream(seed, which);
            let mut groups = generator.held_out(&mut rng, n, device)?;
            groups.shuffle(&mut rng);
            Ok(groups)
        };
        let validation = held_out(Stream::Validation, sizes.validation)?;
        let test = held_out(Stream::Test(0), sizes.test)?;
        Ok(FreshData {
            generator,
            rng: stream(seed, Stream::Train),
            drawn: 0,
            validation,
            test,
            device: device.clone(),
        })
    }
}

impl<G: Fresh> TaskData for FreshData<G> {
    fn train_batch(&mut self, batch_size: usize) -> candle_core::Result<Batch> {
        let batch = self.generator.train_batch_after(&mut self.rng, self.drawn, batch_size, &self.device)?;
        self.drawn += 1;
        Ok(batch)
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

/// Cuts each group (batch axis 1 of inputs and targets) into batches of at most `batch_size`,
/// taking the groups in turn (first batch of every group, then the second, ...), so that an
/// evaluation cut short by `eval_size` still sees every shape when the batches allow it.
pub(super) fn cut(groups: &[Batch], batch_size: usize) -> candle_core::Result<Vec<Batch>> {
    let bs = batch_size.max(1);
    let mut out = vec![];
    for round in 0.. {
        let mut any = false;
        for g in groups {
            let (n, start) = (g.batch_size()?, round * bs);
            if start >= n {
                continue;
            }
            any = true;
            let len = bs.min(n - start);
            out.push(if len == n {
                g.clone()
            } else {
                Batch {
                    inputs: g.inputs.narrow(1, start, len)?.contiguous()?,
                    scored: g.scored.clone(),
                    targets: g.targets.narrow(1, start, len)?.contiguous()?,
                }
            });
        }
        if !any {
            break;
        }
    }
    Ok(out)
}

/// A held-out set of `n` examples spread evenly over `configs` shapes ([`stratify`]): a group for
/// each shape that gets examples, `group(shape, count)`.
pub(super) fn stratified_groups(
    n: usize,
    configs: usize,
    mut group: impl FnMut(usize, usize) -> candle_core::Result<Batch>,
) -> candle_core::Result<Vec<Batch>> {
    stratify(n, configs)
        .into_iter()
        .enumerate()
        .filter(|(_, count)| *count > 0)
        .map(|(c, count)| group(c, count))
        .collect()
}

/// Splits `n` examples evenly over `configs` shapes: example `i` gets shape `i·configs / n`
/// (so every shape is equally represented, as NAM's digit schedule). Returns the count per shape.
fn stratify(n: usize, configs: usize) -> Vec<usize> {
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

    /// A batch of these inputs that answers at its end: its last steps, one per step of
    /// `targets`, are scored (the layout of tasks that read, then write).
    pub(super) fn into_batch(self, targets: Seq, device: &Device) -> candle_core::Result<Batch> {
        let scored = (self.steps - targets.steps..self.steps).collect();
        Ok(Batch { inputs: self.into_tensor(device)?, scored, targets: targets.into_tensor(device)? })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A group of `n` examples of `steps` steps whose input values are their example index.
    fn group(steps: usize, n: usize) -> Batch {
        let x: Vec<f32> = (0..steps).flat_map(|_| (0..n).map(|i| i as f32)).collect();
        Batch {
            inputs: Tensor::from_vec(x, (steps, n, 1), &Device::Cpu).unwrap(),
            scored: vec![steps - 1],
            targets: Tensor::zeros((1, n, 1), candle_core::DType::F32, &Device::Cpu).unwrap(),
        }
    }

    #[test]
    fn cut_visits_the_groups_in_turn() {
        let groups = [group(2, 5), group(3, 2)];
        let batches = cut(&groups, 2).unwrap();
        let shape = |b: &Batch| (b.steps().unwrap(), b.batch_size().unwrap());
        assert_eq!(batches.iter().map(shape).collect::<Vec<_>>(), vec![(2, 2), (3, 2), (2, 2), (2, 1)]);
        let firsts: Vec<f32> =
            batches.iter().map(|b| b.inputs.get(0).unwrap().get(0).unwrap().to_vec1().unwrap()[0]).collect();
        assert_eq!(firsts, vec![0.0, 0.0, 2.0, 4.0], "consecutive slices of each group");
        assert_eq!(cut(&groups, 100).unwrap().len(), 2);
    }

    #[test]
    fn stratify_spreads_examples_evenly() {
        assert_eq!(stratify(10, 3), vec![4, 3, 3]);
        assert_eq!(stratify(2, 4), vec![1, 0, 1, 0]);
    }
}
