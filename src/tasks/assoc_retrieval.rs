//! Associative retrieval (SAM paper §3.1; the authors' `number_arecall` generator,
//! docs/models.md, Associative retrieval).
//!
//! A sequence of `pairs` key–value pairs, then `??` and a query key; the answer is the value
//! stored under the query key:
//!
//! ```text
//!   c 9 k 2 a 5 ? ? k   →  2
//! ```
//!
//! - Keys are distinct letters a–z, values digits 0–9 (repeats allowed), the query one of the keys.
//! - Token ids as the authors' embedding sees them: digits 0–9 → 0–9, letters → 10–35, `?` → 36
//!   (vocabulary 37). The sequence has `2·pairs + 3` tokens; only the output after the last
//!   token is scored (10 classes), with cross-entropy; metric accuracy.
//! - "Length 30" in the paper is ambiguous (the code ships only `pairs = 24`, i.e. 51 tokens,
//!   the "length 50" setting). memctl's `length 30` is `pairs = 13`: 29 tokens.
//! - Fixed datasets generated once per trial from its seed: `train` examples (default 100 000,
//!   as the code), `validation` (10 000) and `test` (20 000); training batches are drawn
//!   uniformly from the training set.

use candle_core::{Device, Tensor};
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::define::task_kind;
use super::held_out::HeldOut;
use super::options::TaskOption;
use super::prelude::*;

static OPTIONS: [TaskOption; 2] =
    [TaskOption::int("pairs", 13, 1, LETTERS as i64), TaskOption::int("train", 100_000, 1, 10_000_000)];

/// Token id of `?`.
const QUESTION: u32 = 36;
const VOCAB: usize = 37;
const LETTERS: u32 = 26;

task_kind! {
    AssocRetrievalKind = "assocRetrieval",
    "associative retrieval: k1 v1 … kK vK ? ? kq → value of kq (SAM §3.1)",
    options: &OPTIONS,
    held_out: (10_000, 20_000),
    builds: |o| o.parse::<AssocRetrieval>()?,
}

/// E[the largest count] when `balls` fall uniformly into `bins`: Σₘ P(max > m), with
/// P(max ≤ m) counted exactly (sequences whose every bin holds at most m, by dynamic
/// programming over bins).
fn expected_max_count(balls: usize, bins: usize) -> f64 {
    let binomial = |n: usize, k: usize| (0..k).fold(1.0, |acc, i| acc * (n - i) as f64 / (i + 1) as f64);
    let total = (bins as f64).powi(balls as i32);
    (0..balls)
        .map(|cap| {
            // ways[n]: sequences of n labelled balls in the bins so far, each holding ≤ cap.
            let mut ways = vec![0.0; balls + 1];
            ways[0] = 1.0;
            for _ in 0..bins {
                ways = (0..=balls).map(|n| (0..=cap.min(n)).map(|c| binomial(n, c) * ways[n - c]).sum()).collect();
            }
            1.0 - ways[balls] / total
        })
        .sum()
}

#[derive(serde::Deserialize)]
pub struct AssocRetrieval {
    pairs: usize,
    train: usize,
    #[serde(flatten)]
    held_out: HeldOut,
}

impl AssocRetrieval {
    fn seq_len(&self) -> usize {
        2 * self.pairs + 3
    }

    /// `n` examples: tokens `[n, T]` (row-major) and answers `[n]`.
    fn generate(&self, n: usize, rng: &mut ChaCha8Rng) -> (Vec<u32>, Vec<u32>) {
        let t = self.seq_len();
        let mut tokens = Vec::with_capacity(n * t);
        let mut answers = Vec::with_capacity(n);
        let mut letters: Vec<u32> = (0..LETTERS).collect();
        for _ in 0..n {
            letters.shuffle(rng);
            let keys = &letters[..self.pairs];
            let values: Vec<u32> = (0..self.pairs).map(|_| rng.random_range(0..10)).collect();
            for (k, v) in keys.iter().zip(&values) {
                tokens.push(10 + k);
                tokens.push(*v);
            }
            let q = rng.random_range(0..self.pairs);
            tokens.extend([QUESTION, QUESTION, 10 + keys[q]]);
            answers.push(values[q]);
        }
        (tokens, answers)
    }
}

impl Task for AssocRetrieval {
    fn max_steps(&self) -> Option<usize> {
        Some(self.seq_len())
    }
    fn input(&self) -> Ty {
        Ty::Tokens(VOCAB)
    }
    fn target(&self) -> Target {
        Target::Classes(10)
    }
    /// Chance over the 10 digits, and the best guess that ignores the query: the value stored
    /// most often in the sequence (a single stored value is right 1/pairs of the time, more
    /// with repeats).
    fn trivial_levels(&self) -> Vec<TrivialLevel> {
        let pairs = self.pairs;
        vec![
            TrivialLevel::new("chance (1 of 10 digits)", "accuracy", 0.1),
            TrivialLevel::new(
                format!("the value stored most often among the {pairs}"),
                "accuracy",
                expected_max_count(pairs, 10) / pairs as f64,
            ),
        ]
    }
    fn data(&self, seed: u64, device: &Device) -> candle_core::Result<Box<dyn TaskData>> {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let t = self.seq_len();
        let mut split = |n: usize| -> candle_core::Result<Examples> {
            let (tokens, answers) = self.generate(n, &mut rng);
            Ok(Examples {
                tokens: Tensor::from_vec(tokens, (n, t), device)?,
                answers: Tensor::from_vec(answers, (n, 1), device)?,
            })
        };
        let train = split(self.train)?;
        let validation = split(self.held_out.validation)?;
        let test = split(self.held_out.test)?;
        Ok(Box::new(AssocData { train, validation, test, rng, seq_len: t, device: device.clone() }))
    }
}

/// Examples stored example-major; batches are transposed to time-major.
struct Examples {
    tokens: Tensor,
    answers: Tensor,
}

impl Examples {
    fn len(&self) -> usize {
        self.answers.dims()[0]
    }

    fn batch(&self, idx: &Tensor, seq_len: usize) -> candle_core::Result<Batch> {
        Ok(Batch {
            inputs: self.tokens.index_select(idx, 0)?.t()?.contiguous()?,
            scored: vec![seq_len - 1],
            targets: self.answers.index_select(idx, 0)?.t()?.contiguous()?,
        })
    }
}

struct AssocData {
    train: Examples,
    validation: Examples,
    test: Examples,
    rng: ChaCha8Rng,
    seq_len: usize,
    device: Device,
}

impl TaskData for AssocData {
    fn train_batch(&mut self, batch_size: usize) -> candle_core::Result<Batch> {
        let n = self.train.len() as u32;
        let idx: Vec<u32> = (0..batch_size).map(|_| self.rng.random_range(0..n)).collect();
        self.train.batch(&Tensor::from_vec(idx, batch_size, &self.device)?, self.seq_len)
    }

    fn eval_batches(&self, split: Split, batch_size: usize) -> candle_core::Result<Vec<Batch>> {
        let set = match split {
            Split::Validation => &self.validation,
            Split::Test(_) => &self.test,
        };
        let n = set.len();
        (0..n)
            .step_by(batch_size.max(1))
            .map(|start| {
                let end = (start + batch_size).min(n);
                let idx: Vec<u32> = (start as u32..end as u32).collect();
                set.batch(&Tensor::from_vec(idx, end - start, &self.device)?, self.seq_len)
            })
            .collect()
    }

    fn train_size(&self) -> Option<usize> {
        Some(self.train.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_most_frequent_stored_value_scores_as_computed() {
        for pairs in [1usize, 4, 13] {
            let task = AssocRetrieval { pairs, train: 1, held_out: HeldOut { validation: 1, test: 1 } };
            let (tokens, answers) = task.generate(20_000, &mut ChaCha8Rng::seed_from_u64(7));
            let t = task.seq_len();
            // Guess the (smallest) value stored most often; the query is what it ignores.
            let hits = answers.iter().enumerate().filter(|&(i, &answer)| {
                let mut counts = [0usize; 10];
                (0..pairs).for_each(|k| counts[tokens[i * t + 2 * k + 1] as usize] += 1);
                let mode = (0..10).max_by_key(|&v| (counts[v], std::cmp::Reverse(v))).unwrap_or(0);
                mode == answer as usize
            });
            let estimate = hits.count() as f64 / answers.len() as f64;
            let levels = AssocRetrievalKind.trivial_levels(&[Value::Int(pairs as i64)]);
            assert_eq!(levels[0].value, 0.1);
            // Three standard errors of a 20 000-sample proportion.
            let se = (levels[1].value * (1.0 - levels[1].value) / 20_000.0).sqrt();
            assert!(
                (estimate - levels[1].value).abs() <= 3.0 * se + 1e-12,
                "pairs {pairs}: {estimate} vs {}",
                levels[1].value
            );
        }
        // One ball fills one bin; two share one with probability 1/10.
        assert_eq!(expected_max_count(1, 10), 1.0);
        assert!((expected_max_count(2, 10) - 1.1).abs() < 1e-12);
    }

    fn task(pairs: i64) -> Box<dyn Task> {
        AssocRetrievalKind.instantiate(&[Value::Int(pairs), Value::Int(50), Value::Int(20), Value::Int(20)]).unwrap()
    }

    #[test]
    fn sequences_follow_the_documented_encoding() {
        let data = task(4).data(3, &Device::Cpu).unwrap();
        let batches = data.eval_batches(Split::Validation, 8).unwrap();
        assert_eq!(batches.len(), 3); // 20 examples in batches of 8
        let b = &batches[0];
        assert_eq!(b.inputs.dims(), &[11, 8]);
        assert_eq!(b.scored, vec![10]);
        let tokens = b.inputs.t().unwrap().to_vec2::<u32>().unwrap();
        let answers = b.targets.to_vec2::<u32>().unwrap()[0].clone();
        for (seq, answer) in tokens.iter().zip(answers) {
            let keys: Vec<u32> = seq[..8].iter().step_by(2).copied().collect();
            let values: Vec<u32> = seq[1..8].iter().step_by(2).copied().collect();
            assert!(keys.iter().all(|k| (10..36).contains(k)));
            assert!(values.iter().all(|v| *v < 10));
            let mut distinct = keys.clone();
            distinct.sort();
            distinct.dedup();
            assert_eq!(distinct.len(), 4, "keys are distinct");
            assert_eq!(&seq[8..10], &[QUESTION, QUESTION]);
            let q = keys.iter().position(|k| *k == seq[10]).expect("query is a stored key");
            assert_eq!(values[q], answer);
        }
    }

    #[test]
    fn rejects_more_pairs_than_letters() {
        let err = AssocRetrievalKind
            .instantiate(&[Value::Int(27), Value::Int(1), Value::Int(1), Value::Int(1)])
            .err()
            .unwrap();
        assert_eq!(err.arg, Some("pairs"));
    }
}
