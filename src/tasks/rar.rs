//! Relational associative recall, RAR (SAM §3.2 / Fig. 2; thaihungle/SAM `datasets/rar.py`,
//! docs/models.md, RAR): given a list of items and a query item from it, recall the item that is
//! farthest from (or closest to) the query.
//!
//! Each item is `L` bit vectors of `width` (W) bits, Bernoulli(½). Input width W + 2:
//!
//! ```text
//!   for each item i < K:  one delimiter step (channel W = 1), then its L vectors
//!   query:                one query-delimiter step (channel W+1 = 1), the L vectors of item q,
//!                         another query-delimiter step (channel W+1 = 1)
//!   output:               L all-zero steps, scored
//! ```
//!
//! `(L+1)(K+1) + 1` input steps, then `L` scored steps. The query index `q` is uniform in
//! `0..=K−2` (never the last item, as the code). Mode: if the **last bit of the query's last
//! vector** is 1 the answer is the **farthest** other item, else the **closest**; Euclidean
//! distance on the flattened L × W bits; ties go to the first item in list order. Target = the
//! answer item's L vectors; binary cross-entropy on every bit (`Bits(W)`); metric `bit_error`
//! per sequence.
//!
//! **Setting.** The code's generator signature is `(num_item, item_len)` but `run_toys.py` calls
//! it as `(seq_len, num_item)`, so with `rar.json` (seq_len 3, items drawn from [2, 6)) the data
//! actually trained on has **3 items of 2–5 vectors**. memctl's defaults are that effective
//! setting (`min_items = max_items = 3`, `min_len = 2`, `max_len = 5`), the one the published
//! curve was measured on. The paper's intended setting, 2–5 items of 3 vectors, is
//! `min_items = 2, max_items = 5, min_len = 3, max_len = 3`.
//!
//! Training data is fresh every batch; `K`, `L` and `q` are drawn **once per training batch**
//! (shared by its examples) as the code does. The fixed validation and test sets spread their
//! examples evenly over every (K, L) combination (one group per combination) and draw `q` per
//! example.

use candle_core::Device;
use rand::Rng;
use rand_chacha::ChaCha8Rng;

use super::define::task_kind;
use super::fresh::{Fresh, FreshTask, Seq, stratified_groups};
use super::options::TaskOption;
use super::prelude::*;

static OPTIONS: [TaskOption; 5] = [
    TaskOption::int("width", 32, 1, 4096),
    TaskOption::int("min_items", 3, 2, 1000),
    TaskOption::int("max_items", 3, 2, 1000).at_least("min_items"),
    TaskOption::int("min_len", 2, 1, 1000),
    TaskOption::int("max_len", 5, 1, 1000).at_least("min_len"),
];

task_kind! {
    RarKind = "rar",
    "relational associative recall: K items and a query; recall the farthest or closest item (SAM §3.2)",
    options: &OPTIONS,
    held_out: (1000, 2000),
    builds: |o| o.parse::<FreshTask<Rar>>()?,
}

#[derive(Clone, Debug, serde::Deserialize)]
pub struct Rar {
    width: usize,
    min_items: usize,
    max_items: usize,
    min_len: usize,
    max_len: usize,
}

impl Rar {
    /// `n` sequences of `items` items of `len` vectors; query index `query`, or drawn per example.
    fn generate(
        &self,
        rng: &mut ChaCha8Rng,
        n: usize,
        items: usize,
        len: usize,
        query: Option<usize>,
        device: &Device,
    ) -> candle_core::Result<Batch> {
        let w = self.width;
        let steps_in = (len + 1) * (items + 1) + 1;
        let mut x = Seq::zeros(steps_in + len, n, w + 2);
        let mut y = Seq::zeros(len, n, w);
        let item_bits = len * w;
        let mut bits = vec![0f32; items * item_bits];
        for b in 0..n {
            for v in bits.iter_mut() {
                *v = if rng.random_bool(0.5) { 1.0 } else { 0.0 };
            }
            let q = query.unwrap_or_else(|| rng.random_range(0..items - 1));
            let item = |i: usize| &bits[i * item_bits..(i + 1) * item_bits];
            for i in 0..items {
                let start = (len + 1) * i;
                x.set(start, b, w, 1.0);
                for t in 0..len {
                    x.row_mut(start + 1 + t, b)[..w].copy_from_slice(&item(i)[t * w..(t + 1) * w]);
                }
            }
            let start = (len + 1) * items;
            x.set(start, b, w + 1, 1.0);
            for t in 0..len {
                x.row_mut(start + 1 + t, b)[..w].copy_from_slice(&item(q)[t * w..(t + 1) * w]);
            }
            x.set(start + len + 1, b, w + 1, 1.0);

            let farthest = item(q)[item_bits - 1] == 1.0;
            let mut best: Option<(usize, f32)> = None;
            for i in (0..items).filter(|i| *i != q) {
                let d = item(i).iter().zip(item(q)).map(|(a, c)| (a - c) * (a - c)).sum::<f32>();
                let better = match best {
                    None => true,
                    Some((_, bd)) => (farthest && d > bd) || (!farthest && d < bd),
                };
                if better {
                    best = Some((i, d));
                }
            }
            let answer = best.map_or(q, |(i, _)| i);
            for t in 0..len {
                y.row_mut(t, b).copy_from_slice(&item(answer)[t * w..(t + 1) * w]);
            }
        }
        x.into_batch(y, device)
    }
}

impl Fresh for Rar {
    fn max_steps(&self) -> Option<usize> {
        Some((self.max_len + 1) * (self.max_items + 1) + 1 + self.max_len)
    }
    fn input(&self) -> Ty {
        Ty::Tensor(vec![self.width + 2])
    }
    fn target(&self) -> Target {
        Target::Bits(self.width)
    }
    /// Chance: a coin per bit, W/2 wrong bits per vector, over the test set's lengths (spread
    /// evenly over `min_len..=max_len`). Every bit is a fair coin, so no input-only strategy does
    /// better on average.
    fn trivial_levels(&self) -> Vec<TrivialLevel> {
        let mean_len = (self.min_len + self.max_len) as f64 / 2.0;
        vec![TrivialLevel::new("chance (a coin per bit)", "bit_error", self.width as f64 * mean_len / 2.0)]
    }
    fn train_batch(&self, rng: &mut ChaCha8Rng, batch: usize, device: &Device) -> candle_core::Result<Batch> {
        let items = rng.random_range(self.min_items..=self.max_items);
        let len = rng.random_range(self.min_len..=self.max_len);
        let q = rng.random_range(0..items - 1);
        self.generate(rng, batch, items, len, Some(q), device)
    }
    fn held_out(&self, rng: &mut ChaCha8Rng, n: usize, device: &Device) -> candle_core::Result<Vec<Batch>> {
        let lens = self.max_len - self.min_len + 1;
        stratified_groups(n, (self.max_items - self.min_items + 1) * lens, |c, count| {
            let (items, len) = (self.min_items + c / lens, self.min_len + c % lens);
            self.generate(rng, count, items, len, None, device)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(width: i64, items: (i64, i64), len: (i64, i64), n: i64) -> Vec<Value> {
        [width, items.0, items.1, len.0, len.1, n, n].into_iter().map(Value::Int).collect()
    }

    fn task(width: i64, items: (i64, i64), len: (i64, i64), n: i64) -> Box<dyn Task> {
        RarKind.instantiate(&options(width, items, len, n)).unwrap()
    }

    /// Decodes one example of a batch; returns (items, query index, answer) after checking the layout.
    fn decode(b: &Batch, e: usize, items: usize, len: usize, w: usize) -> (Vec<Vec<f32>>, usize, Vec<f32>) {
        let x = b.inputs.to_vec3::<f32>().unwrap();
        let y = b.targets.to_vec3::<f32>().unwrap();
        let flag = |t: usize| (x[t][e][w], x[t][e][w + 1]);
        let bits = |t: usize| x[t][e][..w].to_vec();
        let mut list = vec![];
        for i in 0..items {
            let s = (len + 1) * i;
            assert_eq!(flag(s), (1.0, 0.0), "item delimiter");
            assert!(bits(s).iter().all(|v| *v == 0.0));
            list.push((0..len).flat_map(|t| bits(s + 1 + t)).collect::<Vec<f32>>());
            assert!((0..len).all(|t| flag(s + 1 + t) == (0.0, 0.0)));
        }
        let s = (len + 1) * items;
        assert_eq!(flag(s), (0.0, 1.0), "query delimiter");
        let query: Vec<f32> = (0..len).flat_map(|t| bits(s + 1 + t)).collect();
        assert_eq!(flag(s + len + 1), (0.0, 1.0), "closing query delimiter");
        let q = list.iter().position(|it| *it == query).expect("the query is one of the items");
        assert!(q < items - 1, "never the last item");
        for step in &x[s + len + 2..] {
            assert!(step[e].iter().all(|v| *v == 0.0), "output phase input is zero");
        }
        let answer: Vec<f32> = (0..len).flat_map(|t| y[t][e].clone()).collect();
        (list, q, answer)
    }

    #[test]
    fn chance_is_half_the_bits_of_an_average_item() {
        // 8-bit vectors, items of 2 or 3 of them: 2.5 × 8 bits, half of them wrong.
        let options = [8, 3, 3, 2, 3].map(Value::Int);
        let levels = RarKind.trivial_levels(&options);
        assert_eq!(levels.len(), 1);
        assert_eq!((levels[0].metric, levels[0].value), ("bit_error", 10.0));
    }

    #[test]
    fn targets_are_the_farthest_or_closest_item() {
        let data = task(8, (3, 4), (2, 3), 40).data(11, &Device::Cpu).unwrap();
        let groups = data.eval_batches(Split::Validation, 100).unwrap();
        assert_eq!(groups.len(), 4, "one group per (items, length)");
        let mut modes = [0, 0];
        let mut shapes = vec![];
        for (g, b) in groups.iter().enumerate() {
            let len = b.targets.dim(0).unwrap();
            let steps_in = b.inputs.dim(0).unwrap() - len;
            let items = (steps_in - 1) / (len + 1) - 1;
            assert_eq!(steps_in, (len + 1) * (items + 1) + 1);
            shapes.push((items, len));
            assert_eq!(b.inputs.dims(), &[steps_in + len, 10, 10]);
            assert_eq!(b.targets.dims(), &[len, 10, 8]);
            assert_eq!(b.scored, (steps_in..steps_in + len).collect::<Vec<_>>());
            for e in 0..10 {
                let (list, q, answer) = decode(b, e, items, len, 8);
                let farthest = *list[q].last().unwrap() == 1.0;
                modes[farthest as usize] += 1;
                let d = |i: usize| list[i].iter().zip(&list[q]).filter(|(a, b)| a != b).count();
                let others: Vec<usize> = (0..items).filter(|i| *i != q).collect();
                let best = if farthest {
                    others.iter().copied().fold(others[0], |acc, i| if d(i) > d(acc) { i } else { acc })
                } else {
                    others.iter().copied().fold(others[0], |acc, i| if d(i) < d(acc) { i } else { acc })
                };
                assert_eq!(answer, list[best], "example {e} of group {g}");
            }
        }
        shapes.sort();
        assert_eq!(shapes, vec![(3, 2), (3, 3), (4, 2), (4, 3)]);
        assert!(modes[0] > 0 && modes[1] > 0, "both modes occur: {modes:?}");
    }

    #[test]
    fn training_batches_share_items_length_and_query() {
        let mut data = task(4, (3, 3), (2, 5), 4).data(3, &Device::Cpu).unwrap();
        for _ in 0..5 {
            let b = data.train_batch(6).unwrap();
            let len = b.targets.dim(0).unwrap();
            assert!((2..=5).contains(&len));
            assert_eq!(b.inputs.dim(0).unwrap(), (len + 1) * 4 + 1 + len);
            let qs: Vec<usize> = (0..6).map(|e| decode(&b, e, 3, len, 4).1).collect();
            assert!(qs.iter().all(|q| *q == qs[0]), "q is drawn once per batch: {qs:?}");
        }
    }

    #[test]
    fn declares_input_and_target() {
        let t = RarKind.instantiate(&[]).unwrap();
        assert_eq!(t.input(), Ty::Tensor(vec![34]));
        assert_eq!(t.target(), Target::Bits(32));
    }

    #[test]
    fn rejects_bad_options_by_name() {
        let bad = |o: Vec<Value>| RarKind.instantiate(&o).err().unwrap().arg;
        assert_eq!(bad(options(32, (1, 3), (2, 5), 1)), Some("min_items"));
        assert_eq!(bad(options(32, (4, 3), (2, 5), 1)), Some("max_items"));
        assert_eq!(bad(options(32, (3, 3), (6, 5), 1)), Some("max_len"));
        assert_eq!(bad(options(32, (3, 3), (2, 5), 0)), Some("validation"));
    }
}
