//! ListOps — nested list operations on digits (Nangia & Bowman 2018), synthetic as in the Long
//! Range Arena (Tay et al. 2021), the benchmark of NAM's efficient-attention experiments (NAM
//! §5.3): `[MAX 2 9 [MIN 4 7 ] 0 ]` → 9.
//!
//! The generator follows LRA's `listops.py`: a tree node below `max_depth` is a digit with
//! probability ¾, else an operator (MIN, MAX, MED, SM) over 2..=`max_args` sub-trees;
//! at `max_depth` it is a digit. `MED` is the median truncated to an integer (`int(np.median)`:
//! the mean of the two middle values for an even count, rounded down), `SM` the sum modulo 10.
//! Trees whose token count falls outside `min_length..=max_length` are drawn again. LRA uses
//! lengths 500–2000; the defaults here are CPU-sized.
//!
//! Layout: the expression's tokens, left-padded to `max_length`, then one query step, scored:
//!
//! ```text
//!   input   pad … pad  [MAX 2 9 [MIN 4 7 ] 0 ]  ?
//!   target                                      9     (Classes(10), the last step only)
//! ```
//!
//! Tokens: digits 0–9, `[MIN` 10, `[MAX` 11, `[MED` 12, `[SM` 13, `]` 14, pad 15, query 16.
//! Fresh training data every batch; fixed validation and test sets.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::define::task_kind;
use super::fresh::{Fresh, FreshTask};
use super::options::TaskOption;
use super::prelude::*;

static OPTIONS: [TaskOption; 4] = [
    TaskOption::int("max_depth", 10, 1, 100),
    TaskOption::int("max_args", 10, 2, 100),
    TaskOption::int("min_length", 10, 1, 1 << 16),
    TaskOption::int("max_length", 100, 1, 1 << 16).at_least("min_length"),
];

const MIN: u32 = 10;
const MAX: u32 = 11;
const MED: u32 = 12;
const SM: u32 = 13;
const CLOSE: u32 = 14;
const PAD: u32 = 15;
const QUERY: u32 = 16;
const VOCAB: usize = 17;

task_kind! {
    ListOpsKind = "listOps",
    "ListOps: the value (0–9) of nested MIN/MAX/MED/SM lists of digits, as the Long Range Arena (NAM §5.3)",
    options: &OPTIONS,
    held_out: (1000, 2000),
    builds: |o| {
        let (depth, args) = (o.int("max_depth")?, o.int("max_args")?);
        let tokens = average_tokens(depth, args);
        if tokens > MAX_AVERAGE_TOKENS {
            return Err(PrimError::task(format!(
                "trees of `max_depth` {depth} with up to `max_args` {args} arguments average about {tokens:.1e} tokens, \
                 more than a generator can draw (at most {MAX_AVERAGE_TOKENS:.0e}); lower max_depth or max_args"
            ))
            .on("max_depth"));
        }
        let task = o.parse::<FreshTask<ListOps>>()?;
        task.generator.check_lengths_reachable()?;
        task
    },
}

/// The largest average tree, in tokens, that options may ask for: every example is drawn
/// again until one fits `max_length`, so each draw must stay cheap.
const MAX_AVERAGE_TOKENS: f64 = 1e5;

/// The average number of tokens of a tree drawn with these options: a node above `max_depth`
/// is a digit (¾) or an operator with its closing token over 2..=`max_args` sub-trees (¼).
fn average_tokens(max_depth: usize, max_args: usize) -> f64 {
    let args = (2 + max_args) as f64 / 2.0;
    (1..max_depth).fold(1.0, |below, _| 0.75 + 0.25 * (2.0 + args * below))
}

#[derive(Clone, Copy, Debug, serde::Deserialize)]
struct ListOps {
    max_depth: usize,
    max_args: usize,
    min_length: usize,
    max_length: usize,
}

/// Draws before a generator gives up on the length bounds (an impossible range fails the
/// trial with a message; [`ListOps::check_lengths_reachable`] refuses most before).
const TRIES: usize = 1_000_000;

/// The tokens the options' checks draw, at most, to tell whether the length range is reached
/// often enough: some 1 in 20 000 trees of an average size.
const CHECK_TOKENS: f64 = 2e6;

impl ListOps {
    /// Refuses a length range no tree reaches (longer than the longest tree of `max_depth`
    /// and `max_args`), or that trees of these options reach so rarely that a check's draws
    /// find none (every example would be drawn again that many times).
    fn check_lengths_reachable(&self) -> Result<(), PrimError> {
        // A node at `max_depth` is a digit; above it an operator, its arguments and a close.
        let longest = (1..self.max_depth).fold(1.0f64, |below, _| 2.0 + self.max_args as f64 * below);
        if self.min_length as f64 > longest {
            return Err(PrimError::task(format!(
                "`min_length` {} is longer than any expression of `max_depth` {} and `max_args` {} ({longest} tokens at \
                 most); lower min_length or raise max_depth/max_args",
                self.min_length, self.max_depth, self.max_args
            ))
            .on("min_length"));
        }
        let draws = (CHECK_TOKENS / average_tokens(self.max_depth, self.max_args)).clamp(100.0, 20_000.0) as usize;
        let mut rng = ChaCha8Rng::seed_from_u64(0);
        let mut tokens = vec![];
        for _ in 0..draws {
            tokens.clear();
            let mut count = 0;
            self.tree(&mut rng, 1, &mut tokens, &mut count);
            if (self.min_length..=self.max_length).contains(&count) {
                return Ok(());
            }
        }
        Err(PrimError::task(format!(
            "none of {draws} expressions drawn with these options had {}..={} tokens: the range is too rare to fill \
             a data set (every example is drawn again until one fits); widen it or change max_depth/max_args",
            self.min_length, self.max_length
        ))
        .on("min_length"))
    }

    /// One tree's value, LRA's `generate_tree`; its tokens go to `tokens`, which keeps no more
    /// than one past `max_length` (a longer tree is drawn again; counted in `count`).
    fn tree(&self, rng: &mut ChaCha8Rng, depth: usize, tokens: &mut Vec<u32>, count: &mut usize) -> u32 {
        let leaf = depth >= self.max_depth || rng.random::<f64>() > 0.25;
        if leaf {
            let v = rng.random_range(0..10);
            self.emit(v, tokens, count);
            return v;
        }
        let op = [MIN, MAX, MED, SM][rng.random_range(0..4)];
        self.emit(op, tokens, count);
        let n = rng.random_range(2..=self.max_args);
        let values: Vec<u32> = (0..n).map(|_| self.tree(rng, depth + 1, tokens, count)).collect();
        self.emit(CLOSE, tokens, count);
        apply(op, &values)
    }

    /// Counts token `t` of a tree, and keeps it while `tokens` holds no more than `max_length`.
    fn emit(&self, t: u32, tokens: &mut Vec<u32>, count: &mut usize) {
        *count += 1;
        if tokens.len() <= self.max_length {
            tokens.push(t);
        }
    }

    /// An expression within the length bounds: its tokens and value.
    fn example(&self, rng: &mut ChaCha8Rng) -> candle_core::Result<(Vec<u32>, u32)> {
        let mut tokens = vec![];
        for _ in 0..TRIES {
            tokens.clear();
            let mut count = 0;
            let value = self.tree(rng, 1, &mut tokens, &mut count);
            if (self.min_length..=self.max_length).contains(&count) {
                return Ok((tokens, value));
            }
        }
        candle_core::bail!(
            "listOps drew {TRIES} expressions and none had {}..={} tokens; widen the range or raise max_depth/max_args",
            self.min_length,
            self.max_length
        )
    }

    /// `n` examples as a batch: `[max_length + 1, n]` inputs, targets `[1, n]`.
    fn batch(&self, rng: &mut ChaCha8Rng, n: usize, device: &Device) -> candle_core::Result<Batch> {
        let t = self.max_length + 1;
        let mut inputs = vec![PAD; t * n];
        let mut targets = Vec::with_capacity(n);
        for b in 0..n {
            let (tokens, value) = self.example(rng)?;
            let start = self.max_length - tokens.len();
            for (i, tok) in tokens.iter().enumerate() {
                inputs[(start + i) * n + b] = *tok;
            }
            inputs[(t - 1) * n + b] = QUERY;
            targets.push(value);
        }
        Ok(Batch {
            inputs: Tensor::from_vec(inputs, (t, n), device)?,
            scored: vec![t - 1],
            targets: Tensor::from_vec(targets, (1, n), device)?,
        })
    }
}

/// An operator on its arguments' values.
fn apply(op: u32, values: &[u32]) -> u32 {
    match op {
        MIN => *values.iter().min().expect("at least two arguments"),
        MAX => *values.iter().max().expect("at least two arguments"),
        SM => values.iter().sum::<u32>() % 10,
        MED => {
            let mut v = values.to_vec();
            v.sort_unstable();
            let n = v.len();
            // int(np.median(v)): the middle value, or the floor of the two middle ones' mean.
            if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2 }
        }
        _ => unreachable!("not an operator: {op}"),
    }
}

impl Fresh for ListOps {
    fn max_steps(&self) -> Option<usize> {
        // The longest expression, then the query token.
        Some(self.max_length + 1)
    }
    fn input(&self) -> Ty {
        Ty::Tokens(VOCAB)
    }
    fn target(&self) -> Target {
        Target::Classes(10)
    }
    fn train_batch(&self, rng: &mut ChaCha8Rng, batch: usize, device: &Device) -> candle_core::Result<Batch> {
        self.batch(rng, batch, device)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An independent evaluator: reads the tokens with a stack, as a person would.
    fn evaluate(tokens: &[u32]) -> u32 {
        let mut stack: Vec<(u32, Vec<u32>)> = vec![];
        let mut result = None;
        for &t in tokens {
            match t {
                0..=9 => match stack.last_mut() {
                    Some((_, args)) => args.push(t),
                    None => result = Some(t),
                },
                MIN | MAX | MED | SM => stack.push((t, vec![])),
                CLOSE => {
                    let (op, mut args) = stack.pop().expect("balanced");
                    args.sort_unstable();
                    let v = match op {
                        MIN => args[0],
                        MAX => args[args.len() - 1],
                        SM => args.iter().sum::<u32>() % 10,
                        _ => {
                            let n = args.len();
                            let median = if n % 2 == 1 {
                                args[n / 2] as f64
                            } else {
                                (args[n / 2 - 1] + args[n / 2]) as f64 / 2.0
                            };
                            median as u32
                        }
                    };
                    match stack.last_mut() {
                        Some((_, outer)) => outer.push(v),
                        None => result = Some(v),
                    }
                }
                _ => panic!("not an expression token: {t}"),
            }
        }
        assert!(stack.is_empty());
        result.expect("an expression")
    }

    fn task(options: &[(&str, i64)]) -> Box<dyn Task> {
        let values: Vec<Value> = ListOpsKind
            .signature()
            .iter()
            .map(|s| {
                options.iter().find(|(n, _)| *n == s.name).map_or(s.default.value().unwrap(), |(_, v)| Value::Int(*v))
            })
            .collect();
        ListOpsKind.instantiate(&values).unwrap()
    }

    #[test]
    fn hand_worked_expressions() {
        let e = |s: &str| -> Vec<u32> {
            s.split_whitespace()
                .map(|w| match w {
                    "[MIN" => MIN,
                    "[MAX" => MAX,
                    "[MED" => MED,
                    "[SM" => SM,
                    "]" => CLOSE,
                    d => d.parse().unwrap(),
                })
                .collect()
        };
        assert_eq!(apply(MAX, &[2, 9, 4, 0]), 9);
        assert_eq!(evaluate(&e("[MAX 2 9 [MIN 4 7 ] 0 ]")), 9);
        assert_eq!(apply(MED, &[1, 5, 3, 8]), 4, "(3 + 5) / 2");
        assert_eq!(apply(MED, &[1, 2]), 1, "int(1.5)");
        assert_eq!(apply(MED, &[7, 1, 4]), 4);
        assert_eq!(apply(SM, &[5, 6, 7]), 8);
        assert_eq!(evaluate(&e("[SM [MED 1 2 ] [MIN 3 8 ] 9 ]")), 3, "1 + 3 + 9 = 13");
    }

    #[test]
    fn targets_are_the_expressions_values_and_lengths_stay_in_bounds() {
        let t = task(&[("min_length", 5), ("max_length", 40), ("validation", 300), ("test", 10)]);
        let data = t.data(7, &Device::Cpu).unwrap();
        let (mut ops, mut values) = (0, [0usize; 10]);
        for b in data.eval_batches(Split::Validation, 64).unwrap() {
            assert_eq!(b.scored, vec![40]);
            let x = b.inputs.t().unwrap().to_vec2::<u32>().unwrap();
            let y = b.targets.to_vec2::<u32>().unwrap()[0].clone();
            for (row, target) in x.iter().zip(&y) {
                assert_eq!(row[40], QUERY);
                let start = row.iter().position(|t| *t != PAD).unwrap();
                assert!(row[..start].iter().all(|t| *t == PAD), "left-padded");
                let tokens = &row[start..40];
                assert!((5..=40).contains(&tokens.len()), "{} tokens", tokens.len());
                assert_eq!(evaluate(tokens), *target, "{tokens:?}");
                ops += tokens.iter().filter(|t| (MIN..=SM).contains(*t)).count();
                values[*target as usize] += 1;
            }
        }
        assert!(ops > 300, "nested operators appear: {ops}");
        assert!(values.iter().filter(|n| **n > 0).count() >= 8, "answers spread over the digits: {values:?}");
    }

    /// The average that bounds the options is the average the generator draws (fixed draws of
    /// a seeded generator, so the test is exact), and options past the bound are refused.
    #[test]
    fn trees_average_the_size_computed_and_options_of_endless_trees_are_errors() {
        use rand::SeedableRng;
        let trees = ListOps { max_depth: 6, max_args: 6, min_length: 1, max_length: 1 << 16 };
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let (mut total, draws) = (0, 20_000);
        for _ in 0..draws {
            let (mut tokens, mut count) = (vec![], 0);
            trees.tree(&mut rng, 1, &mut tokens, &mut count);
            assert_eq!(tokens.len(), count);
            total += count;
        }
        let (mean, expected) = (total as f64 / draws as f64, average_tokens(6, 6));
        assert!((mean / expected - 1.0).abs() < 0.05, "{mean} against {expected}");
        assert_eq!(average_tokens(1, 100), 1.0);
        // A tree longer than `max_length` keeps one token past it and counts the rest.
        let short = ListOps { max_length: 3, ..trees };
        let (mut tokens, mut count) = (vec![], 0);
        while count <= 10 {
            (tokens, count) = (vec![], 0);
            short.tree(&mut rng, 1, &mut tokens, &mut count);
        }
        assert_eq!(tokens.len(), 4, "{count} counted");

        let values = [20, 20, 10, 100, 10, 10].map(Value::Int);
        let err = ListOpsKind.instantiate(&values).err().unwrap().to_string();
        assert!(err.contains("average about") && err.contains("lower max_depth or max_args"), "{err}");
    }

    #[test]
    fn depth_one_is_a_single_digit_and_bad_bounds_are_errors() {
        let t = task(&[("max_depth", 1), ("min_length", 1), ("max_length", 1), ("validation", 5), ("test", 5)]);
        let b = t.data(1, &Device::Cpu).unwrap().eval_batches(Split::Validation, 5).unwrap().remove(0);
        assert_eq!(b.inputs.dims(), &[2, 5]);
        let err = ListOpsKind.instantiate(&[10, 10, 50, 20, 10, 10].map(Value::Int)).err().unwrap().to_string();
        assert!(err.contains("`max_length` (20) must be at least `min_length` (50)"), "{err}");
        // A range no tree reaches, and one too rare to fill a data set, are refused with the
        // options, not when a trial draws its data.
        let err = ListOpsKind.instantiate(&[1, 10, 3, 9, 10, 10].map(Value::Int)).err().unwrap().to_string();
        assert!(err.contains("`min_length` 3 is longer than any expression"), "{err}");
        let err = ListOpsKind.instantiate(&[5, 10, 2000, 2000, 10, 10].map(Value::Int)).err().unwrap().to_string();
        assert!(err.contains("had 2000..=2000 tokens: the range is too rare"), "{err}");
    }
}
