//! Timing a model's training step, as `memctl bench` reports it: median and minimum time,
//! FLOPs and the achieved GFLOP/s against the machine's measured sgemm peak, peak memory.
//!
//! The step is the one training uses ([`Stepper::step`]): forward over every time step of a
//! fixed batch, loss, backward, clipping, optimiser update, loss read back to the host.

use std::time::Instant;

use candle_core::{DType, Device, Tensor};

use crate::check::Trial;
use crate::tasks::{Batch, Split};
use crate::train::pack::PackSteps;
use crate::train::{Autograd, Stepper, data_seed, evaluate, evaluation_batch, evaluation_batches};

pub mod device_check;
pub mod dump;
pub mod kernel_checks;
pub mod optim_check;
pub mod solve_check;
pub mod sums_check;

/// What one benchmark measured.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Report {
    pub median_ms: f64,
    pub min_ms: f64,
    /// Median CPU time per step, all threads (less sensitive than wall time to other work on
    /// the machine; with one thread it should match `median_ms` on an idle machine).
    pub median_cpu_ms: f64,
    pub iters: usize,
    /// Trials stepped together (1: a trial alone); the times are per step of all of them.
    pub pack: usize,
    pub params: usize,
    pub threads: usize,
    /// FLOPs of one training step: 3 × forward (backward ≈ 2 × forward), all time steps and
    /// examples (of every trial of a pack).
    pub flops_per_train_step: f64,
    pub gflops: f64,
    pub peak_rss_mb: f64,
    pub final_loss: f64,
    /// The first step, from a stepper just built: kernel loading and, on CUDA, the warm-up.
    pub first_step_ms: f64,
    /// Whether the last step was replayed from a CUDA graph, and how the steps ran
    /// (`Stepper::replay_status`).
    pub cuda_graph: bool,
    pub step_mode: String,
}

/// Times `iters` training steps on one fixed batch after `warmup` untimed ones. With `pack`
/// above 1, a step is one step of a pack of that many trials (the trial with seeds `seed`,
/// `seed + 1`, …, each on its own batch), trained as a packed sweep trains them
/// ([`PackSteps`]): the figures are then per pack step.
pub fn time_steps(
    trial: &Trial,
    device: &Device,
    autograd: Autograd,
    threads: usize,
    pack: usize,
    warmup: usize,
    iters: usize,
) -> candle_core::Result<Report> {
    let trials: Vec<Trial> = (0..pack.max(1) as u64)
        .map(|i| {
            let mut t = trial.clone();
            t.config.seed = trial.config.seed + i;
            t
        })
        .collect();
    let mut steppers = trials
        .iter()
        .map(|t| Stepper::with(t, device, DType::F32, autograd))
        .collect::<candle_core::Result<Vec<_>>>()?;
    let batches = trials
        .iter()
        .map(|t| t.task.data(data_seed(t.config.seed), device)?.train_batch(t.config.train.batch))
        .collect::<candle_core::Result<Vec<Batch>>>()?;
    let batch_refs: Vec<&Batch> = batches.iter().collect();
    let who: Vec<usize> = (0..trials.len()).collect();
    let mut packed = PackSteps::new(device, autograd);
    let mut times = vec![];
    let mut cpu = vec![];
    let mut loss = f64::NAN;
    let mut first_step_ms = f64::NAN;
    for i in 0..warmup + iters {
        let (t0, c0) = (Instant::now(), cpu_seconds());
        loss = match &mut steppers[..] {
            [alone] => alone.step(&batches[0])?,
            all => {
                let mut members: Vec<&mut Stepper> = all.iter_mut().collect();
                packed.step(&who, &mut members, &batch_refs)?[0]
            }
        };
        if i == 0 {
            first_step_ms = t0.elapsed().as_secs_f64() * 1e3;
        }
        if i >= warmup {
            times.push(t0.elapsed().as_secs_f64() * 1e3);
            cpu.push((cpu_seconds() - c0) * 1e3);
        }
    }
    times.sort_by(f64::total_cmp);
    cpu.sort_by(f64::total_cmp);
    let median_ms = times.get(times.len() / 2).copied().unwrap_or(f64::NAN);
    let flops = train_step_flops(trial, &batches[0])? * trials.len() as f64;
    let (cuda_graph, step_mode) = match &mut steppers[..] {
        [alone] => (alone.replays(), alone.replay_status()),
        all => {
            let updates = match crate::train::pack::updates_as_one(&mut all.iter_mut().collect::<Vec<_>>()) {
                true => "updated as one",
                false => "each trial updated on its own",
            };
            let how = packed.failure().map_or_else(
                || (if packed.replays() { "replayed" } else { "eager" }).to_string(),
                |why| format!("eager: its capture failed: {why}"),
            );
            (packed.replays(), format!("a pack of {}, {updates}, {how}", trials.len()))
        }
    };
    Ok(Report {
        median_ms,
        min_ms: times.first().copied().unwrap_or(f64::NAN),
        median_cpu_ms: cpu.get(cpu.len() / 2).copied().unwrap_or(f64::NAN),
        iters,
        pack: trials.len(),
        params: trial.graph.param_count(),
        threads,
        flops_per_train_step: flops,
        gflops: flops / (median_ms * 1e-3) / 1e9,
        peak_rss_mb: peak_rss_mb(),
        final_loss: loss,
        first_step_ms,
        cuda_graph,
        step_mode,
    })
}

/// One evaluation pass, timed: what a trial spends at each `eval_every`.
#[derive(Debug, Clone, serde::Serialize)]
pub struct EvalReport {
    /// Median wall time of a pass over the validation split (`eval_size` sequences, or all).
    pub median_ms: f64,
    pub passes: usize,
    pub sequences: usize,
    /// Sequences per forward, as training evaluates (`train::evaluation_batch`).
    pub batch: usize,
    /// How the passes ran (`Stepper::eval_replay_status`).
    pub mode: String,
}

/// Times `passes` evaluations of the validation split, as training runs them (the same batch
/// size and `eval_size`, weights as initialised), after one untimed pass.
pub fn time_evaluation(
    trial: &Trial,
    device: &Device,
    autograd: Autograd,
    passes: usize,
) -> candle_core::Result<EvalReport> {
    let cfg = &trial.config.train;
    let stepper = Stepper::with(trial, device, DType::F32, autograd)?;
    let data = trial.task.data(data_seed(trial.config.seed), device)?;
    let batch = evaluation_batch(cfg.batch, device);
    let batches = evaluation_batches(data.as_ref(), Split::Validation, batch, cfg.eval_size)?;
    let sequences = batches.iter().map(|b| b.batch_size()).sum::<candle_core::Result<usize>>()?;
    let mut times = vec![];
    for i in 0..=passes {
        let t0 = Instant::now();
        evaluate(&stepper, data.as_ref(), Split::Validation, batch, cfg.eval_size, trial)?;
        if i > 0 {
            times.push(t0.elapsed().as_secs_f64() * 1e3);
        }
    }
    times.sort_by(f64::total_cmp);
    let median_ms = times.get(times.len() / 2).copied().unwrap_or(f64::NAN);
    Ok(EvalReport { median_ms, passes, sequences, batch, mode: stepper.eval_replay_status() })
}

/// 3 × (forward FLOPs per example per time step) × batch × time steps.
pub fn train_step_flops(trial: &Trial, batch: &Batch) -> candle_core::Result<f64> {
    Ok(3.0 * trial.graph.flops_per_step() as f64 * batch.batch_size()? as f64 * batch.steps()? as f64)
}

/// The best GFLOP/s of a square f32 matrix product on this device with the current thread
/// pool: the roofline the step is compared against.
pub fn sgemm_peak_gflops(device: &Device) -> candle_core::Result<f64> {
    let n = 1024;
    let a = Tensor::randn(0f32, 1.0, (n, n), device)?;
    let b = Tensor::randn(0f32, 1.0, (n, n), device)?;
    let mut best = f64::INFINITY;
    for _ in 0..6 {
        let t0 = Instant::now();
        let c = a.matmul(&b)?;
        c.sum_all()?.to_dtype(DType::F64)?.to_scalar::<f64>()?; // wait for the result
        best = best.min(t0.elapsed().as_secs_f64());
    }
    Ok(2.0 * (n * n * n) as f64 / best / 1e9)
}

/// CPU time used by the process so far (all threads), in seconds.
pub fn cpu_seconds() -> f64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes into the timespec we pass and reads nothing else.
    if unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) } != 0 {
        return f64::NAN;
    }
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

/// The process's peak resident memory (VmHWM), in MiB; NaN where unknown.
pub fn peak_rss_mb() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines().find(|l| l.starts_with("VmHWM:")).and_then(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok())
        })
        .map_or(f64::NAN, |kb| kb / 1024.0)
}
