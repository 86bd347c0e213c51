//! Fixed sets of token examples of varying length, batched (what `babi` and `jsonl` share).
//!
//! An example is a sequence of input tokens and a sequence of target classes, in one of two
//! layouts:
//!
//! - **Answer after the input** ([`Layout::After`]): the input, then one answer step per target
//!   token whose input is the answer marker; the answer steps are scored. Inputs of different
//!   lengths are left-padded with the pad token, so that the answer steps line up at the end:
//!
//!   ```text
//!   input   pad pad w1 w2 w3 … wn  ANS ANS
//!   target                          a1  a2     (scored)
//!   ```
//!
//!   A batch holds examples with equally many target tokens.
//! - **Aligned** ([`Layout::Aligned`]): one target per input token, every step scored. A batch
//!   holds examples of one length, so no pad is ever scored.
//!
//! Training batches: one example drawn uniformly from the training set, then the rest of the
//! batch drawn uniformly (with replacement) from the training examples of its shape (for bAbI,
//! one answer token each, that is all of them). Held-out sets: each shape's examples sorted by
//! input length (least padding), cut into batches, and the batches visited in a random order
//! fixed by the seed, so that an evaluation cut short by `eval_size` is not biased to short
//! examples.

use std::collections::BTreeMap;
use std::sync::Arc;

use candle_core::{Device, Tensor};
use rand::Rng;
use rand::seq::SliceRandom;
use rand_chacha::ChaCha8Rng;

use super::prelude::*;
use super::streams::{Stream, stream};

/// A fixed set of examples.
pub(super) trait Examples: Send + Sync + 'static {
    fn len(&self) -> usize;
    /// Number of input tokens of example `i`.
    fn input_len(&self, i: usize) -> usize;
    /// Appends example `i`'s input tokens to `out`.
    fn input(&self, i: usize, out: &mut Vec<u32>);
    /// Example `i`'s target classes.
    fn target(&self, i: usize) -> &[u32];
}

/// Where the scored steps are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Layout {
    /// The input (left-padded with `pad`), then one step per target token with input `answer`.
    After { pad: u32, answer: u32 },
    /// One target per input token.
    Aligned,
}

impl Layout {
    /// Examples of one shape can share a batch.
    fn shape<E: Examples>(self, set: &E, i: usize) -> usize {
        match self {
            Layout::After { .. } => set.target(i).len(),
            Layout::Aligned => set.input_len(i),
        }
    }
}

/// Some examples of a set: a split is a set and the examples of it that belong to the split
/// (bAbI's per-task test splits are parts of one test set).
pub(super) struct Part<E> {
    pub set: Arc<E>,
    pub members: Vec<usize>,
}

impl<E: Examples> Part<E> {
    /// Every example of `set`.
    pub(super) fn all(set: Arc<E>) -> Part<E> {
        let members = (0..set.len()).collect();
        Part { set, members }
    }
}

/// A trial's data: training batches drawn from `train`, held-out sets batched on request.
pub(super) struct ExampleData<E> {
    layout: Layout,
    train: Part<E>,
    /// Training examples by shape, and the shape group of each training member.
    groups: Vec<Vec<usize>>,
    group_of: Vec<usize>,
    validation: Part<E>,
    tests: Vec<Part<E>>,
    rng: ChaCha8Rng,
    seed: u64,
    device: Device,
}

impl<E: Examples> ExampleData<E> {
    pub(super) fn new(
        layout: Layout,
        (train, validation, tests): (Part<E>, Part<E>, Vec<Part<E>>),
        seed: u64,
        device: &Device,
    ) -> candle_core::Result<ExampleData<E>> {
        if train.members.is_empty() {
            candle_core::bail!("the training set has no examples");
        }
        let mut by_shape: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
        for &i in &train.members {
            by_shape.entry(layout.shape(&*train.set, i)).or_default().push(i);
        }
        let groups: Vec<Vec<usize>> = by_shape.into_values().collect();
        let mut group_of = vec![0; train.set.len()];
        for (g, members) in groups.iter().enumerate() {
            for &i in members {
                group_of[i] = g;
            }
        }
        Ok(ExampleData {
            layout,
            train,
            groups,
            group_of,
            validation,
            tests,
            rng: stream(seed, Stream::Train),
            seed,
            device: device.clone(),
        })
    }
}

impl<E: Examples> TaskData for ExampleData<E> {
    fn train_batch(&mut self, batch_size: usize) -> candle_core::Result<Batch> {
        let members = &self.train.members;
        let first = members[self.rng.random_range(0..members.len())];
        let group = &self.groups[self.group_of[first]];
        let mut idx = vec![first];
        while idx.len() < batch_size.max(1) {
            idx.push(group[self.rng.random_range(0..group.len())]);
        }
        batch(&*self.train.set, &idx, self.layout, &self.device)
    }

    fn eval_batches(&self, split: Split, batch_size: usize) -> candle_core::Result<Vec<Batch>> {
        let (part, which) = match split {
            Split::Validation => (&self.validation, Stream::Validation),
            Split::Test(i) => match self.tests.get(i) {
                Some(p) => (p, Stream::Test(i)),
                None => candle_core::bail!("no test split {i}"),
            },
        };
        let set = &*part.set;
        let mut by_shape: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
        for &i in &part.members {
            by_shape.entry(self.layout.shape(set, i)).or_default().push(i);
        }
        let mut cuts: Vec<Vec<usize>> = vec![];
        for mut members in by_shape.into_values() {
            members.sort_by_key(|&i| (set.input_len(i), i));
            cuts.extend(members.chunks(batch_size.max(1)).map(<[usize]>::to_vec));
        }
        cuts.shuffle(&mut stream(self.seed, which));
        cuts.iter().map(|idx| batch(set, idx, self.layout, &self.device)).collect()
    }

    fn train_size(&self) -> Option<usize> {
        Some(self.train.members.len())
    }

    fn longest_train_steps(&self) -> Option<usize> {
        let set = &*self.train.set;
        let steps = |i: usize| match self.layout {
            Layout::After { .. } => set.input_len(i) + set.target(i).len(),
            Layout::Aligned => set.input_len(i),
        };
        self.train.members.iter().map(|&i| steps(i)).max()
    }
}

/// Examples `idx` of `set` (all of one shape) as a time-major batch.
pub(super) fn batch<E: Examples>(
    set: &E,
    idx: &[usize],
    layout: Layout,
    device: &Device,
) -> candle_core::Result<Batch> {
    let n = idx.len();
    let mut tokens = vec![];
    match layout {
        Layout::After { pad, answer } => {
            let k = idx.first().map_or(0, |&i| set.target(i).len());
            let longest = idx.iter().map(|&i| set.input_len(i)).max().unwrap_or(0);
            let t = longest + k;
            let mut inputs = vec![pad; t * n];
            let mut targets = vec![0u32; k * n];
            for (b, &i) in idx.iter().enumerate() {
                tokens.clear();
                set.input(i, &mut tokens);
                let start = longest - tokens.len();
                for (s, tok) in tokens.iter().enumerate() {
                    inputs[(start + s) * n + b] = *tok;
                }
                for (s, &y) in set.target(i).iter().enumerate() {
                    inputs[(longest + s) * n + b] = answer;
                    targets[s * n + b] = y;
                }
            }
            Ok(Batch {
                inputs: Tensor::from_vec(inputs, (t, n), device)?,
                scored: (longest..t).collect(),
                targets: Tensor::from_vec(targets, (k, n), device)?,
            })
        }
        Layout::Aligned => {
            let t = idx.first().map_or(0, |&i| set.input_len(i));
            let mut inputs = vec![0u32; t * n];
            let mut targets = vec![0u32; t * n];
            for (b, &i) in idx.iter().enumerate() {
                tokens.clear();
                set.input(i, &mut tokens);
                for (s, (&x, &y)) in tokens.iter().zip(set.target(i)).enumerate() {
                    inputs[s * n + b] = x;
                    targets[s * n + b] = y;
                }
            }
            Ok(Batch {
                inputs: Tensor::from_vec(inputs, (t, n), device)?,
                scored: (0..t).collect(),
                targets: Tensor::from_vec(targets, (t, n), device)?,
            })
        }
    }
}

/// Examples held as lists.
#[derive(Clone, Debug, Default, PartialEq)]
pub(super) struct Listed {
    pub inputs: Vec<Vec<u32>>,
    pub targets: Vec<Vec<u32>>,
}

impl Examples for Listed {
    fn len(&self) -> usize {
        self.inputs.len()
    }
    fn input_len(&self, i: usize) -> usize {
        self.inputs[i].len()
    }
    fn input(&self, i: usize, out: &mut Vec<u32>) {
        out.extend_from_slice(&self.inputs[i]);
    }
    fn target(&self, i: usize) -> &[u32] {
        &self.targets[i]
    }
}

#[cfg(test)]
pub(super) mod testing {
    use super::*;

    /// Every example of a split as (input without pads and answer steps, targets), and checks
    /// the layout: answer steps at the end, marked, scored; pads only on the left.
    pub(crate) fn examples(data: &dyn TaskData, split: Split, layout: Layout) -> Vec<(Vec<u32>, Vec<u32>)> {
        let mut out = vec![];
        for b in data.eval_batches(split, 3).unwrap() {
            out.extend(decode(&b, layout));
        }
        out
    }

    /// One batch's examples (see [`examples`]).
    pub(crate) fn decode(b: &Batch, layout: Layout) -> Vec<(Vec<u32>, Vec<u32>)> {
        let x = b.inputs.t().unwrap().to_vec2::<u32>().unwrap();
        let y = b.targets.t().unwrap().to_vec2::<u32>().unwrap();
        let t = b.steps().unwrap();
        x.into_iter()
            .zip(y)
            .map(|(x, y)| match layout {
                Layout::After { pad, answer } => {
                    let k = y.len();
                    assert_eq!(b.scored, (t - k..t).collect::<Vec<_>>(), "the answer steps are scored");
                    assert!(x[t - k..].iter().all(|a| *a == answer), "answer steps carry the marker");
                    let start = x[..t - k].iter().position(|v| *v != pad).unwrap_or(t - k);
                    (x[start..t - k].to_vec(), y)
                }
                Layout::Aligned => {
                    assert_eq!(b.scored, (0..t).collect::<Vec<_>>());
                    (x, y)
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::testing::*;
    use super::*;

    fn listed(pairs: &[(&[u32], &[u32])]) -> Arc<Listed> {
        Arc::new(Listed {
            inputs: pairs.iter().map(|(x, _)| x.to_vec()).collect(),
            targets: pairs.iter().map(|(_, y)| y.to_vec()).collect(),
        })
    }

    const AFTER: Layout = Layout::After { pad: 0, answer: 1 };

    #[test]
    fn answers_follow_left_padded_inputs() {
        let set = listed(&[(&[5, 6, 7], &[2]), (&[8], &[3])]);
        let b = batch(&*set, &[0, 1], AFTER, &Device::Cpu).unwrap();
        assert_eq!(b.inputs.to_vec2::<u32>().unwrap(), vec![vec![5, 0], vec![6, 0], vec![7, 8], vec![1, 1]]);
        assert_eq!(b.scored, vec![3]);
        assert_eq!(b.targets.to_vec2::<u32>().unwrap(), vec![vec![2, 3]]);
        let aligned = listed(&[(&[5, 6], &[1, 2]), (&[7, 8], &[3, 4])]);
        let b = batch(&*aligned, &[1, 0], Layout::Aligned, &Device::Cpu).unwrap();
        assert_eq!(b.inputs.to_vec2::<u32>().unwrap(), vec![vec![7, 5], vec![8, 6]]);
        assert_eq!(b.targets.to_vec2::<u32>().unwrap(), vec![vec![3, 1], vec![4, 2]]);
        assert_eq!(b.scored, vec![0, 1]);
    }

    #[test]
    fn batches_hold_one_shape_and_held_out_sets_come_whole() {
        let set = listed(&[(&[5], &[2]), (&[6, 7], &[3, 4]), (&[8, 9, 5], &[2]), (&[7], &[3, 3]), (&[6], &[4])]);
        let data = ExampleData::new(
            AFTER,
            (Part::all(set.clone()), Part::all(set.clone()), vec![Part { set: set.clone(), members: vec![1, 2] }]),
            3,
            &Device::Cpu,
        )
        .unwrap();
        let mut got = examples(&data, Split::Validation, AFTER);
        got.sort();
        let mut all: Vec<(Vec<u32>, Vec<u32>)> = set.inputs.iter().cloned().zip(set.targets.iter().cloned()).collect();
        all.sort();
        assert_eq!(got, all);
        assert_eq!(examples(&data, Split::Test(0), AFTER).len(), 2);
        assert_eq!(data.longest_train_steps(), Some(4), "3 input tokens and 1 answer step, or 2 and 2");
        assert!(data.eval_batches(Split::Test(1), 3).is_err());

        let mut data = data;
        for _ in 0..20 {
            let b = data.train_batch(4).unwrap();
            let ex = decode(&b, AFTER);
            assert_eq!(ex.len(), 4);
            assert!(ex.iter().all(|(_, y)| y.len() == ex[0].1.len()), "one shape per batch: {ex:?}");
        }
    }

    #[test]
    fn same_seed_same_batches() {
        let set = listed(&[(&[5], &[2]), (&[6, 7], &[3]), (&[8, 9, 5], &[2]), (&[7], &[3]), (&[6], &[4])]);
        let draw = |seed| {
            let parts = (Part::all(set.clone()), Part::all(set.clone()), vec![Part::all(set.clone())]);
            let mut d = ExampleData::new(AFTER, parts, seed, &Device::Cpu).unwrap();
            let train: Vec<_> = (0..5).map(|_| decode(&d.train_batch(3).unwrap(), AFTER)).collect();
            let order: Vec<_> =
                d.eval_batches(Split::Validation, 2).unwrap().iter().map(|b| decode(b, AFTER)).collect();
            (train, order)
        };
        assert_eq!(draw(1), draw(1));
        assert_ne!(draw(1), draw(2));
    }
}
