//! Question-then-answer tasks with fresh data (SAM's geometry and graph tasks): an example is
//! a question, one float vector per step, followed by one answer step per answer token.
//!
//! ```text
//!   step      q_1 … q_Q          a_1 … a_K
//!   input     question rows      zeros, with the last channel (the answer flag) set to 1
//!   target    —                  answer_1 … answer_K   (Classes, scored)
//! ```
//!
//! Question and answer lengths differ between examples (a hull's size, a path's length), and
//! a batch needs one shape. A training batch therefore draws its problem size once (N points,
//! or N nodes and E edges, from the training ranges), takes its first example's shape, and
//! draws further examples of that size until it has enough of that shape (rejection: the
//! examples keep the distribution of their shape). Held-out sets draw every example
//! independently and are stored as groups of equal shape ([`super::fresh::cut`] batches them).

use std::collections::BTreeMap;

use candle_core::{Device, Tensor};
use rand_chacha::ChaCha8Rng;

use super::fresh::{Seq, cut};
use super::held_out::HeldOut;
use super::prelude::*;
use super::streams::{Stream, stream};

/// One example: `question` holds `rows × width` values, the answer flag channel left at 0.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Example {
    pub question: Vec<f32>,
    pub answer: Vec<u32>,
}

/// A generator of question-then-answer examples.
pub(super) trait Generator: Send + Sync + 'static {
    /// A problem size (points, nodes and edges, ...).
    type Size: Copy + Send + Sync;
    /// Input channels, the answer flag (the last one) included.
    fn width(&self) -> usize;
    /// A size for a training batch or a held-out example of `split`.
    fn size(&self, rng: &mut ChaCha8Rng, split: Option<Split>) -> Self::Size;
    fn example(&self, rng: &mut ChaCha8Rng, size: Self::Size) -> Example;
}

/// Tries per example before a training batch gives up on its shape and starts over.
const TRIES: usize = 1000;

/// A trial's data: fresh training batches, a fixed validation set and `tests` fixed test sets.
pub(super) struct AnswerData<G: Generator> {
    generator: G,
    rng: ChaCha8Rng,
    validation: Vec<Batch>,
    tests: Vec<Vec<Batch>>,
    device: Device,
}

impl<G: Generator> AnswerData<G> {
    pub(super) fn new(
        generator: G,
        seed: u64,
        sizes: HeldOut,
        tests: usize,
        device: &Device,
    ) -> candle_core::Result<AnswerData<G>> {
        let held_out = |split: Split, which: Stream, n: usize| -> candle_core::Result<Vec<Batch>> {
            let mut rng = stream(seed, which);
            let examples: Vec<Example> = (0..n)
                .map(|_| {
                    let size = generator.size(&mut rng, Some(split));
                    generator.example(&mut rng, size)
                })
                .collect();
            groups(&examples, generator.width(), device)
        };
        let validation = held_out(Split::Validation, Stream::Validation, sizes.validation)?;
        let tests = (0..tests)
            .map(|i| held_out(Split::Test(i), Stream::Test(i), sizes.test))
            .collect::<candle_core::Result<_>>()?;
        Ok(AnswerData { generator, rng: stream(seed, Stream::Train), validation, tests, device: device.clone() })
    }
}

impl<G: Generator> TaskData for AnswerData<G> {
    fn train_batch(&mut self, batch_size: usize) -> candle_core::Result<Batch> {
        let examples = same_shape_batch(&self.generator, &mut self.rng, batch_size.max(1));
        Ok(groups(&examples, self.generator.width(), &self.device)?.remove(0))
    }

    fn eval_batches(&self, split: Split, batch_size: usize) -> candle_core::Result<Vec<Batch>> {
        match split {
            Split::Validation => cut(&self.validation, batch_size),
            Split::Test(i) => cut(&self.tests[i.min(self.tests.len() - 1)], batch_size),
        }
    }

    fn train_size(&self) -> Option<usize> {
        None
    }
}

fn shape(e: &Example, width: usize) -> (usize, usize) {
    (e.question.len() / width, e.answer.len())
}

/// `n` training examples of one size and one shape (see the module comment).
fn same_shape_batch<G: Generator>(generator: &G, rng: &mut ChaCha8Rng, n: usize) -> Vec<Example> {
    let width = generator.width();
    loop {
        let size = generator.size(rng, None);
        let first = generator.example(rng, size);
        let want = shape(&first, width);
        let mut batch = vec![first];
        let mut tries = 0;
        while batch.len() < n && tries < TRIES * n {
            let e = generator.example(rng, size);
            if shape(&e, width) == want {
                batch.push(e);
            }
            tries += 1;
        }
        if batch.len() == n {
            return batch;
        }
    }
}

/// The examples as batches of equal shape, in order of shape.
fn groups(examples: &[Example], width: usize, device: &Device) -> candle_core::Result<Vec<Batch>> {
    let mut by_shape: BTreeMap<(usize, usize), Vec<&Example>> = BTreeMap::new();
    for e in examples {
        by_shape.entry(shape(e, width)).or_default().push(e);
    }
    by_shape.into_iter().map(|((q, k), group)| batch(&group, q, k, width, device)).collect()
}

fn batch(examples: &[&Example], q: usize, k: usize, width: usize, device: &Device) -> candle_core::Result<Batch> {
    let n = examples.len();
    let mut seq = Seq::zeros(q + k, n, width);
    let mut targets = vec![0u32; k * n];
    for (b, e) in examples.iter().enumerate() {
        for t in 0..q {
            seq.row_mut(t, b).copy_from_slice(&e.question[t * width..(t + 1) * width]);
        }
        for (i, &a) in e.answer.iter().enumerate() {
            seq.set(q + i, b, width - 1, 1.0);
            targets[i * n + b] = a;
        }
    }
    Ok(Batch {
        inputs: seq.into_tensor(device)?,
        scored: (q..q + k).collect(),
        targets: Tensor::from_vec(targets, (k, n), device)?,
    })
}

/// `n` distinct feature ids out of `0..features`, in random order (SAM's "random one-hot
/// features" of points and nodes).
pub(super) fn features(rng: &mut ChaCha8Rng, n: usize, features: usize) -> Vec<u32> {
    rand::seq::index::sample(rng, features, n).into_iter().map(|f| f as u32).collect()
}

#[cfg(test)]
pub(super) mod testing {
    use super::*;

    /// Every example of a split as (question rows, answer flags, answers): checks the layout.
    pub fn examples(data: &dyn TaskData, split: Split) -> Vec<(Vec<Vec<f32>>, Vec<u32>)> {
        let mut out = vec![];
        for b in data.eval_batches(split, 1000).unwrap() {
            let x: Vec<Vec<Vec<f32>>> = b.inputs.to_vec3().unwrap();
            let y: Vec<Vec<u32>> = b.targets.to_vec2().unwrap();
            let (steps, n) = (x.len(), x[0].len());
            let q = steps - y.len();
            assert_eq!(b.scored, (q..steps).collect::<Vec<_>>());
            for i in 0..n {
                let rows: Vec<Vec<f32>> = (0..steps).map(|t| x[t][i].clone()).collect();
                let width = rows[0].len();
                for (t, row) in rows.iter().enumerate() {
                    let answering = row[width - 1] == 1.0;
                    assert_eq!(answering, t >= q, "the answer flag marks exactly the answer steps");
                    if answering {
                        assert!(row[..width - 1].iter().all(|v| *v == 0.0), "answer steps carry no input");
                    }
                }
                out.push((rows[..q].to_vec(), (0..y.len()).map(|s| y[s][i]).collect()));
            }
        }
        out
    }

    /// Same seed, same data; another seed, other data; a training batch has one shape.
    pub fn determinism(kind: &dyn TaskKind, options: &[Value]) {
        let task = kind.instantiate(options).unwrap();
        let draw = |seed| {
            let mut d = task.data(seed, &Device::Cpu).unwrap();
            let train = d.train_batch(16).unwrap();
            assert_eq!(train.batch_size().unwrap(), 16);
            let x: Vec<f32> = train.inputs.flatten_all().unwrap().to_vec1().unwrap();
            (x, examples(d.as_ref(), Split::Validation), examples(d.as_ref(), Split::Test(0)))
        };
        assert_eq!(draw(3), draw(3), "same seed, same data");
        assert_ne!(draw(3), draw(4), "another seed, other data");
    }
}
