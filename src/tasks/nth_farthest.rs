//! Nth-farthest (RMC paper §5.1; SAM Table 2): which vector is the n-th farthest from a reference?
//!
//! `vectors` (V) vectors of `dims` (D) components, each U(−1, 1), one per time step. Every step
//! also carries the vector's ID and the question (n, m) as one-hots, so the input width is
//! D + 3V (40 for the default 8 × 16):
//!
//! ```text
//!   step i = [ vector_i (D) | onehot(id_i) (V) | onehot(n) (V) | onehot(m) (V) ]
//! ```
//!
//! **Encoding: the SAM / L0SG one** (thaihungle/SAM `datasets/nfar.py`, docs/models.md,
//! Nth-farthest), the one STM's published numbers were measured on. The IDs are a random
//! permutation of 0..V (so IDs are not positions); `m` is the ID of the reference vector (drawn
//! uniformly among the V); `n` is uniform in 0..V; the answer is the ID of the vector at rank
//! `n` in **descending** Euclidean distance from the reference — `n = 0` is the farthest,
//! `n = V−1` the reference itself. (Sonnet's official encoding orders the two question one-hots
//! the other way and counts ranks ascending; the problems are the same up to relabelling
//! `n ↔ V−1−n`.)
//!
//! V steps, no extra output steps (the SAM code reads the output after the last input step):
//! only the last step is scored, with a V-way cross-entropy (`Classes(V)`); metric accuracy.
//! Fresh random data every training batch, as the code; fixed validation and test sets
//! (`validation`, `test` examples) generated once per trial from their own seeded streams.

use candle_core::{Device, Tensor};
use rand::seq::SliceRandom;
use rand::{Rng, RngCore};
use rand_chacha::ChaCha8Rng;

use super::define::task_kind;
use super::fresh::{Fresh, FreshTask, Seq};
use super::options::TaskOption;
use super::prelude::*;

static OPTIONS: [TaskOption; 2] = [TaskOption::int("vectors", 8, 2, 256), TaskOption::int("dims", 16, 1, 4096)];

task_kind! {
    NthFarthestKind = "nthFarthest",
    "nth-farthest: V vectors with IDs and a question (n, m); answer the ID of the n-th farthest from m (RMC §5.1)",
    options: &OPTIONS,
    held_out: (2048, 10_000),
    builds: |o| o.parse::<FreshTask<NthFarthest>>()?,
}

#[derive(Clone, Debug, serde::Deserialize)]
pub struct NthFarthest {
    vectors: usize,
    dims: usize,
}

impl NthFarthest {
    fn width(&self) -> usize {
        self.dims + 3 * self.vectors
    }
}

/// U(−1, 1) as f32.
fn uniform_pm1(rng: &mut impl RngCore) -> f32 {
    rng.random::<f32>() * 2.0 - 1.0
}

impl Fresh for NthFarthest {
    fn max_steps(&self) -> Option<usize> {
        Some(self.vectors)
    }
    fn input(&self) -> Ty {
        Ty::Tensor(vec![self.width()])
    }
    fn target(&self) -> Target {
        Target::Classes(self.vectors)
    }
    /// Chance over the V IDs, and what the question alone gives: when n = V−1 the answer is
    /// the reference, whose ID is in the input; otherwise a guess among the other V−1 IDs.
    fn trivial_levels(&self) -> Vec<TrivialLevel> {
        let v = self.vectors as f64;
        vec![
            TrivialLevel::new(format!("chance (1 of {v} IDs)"), "accuracy", 1.0 / v),
            TrivialLevel::new(
                "the reference when n = V−1, else a guess among the others",
                "accuracy",
                1.0 / v + (1.0 - 1.0 / v) / (v - 1.0),
            ),
        ]
    }
    /// `n` examples, time-major: inputs `[V, n, D + 3V]`, answers `[1, n]`.
    fn train_batch(&self, rng: &mut ChaCha8Rng, n: usize, device: &Device) -> candle_core::Result<Batch> {
        let (v, d) = (self.vectors, self.dims);
        let mut seq = Seq::zeros(v, n, self.width());
        let mut answers = Vec::with_capacity(n);
        let mut ids: Vec<usize> = (0..v).collect();
        let mut vecs = vec![0f32; v * d];
        let mut order: Vec<usize> = (0..v).collect();
        let mut dist = vec![0f32; v];
        for b in 0..n {
            let nth = rng.random_range(0..v);
            ids.shuffle(rng);
            let reference = rng.random_range(0..v);
            for x in vecs.iter_mut() {
                *x = uniform_pm1(rng);
            }
            let r = &vecs[reference * d..(reference + 1) * d];
            for (i, di) in dist.iter_mut().enumerate() {
                *di = vecs[i * d..(i + 1) * d].iter().zip(r).map(|(a, b)| (a - b) * (a - b)).sum::<f32>();
            }
            order.iter_mut().enumerate().for_each(|(i, o)| *o = i);
            // Descending distance; ties (probability 0 apart from the reference) by position.
            order.sort_by(|&i, &j| dist[j].total_cmp(&dist[i]));
            answers.push(ids[order[nth]] as u32);
            for t in 0..v {
                let row = seq.row_mut(t, b);
                row[..d].copy_from_slice(&vecs[t * d..(t + 1) * d]);
                row[d + ids[t]] = 1.0;
                row[d + v + nth] = 1.0;
                row[d + 2 * v + ids[reference]] = 1.0;
            }
        }
        Ok(Batch {
            inputs: seq.into_tensor(device)?,
            scored: vec![v - 1],
            targets: Tensor::from_vec(answers, (1, n), device)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task(vectors: i64, dims: i64) -> Box<dyn Task> {
        NthFarthestKind.instantiate(&[Value::Int(vectors), Value::Int(dims), Value::Int(16), Value::Int(16)]).unwrap()
    }

    fn first_eval(seed: u64) -> Batch {
        let data = task(4, 3).data(seed, &Device::Cpu).unwrap();
        data.eval_batches(Split::Validation, 16).unwrap().remove(0)
    }

    #[test]
    fn the_reference_shortcut_scores_as_computed() {
        for vectors in [4usize, 8] {
            let task = NthFarthest { vectors, dims: 3 };
            let b = task
                .train_batch(&mut <ChaCha8Rng as rand::SeedableRng>::seed_from_u64(3), 20_000, &Device::Cpu)
                .unwrap();
            let x = b.inputs.to_vec3::<f32>().unwrap().remove(0); // step 0: [b][c]
            let answers = b.targets.to_vec2::<u32>().unwrap().remove(0);
            let one_hot = |row: &[f32], at: usize| (0..vectors).find(|&i| row[at + i] == 1.0).unwrap();
            // The strategy's expected score per example: 1 if n = V−1 and the answer is the
            // reference, else 1/(V−1) if the answer is another ID.
            let score: f64 = answers
                .iter()
                .zip(&x)
                .map(|(&answer, row)| {
                    let (n, m) = (one_hot(row, 3 + vectors), one_hot(row, 3 + 2 * vectors));
                    match (n == vectors - 1, answer as usize == m) {
                        (true, true) => 1.0,
                        (false, false) => 1.0 / (vectors - 1) as f64,
                        _ => 0.0,
                    }
                })
                .sum();
            let estimate = score / answers.len() as f64;
            let levels = NthFarthestKind.trivial_levels(&[
                Value::Int(vectors as i64),
                Value::Int(3),
                Value::Int(1),
                Value::Int(1),
            ]);
            assert_eq!(levels[0].value, 1.0 / vectors as f64);
            assert!((estimate - levels[1].value).abs() < 0.01, "V = {vectors}: {estimate} vs {}", levels[1].value);
        }
    }

    #[test]
    fn sequences_follow_the_documented_encoding() {
        let b = first_eval(5);
        assert_eq!(b.inputs.dims(), &[4, 16, 3 + 12]);
        assert_eq!(b.scored, vec![3]);
        assert_eq!(b.targets.dims(), &[1, 16]);
        let x = b.inputs.to_vec3::<f32>().unwrap(); // [t][b][c]
        let answers = b.targets.to_vec2::<u32>().unwrap().remove(0);
        let mut nths = vec![];
        for (e, answer) in answers.iter().enumerate() {
            let rows: Vec<&Vec<f32>> = (0..4).map(|t| &x[t][e]).collect();
            let onehot = |r: &[f32]| {
                assert_eq!(r.iter().filter(|v| **v == 1.0).count(), 1);
                assert_eq!(r.iter().filter(|v| **v == 0.0).count(), r.len() - 1);
                r.iter().position(|v| *v == 1.0).unwrap()
            };
            let ids: Vec<usize> = rows.iter().map(|r| onehot(&r[3..7])).collect();
            let mut sorted = ids.clone();
            sorted.sort();
            assert_eq!(sorted, vec![0, 1, 2, 3], "IDs are a permutation");
            let nth = onehot(&rows[0][7..11]);
            let m = onehot(&rows[0][11..15]);
            for r in &rows {
                assert_eq!(onehot(&r[7..11]), nth, "the question is repeated on every step");
                assert_eq!(onehot(&r[11..15]), m);
                assert!(r[..3].iter().all(|v| (-1.0..1.0).contains(v)));
            }
            // Recompute the label: rank vectors by descending distance from the one with ID m.
            let reference = ids.iter().position(|i| *i == m).unwrap();
            let d2 = |i: usize| (0..3).map(|c| (rows[i][c] - rows[reference][c]).powi(2)).sum::<f32>();
            let mut by_distance: Vec<usize> = (0..4).collect();
            by_distance.sort_by(|&i, &j| d2(j).total_cmp(&d2(i)));
            assert_eq!(ids[by_distance[nth]] as u32, *answer);
            if nth == 3 {
                assert_eq!(*answer as usize, m, "the last rank is the reference itself");
            }
            nths.push(nth);
        }
        assert!(nths.iter().any(|n| *n != nths[0]), "n varies across examples");
    }

    #[test]
    fn training_data_is_fresh_every_batch() {
        let mut d = task(4, 3).data(1, &Device::Cpu).unwrap();
        let (a, b) = (d.train_batch(8).unwrap(), d.train_batch(8).unwrap());
        assert_ne!(
            a.inputs.flatten_all().unwrap().to_vec1::<f32>().unwrap(),
            b.inputs.flatten_all().unwrap().to_vec1::<f32>().unwrap(),
            "fresh data every batch"
        );
        assert_eq!(d.train_size(), None);
    }

    #[test]
    fn declares_input_and_target() {
        let t = task(8, 16);
        assert_eq!(t.input(), Ty::Tensor(vec![40]));
        assert_eq!(t.target(), Target::Classes(8));
    }

    #[test]
    fn rejects_bad_options_by_name() {
        let err = NthFarthestKind.instantiate(&[Value::Int(1), Value::Int(16), Value::Int(1), Value::Int(1)]);
        assert_eq!(err.err().unwrap().arg, Some("vectors"));
        let err = NthFarthestKind.instantiate(&[Value::Int(8), Value::Int(0), Value::Int(1), Value::Int(1)]);
        assert_eq!(err.err().unwrap().arg, Some("dims"));
    }
}
