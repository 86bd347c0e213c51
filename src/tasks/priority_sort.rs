//! Priority sort (NTM; SAM Fig. 2, thaihungle/SAM `datasets/prioritysort.py`, docs/models.md,
//! Priority sort): read bit vectors tagged with priorities, then write out the highest-priority
//! ones in order.
//!
//! `inputs` vectors of `width` (W) bits (Bernoulli(½)); input width W + 2:
//!
//! ```text
//!   steps 0..inputs                 [bits (W) | priority ~ U[−1, 1) | 0]
//!   steps inputs..inputs+outputs    all-zero input; scored
//! ```
//!
//! As the code: no delimiter or end flag (channel W+1 is always 0), priorities from the
//! half-open U[−1, 1). Target at output step `k` = the bits of the input with the `k`-th
//! **highest** priority (descending; ties, probability 0, by input position); only the top
//! `outputs` are asked for. Binary cross-entropy on every bit (`Bits(W)`); metric `bit_error`
//! per sequence. Fresh data every training batch; fixed validation and test sets.

use candle_core::Device;
use rand::Rng;
use rand_chacha::ChaCha8Rng;

use super::define::task_kind;
use super::fresh::{Fresh, FreshTask, Seq};
use super::options::{Options, TaskOption};
use super::prelude::*;

static OPTIONS: [TaskOption; 3] = [
    TaskOption::int("width", 32, 1, 4096),
    TaskOption::int("inputs", 20, 1, 10_000),
    TaskOption::int("outputs", 16, 1, 10_000),
];

task_kind! {
    PrioritySortKind = "prioritySort",
    "priority sort: read bit vectors with priorities, write the top ones in descending priority (NTM; SAM Fig. 2)",
    options: &OPTIONS,
    held_out: (1000, 2000),
}

fn instantiate(o: &Options) -> Result<Box<dyn Task>, PrimError> {
    let task: FreshTask<PrioritySort> = o.parse()?;
    let PrioritySort { inputs, outputs, .. } = task.generator;
    if outputs > inputs {
        let why = format!("`outputs` ({outputs}) must be at most `inputs` ({inputs}): only inputs can be sorted");
        return Err(PrimError::task(why).on("outputs"));
    }
    Ok(Box::new(task))
}

#[derive(Clone, Debug, serde::Deserialize)]
pub struct PrioritySort {
    width: usize,
    inputs: usize,
    outputs: usize,
}

impl Fresh for PrioritySort {
    fn max_steps(&self) -> Option<usize> {
        Some(self.inputs + self.outputs)
    }
    fn input(&self) -> Ty {
        Ty::Tensor(vec![self.width + 2])
    }
    fn target(&self) -> Target {
        Target::Bits(self.width)
    }
    fn train_batch(&self, rng: &mut ChaCha8Rng, n: usize, device: &Device) -> candle_core::Result<Batch> {
        let (w, k) = (self.width, self.inputs);
        let mut x = Seq::zeros(k + self.outputs, n, w + 2);
        let mut y = Seq::zeros(self.outputs, n, w);
        let mut priority = vec![0f32; k];
        let mut order: Vec<usize> = (0..k).collect();
        for b in 0..n {
            for (t, p) in priority.iter_mut().enumerate() {
                let row = x.row_mut(t, b);
                for bit in row[..w].iter_mut() {
                    *bit = if rng.random_bool(0.5) { 1.0 } else { 0.0 };
                }
                *p = rng.random::<f32>() * 2.0 - 1.0;
                row[w] = *p;
            }
            order.iter_mut().enumerate().for_each(|(i, o)| *o = i);
            order.sort_by(|&i, &j| priority[j].total_cmp(&priority[i]));
            for (s, &t) in order[..self.outputs].iter().enumerate() {
                let bits: Vec<f32> = x.row_mut(t, b)[..w].to_vec();
                y.row_mut(s, b).copy_from_slice(&bits);
            }
        }
        x.into_batch(y, device)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(width: i64, inputs: i64, outputs: i64) -> Vec<Value> {
        vec![Value::Int(width), Value::Int(inputs), Value::Int(outputs), Value::Int(5), Value::Int(5)]
    }

    fn task(width: i64, inputs: i64, outputs: i64) -> Box<dyn Task> {
        PrioritySortKind.instantiate(&options(width, inputs, outputs)).unwrap()
    }

    #[test]
    fn targets_are_the_top_inputs_in_descending_priority() {
        let data = task(3, 6, 4).data(2, &Device::Cpu).unwrap();
        let b = data.eval_batches(Split::Validation, 5).unwrap().remove(0);
        assert_eq!(b.inputs.dims(), &[10, 5, 5]);
        assert_eq!(b.targets.dims(), &[4, 5, 3]);
        assert_eq!(b.scored, vec![6, 7, 8, 9]);
        let x = b.inputs.to_vec3::<f32>().unwrap();
        let y = b.targets.to_vec3::<f32>().unwrap();
        for e in 0..5 {
            let mut items: Vec<(f32, Vec<f32>)> = (0..6).map(|t| (x[t][e][3], x[t][e][..3].to_vec())).collect();
            for (p, bits) in &items {
                assert!((-1.0..1.0).contains(p));
                assert!(bits.iter().all(|v| *v == 0.0 || *v == 1.0));
            }
            assert!((0..6).all(|t| x[t][e][4] == 0.0), "no delimiter channel");
            assert!((6..10).all(|t| x[t][e].iter().all(|v| *v == 0.0)), "output phase input is zero");
            items.sort_by(|a, b| b.0.total_cmp(&a.0));
            for s in 0..4 {
                assert_eq!(y[s][e], items[s].1, "output {s} = input with the {s}-th highest priority");
            }
        }
    }

    #[test]
    fn declares_input_and_target() {
        let t = task(32, 20, 16);
        assert_eq!(t.input(), Ty::Tensor(vec![34]));
        assert_eq!(t.target(), Target::Bits(32));
    }

    #[test]
    fn rejects_bad_options_by_name() {
        assert_eq!(PrioritySortKind.instantiate(&options(32, 4, 5)).err().unwrap().arg, Some("outputs"));
        assert_eq!(PrioritySortKind.instantiate(&options(32, 0, 5)).err().unwrap().arg, Some("inputs"));
        assert_eq!(PrioritySortKind.instantiate(&options(0, 20, 16)).err().unwrap().arg, Some("width"));
    }
}
