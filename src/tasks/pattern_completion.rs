//! Pattern completion (queried reconstruction, as the Kanerva Machine / Product Kanerva Machine
//! papers evaluate memories; here on random binary patterns the project generates, not images).
//!
//! A sequence first **writes** `patterns` (P) random binary patterns of `bits` (N) bits, then
//! **reads** `queries` (Q) corrupted versions of stored patterns; after each query the model must
//! output the clean pattern. Inputs are bipolar, width N + 2:
//!
//! ```text
//!   steps 0..P       write: [pattern_i as ±1 (N) | 1 | 0]
//!   steps P..P+Q     read:  [corrupted pattern_j as ±1 / 0 (N) | 0 | 1]   scored: target pattern_j ∈ {0,1}^N
//! ```
//!
//! - Pattern bits are Bernoulli(½); a bit b is presented as 2b − 1.
//! - Each query picks one of the P stored patterns uniformly (independently per query).
//! - `corruption = "flip"`: every bit is flipped (sign changed) with probability `noise`
//!   (`noise` < ½). `corruption = "erase"`: every bit is erased (presented as 0, "unknown")
//!   with probability `noise` (`noise` < 1) — partial patterns.
//! - The query's output is read at the query step itself (no extra zero-input step).
//!
//! Target `Bits(N)`: binary cross-entropy on every bit of every query. The trainer's `bit_error`
//! metric (wrong bits per sequence, threshold ½) is the **reconstruction error** summed over the
//! Q queries — divide by Q·N for the fraction of wrong bits; `accuracy` is the fraction of
//! sequences whose every query is reconstructed exactly. For reference, echoing the query back
//! scores `bit_error` ≈ Q·N·noise with `flip` and ≈ Q·N·noise/2 with `erase` (guessing erased bits).
//!
//! Fresh data every training batch; fixed validation and test sets.

use candle_core::Device;
use rand::Rng;
use rand_chacha::ChaCha8Rng;

use super::define::task_kind;
use super::fresh::{Fresh, FreshTask};
use super::options::{Options, TaskOption};
use super::prelude::*;
use super::recall::{self, Shape, bipolar};

static OPTIONS: [TaskOption; 5] = [
    TaskOption::int("patterns", 8, 1, 100_000),
    TaskOption::int("bits", 64, 1, 65_536),
    // Below ½ with `flip` (checked in `configured`).
    TaskOption::float_below("noise", 0.2, 0.0, 1.0),
    TaskOption::int("queries", 1, 1, 100_000),
    TaskOption::choice("corruption", "flip", &CORRUPTIONS),
];

const CORRUPTIONS: [&str; 2] = ["flip", "erase"];

/// How a query hides its pattern (named as in [`CORRUPTIONS`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
enum Corruption {
    Flip,
    Erase,
}

task_kind! {
    PatternCompletionKind = "patternCompletion",
    "pattern completion: write P binary patterns, then recall each from a noisy or partial query (Kanerva-style)",
    options: &OPTIONS,
    held_out: (1000, 2000),
    builds: |o| configured(o)?,
}

/// The task these options configure, or the first option at fault.
fn configured(o: &Options) -> Result<FreshTask<PatternCompletion>, PrimError> {
    let task: FreshTask<PatternCompletion> = o.parse()?;
    if task.generator.corruption == Corruption::Flip {
        // Flipping half the bits or more leaves nothing to recover.
        o.float_in("noise", 0.0, 0.5, true)?;
    }
    Ok(task)
}

#[derive(Clone, Debug, serde::Deserialize)]
pub struct PatternCompletion {
    patterns: usize,
    bits: usize,
    noise: f32,
    queries: usize,
    corruption: Corruption,
}

impl Fresh for PatternCompletion {
    fn max_steps(&self) -> Option<usize> {
        Some(self.patterns + self.queries)
    }
    fn input(&self) -> Ty {
        Ty::Tensor(vec![self.bits + 2])
    }
    fn target(&self) -> Target {
        Target::Bits(self.bits)
    }
    /// Wrong bits per sequence over the Q queries of N bits: a coin for every bit, and echoing
    /// the query (its flipped bits wrong; an erased bit a coin).
    fn trivial_levels(&self) -> Vec<TrivialLevel> {
        let scored_bits = (self.bits * self.queries) as f64;
        let echo = scored_bits * self.noise as f64 * if self.corruption == Corruption::Erase { 0.5 } else { 1.0 };
        vec![
            TrivialLevel::new("chance (a coin per bit)", "bit_error", scored_bits / 2.0),
            TrivialLevel::new("echoing the query", "bit_error", echo),
        ]
    }
    fn train_batch(&self, rng: &mut ChaCha8Rng, n: usize, device: &Device) -> candle_core::Result<Batch> {
        let shape = Shape { patterns: self.patterns, bits: self.bits, queries: self.queries };
        let noise = self.noise as f64;
        let store =
            |rng: &mut ChaCha8Rng, stored: &mut [bool]| stored.iter_mut().for_each(|s| *s = rng.random_bool(0.5));
        let show = |rng: &mut ChaCha8Rng, _, bit| {
            let hit = noise > 0.0 && rng.random_bool(noise);
            match (hit, self.corruption) {
                (false, _) => bipolar(bit),
                (true, Corruption::Flip) => -bipolar(bit),
                (true, Corruption::Erase) => 0.0,
            }
        };
        recall::batch(rng, n, shape, store, show, device)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(patterns: i64, bits: i64, noise: f64, queries: i64, corruption: &str) -> Vec<Value> {
        vec![
            Value::Int(patterns),
            Value::Int(bits),
            Value::Float(noise),
            Value::Int(queries),
            Value::Str(corruption.into()),
            Value::Int(50),
            Value::Int(50),
        ]
    }

    fn eval(o: Vec<Value>, seed: u64) -> Batch {
        let data = PatternCompletionKind.instantiate(&o).unwrap().data(seed, &Device::Cpu).unwrap();
        data.eval_batches(Split::Validation, 50).unwrap().remove(0)
    }

    /// Rows of one example: stored patterns as bits, queries as presented, or targets.
    type Rows = Vec<Vec<f32>>;

    /// Per example: stored patterns as bits, queries as presented, targets.
    fn decode(b: &Batch, p: usize, q: usize, w: usize) -> Vec<(Rows, Rows, Rows)> {
        let x = b.inputs.to_vec3::<f32>().unwrap();
        let y = b.targets.to_vec3::<f32>().unwrap();
        (0..b.batch_size().unwrap())
            .map(|e| {
                for step in &x[..p] {
                    assert_eq!(&step[e][w..], &[1.0, 0.0], "write flag");
                    assert!(step[e][..w].iter().all(|v| *v == 1.0 || *v == -1.0));
                }
                for step in &x[p..p + q] {
                    assert_eq!(&step[e][w..], &[0.0, 1.0], "read flag");
                }
                let stored = (0..p).map(|t| x[t][e][..w].iter().map(|v| (*v > 0.0) as u8 as f32).collect()).collect();
                let queries = (p..p + q).map(|t| x[t][e][..w].to_vec()).collect();
                let targets = (0..q).map(|k| y[k][e].clone()).collect();
                (stored, queries, targets)
            })
            .collect()
    }

    #[test]
    fn flip_queries_are_noisy_stored_patterns_and_targets_are_clean() {
        let (p, q, w) = (4, 3, 64);
        let b = eval(options(p as i64, w as i64, 0.1, q as i64, "flip"), 1);
        assert_eq!(b.inputs.dims(), &[7, 50, 66]);
        assert_eq!(b.targets.dims(), &[3, 50, 64]);
        assert_eq!(b.scored, vec![4, 5, 6]);
        let (mut flipped, mut total) = (0, 0);
        for (stored, queries, targets) in decode(&b, p, q, w) {
            for (query, target) in queries.iter().zip(&targets) {
                assert!(stored.contains(target), "the target is one of the stored patterns");
                assert!(query.iter().all(|v| *v == 1.0 || *v == -1.0));
                let query_bits: Vec<f32> = query.iter().map(|v| (*v > 0.0) as u8 as f32).collect();
                let wrong = query_bits.iter().zip(target).filter(|(a, b)| a != b).count();
                // The query is closest to its own pattern (flip noise 0.1 on 64 bits).
                for other in stored.iter().filter(|s| *s != target) {
                    assert!(query_bits.iter().zip(other).filter(|(a, b)| a != b).count() > wrong);
                }
                flipped += wrong;
                total += w;
            }
        }
        let rate = flipped as f64 / total as f64;
        assert!((0.07..0.13).contains(&rate), "flip rate {rate}");
    }

    #[test]
    fn erase_queries_are_partial_patterns() {
        let (p, q, w) = (3, 1, 32);
        let b = eval(options(p as i64, w as i64, 0.5, q as i64, "erase"), 2);
        let (mut erased, mut total) = (0, 0);
        for (_, queries, targets) in decode(&b, p, q, w) {
            for (c, v) in queries[0].iter().enumerate() {
                if *v == 0.0 {
                    erased += 1;
                } else {
                    assert_eq!(*v, 2.0 * targets[0][c] - 1.0, "kept bits are the pattern's");
                }
                total += 1;
            }
        }
        let rate = erased as f64 / total as f64;
        assert!((0.45..0.55).contains(&rate), "erase rate {rate}");
    }

    #[test]
    fn echoing_the_query_scores_as_computed() {
        for corruption in ["flip", "erase"] {
            let o = options(8, 32, 0.1, 4, corruption);
            let task = configured(&Options::new(PatternCompletionKind::options(), &o)).unwrap();
            let b = task
                .generator
                .train_batch(&mut <ChaCha8Rng as rand::SeedableRng>::seed_from_u64(5), 4000, &Device::Cpu)
                .unwrap();
            let x = b.inputs.to_vec3::<f32>().unwrap(); // [t][b][c]
            let y = b.targets.to_vec3::<f32>().unwrap(); // [q][b][c]
            // Echo: a presented bit as it is; an erased one (0) a coin, worth half a wrong bit.
            let mut wrong = 0.0;
            for (q, targets) in y.iter().enumerate() {
                for (row, target) in x[8 + q].iter().zip(targets) {
                    for (v, t) in row.iter().zip(target) {
                        wrong += if *v == 0.0 {
                            0.5
                        } else if (*v > 0.0) != (*t > 0.5) {
                            1.0
                        } else {
                            0.0
                        };
                    }
                }
            }
            let estimate = wrong / 4000.0;
            let levels = PatternCompletionKind.trivial_levels(&o);
            assert_eq!(levels[0].value, 64.0);
            assert!((estimate - levels[1].value).abs() < 0.2, "{corruption}: {estimate} vs {}", levels[1].value);
        }
    }

    #[test]
    fn zero_noise_queries_are_exact() {
        let b = eval(options(2, 16, 0.0, 2, "flip"), 3);
        for (_, queries, targets) in decode(&b, 2, 2, 16) {
            for (query, target) in queries.iter().zip(&targets) {
                let bits: Vec<f32> = query.iter().map(|v| (*v > 0.0) as u8 as f32).collect();
                assert_eq!(&bits, target);
            }
        }
    }

    #[test]
    fn declares_input_and_target() {
        let t = PatternCompletionKind.instantiate(&[]).unwrap();
        assert_eq!(t.input(), Ty::Tensor(vec![66]));
        assert_eq!(t.target(), Target::Bits(64));
    }

    #[test]
    fn rejects_bad_options_by_name() {
        let bad = |o: Vec<Value>| PatternCompletionKind.instantiate(&o).err().unwrap().arg;
        assert_eq!(bad(options(8, 64, 0.5, 1, "flip")), Some("noise"));
        assert_eq!(bad(options(8, 64, -0.1, 1, "erase")), Some("noise"));
        assert_eq!(bad(options(8, 64, 0.2, 1, "blur")), Some("corruption"));
        assert_eq!(bad(options(0, 64, 0.2, 1, "flip")), Some("patterns"));
        assert_eq!(bad(options(8, 64, 0.2, 0, "flip")), Some("queries"));
        assert!(PatternCompletionKind.instantiate(&options(8, 64, 0.9, 1, "erase")).is_ok());
    }
}
