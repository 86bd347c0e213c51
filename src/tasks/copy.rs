//! Copy (NTM; SAM Fig. 2, thaihungle/SAM `datasets/copy.py`, docs/models.md, Copy): read a sequence
//! of random bit vectors, then write it back.
//!
//! `L` vectors of `width` (W) bits, each bit Bernoulli(½); input width W + 2 (two flag channels):
//!
//! ```text
//!   step 0            start flag   (channel W = 1, all else 0)
//!   steps 1..=L       the L bit vectors (flags 0)
//!   step L+1          end flag     (channel W+1 = 1)
//!   steps L+2..=2L+1  all-zero input; output scored against vector 1..L
//! ```
//!
//! `T = 2L + 2` steps; the `L` output steps are scored with binary cross-entropy on every bit
//! (`Bits(W)`); metric `bit_error` = wrong bits per sequence (SAM's "bit error per sequence").
//! `L` is uniform in `min_len..=max_len`, drawn **once per training batch** as the code does
//! (`run_toys.py`); training data is fresh every batch. The fixed validation and test sets give
//! every length the same number of examples (example `i` of `n` has length
//! `min_len + i·(max_len − min_len + 1)/n`), stored as one group per length.

use candle_core::Device;
use rand::Rng;
use rand_chacha::ChaCha8Rng;

use super::define::task_kind;
use super::fresh::{Fresh, FreshTask, Seq, stratified_groups};
use super::options::TaskOption;
use super::prelude::*;

static OPTIONS: [TaskOption; 3] = [
    TaskOption::int("width", 32, 1, 4096),
    TaskOption::int("min_len", 1, 1, 10_000),
    TaskOption::int("max_len", 20, 1, 10_000).at_least("min_len"),
];

task_kind! {
    CopyKind = "copy",
    "copy: read L random bit vectors between start/end flags, then write them back (NTM; SAM Fig. 2)",
    options: &OPTIONS,
    held_out: (1000, 2000),
    builds: |o| o.parse::<FreshTask<Copy>>()?,
}

#[derive(Clone, Debug, serde::Deserialize)]
pub struct Copy {
    width: usize,
    min_len: usize,
    max_len: usize,
}

impl Copy {
    /// `n` sequences of length `len`.
    fn generate(&self, rng: &mut ChaCha8Rng, n: usize, len: usize, device: &Device) -> candle_core::Result<Batch> {
        let w = self.width;
        let mut x = Seq::zeros(2 * len + 2, n, w + 2);
        let mut y = Seq::zeros(len, n, w);
        for b in 0..n {
            x.set(0, b, w, 1.0);
            for t in 0..len {
                for c in 0..w {
                    let bit = if rng.random_bool(0.5) { 1.0 } else { 0.0 };
                    x.set(1 + t, b, c, bit);
                    y.set(t, b, c, bit);
                }
            }
            x.set(len + 1, b, w + 1, 1.0);
        }
        x.into_batch(y, device)
    }
}

impl Fresh for Copy {
    fn max_steps(&self) -> Option<usize> {
        Some(2 * self.max_len + 2)
    }
    fn input(&self) -> Ty {
        Ty::Tensor(vec![self.width + 2])
    }
    fn target(&self) -> Target {
        Target::Bits(self.width)
    }
    fn train_batch(&self, rng: &mut ChaCha8Rng, batch: usize, device: &Device) -> candle_core::Result<Batch> {
        let len = rng.random_range(self.min_len..=self.max_len);
        self.generate(rng, batch, len, device)
    }
    fn held_out(&self, rng: &mut ChaCha8Rng, n: usize, device: &Device) -> candle_core::Result<Vec<Batch>> {
        stratified_groups(n, self.max_len - self.min_len + 1, |i, count| {
            self.generate(rng, count, self.min_len + i, device)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task(width: i64, min_len: i64, max_len: i64) -> Box<dyn Task> {
        CopyKind
            .instantiate(&[Value::Int(width), Value::Int(min_len), Value::Int(max_len), Value::Int(9), Value::Int(9)])
            .unwrap()
    }

    #[test]
    fn sequences_follow_the_documented_encoding() {
        let data = task(4, 2, 4).data(7, &Device::Cpu).unwrap();
        let batches = data.eval_batches(Split::Validation, 100).unwrap();
        // 9 examples stratified over lengths 2, 3, 4: three groups of three (in random order).
        assert_eq!(batches.len(), 3);
        let mut lens = vec![];
        for b in &batches {
            let len = b.targets.dim(0).unwrap();
            lens.push(len);
            assert_eq!(b.inputs.dims(), &[2 * len + 2, 3, 6]);
            assert_eq!(b.targets.dims(), &[len, 3, 4]);
            assert_eq!(b.scored, (len + 2..2 * len + 2).collect::<Vec<_>>());
            let x = b.inputs.to_vec3::<f32>().unwrap();
            let y = b.targets.to_vec3::<f32>().unwrap();
            for e in 0..3 {
                assert_eq!(x[0][e], vec![0., 0., 0., 0., 1., 0.], "start flag");
                assert_eq!(x[len + 1][e], vec![0., 0., 0., 0., 0., 1.], "end flag");
                for t in 0..len {
                    assert_eq!(&x[1 + t][e][..4], &y[t][e][..], "target = the input vectors in order");
                    assert_eq!(&x[1 + t][e][4..], &[0., 0.], "no flags on data steps");
                    assert!(y[t][e].iter().all(|v| *v == 0.0 || *v == 1.0));
                    assert!(x[len + 2 + t][e].iter().all(|v| *v == 0.0), "output phase input is zero");
                }
            }
        }
        lens.sort();
        assert_eq!(lens, vec![2, 3, 4]);
        // Cut into smaller batches.
        assert_eq!(data.eval_batches(Split::Validation, 2).unwrap().len(), 6);
    }

    #[test]
    fn training_length_is_drawn_per_batch_within_range() {
        let mut data = task(3, 1, 5).data(1, &Device::Cpu).unwrap();
        let mut lens = vec![];
        for _ in 0..40 {
            let b = data.train_batch(2).unwrap();
            let len = b.targets.dim(0).unwrap();
            assert!((1..=5).contains(&len));
            assert_eq!(b.inputs.dim(0).unwrap(), 2 * len + 2);
            lens.push(len);
        }
        lens.sort();
        lens.dedup();
        assert!(lens.len() >= 4, "lengths vary between batches: {lens:?}");
    }

    #[test]
    fn declares_input_and_target() {
        let t = task(32, 1, 20);
        assert_eq!(t.input(), Ty::Tensor(vec![34]));
        assert_eq!(t.target(), Target::Bits(32));
    }

    #[test]
    fn rejects_bad_options_by_name() {
        let bad = |w, lo, hi| {
            CopyKind
                .instantiate(&[Value::Int(w), Value::Int(lo), Value::Int(hi), Value::Int(1), Value::Int(1)])
                .err()
                .unwrap()
                .arg
        };
        assert_eq!(bad(0, 1, 20), Some("width"));
        assert_eq!(bad(32, 0, 20), Some("min_len"));
        assert_eq!(bad(32, 5, 4), Some("max_len"));
    }
}
