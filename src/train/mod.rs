//! Training one trial: batches, forward over time, loss, backward, clipping, optimiser,
//! periodic validation, `stop_when`, budgets, and a final test evaluation.
//!
//! Nothing here prints: progress goes to an [`Observer`], results into an [`Outcome`].
//! Errors never escape as panics: a candle error, a non-finite loss or a panic ends the trial
//! `failed` with the reason, keeping the steps and curves recorded so far.

pub mod checkpoint;
pub mod clip;
mod evaluation;
mod graph_eval;
#[cfg(feature = "cuda")]
mod graph_profile;
mod graph_step;
pub mod loss;
pub mod memory;
pub mod optim;
pub mod pack;
mod pack_replay;
mod pack_update;
mod trial_run;

use std::collections::BTreeMap;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Instant;

use candle_core::{DType, Device};
use serde::{Deserialize, Serialize};

use crate::check::Trial;
use crate::compile::Cell;
use crate::tasks::Target;
use trial_run::{Run, TrialRun};

pub use evaluation::{Selected, evaluate, evaluation_batch, evaluation_batches, final_metric_names};

/// Hooks for progress display.
pub trait Observer: Sync {
    /// After every training step.
    fn on_step(&self, _step: usize, _steps: usize, _loss: f64) {}
    /// After every validation.
    fn on_eval(&self, _step: usize, _metrics: &[(&str, f64)]) {}
    /// The outcome so far (curves, steps, timings): after the first step, after every
    /// validation, and at least every [`REPORT_EVERY`] of training.
    fn on_progress(&self, _so_far: &Outcome) {}
    /// After every validation: why to stop here (a search's pruner), or `None` to go on.
    fn stop_here(&self, _step: usize, _so_far: &Outcome) -> Option<String> {
        None
    }
}

/// How often, at least, a trial reports its progress ([`Observer::on_progress`]): as often as
/// the store takes it, so that a process killed between evaluations leaves a record of the
/// steps it ran and the curve points it evaluated, short by a few seconds at most.
pub const REPORT_EVERY: std::time::Duration = crate::store::PROGRESS_EVERY;

/// An observer that ignores everything.
pub struct Silent;
impl Observer for Silent {}

/// How a trial ended.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Ending {
    /// Ran all its steps, met `stop_when`, or used up `max_time`.
    Done,
    Failed(String),
    /// Stopped from outside (Ctrl-C).
    Interrupted,
    /// Stopped early by [`Observer::stop_here`] (a search's pruner).
    Pruned,
}

/// When `stop_when` was first met.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Converged {
    pub step: usize,
    /// `step · batch / training-set size`, for tasks with a fixed training set.
    pub epoch: Option<f64>,
}

/// Everything a trial produced.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Outcome {
    pub ending: Ending,
    /// Why training stopped: "steps", "stop_when", "max_time", or the failure.
    pub stop_reason: String,
    /// `name → [(step, value)]`: `train_loss` (mean over each evaluation interval) and the
    /// validation metrics (`val_loss`, `val_accuracy`, ...).
    pub curves: BTreeMap<String, Vec<(u64, f64)>>,
    /// Test-set metrics at the end (`loss`, `accuracy`, ...) and the last validation (`val_*`);
    /// with `select`, also the selected evaluation's, as `selected_*` and `selected_step`.
    pub final_metrics: BTreeMap<String, f64>,
    /// The best evaluation by the `select` rule, so far.
    pub selected: Option<Selected>,
    /// The evaluation whose loss was not finite, in a trial `select` had already chosen an
    /// evaluation of: training stopped there, and the trial's result is the selected one.
    #[serde(default)]
    pub diverged_at: Option<usize>,
    pub steps_run: usize,
    pub converged: Option<Converged>,
    pub param_count: usize,
    pub flops_per_step: u64,
    pub train_seconds: f64,
    pub eval_seconds: f64,
}

impl Outcome {
    /// A trial's outcome before it trains.
    pub fn starting(trial: &Trial) -> Outcome {
        Outcome {
            ending: Ending::Done,
            stop_reason: "steps".into(),
            curves: BTreeMap::new(),
            final_metrics: BTreeMap::new(),
            selected: None,
            diverged_at: None,
            steps_run: 0,
            converged: None,
            param_count: trial.graph.param_count(),
            flops_per_step: trial.graph.flops_per_step(),
            train_seconds: 0.0,
            eval_seconds: 0.0,
        }
    }

    /// Ends the trial for `error`: `interrupted` where only its checkpoint's restoring failed
    /// (it is resumed later), else `failed`.
    pub(crate) fn end_on(&mut self, error: TrainError) {
        match error {
            TrainError::Resume(_) => {
                self.ending = Ending::Interrupted;
                self.stop_reason = error.to_string();
            }
            _ => self.fail(error),
        }
    }

    /// Ends the trial `failed` for `reason`, keeping what it recorded so far.
    pub fn fail(&mut self, reason: impl std::fmt::Display) {
        let reason = reason.to_string();
        self.ending = Ending::Failed(reason.clone());
        self.stop_reason = reason;
    }
}

/// How a training step computes its gradients.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Autograd {
    /// memctl's reverse mode over the step graph (`compile::tape`): fused manual backward
    /// passes, candle's autograd per node for primitives without one. CPU only.
    Tape,
    /// candle's autograd over the whole unrolled run (any device; the reference).
    Candle,
}

impl Autograd {
    /// The tape on the CPU, candle's autograd elsewhere.
    pub fn default_for(device: &Device) -> Autograd {
        if device.is_cpu() { Autograd::Tape } else { Autograd::Candle }
    }
}

/// One training step at a time: forward over the batch's sequences, loss, backward,
/// clipping, optimiser update. Shared by training, the fixed-batch check and `memctl bench`.
pub struct Stepper {
    cell: Cell,
    opt: Box<dyn optim::Optimizer>,
    target: Target,
    autograd: Autograd,
    /// Replay from a CUDA graph (`graph_step`).
    replay: graph_step::Replay,
    /// The evaluations' forward, replayed from CUDA graphs (`graph_eval`). Evaluation reads
    /// the stepper shared.
    eval_replay: std::sync::Mutex<graph_eval::EvalReplay>,
    /// The trial's training settings: its clipping, and a pack compares its trials' update
    /// rules.
    config: crate::train_config::TrainConfig,
    /// The first trial of a pack that updates as one holds the pack's optimiser (`pack_update`).
    pack_update: Option<pack_update::PackUpdate>,
}

impl Stepper {
    pub fn new(trial: &Trial, device: &Device) -> candle_core::Result<Stepper> {
        Stepper::with(trial, device, DType::F32, Autograd::default_for(device))
    }

    /// A stepper with a chosen parameter dtype and gradient method (tests compare them).
    pub fn with(trial: &Trial, device: &Device, dtype: DType, autograd: Autograd) -> candle_core::Result<Stepper> {
        let cfg = &trial.config.train;
        let cell = Cell::new(Arc::clone(&trial.graph), trial.config.seed, device, dtype)?;
        let opt = optim::build(cfg, cell.vars().to_vec())?;
        let target = trial.task.target();
        let replay = graph_step::Replay::for_device(device, autograd);
        let eval_replay = std::sync::Mutex::new(graph_eval::EvalReplay::for_device(device, dtype));
        let (config, pack_update) = (cfg.clone(), None);
        Ok(Stepper { cell, opt, target, autograd, replay, eval_replay, config, pack_update })
    }

    pub fn cell(&self) -> &Cell {
        &self.cell
    }

    /// The outputs at the `scored` steps of `inputs` with the current weights and no autograd
    /// graph: an evaluation's forward (on CUDA replayed from a graph when `eval_graph` is on).
    pub fn evaluation_forward(
        &self,
        inputs: &candle_core::Tensor,
        scored: &[usize],
    ) -> candle_core::Result<candle_core::Tensor> {
        self.eval_replays().forward(&self.cell, inputs, scored)
    }

    /// The loss of `batch` as an evaluation computes it.
    pub fn evaluation_loss(&self, batch: &crate::tasks::Batch) -> candle_core::Result<f64> {
        let outputs = self.evaluation_forward(&self.inputs_of(batch)?, &batch.scored)?;
        loss::loss(self.target, &outputs, &batch.targets)?.to_dtype(DType::F64)?.to_scalar::<f64>()
    }

    /// How evaluations run: eagerly and why, or replayed.
    pub fn eval_replay_status(&self) -> String {
        self.eval_replays().status()
    }

    fn eval_replays(&self) -> std::sync::MutexGuard<'_, graph_eval::EvalReplay> {
        // A panic while evaluating leaves nothing half-written that a later forward reads.
        self.eval_replay.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    #[cfg(test)]
    fn force_eval_replay(&mut self) {
        self.eval_replay = std::sync::Mutex::new(graph_eval::EvalReplay::forced());
    }

    /// The loss on `batch` and its gradient for every parameter (`None`: does not reach the loss).
    pub fn loss_and_grads(
        &self,
        batch: &crate::tasks::Batch,
    ) -> candle_core::Result<(f64, Vec<Option<candle_core::Tensor>>)> {
        let inputs = self.inputs_of(batch)?;
        match self.autograd {
            Autograd::Tape => self.tape_loss_and_grads(batch, &inputs),
            Autograd::Candle => {
                let (logits, weights) = self.cell.run_for_gradients(&inputs, &batch.scored)?;
                let loss = loss::loss(self.target, &logits, &batch.targets)?;
                let value = loss.to_dtype(DType::F64)?.to_scalar::<f64>()?;
                if !value.is_finite() {
                    return Ok((value, vec![None; self.cell.vars().len()]));
                }
                Ok((value, weights.gradients_of(&loss)?))
            }
        }
    }

    /// Float inputs in the parameters' dtype (token ids stay u32).
    fn inputs_of(&self, batch: &crate::tasks::Batch) -> candle_core::Result<candle_core::Tensor> {
        match batch.inputs.dtype().is_float() {
            true => batch.inputs.to_dtype(self.cell.dtype()),
            false => Ok(batch.inputs.clone()),
        }
    }

    /// The tape's loss and gradients, with the batch split into one part per pool thread:
    /// sequences are independent until the loss, so each part runs the whole recurrent
    /// forward and backward on its own thread (kernels serial inside, see
    /// `kernels::cpu::par::serial`), and the parts' losses and gradients are summed. Coarse
    /// parts need no hand-offs between threads during the step.
    fn tape_loss_and_grads(
        &self,
        batch: &crate::tasks::Batch,
        inputs: &candle_core::Tensor,
    ) -> candle_core::Result<(f64, Vec<Option<candle_core::Tensor>>)> {
        use rayon::prelude::*;
        let (steps, sequences) = (batch.scored.len(), inputs.dim(1)?);
        let (cell, target) = (&self.cell, self.target);
        let weights = cell.weights(false);
        let part = |start: usize, len: usize| {
            let (x, y) = (inputs.narrow(1, start, len)?, batch.targets.narrow(1, start, len)?);
            cell.train_grads(&weights, &x, &batch.scored, &mut |s, logits| {
                loss::step_loss_and_grad(target, logits, &y.get(s)?, steps, sequences)
            })
        };
        let parts = rayon::current_num_threads().min(sequences).max(1);
        if parts == 1 {
            return part(0, sequences);
        }
        let per = sequences.div_ceil(parts);
        let results: Vec<candle_core::Result<_>> = (0..sequences.div_ceil(per))
            .into_par_iter()
            .map(|p| crate::kernels::cpu::par::serial(|| part(p * per, per.min(sequences - p * per))))
            .collect();
        let mut total = 0.0;
        let mut grads: Vec<Option<candle_core::Tensor>> = vec![None; self.cell.vars().len()];
        for r in results {
            let (l, g) = r?;
            total += l;
            for (acc, g) in grads.iter_mut().zip(g) {
                *acc = match (acc.take(), g) {
                    (Some(a), Some(g)) => Some((a + g)?),
                    (a, g) => a.or(g),
                };
            }
        }
        Ok((total, grads))
    }

    /// The parameters and the optimiser's state (a checkpoint's content).
    pub fn snapshot(&self) -> (Vec<candle_core::Tensor>, optim::OptimState) {
        (self.cell.weights(false), self.opt.state())
    }

    /// Continues from a snapshot of a stepper of the same trial.
    pub fn restore(&mut self, params: &[candle_core::Tensor], optimizer: optim::OptimState) -> candle_core::Result<()> {
        let vars = self.cell.vars();
        if params.len() != vars.len() {
            candle_core::bail!("the checkpoint has {} parameters, the model {}", params.len(), vars.len());
        }
        for (v, p) in vars.iter().zip(params) {
            if v.dims() != p.dims() {
                candle_core::bail!("a checkpoint parameter of shape {:?} for one of shape {:?}", p.dims(), v.dims());
            }
            v.set(&p.to_dtype(v.dtype())?.to_device(v.device())?)?;
        }
        // The optimiser's buffers are new tensors; a captured graph still points at the old ones.
        let device = vars.first().map_or(Device::Cpu, |v| v.device().clone());
        self.replay = graph_step::Replay::for_device(&device, self.autograd);
        self.opt.restore(optimizer)
    }

    /// Trains on `batch` once; returns the loss before the update.
    pub fn step(&mut self, batch: &crate::tasks::Batch) -> candle_core::Result<f64> {
        if let Some(value) = self.replayed_step(batch)? {
            return Ok(value);
        }
        let (value, grads) = self.loss_and_grads(batch)?;
        self.update(value, grads)
    }

    /// After the cell's parameters became other `Var`s (views of a pack's stacks): the
    /// optimiser updates those, and the CUDA graphs captured on the old ones go.
    fn parameters_moved(&mut self) -> candle_core::Result<()> {
        self.opt.rebind(self.cell.vars())?;
        let device = self.cell.vars().first().map_or(candle_core::Device::Cpu, |v| v.device().clone());
        self.replay = graph_step::Replay::for_device(&device, self.autograd);
        let eval = graph_eval::EvalReplay::for_device(&device, self.cell.dtype());
        *self.eval_replay.get_mut().unwrap_or_else(std::sync::PoisonError::into_inner) = eval;
        Ok(())
    }

    /// Clips `grads` and updates the parameters with them, unless the loss `value` they come
    /// from is not finite (the caller fails the trial); returns `value`.
    fn update(&mut self, value: f64, mut grads: Vec<Option<candle_core::Tensor>>) -> candle_core::Result<f64> {
        if !value.is_finite() {
            return Ok(value);
        }
        let clamp = clip::before_update(&mut grads, self.config.clip_value, self.config.clip_norm, false)?;
        self.opt.step(&grads, clamp)?;
        Ok(value)
    }
}

/// A trial's data stream is seeded separately from its parameters.
pub fn data_seed(seed: u64) -> u64 {
    seed.wrapping_mul(0x9E37_79B9_7F4A_7C15).wrapping_add(0xD1B5_4A32_D192_ED03)
}

/// Trains one trial on `device` (gradients by the device's default method, see
/// [`Autograd::default_for`]). `cancel` is polled between steps and between evaluation batches.
pub fn train(trial: &Trial, device: &Device, observer: &dyn Observer, cancel: &AtomicBool) -> Outcome {
    train_with(trial, device, Autograd::default_for(device), observer, cancel)
}

/// [`train`] with a chosen gradient method: `Autograd::Candle` on the CPU runs exactly the
/// device-generic path a CUDA device runs (tests use it; there is no GPU here).
pub fn train_with(
    trial: &Trial,
    device: &Device,
    autograd: Autograd,
    observer: &dyn Observer,
    cancel: &AtomicBool,
) -> Outcome {
    train_resumable(trial, device, autograd, observer, cancel, &checkpoint::NoCheckpoints)
}

/// [`train_with`] that resumes from and saves checkpoints: it starts where
/// `checkpoints.resume()` left off, and saves its state every `checkpoints.every()` of
/// training time and when it is stopped from outside (`cancel`).
pub fn train_resumable(
    trial: &Trial,
    device: &Device,
    autograd: Autograd,
    observer: &dyn Observer,
    cancel: &AtomicBool,
    checkpoints: &dyn checkpoint::Checkpoints,
) -> Outcome {
    let mut out = Outcome::starting(trial);
    let run = Run { trial, device, autograd, observer, cancel, checkpoints };
    // A panic (a bug) fails the trial as an error does, keeping the steps and curves so far.
    if let Err(error) = failing_on_panic("training", || train_alone(run, &mut out)) {
        out.end_on(error);
    }
    out
}

/// `f`'s result, or its error or a panic (a bug, while `doing`): the reason a trial fails.
pub(crate) fn failing_on_panic<T>(
    doing: &'static str,
    f: impl FnOnce() -> Result<T, TrainError>,
) -> Result<T, TrainError> {
    match std::panic::catch_unwind(AssertUnwindSafe(f)) {
        Ok(result) => result,
        Err(panic) => Err(TrainError::Panic { doing, message: panic_message(panic.as_ref()) }),
    }
}

/// A panic's message, as `panic!` gave it.
pub fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".into())
}

#[derive(Debug, thiserror::Error)]
pub(crate) enum TrainError {
    #[error("loss is {value} at step {step}; {advice}")]
    NonFinite { step: usize, value: f64, advice: &'static str },
    /// The training loss was finite, the parameters after the step's update are not (or
    /// overflow on held-out examples): a diverged trial, whose test metrics would be noise.
    #[error(
        "validation loss is {value} at step {step}, after that step's update (its training loss was finite); \
         {advice}"
    )]
    NonFiniteValidation { step: usize, value: f64, advice: &'static str },
    #[error("{0}")]
    Candle(#[from] candle_core::Error),
    /// Its checkpoint does not fit on the device (out of memory): the trial ends interrupted,
    /// and the checkpoint, untouched, is where the next sweep resumes it.
    #[error("its checkpoint could not be restored on the device ({0}); the next sweep resumes from it")]
    Resume(candle_core::Error),
    /// A bug: the trial fails, keeping its steps and curves so far.
    #[error("internal error (panic) while {doing}: {message}")]
    Panic { doing: &'static str, message: String },
}

/// What to try when the loss is not finite. Step 1's loss is the initial parameters' (the
/// optimiser has not moved them yet), so no learning rate or clipping can be the cause there.
fn non_finite_advice(step: usize, cfg: &crate::train_config::TrainConfig) -> &'static str {
    if step == 1 {
        "that is the loss of the initial parameters, before any update: the forward pass overflows \
         (check the model's sizes and the task's inputs); the learning rate plays no part yet"
    } else if cfg.clip_norm.is_some() || cfg.clip_value.is_some() {
        "try a smaller learning rate or a tighter gradient clip"
    } else {
        "try a smaller learning rate or gradient clipping (`clip_norm = 1` in `train`)"
    }
}

/// Trains one trial alone, filling `out` as it goes (so that a failure keeps the curves so far).
fn train_alone(run: Run<'_>, out: &mut Outcome) -> Result<(), TrainError> {
    let mut trial = TrialRun::start(run, out)?;
    let mut mark = Instant::now();
    while let Some(batch) = trial.next_batch(out)? {
        let value = trial.stepper.step(&batch)?;
        trial.charge(mark.elapsed());
        let go_on = trial.after_step(value, out)?;
        mark = Instant::now();
        if !go_on {
            break;
        }
    }
    trial.finish(out)
}

fn push(out: &mut Outcome, curve: &str, step: usize, value: f64) {
    out.curves.entry(curve.to_string()).or_default().push((step as u64, value));
}

/// Trains on one fixed training batch for `steps` steps and returns the loss before each
/// step: an overfitting check that a model can learn at all (fast, and assertable).
pub fn fixed_batch_losses(trial: &Trial, steps: usize, device: &Device) -> candle_core::Result<Vec<f64>> {
    let mut stepper = Stepper::new(trial, device)?;
    let mut data = trial.task.data(data_seed(trial.config.seed), device)?;
    let batch = data.train_batch(trial.config.train.batch)?;
    (0..steps).map(|_| stepper.step(&batch)).collect()
}

/// Settings for unit tests: Adam 1e-3, batch 8, 10 steps.
#[cfg(test)]
pub fn test_config() -> crate::train_config::TrainConfig {
    crate::train_config::TrainConfig::plain(crate::train_config::OptimizerKind::Adam, 1e-3)
}
