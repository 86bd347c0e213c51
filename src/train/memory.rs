//! How much memory a trial's training needs, estimated before it runs: what `memctl check`
//! prints, and what a sweep compares with the memory free so as to refuse a trial that cannot
//! fit instead of dying in the middle of a sweep.
//!
//! Counted (f32, 4 bytes each):
//! - the parameters, their gradients, and the optimiser's buffers (Adam and RMSprop two per
//!   parameter, SGD one with momentum);
//! - the activations the backward keeps: for every time step of a sequence, every node's
//!   outputs and the states, twice over (the ops' saved intermediates are of the same
//!   order), and what an op keeps beyond that order (`mhdpa`'s attention weights, N² per
//!   head for a memory of N slots), for every sequence of the batch;
//! - one training batch (inputs and targets);
//! - or, where it needs more than a training step's activations and batch, one evaluation
//!   batch (larger than a training batch, `train::evaluation::evaluation_batch`): the loss's
//!   and metrics' copies of the outputs over all steps (the logits, large for a task of many
//!   classes: a word-level corpus), and on the CPU, whose evaluation runs the tape's kernels,
//!   every time step's node outputs and states once; beside it, its split cut into batches,
//!   which an evaluation holds at once. The two share their buffers in part: peak resident
//!   memory of `sweep specs/bench/stm.mem` with an evaluation every few steps and with only
//!   the final one, 2-core AMD EPYC, 2026-11-30: STM B 1.16 and 1.16 GB (estimated 1.91),
//!   STM A 219 and 197 MB (estimated 130). `patternCompletion(patterns = 300, bits = 512)`,
//!   whose data sets make most of it: 5.08 GB (estimated 3.38), 2026-12-01.
//!   What a GPU's evaluation holds besides the outputs is not measured yet;
//! - the task's data sets, which a trial holds from start to end: a fixed training set, the
//!   validation set and the test sets, as the batches they become.
//!
//! Generating the data sets tells their size, but sets larger than the memory free would end
//! the process first. So where the examples' longest form
//! ([`Task::max_steps`](crate::tasks::Task::max_steps)) says that even a sample of 8 examples
//! of each set would take a quarter of the memory free, nothing is generated and every example counts at that
//! length; otherwise, where the sets are projected, from such a sample, to more than half of
//! it, the sample stands for them; otherwise the trial's own data are generated and measured.
//! A trial whose data cannot fit is then refused (`C095`) instead of `memctl check` running
//! out of memory.

use candle_core::Device;

use crate::check::Trial;
use crate::graph::Ty;
use crate::tasks::{Batch, Split, TaskData};
use crate::train_config::OptimizerKind;
use crate::value::Value;

/// Bytes, by what they hold.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemoryEstimate {
    pub params: u64,
    pub gradients: u64,
    pub optimizer: u64,
    pub activations: u64,
    pub batch: u64,
    /// An evaluation batch's forward, which runs between training steps (the larger of the
    /// two counts).
    pub evaluation: u64,
    /// The task's data sets (see the module's comment).
    pub data: u64,
}

impl MemoryEstimate {
    pub fn total(&self) -> u64 {
        let training = self.activations.saturating_add(self.batch);
        let fixed = self.params.saturating_add(self.gradients).saturating_add(self.optimizer).saturating_add(self.data);
        fixed.saturating_add(training.max(self.evaluation))
    }

    /// Whether the task's data sets make half the estimate or more.
    pub fn data_dominates(&self) -> bool {
        self.data >= self.total() / 2
    }

    /// Whether evaluation, not training, makes most of the estimate (twice the training step
    /// or more): a task of many classes, whose outputs' copies dominate.
    pub fn evaluation_dominates(&self) -> bool {
        self.evaluation / 2 >= self.activations.saturating_add(self.batch)
    }
}

/// Copies of the outputs over all steps that an evaluation holds at once besides the outputs
/// themselves: the loss's log-probabilities and their intermediates, the metrics' (7 in all
/// for a word-level LSTM of 10 000 and 30 000 words, 2-core AMD EPYC, 2026-11-30).
const EVAL_OUTPUT_COPIES: u64 = 6;

const F32: u64 = 4;

/// Training examples drawn to learn the longest sequence of generated data, besides its
/// validation set (copy's lengths 1 to 20: all 64 under 20 one time in 27).
const SAMPLED_EXAMPLES: usize = 64;

/// The estimate for one trial on the CPU (`on_cpu`) or a GPU, whose evaluation batches
/// differ. The trial's data tells the lengths: a training batch is as long as the longest the
/// data can give (a data set's longest training sequence; for generated data, the longest of
/// its validation set and of a few training examples), and evaluation as the held-out batch,
/// of any split (a test split of longer sequences too), that needs the most. Where even a
/// sample of the data would take a quarter of the memory free, nothing is generated: the
/// examples are taken as long as [`Task::max_steps`](crate::tasks::Task::max_steps) allows.
pub fn estimate(trial: &Trial, on_cpu: bool) -> candle_core::Result<MemoryEstimate> {
    let eval_batch = super::evaluation::evaluation_batch_on(trial.config.train.batch, on_cpu);
    let drawn = match Bound::of(trial) {
        Some(bound) if available().is_some_and(|room| bound.sample_bytes() > room / 4) => bound.drawn(),
        _ => Drawn::from_data(trial, eval_batch)?,
    };
    Ok(drawn.estimate(trial, on_cpu, eval_batch))
}

/// What the estimate reads off a trial's data: the longest sequence a training batch can
/// hold, the held-out batches, and the data sets' bytes.
struct Drawn {
    longest: BatchSize,
    /// The most time steps of a training batch.
    steps: u64,
    held_out: Vec<BatchSize>,
    /// The bytes of the largest held-out split's batches, which its evaluation holds at once.
    largest_split: u64,
    data: u64,
}

impl Drawn {
    /// From the trial's data, or, where generating it would not leave room for the rest, the
    /// sample that projected its size.
    fn from_data(trial: &Trial, eval_batch: usize) -> candle_core::Result<Drawn> {
        let (mut data, projected) = match Projection::of(trial, eval_batch)? {
            Some(p) if available().is_some_and(|room| p.bytes > room / 2) => {
                (p.sample, Some((p.bytes, p.largest_split)))
            }
            _ => (trial.task.data(super::data_seed(trial.config.seed), &Device::Cpu)?, None),
        };
        // The longest of a few training examples, so that a small validation set still tells.
        let first = BatchSize::of(&data.train_batch(1)?)?;
        let mut example = first;
        if data.longest_train_steps().is_none() {
            for _ in 1..SAMPLED_EXAMPLES {
                let drawn = BatchSize::of(&data.train_batch(1)?)?;
                if drawn.steps > example.steps {
                    example = drawn;
                }
            }
        }
        let (mut held_out, mut validation_longest, mut largest_split) = (vec![], None::<BatchSize>, 0);
        let splits = std::iter::once(Split::Validation).chain((0..trial.task.test_splits().len()).map(Split::Test));
        for split in splits {
            let mut split_bytes = 0;
            for b in data.eval_batches(split, eval_batch)? {
                let b = BatchSize::of(&b)?;
                if split == Split::Validation && validation_longest.is_none_or(|v| b.steps > v.steps) {
                    validation_longest = Some(b);
                }
                split_bytes += b.elements * F32;
                held_out.push(b);
            }
            largest_split = largest_split.max(split_bytes);
        }
        let (data_sets, largest_split) = projected.unwrap_or_else(|| {
            let training_set = data.train_size().unwrap_or(0) as u64 * first.elements * F32;
            (held_out.iter().map(|b| b.elements * F32).sum::<u64>().saturating_add(training_set), largest_split)
        });
        let longest = match validation_longest {
            Some(v) if v.steps > example.steps => v,
            _ => example,
        };
        let steps = data.longest_train_steps().unwrap_or(longest.steps) as u64;
        Ok(Drawn { longest, steps, held_out, largest_split, data: data_sets })
    }

    fn estimate(&self, trial: &Trial, on_cpu: bool, eval_batch: usize) -> MemoryEstimate {
        let cfg = &trial.config.train;
        let (longest, steps) = (self.longest, self.steps);
        let batch = cfg.batch as u64;
        let params = trial.graph.param_count() as u64 * F32;
        let buffers = match cfg.optimizer {
            OptimizerKind::Adam | OptimizerKind::RmsProp => 2,
            OptimizerKind::Sgd if cfg.momentum > 0.0 => 1,
            OptimizerKind::Sgd => 0,
        };
        let elements = |t: &Ty| match t {
            Ty::Tensor(s) => s.iter().product::<usize>() as u64,
            Ty::Tokens(_) => 1,
        };
        let per_step: u64 = trial.graph.nodes.iter().flat_map(|n| &n.outputs).map(elements).sum::<u64>()
            + trial.graph.states.iter().map(|s| s.shape.iter().product::<usize>() as u64).sum::<u64>();
        // What ops keep for their backward beyond their outputs' order (attention weights),
        // once; an evaluation holds one step's of it at a time.
        let saved: u64 = trial.graph.nodes.iter().map(|n| n.saved).sum();
        let outputs = trial.graph.output_shape.iter().product::<usize>() as u64;
        let outputs_held = (EVAL_OUTPUT_COPIES + u64::from(!on_cpu)).saturating_mul(outputs);
        let per_eval_step = if on_cpu { per_step.saturating_add(outputs_held) } else { outputs_held };
        // A batch's inputs and targets: the longest sequence's, per time step.
        let data_bytes = |steps: u64, sequences: u64| {
            let per_sequence = longest.elements.saturating_mul(F32) / longest.sequences.max(1);
            per_sequence.saturating_mul(steps).saturating_mul(sequences) / (longest.steps.max(1) as u64)
        };
        let evaluation = |steps: u64, sequences: u64, bytes: u64| {
            let held = per_eval_step.saturating_mul(steps).saturating_add(saved).saturating_mul(sequences);
            held.saturating_mul(F32).saturating_add(bytes)
        };
        // The held-out batch that needs the most, beside its split's batches (a split's
        // evaluation cuts them all before the first runs); without held-out sets, a full
        // evaluation batch of training's length.
        let evaluation = self
            .held_out
            .iter()
            .map(|b| evaluation(b.steps as u64, b.sequences, self.largest_split))
            .max()
            .unwrap_or_else(|| evaluation(steps, eval_batch as u64, data_bytes(steps, eval_batch as u64)));
        MemoryEstimate {
            params,
            gradients: params,
            optimizer: buffers * params,
            activations: (per_step.saturating_mul(2).saturating_add(saved))
                .saturating_mul(steps)
                .saturating_mul(batch)
                .saturating_mul(F32),
            batch: data_bytes(steps, batch),
            evaluation,
            data: self.data,
        }
    }
}

/// Examples of each generated set (a fixed training set, the validation set, each test set)
/// that a copy of the task generates to project the size of the trial's own.
const SAMPLED_SET: i64 = 8;

/// The sizes of a trial's generated sets: each set option (`train`, `validation`, `test`) the
/// task has, with the trial's value.
fn set_sizes(trial: &Trial) -> Vec<(&'static str, i64)> {
    let Some(kind) = crate::tasks::get(&trial.config.task) else { return vec![] };
    kind.signature()
        .iter()
        .filter(|arg| matches!(arg.name, "train" | "validation" | "test"))
        .filter_map(|arg| match trial.config.task_options.get(arg.name) {
            Some(&Value::Int(n)) => Some((arg.name, n)),
            _ => None,
        })
        .collect()
}

/// The most a trial's examples can hold, from its task's options alone
/// ([`Task::max_steps`](crate::tasks::Task::max_steps)).
struct Bound {
    steps: usize,
    /// Inputs and targets of one time step.
    per_step: u64,
    /// Examples of the trial's data sets (each test split counted), where the options say.
    examples: u64,
    /// Examples a [`Projection`]'s sample generates, and the one training example drawn at once.
    sampled: u64,
    /// Examples of the largest held-out set.
    largest_set: u64,
}

impl Bound {
    fn of(trial: &Trial) -> Option<Bound> {
        let steps = trial.task.max_steps()?;
        let input = match trial.task.input() {
            Ty::Tensor(shape) => shape.iter().product::<usize>() as u64,
            Ty::Tokens(_) => 1,
        };
        let target = match trial.task.target() {
            crate::tasks::Target::Bits(n) => n as u64,
            crate::tasks::Target::Classes(_) => 1,
        };
        let tests = trial.task.test_splits().len() as u64;
        let (mut examples, mut sampled, mut largest_set) = (0u64, 1u64, 1u64);
        for (set, n) in set_sizes(trial) {
            let times = if set == "test" { tests } else { 1 };
            examples = examples.saturating_add((n as u64).saturating_mul(times));
            sampled += n.min(SAMPLED_SET) as u64 * times;
            if set != "train" {
                largest_set = largest_set.max(n as u64);
            }
        }
        Some(Bound { steps, per_step: input + target, examples: examples.max(1), sampled, largest_set })
    }

    fn example_bytes(&self) -> u64 {
        (self.steps as u64).saturating_mul(self.per_step).saturating_mul(F32)
    }

    /// What generating a projection's sample can take at once.
    fn sample_bytes(&self) -> u64 {
        self.example_bytes().saturating_mul(self.sampled)
    }

    /// Every example as long as it can be, none generated.
    fn drawn(&self) -> Drawn {
        let longest = BatchSize { steps: self.steps, sequences: 1, elements: self.steps as u64 * self.per_step };
        let data = self.example_bytes().saturating_mul(self.examples);
        let largest_split = self.example_bytes().saturating_mul(self.largest_set);
        Drawn { longest, steps: self.steps as u64, held_out: vec![], largest_split, data }
    }
}

/// The bytes of a trial's generated data sets, projected from a copy of its task that
/// generates at most [`SAMPLED_SET`] examples of each, and that copy's data.
struct Projection {
    bytes: u64,
    /// The largest held-out split's, projected.
    largest_split: u64,
    sample: Box<dyn TaskData>,
}

impl Projection {
    /// `None` where there is nothing to project: a task that reads its data (in memory
    /// already), or whose sets are no larger than the sample's.
    fn of(trial: &Trial, eval_batch: usize) -> candle_core::Result<Option<Projection>> {
        let Some(kind) = crate::tasks::get(&trial.config.task).filter(|k| k.reads().is_none()) else {
            return Ok(None);
        };
        // How many times the sample's examples each set of the trial holds.
        let scale: std::collections::HashMap<&str, f64> = set_sizes(trial)
            .into_iter()
            .filter(|&(_, n)| n > SAMPLED_SET)
            .map(|(set, n)| (set, n as f64 / SAMPLED_SET as f64))
            .collect();
        let mut options = vec![];
        for arg in kind.signature() {
            let Some(value) = trial.config.task_options.get(arg.name) else { return Ok(None) };
            options.push(if scale.contains_key(arg.name) { Value::Int(SAMPLED_SET) } else { value.clone() });
        }
        // A copy whose options fail a check the trial's pass (none today) projects nothing.
        let (false, Ok(task)) = (scale.is_empty(), kind.instantiate(&options)) else { return Ok(None) };
        let mut sample = task.data(super::data_seed(trial.config.seed), &Device::Cpu)?;
        let times = |set: &str| scale.get(set).copied().unwrap_or(1.0);
        let (mut bytes, mut largest_split) = (0.0, 0.0f64);
        let splits = std::iter::once(Split::Validation).chain((0..task.test_splits().len()).map(Split::Test));
        for split in splits {
            let set = if split == Split::Validation { "validation" } else { "test" };
            let batches = sample.eval_batches(split, eval_batch)?;
            let elements =
                batches.iter().map(|b| BatchSize::of(b).map(|b| b.elements)).sum::<candle_core::Result<u64>>()?;
            let split_bytes = (elements * F32) as f64 * times(set);
            bytes += split_bytes;
            largest_split = largest_split.max(split_bytes);
        }
        if let Some(examples) = sample.train_size() {
            let example = BatchSize::of(&sample.train_batch(1)?)?;
            bytes += (example.elements * F32) as f64 * examples as f64 * times("train");
        }
        // A float past u64's range saturates.
        Ok(Some(Projection { bytes: bytes as u64, largest_split: largest_split as u64, sample }))
    }
}

/// A batch's time steps, sequences, and elements of inputs and targets.
#[derive(Clone, Copy, Debug)]
struct BatchSize {
    steps: usize,
    sequences: u64,
    elements: u64,
}

impl BatchSize {
    fn of(b: &Batch) -> candle_core::Result<BatchSize> {
        Ok(BatchSize {
            steps: b.steps()?,
            sequences: b.batch_size()? as u64,
            elements: (b.inputs.elem_count() + b.targets.elem_count()) as u64,
        })
    }
}

/// Free memory on the named device (`cpu`, `cuda`, `cuda:1`), if it can be read.
pub fn available_on(device: &str) -> Option<u64> {
    match crate::device::parse(device)? {
        crate::device::DeviceSpec::Cpu => available(),
        crate::device::DeviceSpec::Cuda(ordinal) => gpu_free(&crate::device::open(device).ok()?, ordinal),
    }
}

/// Free memory of a CUDA device: what its driver reports, and what the device's memory pool
/// holds unused.
#[cfg(feature = "cuda")]
fn gpu_free(device: &candle_core::Device, ordinal: usize) -> Option<u64> {
    use candle_core::cuda_backend::cudarc::driver::result;
    let candle_core::Device::Cuda(d) = device else { return None };
    d.cuda_stream().context().bind_to_thread().ok()?;
    let free = result::mem_get_info().ok().map(|(free, _total)| free as u64)?;
    Some(free + crate::device::pool_idle_bytes(ordinal).unwrap_or(0))
}

#[cfg(not(feature = "cuda"))]
fn gpu_free(_: &candle_core::Device, _: usize) -> Option<u64> {
    None
}

/// Memory this process can still take: what the host has (`MemAvailable`), or less where the
/// process's control groups cap it (a Slurm job's `--mem`, a container's limit), since going
/// past a cgroup's limit gets the process killed however much the host has free, or where its
/// address space is limited (`ulimit -v`: an allocation past it aborts the process).
pub fn available() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let host = kilobytes(&info, "MemAvailable:")?;
    let cgroups = std::fs::read_to_string("/proc/self/cgroup").ok();
    let capped = cgroups.and_then(|c| cgroup_headroom(&c, &|path| std::fs::read_to_string(path).ok()));
    let least = capped.map_or(host, |c| c.min(host));
    Some(address_space_headroom().map_or(least, |a| a.min(least)))
}

/// The bytes of a `/proc` line `Name:   123 kB`.
fn kilobytes(text: &str, name: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with(name))?;
    line.split_whitespace().nth(1)?.parse::<u64>().ok().map(|kb| kb * 1024)
}

/// What the address space limit (`RLIMIT_AS`) leaves of the process's mapped size
/// (`VmSize`); `None` without a limit.
fn address_space_headroom() -> Option<u64> {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit writes the struct it is given and nothing else.
    if unsafe { libc::getrlimit(libc::RLIMIT_AS, &mut limit) } != 0 || limit.rlim_cur == libc::RLIM_INFINITY {
        return None;
    }
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    Some(limit.rlim_cur.saturating_sub(kilobytes(&status, "VmSize:")?))
}

/// The least room left under the memory limits of this process's cgroup and its ancestors
/// (`limit − usage`), from `/proc/self/cgroup`; `read` reads a file of the cgroup file system.
/// cgroup v2 (`0::/path`: `memory.max`, `memory.current`) and v1 (`N:memory:/path`:
/// `memory.limit_in_bytes`, `memory.usage_in_bytes`). `None` where no limit is set.
fn cgroup_headroom(proc_cgroup: &str, read: &dyn Fn(&str) -> Option<String>) -> Option<u64> {
    let number = |path: String| read(&path).and_then(|s| s.trim().parse::<u64>().ok());
    let mut least: Option<u64> = None;
    for line in proc_cgroup.lines() {
        let mut parts = line.splitn(3, ':');
        let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        let (root, limit_file, usage_file) = match controllers {
            "" => ("/sys/fs/cgroup", "memory.max", "memory.current"),
            c if c.split(',').any(|c| c == "memory") => {
                ("/sys/fs/cgroup/memory", "memory.limit_in_bytes", "memory.usage_in_bytes")
            }
            _ => continue,
        };
        // The process's own cgroup, then each ancestor up to the root.
        let mut dir = std::path::PathBuf::from(path.trim_end_matches('/'));
        loop {
            let at = format!("{root}{}", dir.display()).trim_end_matches('/').to_string();
            // "max" (v2) does not parse, and v1 says "no limit" with a huge number.
            if let (Some(limit), Some(usage)) =
                (number(format!("{at}/{limit_file}")), number(format!("{at}/{usage_file}")))
                && limit < 1 << 60
            {
                let room = limit.saturating_sub(usage);
                least = Some(least.map_or(room, |l| l.min(room)));
            }
            if !dir.pop() {
                break;
            }
        }
    }
    least
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tightest_cgroup_limit_on_the_way_to_the_root_caps_the_memory() {
        let files = std::collections::HashMap::from([
            // v2: the job's cgroup has no limit of its own, its parent (the Slurm job) does.
            ("/sys/fs/cgroup/job/step/memory.max", "max\n"),
            ("/sys/fs/cgroup/job/step/memory.current", "100\n"),
            ("/sys/fs/cgroup/job/memory.max", "4000\n"),
            ("/sys/fs/cgroup/job/memory.current", "1500\n"),
            // v1: a limit of "none" is a huge number.
            ("/sys/fs/cgroup/memory/c/memory.limit_in_bytes", "9223372036854771712\n"),
            ("/sys/fs/cgroup/memory/c/memory.usage_in_bytes", "6713290752\n"),
            ("/sys/fs/cgroup/memory/memory.limit_in_bytes", "9223372036854771712\n"),
            ("/sys/fs/cgroup/memory/memory.usage_in_bytes", "6713290752\n"),
        ]);
        let read = |p: &str| files.get(p).map(|s| s.to_string());
        assert_eq!(cgroup_headroom("0::/job/step\n", &read), Some(2500));
        assert_eq!(cgroup_headroom("4:memory:/c\n3:cpuset:/\n", &read), None, "no limit set");
        assert_eq!(cgroup_headroom("12:cpu,memory:/c\n0::/job/step\n", &read), Some(2500));
        assert_eq!(cgroup_headroom("", &read), None);
    }

    fn trial(batch: usize) -> Trial {
        let spec = crate::lang::parse_str(
            "t.mem",
            &format!(
                r#"
                model m() {{
                  state h = zeros(4)
                  step x {{ h = tanh(linear(x, 4) + h)  out linear(h, output_size) }}
                }}
                experiment e {{ task randomSequence(input = 2, output = 2, length = 3) model m
                               train {{ batch = {batch}, optimizer = adam(lr = 1e-3) }} }}
                "#
            ),
        )
        .unwrap();
        let program = crate::check::check(&spec, &crate::prims::Primitives).unwrap();
        program.experiments[0].trials[0].clone()
    }

    #[test]
    fn the_estimate_adds_up_what_training_holds() {
        let e = estimate(&trial(8), true).unwrap();
        // Parameters: linear 2 → 4 (12) and 4 → 2 (10).
        assert_eq!((e.params, e.gradients, e.optimizer), (22 * 4, 22 * 4, 2 * 22 * 4));
        // Per step: the nodes' outputs (linear 4, add 4, tanh 4, linear 2) and the state (4),
        // twice, over 3 steps and 8 sequences.
        assert_eq!(e.activations, 2 * 18 * 3 * 8 * 4);
        // A batch: 3 steps of 2 inputs and of 2 targets per sequence.
        assert_eq!(e.batch, (3 * 2 + 3 * 2) * 4 * 8);
        // An evaluation batch of 64 sequences on the CPU (1 024 on a GPU): per step the nodes'
        // outputs and the state once (18) and 6 copies of the output (2), and the split's 256
        // sequences cut into batches.
        assert_eq!(e.evaluation, (18 + 6 * 2) * 3 * 64 * 4 + (3 * 2 + 3 * 2) * 4 * 256);
        // On a GPU the outputs and their copies (7 × 2), for a batch of 1 024 sequences, or
        // as here all of a held-out set's 256.
        let gpu = estimate(&trial(8), false).unwrap();
        assert_eq!(gpu.evaluation, 7 * 2 * 3 * 256 * 4 + (3 * 2 + 3 * 2) * 4 * 256);
        // The data sets: randomSequence's validation and test sets of 256 sequences each.
        assert_eq!(e.data, 2 * 256 * (3 * 2 + 3 * 2) * 4);
        let training = e.activations + e.batch;
        assert_eq!(e.total(), e.params + e.gradients + e.optimizer + e.data + training.max(e.evaluation));
        // 64 sequences against 8: evaluation makes most of it; at a batch of 64 (128 to
        // evaluate), training does.
        assert!(e.evaluation_dominates(), "{e:?}");
        assert!(!estimate(&trial(64), true).unwrap().evaluation_dominates());
    }

    /// Copy's sequences are 1 to 20 vectors long: every seed's estimate plans training for the
    /// longest, as a copy of 20 vectors every time needs (with a validation set of 1000, and of
    /// 4 where the drawn training examples tell).
    #[test]
    fn sequences_of_many_lengths_are_planned_at_the_longest_whatever_the_seed() {
        let trial = |lengths: &str, seed: u64| {
            let text = format!(
                r#"
                model m() {{
                  state h = zeros(16)
                  step x {{ h = tanh(linear(x, 16) + h)  out linear(h, output_size) }}
                }}
                experiment e {{ task copy(width = 8, {lengths}) model m
                               train {{ batch = 32, optimizer = adam(lr = 1e-3) }}
                               sweep {{ seed in [{seed}] }} }}
                "#
            );
            let spec = crate::lang::parse_str("t.mem", &text).unwrap();
            let program = crate::check::check(&spec, &crate::prims::Primitives).unwrap();
            estimate(&program.experiments[0].trials[0], true).unwrap()
        };
        let longest = trial("min_len = 20, max_len = 20", 0);
        for (lengths, seed) in
            (0..6).map(|s| ("min_len = 1, max_len = 20", s)).chain([("min_len = 1, max_len = 20, validation = 4", 1)])
        {
            let e = trial(lengths, seed);
            assert_eq!((e.activations, e.batch), (longest.activations, longest.batch), "{lengths}, seed {seed}");
        }
    }

    /// The first trial of `task` with a small recurrent model (`model m(tokens = true)` for a
    /// task whose inputs are tokens).
    fn trial_of(task: &str, model: &str) -> Trial {
        let text = format!(
            r#"
            model m(tokens = false) {{
              state h = zeros(4)
              step x {{
                if tokens {{ x = embed(x, 4) }}
                h = tanh(linear(x, 4) + h)
                out linear(h, output_size)
              }}
            }}
            experiment e {{ task {task} model {model} train {{ batch = 8, optimizer = adam(lr = 1e-3) }} }}
            "#
        );
        let spec = crate::lang::parse_str("t.mem", &text).unwrap();
        let program = crate::check::check(&spec, &crate::prims::Primitives).unwrap();
        program.experiments[0].trials[0].clone()
    }

    /// Examples of one length make batches of one size: the sets projected from the sample
    /// are exactly the sets generated (copy's validation and test sets; associative
    /// retrieval's training set besides).
    #[test]
    fn data_sets_projected_from_a_sample_equal_the_generated_ones_for_examples_of_one_length() {
        for (task, model) in [
            ("copy(width = 8, min_len = 10, max_len = 10, validation = 100, test = 300)", "m"),
            ("assocRetrieval(pairs = 4, train = 1000, validation = 100, test = 200)", "m(tokens = true)"),
        ] {
            let trial = trial_of(task, model);
            let eval_batch = crate::train::evaluation::evaluation_batch_on(8, true);
            let projected = Projection::of(&trial, eval_batch).unwrap().expect("sets larger than the sample");
            let e = estimate(&trial, true).unwrap();
            assert!(e.data > 0);
            assert_eq!(projected.bytes, e.data, "{task}");
        }
        // Sets no larger than the sample are generated as they are: nothing to project.
        let small = trial_of("copy(width = 8, validation = 8, test = 2)", "m");
        assert!(Projection::of(&small, 64).unwrap().is_none());
    }

    /// Validation and test sets of ten million sequences of up to 2 000 vectors of 512 bits:
    /// far more than any machine has. The estimate projects them and returns, instead of
    /// generating them until the allocator aborts the process.
    #[test]
    fn data_sets_too_large_to_generate_are_projected_not_generated() {
        let trial = trial_of("copy(width = 512, max_len = 2000, validation = 10000000, test = 10000000)", "m");
        let e = estimate(&trial, true).unwrap();
        assert!(e.data > 1 << 45, "{e:?}");
        assert!(e.data_dominates(), "{e:?}");
        assert!(available().is_some_and(|a| a < e.total()));
    }

    /// RAR sequences of 1000 items of 1000 vectors of 4096 bits: some 32 GB an example, past
    /// what any machine could generate even a sample of. Nothing is generated: every example
    /// counts at its longest.
    #[test]
    fn examples_too_large_to_sample_are_counted_at_their_longest_without_generating_any() {
        let task = "rar(width = 4096, min_items = 1000, max_items = 1000, min_len = 1000, max_len = 1000)";
        let trial = trial_of(task, "m");
        let steps = (1000 + 1) * (1000 + 1) + 1 + 1000;
        assert_eq!(trial.task.max_steps(), Some(steps));
        let e = estimate(&trial, true).unwrap();
        // Inputs of 4096 + 2 and targets of 4096 per step, for the 1000 + 2000 held-out examples.
        let example = steps as u64 * (4098 + 4096) * 4;
        assert_eq!(e.data, example * 3000, "{e:?}");
        assert!(available().is_some_and(|a| a < e.total()));
    }

    /// Attention over a memory of N slots keeps N² weights per head for the backward, where
    /// the op's outputs are N × d: a memory of 2048 slots of 8 counts its weights.
    #[test]
    fn attention_weights_kept_for_the_backward_count_in_the_activations() {
        let spec = |slots: usize| {
            let text = format!(
                r#"
                model m() {{
                  state M = zeros({slots}, 8)
                  step x {{
                    M = mhdpa(M, linear(x, 8), heads = 1, head_size = 8)
                    out linear(flatten(M), output_size)
                  }}
                }}
                experiment e {{ task copy(width = 2, min_len = 3, max_len = 3) model m
                               train {{ batch = 4, optimizer = adam(lr = 1e-3) }} }}
                "#
            );
            let spec = crate::lang::parse_str("t.mem", &text).unwrap();
            let program = crate::check::check(&spec, &crate::prims::Primitives).unwrap();
            program.experiments[0].trials[0].clone()
        };
        let trial = spec(2048);
        let attention = trial.graph.nodes.iter().find(|n| n.prim == "mhdpa").map(|n| n.saved);
        assert_eq!(attention, Some(2049 * 2049));
        // 8 steps (3 vectors, flags, 3 answers) of 4 sequences.
        let e = estimate(&trial, true).unwrap();
        assert!(e.activations >= 2049 * 2049 * 8 * 4 * 4, "{e:?}");
        assert!(e.activations > 100 * estimate(&spec(8), true).unwrap().activations, "{e:?}");
    }

    #[test]
    fn an_absurd_batch_is_estimated_without_allocating_it() {
        let e = estimate(&trial(1 << 40), true).unwrap();
        assert!(e.total() > 1 << 45, "{e:?}");
        assert!(available().is_some_and(|a| a < e.total()));
    }
}
