//! The NAM paper's algorithmic tasks (§4.1; hwnam831/neuralattentionmemory @972108f,
//! `NSPDataset.py`, `AutoEncode.py`; docs/models.md, NAM tasks): what `addition`, `palindrome` and
//! `reduce` share.
//!
//! - **Masked completion.** Every example is a fixed-length sequence of token ids with one
//!   prediction per position (non-autoregressive): every position is scored (`Classes(V)`, V the
//!   task's vocabulary), cross-entropy averaged over positions; the paper's metric is sequence
//!   accuracy (`seq_accuracy`: every position right, pads included).
//! - **Digits** are little-endian. Token ids as the code: 0–9 digits, 10 delimiter, 11 pad,
//!   12 start (unused), 13 EOS, 14 mask, 15 custom (unused) — vocabulary 16 (`reduce` uses only
//!   0–11, vocabulary 12).
//! - **Digit counts** are deterministic in the example's index, as the code: example `i` of `N`
//!   in a set with digit range `lo..=hi` has `lo + ⌊(hi − lo + 1)·i / N⌋` digits, so every
//!   count is equally represented; the examples are then stored in a random order. The sequence
//!   length depends on the set's `hi`, so each split has a length of its own.
//! - **Sets.** Training: `min_digits..=digits` (default 1..10), `train` examples generated once
//!   per trial (the code caches it and reuses it every epoch); batches walk through it in a
//!   fresh random order each epoch (the last batch of an epoch wraps into the next one).
//!   Validation and `test` (in-distribution): `max(min_digits, ⌊digits/2⌋)..=digits` (5..10),
//!   independent draws. Out of distribution, `od_easy` and `od_hard`, with `od = "paper"`
//!   (default): `digits+1..=digits+3` and `digits+4..=digits+6` (11..13, 14..16, paper §4.1);
//!   with `od = "code"` (addition and palindrome only): `digits+1..=digits+4` and
//!   `digits+5..=digits+8` (11..14, 15..18, the 972108f code). For `reduce` the two agree.
//!   Set sizes default to the paper's (25 600 training, 2048 per held-out set; the code uses 1024).

use candle_core::{Device, Tensor};
use rand::Rng;
use rand::seq::SliceRandom;
use rand_chacha::ChaCha8Rng;

use super::held_out::HeldOut;
use super::options::TaskOption;
use super::prelude::*;
use super::streams::{Stream, stream};

/// Token ids.
pub(super) const DELIM: u32 = 10;
pub(super) const PAD: u32 = 11;
pub(super) const EOS: u32 = 13;
pub(super) const MASK: u32 = 14;

/// The held-out splits, in-distribution first.
pub(super) const TEST_SPLITS: &[&str] = &["test", "od_easy", "od_hard"];

const HELD_OUT: [TaskOption; 2] = HeldOut::options(2048, 2048);

/// The options every NAM task has (`od` last, for tasks that offer it; the held-out sizes
/// before it, where specs have always had them).
pub(super) static OPTIONS_WITH_OD: [TaskOption; 6] = [
    TaskOption::int("digits", 10, 1, 1000).at_least("min_digits"),
    TaskOption::int("min_digits", 1, 1, 1000),
    TaskOption::int("train", 25_600, 1, 10_000_000),
    HELD_OUT[0],
    HELD_OUT[1],
    TaskOption::choice("od", "paper", &["paper", "code"]),
];

/// The shared options without `od` (for `reduce`, whose OD ranges are the same in paper and code).
pub(super) static OPTIONS_WITHOUT_OD: [TaskOption; 5] =
    [OPTIONS_WITH_OD[0], OPTIONS_WITH_OD[1], OPTIONS_WITH_OD[2], OPTIONS_WITH_OD[3], OPTIONS_WITH_OD[4]];

/// How one task lays out an example.
pub(super) trait Rule: Clone + Send + Sync + 'static {
    /// Vocabulary of inputs and targets.
    const VOCAB: usize;
    /// Sequence length of a set whose longest example has `max_digits` digits.
    fn seq_len(&self, max_digits: usize) -> usize;
    /// Writes one example with `n` digits; `input` and `target` (`seq_len(max_digits)` long)
    /// arrive filled with pad.
    fn example(&self, rng: &mut ChaCha8Rng, n: usize, max_digits: usize, input: &mut [u32], target: &mut [u32]);
    /// The best answer read off the input alone, in words (its levels: [`shortcut_levels`]).
    const SHORTCUT: &'static str;
    /// The chance that [`Rule::SHORTCUT`] answers an example of `n` digits right.
    fn shortcut_right(&self, n: usize) -> f64;
}

/// Digit ranges and set sizes.
#[derive(Clone, Debug, PartialEq, serde::Deserialize)]
pub(super) struct Config {
    pub digits: usize,
    pub min_digits: usize,
    pub train: usize,
    #[serde(flatten)]
    pub held_out: HeldOut,
    /// The paper's when the task has no `od` option.
    #[serde(default)]
    pub od: Od,
}

/// Whose out-of-distribution digit ranges: the paper's or the 972108f code's.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub(super) enum Od {
    #[default]
    Paper,
    Code,
}

impl Config {
    pub(super) fn train_range(&self) -> (usize, usize) {
        (self.min_digits, self.digits)
    }

    /// In-distribution validation and test digits.
    pub(super) fn id_range(&self) -> (usize, usize) {
        ((self.digits / 2).max(self.min_digits), self.digits)
    }

    /// Digits of the `i`-th test split.
    pub(super) fn test_range(&self, i: usize) -> (usize, usize) {
        let d = self.digits;
        match (i, self.od) {
            (0, _) => self.id_range(),
            (1, Od::Paper) => (d + 1, d + 3),
            (1, Od::Code) => (d + 1, d + 4),
            (_, Od::Paper) => (d + 4, d + 6),
            (_, Od::Code) => (d + 5, d + 8),
        }
    }
}

/// The metrics of the test splits, in [`TEST_SPLITS`]'s order.
pub(super) const TEST_SEQ_METRICS: [&str; 3] = ["seq_accuracy", "od_easy_seq_accuracy", "od_hard_seq_accuracy"];

/// Sequence accuracy, on each test split, of an answer read off the input alone: the mean,
/// over the digit counts the split draws evenly ([`digits_of`]), of `right(n)`, the chance
/// that the answer is right for an example of n digits.
fn shortcut_levels(config: &Config, name: &str, right: impl Fn(usize) -> f64) -> Vec<TrivialLevel> {
    (0..TEST_SPLITS.len())
        .map(|i| {
            let (lo, hi) = config.test_range(i);
            let value = (lo..=hi).map(&right).sum::<f64>() / (hi - lo + 1) as f64;
            TrivialLevel::new(name, TEST_SEQ_METRICS[i], value)
        })
        .collect()
}

/// A NAM task: a [`Rule`] and its sets.
#[derive(Clone, Debug)]
pub(super) struct NamTask<R: Rule> {
    pub rule: R,
    pub config: Config,
}

impl<R: Rule + std::fmt::Debug> Task for NamTask<R> {
    fn max_steps(&self) -> Option<usize> {
        let c = &self.config;
        let most_digits = (0..TEST_SPLITS.len()).map(|i| c.test_range(i).1).chain([c.train_range().1, c.id_range().1]);
        Some(self.rule.seq_len(most_digits.max().unwrap_or(c.digits)))
    }
    fn input(&self) -> Ty {
        Ty::Tokens(R::VOCAB)
    }
    fn target(&self) -> Target {
        Target::Classes(R::VOCAB)
    }
    fn test_splits(&self) -> &'static [&'static str] {
        TEST_SPLITS
    }
    fn trivial_levels(&self) -> Vec<TrivialLevel> {
        shortcut_levels(&self.config, R::SHORTCUT, |n| self.rule.shortcut_right(n))
    }
    fn data(&self, seed: u64, device: &Device) -> candle_core::Result<Box<dyn TaskData>> {
        let c = &self.config;
        let set = |which: Stream, n: usize, range: (usize, usize)| {
            TokenSet::generate(&self.rule, &mut stream(seed, which), n, range, device)
        };
        let train = set(Stream::Train, c.train, c.train_range())?;
        let validation = set(Stream::Validation, c.held_out.validation, c.id_range())?;
        let tests = (0..TEST_SPLITS.len())
            .map(|i| set(Stream::Test(i), c.held_out.test, c.test_range(i)))
            .collect::<candle_core::Result<Vec<_>>>()?;
        let order: Vec<u32> = (0..c.train as u32).collect();
        Ok(Box::new(FixedData {
            train,
            validation,
            tests,
            rng: stream(seed, Stream::Order),
            order,
            next: c.train, // shuffle before the first batch
            device: device.clone(),
        }))
    }
}

/// A fixed set of token sequences, example-major: inputs and targets `[N, T]` u32.
pub(super) struct TokenSet {
    inputs: Tensor,
    targets: Tensor,
}

impl TokenSet {
    /// `n` examples with digit counts spread evenly over `lo..=hi`.
    pub(super) fn generate<R: Rule>(
        rule: &R,
        rng: &mut ChaCha8Rng,
        n: usize,
        (lo, hi): (usize, usize),
        device: &Device,
    ) -> candle_core::Result<TokenSet> {
        let t = rule.seq_len(hi);
        let mut inputs = vec![PAD; n * t];
        let mut targets = vec![PAD; n * t];
        // Example i (with the schedule's digit count) goes to row row[i]: rows are in random
        // order, so a validation cut short by `eval_size` is not biased to the shortest numbers.
        let mut row: Vec<usize> = (0..n).collect();
        row.shuffle(rng);
        for (i, &r) in row.iter().enumerate() {
            let span = r * t..(r + 1) * t;
            rule.example(rng, digits_of(i, n, lo, hi), hi, &mut inputs[span.clone()], &mut targets[span]);
        }
        Ok(TokenSet {
            inputs: Tensor::from_vec(inputs, (n, t), device)?,
            targets: Tensor::from_vec(targets, (n, t), device)?,
        })
    }

    fn len(&self) -> usize {
        self.inputs.dims()[0]
    }

    /// Rows `idx`, time-major; every position scored.
    fn batch(&self, idx: &Tensor) -> candle_core::Result<Batch> {
        let inputs = self.inputs.index_select(idx, 0)?.t()?.contiguous()?;
        Ok(Batch {
            scored: (0..inputs.dim(0)?).collect(),
            targets: self.targets.index_select(idx, 0)?.t()?.contiguous()?,
            inputs,
        })
    }

    fn range(&self, start: usize, len: usize) -> candle_core::Result<Batch> {
        let inputs = self.inputs.narrow(0, start, len)?.t()?.contiguous()?;
        Ok(Batch {
            scored: (0..inputs.dim(0)?).collect(),
            targets: self.targets.narrow(0, start, len)?.t()?.contiguous()?,
            inputs,
        })
    }
}

/// Digit count of example `i` of `n` in a set with digits `lo..=hi` (the code's schedule).
pub(super) fn digits_of(i: usize, n: usize, lo: usize, hi: usize) -> usize {
    lo + (hi - lo + 1) * i / n
}

struct FixedData {
    train: TokenSet,
    validation: TokenSet,
    tests: Vec<TokenSet>,
    rng: ChaCha8Rng,
    /// This epoch's order of the training examples, and the next position in it.
    order: Vec<u32>,
    next: usize,
    device: Device,
}

impl TaskData for FixedData {
    fn train_batch(&mut self, batch_size: usize) -> candle_core::Result<Batch> {
        let mut idx = Vec::with_capacity(batch_size);
        while idx.len() < batch_size {
            if self.next == self.order.len() {
                self.order.shuffle(&mut self.rng);
                self.next = 0;
            }
            let take = (batch_size - idx.len()).min(self.order.len() - self.next);
            idx.extend_from_slice(&self.order[self.next..self.next + take]);
            self.next += take;
        }
        self.train.batch(&Tensor::from_vec(idx, batch_size, &self.device)?)
    }

    fn eval_batches(&self, split: Split, batch_size: usize) -> candle_core::Result<Vec<Batch>> {
        let set = match split {
            Split::Validation => &self.validation,
            Split::Test(i) => self.tests.get(i).ok_or_else(|| candle_core::Error::Msg(format!("no test split {i}")))?,
        };
        let (n, bs) = (set.len(), batch_size.max(1));
        (0..n).step_by(bs).map(|start| set.range(start, bs.min(n - start))).collect()
    }

    fn train_size(&self) -> Option<usize> {
        Some(self.train.len())
    }
}

/// Uniform random digits.
pub(super) fn random_digits(rng: &mut ChaCha8Rng, n: usize) -> Vec<u32> {
    (0..n).map(|_| rng.random_range(0..10)).collect()
}

#[cfg(test)]
pub(super) mod testing {
    //! Checks every NAM task shares.
    use super::super::token_examples::Layout;
    use super::super::token_examples::testing::examples;
    use super::*;

    /// Every split's sequences: (inputs, targets) per example, example-major.
    pub(crate) fn split(data: &dyn TaskData, which: Split) -> Vec<(Vec<u32>, Vec<u32>)> {
        examples(data, which, Layout::Aligned)
    }

    /// Runs the checks every NAM task must pass; `digits` decodes an example's digit count.
    pub(crate) fn common_checks(kind: &dyn TaskKind, seq_len: fn(usize) -> usize, digits: fn(&[u32], &[u32]) -> usize) {
        // digits = 6: train 1..6, ID 3..6, OD (paper) 7..9 and 10..12.
        let options = [
            ("digits", Value::Int(6)),
            ("min_digits", Value::Int(1)),
            ("train", Value::Int(60)),
            ("validation", Value::Int(40)),
            ("test", Value::Int(40)),
        ];
        let values: Vec<Value> = kind
            .signature()
            .iter()
            .map(|s| options.iter().find(|(n, _)| *n == s.name).map_or(s.default.value().unwrap(), |(_, v)| v.clone()))
            .collect();
        let task = kind.instantiate(&values).unwrap();
        assert_eq!(task.test_splits(), &["test", "od_easy", "od_hard"]);
        let vocab = match task.input() {
            Ty::Tokens(v) => v,
            other => panic!("token input expected, found {other}"),
        };
        assert_eq!(task.target(), Target::Classes(vocab));
        let mut data = task.data(4, &Device::Cpu).unwrap();
        assert_eq!(data.train_size(), Some(60));

        let ranges =
            [(Split::Validation, 3, 6), (Split::Test(0), 3, 6), (Split::Test(1), 7, 9), (Split::Test(2), 10, 12)];
        for (which, lo, hi) in ranges {
            let examples = split(data.as_ref(), which);
            assert_eq!(examples.len(), 40);
            let mut seen: Vec<usize> = examples
                .iter()
                .map(|(x, y)| {
                    assert_eq!(x.len(), seq_len(hi), "{which:?}: length for {hi} digits");
                    assert!(x.iter().chain(y).all(|t| (*t as usize) < vocab));
                    digits(x, y)
                })
                .collect();
            seen.sort();
            seen.dedup();
            assert_eq!(seen, (lo..=hi).collect::<Vec<_>>(), "{which:?}: digit range");
        }
        let val = split(data.as_ref(), Split::Validation);
        let stored: Vec<usize> = val.iter().map(|(x, y)| digits(x, y)).collect();
        assert!(stored.windows(2).any(|w| w[0] > w[1]), "stored in random order, not by digits: {stored:?}");
        assert_ne!(val, split(data.as_ref(), Split::Test(0)), "validation and ID test are different draws");

        // Training: one epoch visits every example once; all digit counts 1..6.
        let mut epoch = vec![];
        for _ in 0..6 {
            let b = data.train_batch(10).unwrap();
            assert_eq!(b.inputs.dims(), &[seq_len(6), 10]);
            let x = b.inputs.t().unwrap().to_vec2::<u32>().unwrap();
            let y = b.targets.t().unwrap().to_vec2::<u32>().unwrap();
            epoch.extend(x.into_iter().zip(y));
        }
        let mut counts: Vec<usize> = epoch.iter().map(|(x, y)| digits(x, y)).collect();
        counts.sort();
        assert_eq!(counts, (1..=6).flat_map(|d| [d; 10]).collect::<Vec<_>>());

        // Determinism.
        let again = kind.instantiate(&values).unwrap().data(4, &Device::Cpu).unwrap();
        assert_eq!(split(again.as_ref(), Split::Test(2)), split(data.as_ref(), Split::Test(2)));
        let other = kind.instantiate(&values).unwrap().data(5, &Device::Cpu).unwrap();
        assert_ne!(split(other.as_ref(), Split::Test(2)), split(data.as_ref(), Split::Test(2)));
        let mut a = kind.instantiate(&values).unwrap().data(4, &Device::Cpu).unwrap();
        let mut b = kind.instantiate(&values).unwrap().data(4, &Device::Cpu).unwrap();
        let batch = |d: &mut Box<dyn TaskData>| d.train_batch(7).unwrap().inputs.to_vec2::<u32>().unwrap();
        assert_eq!(batch(&mut a), batch(&mut b));

        // Option errors name the option.
        let mut bad = values.clone();
        bad[1] = Value::Int(7); // min_digits > digits
        assert_eq!(kind.instantiate(&bad).err().unwrap().arg, Some("digits"));
        let mut bad = values.clone();
        bad[2] = Value::Int(0);
        assert_eq!(kind.instantiate(&bad).err().unwrap().arg, Some("train"));
    }

    #[test]
    fn digit_schedule_covers_the_range_evenly() {
        let counts: Vec<usize> = (0..12).map(|i| digits_of(i, 12, 5, 10)).collect();
        assert_eq!(counts, vec![5, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10, 10]);
    }

    #[test]
    fn od_ranges_follow_the_paper_or_the_code() {
        let mut c =
            Config { digits: 10, min_digits: 1, train: 1, held_out: HeldOut { validation: 1, test: 1 }, od: Od::Paper };
        assert_eq!(c.train_range(), (1, 10));
        assert_eq!([c.test_range(0), c.test_range(1), c.test_range(2)], [(5, 10), (11, 13), (14, 16)]);
        c.od = Od::Code;
        assert_eq!([c.test_range(0), c.test_range(1), c.test_range(2)], [(5, 10), (11, 14), (15, 18)]);
        c.min_digits = 7;
        assert_eq!(c.id_range(), (7, 10));
    }
}
