//! RGB binding — the Product Kanerva Machine paper's binding task (PKM §4, Fig. 2), on
//! synthetic patterns: MNIST is not available offline, so each "digit" is a class prototype of
//! random bits and each "image" a noisy copy of its class's prototype.
//!
//! A sequence **writes** `triplets` (45 in the paper) bound triplets — a Red, a Green and a Blue
//! pattern, each of a class drawn uniformly from `classes` — then **queries** `queries` stored
//! triplets by their R and B parts only (G erased) and must reconstruct all three parts. The
//! score is the reconstruction loss over the three parts, as the paper's.
//!
//! - The prototypes are fixed for the task (drawn from the option `world`, the same in every
//!   trial, as MNIST's digit classes are), so a model can learn the classes; a pattern is its
//!   class's prototype with every bit flipped with probability `variation`.
//! - Inputs are bipolar, width 3N + 2: writes `[R | G | B as ±1 (3N) | 1 | 0]`, queries
//!   `[R | 0…0 | B | 0 | 1]`; target `Bits(3N)`, the stored triplet, at each query step.
//!   `bit_error` is the number of wrong bits summed over the queries; `accuracy` the share of
//!   sequences with every query reconstructed exactly.
//!
//! Fresh data every training batch; fixed validation and test sets.

use candle_core::Device;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::define::task_kind;
use super::fresh::{Fresh, FreshTask};
use super::options::{Options, TaskOption};
use super::prelude::*;
use super::recall::{self, Shape, bipolar};

static OPTIONS: [TaskOption; 6] = [
    TaskOption::int("triplets", 45, 1, 100_000),
    TaskOption::int("bits", 32, 1, 65_536),
    TaskOption::int("classes", 10, 1, 10_000),
    // Flipping half the bits or more leaves no class to learn.
    TaskOption::float_below("variation", 0.1, 0.0, 0.5),
    TaskOption::int("queries", 10, 1, 100_000),
    TaskOption::int("world", 0, 0, i64::MAX),
];

task_kind! {
    RgbBindingKind = "rgbBinding",
    "RGB binding: write R-G-B triplets of class patterns, recall each whole triplet from its R and B parts (PKM Fig. 2)",
    options: &OPTIONS,
    held_out: (500, 1000),
}

fn instantiate(o: &Options) -> Result<Box<dyn Task>, PrimError> {
    let FreshTask { generator: task, held_out } = o.parse::<FreshTask<RgbBinding>>()?;
    let generator = RgbBinding { prototypes: prototypes(task.world, task.classes, task.bits), ..task };
    Ok(Box::new(FreshTask { generator, held_out }))
}

/// `classes × bits` prototype bits, the same for every trial of a `world`.
fn prototypes(world: u64, classes: usize, bits: usize) -> Vec<bool> {
    let mut rng = ChaCha8Rng::seed_from_u64(world);
    (0..classes * bits).map(|_| rng.random_bool(0.5)).collect()
}

#[derive(Clone, Debug, serde::Deserialize)]
pub struct RgbBinding {
    triplets: usize,
    bits: usize,
    classes: usize,
    variation: f64,
    queries: usize,
    world: u64,
    /// `classes × bits`: each class's prototype, drawn from `world` once the options are read.
    #[serde(skip)]
    prototypes: Vec<bool>,
}

impl RgbBinding {
    /// One pattern of class `c`: its prototype with bits flipped at the variation rate.
    fn pattern(&self, rng: &mut ChaCha8Rng, c: usize, out: &mut [bool]) {
        let proto = &self.prototypes[c * self.bits..(c + 1) * self.bits];
        for (o, &p) in out.iter_mut().zip(proto) {
            *o = p ^ (self.variation > 0.0 && rng.random_bool(self.variation));
        }
    }

    fn generate(&self, rng: &mut ChaCha8Rng, n: usize, device: &Device) -> candle_core::Result<Batch> {
        let shape = Shape { patterns: self.triplets, bits: 3 * self.bits, queries: self.queries };
        let store = |rng: &mut ChaCha8Rng, stored: &mut [bool]| {
            for part in stored.chunks_exact_mut(self.bits) {
                let c = rng.random_range(0..self.classes);
                self.pattern(rng, c, part);
            }
        };
        // The G part (the middle third) is erased: presented as 0.
        let show =
            |_: &mut ChaCha8Rng, c, bit| if (self.bits..2 * self.bits).contains(&c) { 0.0 } else { bipolar(bit) };
        recall::batch(rng, n, shape, store, show, device)
    }
}

impl Fresh for RgbBinding {
    fn max_steps(&self) -> Option<usize> {
        Some(self.triplets + self.queries)
    }
    fn input(&self) -> Ty {
        Ty::Tensor(vec![3 * self.bits + 2])
    }
    fn target(&self) -> Target {
        Target::Bits(3 * self.bits)
    }
    fn train_batch(&self, rng: &mut ChaCha8Rng, batch: usize, device: &Device) -> candle_core::Result<Batch> {
        self.generate(rng, batch, device)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task(triplets: i64, bits: i64, classes: i64, variation: f64, queries: i64) -> Box<dyn Task> {
        let o = [
            Value::Int(triplets),
            Value::Int(bits),
            Value::Int(classes),
            Value::Float(variation),
            Value::Int(queries),
            Value::Int(0),
            Value::Int(40),
            Value::Int(40),
        ];
        RgbBindingKind.instantiate(&o).unwrap()
    }

    fn validation(t: &dyn Task, seed: u64) -> Batch {
        t.data(seed, &Device::Cpu).unwrap().eval_batches(Split::Validation, 40).unwrap().remove(0)
    }

    #[test]
    fn queries_show_r_and_b_and_ask_for_a_stored_triplet() {
        let (p, n, q) = (5, 4, 3);
        let b = validation(&*task(p, n, 3, 0.1, q), 1);
        let x = b.inputs.to_vec3::<f32>().unwrap();
        let y = b.targets.to_vec3::<f32>().unwrap();
        assert_eq!(b.scored, vec![5, 6, 7]);
        let w = (3 * n) as usize;
        for e in 0..40 {
            let stored: Vec<Vec<f32>> = (0..p as usize)
                .map(|i| {
                    assert_eq!(&x[i][e][w..], &[1.0, 0.0], "write flag");
                    x[i][e][..w].iter().map(|v| (*v > 0.0) as u8 as f32).collect()
                })
                .collect();
            for k in 0..q as usize {
                let row = &x[p as usize + k][e];
                assert_eq!(&row[w..], &[0.0, 1.0], "read flag");
                let target = &y[k][e];
                assert!(stored.contains(target), "the target is a stored triplet");
                for (c, (&v, &t)) in row[..w].iter().zip(target).enumerate() {
                    if (n as usize..2 * n as usize).contains(&c) {
                        assert_eq!(v, 0.0, "G is erased");
                    } else {
                        assert_eq!(v > 0.0, t == 1.0, "R and B are shown as stored");
                    }
                }
            }
        }
    }

    #[test]
    fn parts_are_noisy_copies_of_class_prototypes() {
        // With no variation, every part is one of the `classes` prototypes.
        let b = validation(&*task(6, 8, 3, 0.0, 1), 2);
        let x = b.inputs.to_vec3::<f32>().unwrap();
        let mut parts = std::collections::BTreeSet::new();
        for step in &x[..6] {
            for e in step {
                for part in e[..24].chunks(8) {
                    parts.insert(part.iter().map(|v| (*v > 0.0) as u8).collect::<Vec<_>>());
                }
            }
        }
        assert_eq!(parts.len(), 3, "{parts:?}");
        // With variation 0.1, about a tenth of the bits differ from the nearest prototype.
        let b = validation(&*task(6, 64, 3, 0.1, 1), 2);
        let x = b.inputs.to_vec3::<f32>().unwrap();
        let (mut flipped, mut total) = (0usize, 0usize);
        let protos = prototypes(0, 3, 64);
        for step in &x[..6] {
            for e in step {
                for part in e[..192].chunks(64) {
                    let bits: Vec<bool> = part.iter().map(|v| *v > 0.0).collect();
                    let nearest = (0..3)
                        .map(|c| bits.iter().zip(&protos[c * 64..(c + 1) * 64]).filter(|(a, b)| a != b).count())
                        .min()
                        .unwrap();
                    flipped += nearest;
                    total += 64;
                }
            }
        }
        let rate = flipped as f64 / total as f64;
        assert!((0.07..0.13).contains(&rate), "{rate}");
    }

    #[test]
    fn the_same_seed_gives_the_same_data_and_the_classes_are_the_same_in_every_trial() {
        let t = task(4, 8, 2, 0.1, 2);
        let x = |seed| validation(&*t, seed).inputs.to_vec3::<f32>().unwrap();
        assert_eq!(x(3), x(3));
        assert_ne!(x(3), x(4));
        // The prototypes come from `world`, not from the trial's seed.
        let a = RgbBindingKind
            .instantiate(
                &[4, 8, 2]
                    .map(Value::Int)
                    .into_iter()
                    .chain([Value::Float(0.0), Value::Int(1), Value::Int(0), Value::Int(40), Value::Int(40)])
                    .collect::<Vec<_>>(),
            )
            .unwrap();
        let parts = |seed| -> std::collections::BTreeSet<Vec<u8>> {
            let b = validation(&*a, seed);
            let x = b.inputs.to_vec3::<f32>().unwrap();
            x[..4]
                .iter()
                .flat_map(|s| {
                    s.iter().flat_map(|e| {
                        e[..24]
                            .chunks(8)
                            .map(|p| p.iter().map(|v| (*v > 0.0) as u8).collect::<Vec<_>>())
                            .collect::<Vec<_>>()
                    })
                })
                .collect()
        };
        assert_eq!(parts(1), parts(2));
    }
}
