//! `randomSequence(input = 8, output = 8, length = 20)`: random inputs and random target bits
//! at every step — no structure to learn. It exists to time and smoke-test models: it is the
//! data of the PyTorch STM reference benchmark (`../shared/bench/stm_torch.py`: x ~ N(0, 1),
//! y ~ Bernoulli(½), binary cross-entropy on every step's output).
//!
//! Training batches are fresh every step; validation and test sets hold 256 sequences each.

use candle_core::{Device, Tensor};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::StandardNormal;

use super::define::task_kind;
use super::options::TaskOption;
use super::prelude::*;

static OPTIONS: [TaskOption; 3] = [
    TaskOption::int("input", 8, 1, 1 << 16),
    TaskOption::int("output", 8, 1, 1 << 16),
    TaskOption::int("length", 20, 1, 1 << 16),
];

/// Sequences in each held-out set.
const HELD_OUT: usize = 256;

task_kind! {
    RandomSequenceKind = "randomSequence",
    "random inputs and target bits at every step (benchmarks and smoke tests)",
    options: &OPTIONS,
    builds: |o| o.parse::<RandomSequence>()?,
}

#[derive(serde::Deserialize)]
pub struct RandomSequence {
    input: usize,
    output: usize,
    length: usize,
}

impl Task for RandomSequence {
    fn max_steps(&self) -> Option<usize> {
        Some(self.length)
    }
    fn input(&self) -> Ty {
        Ty::Tensor(vec![self.input])
    }
    fn target(&self) -> Target {
        Target::Bits(self.output)
    }
    fn data(&self, seed: u64, device: &Device) -> candle_core::Result<Box<dyn TaskData>> {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let validation = make(self, HELD_OUT, &mut rng, device)?;
        let test = make(self, HELD_OUT, &mut rng, device)?;
        Ok(Box::new(RandomData {
            input: self.input,
            output: self.output,
            length: self.length,
            rng,
            validation,
            test,
            device: device.clone(),
        }))
    }
}

fn make(t: &RandomSequence, batch: usize, rng: &mut ChaCha8Rng, device: &Device) -> candle_core::Result<Batch> {
    let x: Vec<f32> = (0..t.length * batch * t.input).map(|_| rng.sample(StandardNormal)).collect();
    let y: Vec<f32> = (0..t.length * batch * t.output).map(|_| if rng.random_bool(0.5) { 1.0 } else { 0.0 }).collect();
    Ok(Batch {
        inputs: Tensor::from_vec(x, (t.length, batch, t.input), device)?,
        scored: (0..t.length).collect(),
        targets: Tensor::from_vec(y, (t.length, batch, t.output), device)?,
    })
}

struct RandomData {
    input: usize,
    output: usize,
    length: usize,
    rng: ChaCha8Rng,
    validation: Batch,
    test: Batch,
    device: Device,
}

impl TaskData for RandomData {
    fn train_batch(&mut self, batch_size: usize) -> candle_core::Result<Batch> {
        let t = RandomSequence { input: self.input, output: self.output, length: self.length };
        make(&t, batch_size, &mut self.rng, &self.device)
    }
    fn eval_batches(&self, split: Split, batch_size: usize) -> candle_core::Result<Vec<Batch>> {
        let set = if split == Split::Validation { &self.validation } else { &self.test };
        super::fresh::cut(std::slice::from_ref(set), batch_size)
    }
    fn train_size(&self) -> Option<usize> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_step_is_scored_with_random_bits() {
        let task = RandomSequenceKind.instantiate(&[Value::Int(3), Value::Int(2), Value::Int(5)]).unwrap();
        let mut data = task.data(1, &Device::Cpu).unwrap();
        let b = data.train_batch(4).unwrap();
        assert_eq!(b.inputs.dims(), &[5, 4, 3]);
        assert_eq!(b.targets.dims(), &[5, 4, 2]);
        assert_eq!(b.scored, vec![0, 1, 2, 3, 4]);
        let bits = b.targets.flatten_all().unwrap().to_vec1::<f32>().unwrap();
        assert!(bits.iter().all(|v| *v == 0.0 || *v == 1.0));
        assert!(bits.contains(&1.0) && bits.contains(&0.0));
        assert_eq!(task.target(), Target::Bits(2));
    }
}
