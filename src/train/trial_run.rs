//! One trial's training loop, a step at a time, so that a trial trains alone ([`super::train`])
//! or beside others in a pack ([`super::pack`]) with the same bookkeeping: batches, curves,
//! validation, `select`, `stop_when`, `max_time`, progress reports and checkpoints.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use candle_core::{DType, Device};

use super::checkpoint::{self, Checkpoints};
use super::{
    Autograd, Converged, Ending, Observer, Outcome, REPORT_EVERY, Stepper, TrainError, data_seed, evaluate,
    evaluate_tests, evaluation_batch, non_finite_advice, push, select_evaluation,
};
use crate::check::Trial;
use crate::tasks::{Batch, Split, TaskData};

/// One training run's inputs, as [`super::train_resumable`] takes them.
#[derive(Clone, Copy)]
pub struct Run<'a> {
    pub trial: &'a Trial,
    pub device: &'a Device,
    pub autograd: Autograd,
    pub observer: &'a dyn Observer,
    pub cancel: &'a AtomicBool,
    pub checkpoints: &'a dyn Checkpoints,
}

/// A trial in training: its stepper, its data stream and where it stands. Its [`Outcome`] is
/// kept by the caller, so that a failure keeps the curves so far.
pub struct TrialRun<'a> {
    run: Run<'a>,
    pub(super) stepper: Stepper,
    data: Box<dyn TaskData>,
    eval_batch: usize,
    /// The training loss summed since the last evaluation, and the steps it sums.
    interval_loss: (f64, usize),
    /// Training seconds over every run of this trial (resumed from a checkpoint) so far.
    train_seconds: f64,
    /// Evaluation seconds, likewise.
    eval_seconds: f64,
    last_checkpoint: Instant,
    reported: bool,
    last_progress: Instant,
}

impl<'a> TrialRun<'a> {
    /// Builds the trial's stepper and data, and resumes from its checkpoint if it has one.
    pub fn start(run: Run<'a>, out: &mut Outcome) -> Result<TrialRun<'a>, TrainError> {
        let (trial, device) = (run.trial, run.device);
        let cfg = &trial.config.train;
        let mut stepper = Stepper::with(trial, device, DType::F32, run.autograd)?;
        let mut data = trial.task.data(data_seed(trial.config.seed), device)?;
        let mut this_run = (0.0, 0.0);
        let mut interval_loss = (0.0, 0usize);
        if let Some(state) = run.checkpoints.resume(device) {
            stepper.restore(&state.params, state.optimizer)?;
            // The data stream restarts from the seed: draw the batches the steps so far used.
            for _ in 0..state.step {
                data.train_batch(cfg.batch)?;
            }
            out.steps_run = state.step;
            out.curves = state.curves;
            out.selected = state.selected;
            interval_loss = state.interval_loss;
            this_run = (state.train_seconds, state.eval_seconds);
        }
        Ok(TrialRun {
            run,
            stepper,
            data,
            eval_batch: evaluation_batch(cfg.batch, device),
            interval_loss,
            train_seconds: this_run.0,
            eval_seconds: this_run.1,
            last_checkpoint: Instant::now(),
            reported: false,
            last_progress: Instant::now(),
        })
    }

    /// The next step's batch; `None` when the trial has run all its steps, or is stopped
    /// from outside (then it ends `interrupted`, with a checkpoint).
    pub fn next_batch(&mut self, out: &mut Outcome) -> Result<Option<Batch>, TrainError> {
        let cfg = &self.run.trial.config.train;
        if out.steps_run >= cfg.steps {
            return Ok(None);
        }
        if self.run.cancel.load(Ordering::Relaxed) {
            out.ending = Ending::Interrupted;
            out.stop_reason = "interrupted".into();
            self.save(out);
            return Ok(None);
        }
        Ok(Some(self.data.train_batch(cfg.batch)?))
    }

    /// Counts `time` of training towards this trial (its `train_seconds` and `max_time`).
    pub fn charge(&mut self, time: Duration) {
        self.train_seconds += time.as_secs_f64();
    }

    /// Records the step just taken (its loss `value`), and evaluates, checks `stop_when` and
    /// `max_time`, reports and checkpoints as due. `false`: the trial stops here.
    pub fn after_step(&mut self, value: f64, out: &mut Outcome) -> Result<bool, TrainError> {
        let Run { trial, observer, checkpoints, .. } = self.run;
        let cfg = &trial.config.train;
        let step = out.steps_run + 1;
        if !value.is_finite() {
            return Err(TrainError::NonFinite { step, value, advice: non_finite_advice(step, cfg) });
        }
        out.steps_run = step;
        self.interval_loss.0 += value;
        self.interval_loss.1 += 1;
        observer.on_step(step, cfg.steps, value);
        // A first report as soon as training runs (a process that dies before it has not
        // trained at all; see `sweep::probe`), then at every validation and every `REPORT_EVERY`.
        if !self.reported || self.last_progress.elapsed() >= REPORT_EVERY {
            (out.train_seconds, out.eval_seconds) = (self.train_seconds, self.eval_seconds);
            observer.on_progress(out);
            (self.reported, self.last_progress) = (true, Instant::now());
        }
        let out_of_time = cfg.max_time.is_some_and(|t| self.train_seconds >= t);
        if step.is_multiple_of(cfg.eval_every) || step == cfg.steps || out_of_time {
            push(out, "train_loss", step, self.interval_loss.0 / self.interval_loss.1.max(1) as f64);
            self.interval_loss = (0.0, 0);
            let t0 = Instant::now();
            let metrics = evaluate(
                &self.stepper,
                self.data.as_ref(),
                Split::Validation,
                self.eval_batch,
                cfg.eval_size,
                &*trial.task,
            )?;
            for (name, v) in &metrics {
                push(out, &format!("val_{name}"), step, *v);
            }
            if let Some(select) = &cfg.select {
                select_evaluation(
                    select,
                    step,
                    &metrics,
                    &self.stepper,
                    self.data.as_ref(),
                    self.eval_batch,
                    trial,
                    out,
                )?;
            }
            self.eval_seconds += t0.elapsed().as_secs_f64();
            observer.on_eval(step, &metrics);
            (out.train_seconds, out.eval_seconds) = (self.train_seconds, self.eval_seconds);
            observer.on_progress(out);
            self.last_progress = Instant::now();
            if let Some(stop) = &cfg.stop_when {
                let met = metrics
                    .iter()
                    .find(|(n, _)| *n == stop.metric)
                    .is_some_and(|(_, v)| stop.op.holds(*v, stop.threshold));
                if met && out.converged.is_none() {
                    let epoch = self.data.train_size().map(|n| (step * cfg.batch) as f64 / n as f64);
                    out.converged = Some(Converged { step, epoch });
                    out.stop_reason = "stop_when".into();
                    return Ok(false);
                }
            }
            if out_of_time {
                out.stop_reason = "max_time".into();
                return Ok(false);
            }
            if let Some(reason) = observer.stop_here(step, out) {
                out.ending = Ending::Pruned;
                out.stop_reason = reason;
                return Ok(false);
            }
        }
        // After the step's evaluation, so that a resumed run goes on from a whole step.
        if checkpoints.every().is_some_and(|every| self.last_checkpoint.elapsed() >= every) {
            self.save(out);
            self.last_checkpoint = Instant::now();
        }
        Ok(true)
    }

    /// Ends the run: the test evaluation of a trial that ended `Done`, and its timings.
    pub fn finish(mut self, out: &mut Outcome) -> Result<(), TrainError> {
        let trial = self.run.trial;
        out.train_seconds = self.train_seconds;
        if out.ending == Ending::Done {
            let t0 = Instant::now();
            out.final_metrics = evaluate_tests(&self.stepper, self.data.as_ref(), self.eval_batch, trial, None)?;
            self.eval_seconds += t0.elapsed().as_secs_f64();
            if let Some(selected) = &out.selected {
                out.final_metrics.insert("selected_step".into(), selected.step as f64);
                for (k, v) in &selected.metrics {
                    out.final_metrics.insert(format!("selected_{k}"), *v);
                }
            }
        }
        if matches!(out.ending, Ending::Done | Ending::Pruned) {
            let last_val: Vec<(String, f64)> = out
                .curves
                .iter()
                .filter(|(k, _)| k.starts_with("val_"))
                .filter_map(|(k, c)| c.last().map(|(_, v)| (k.clone(), *v)))
                .collect();
            out.final_metrics.extend(last_val);
        }
        out.eval_seconds = self.eval_seconds;
        Ok(())
    }

    /// Saves a checkpoint of where the trial stands.
    fn save(&self, out: &Outcome) {
        let (params, optimizer) = self.stepper.snapshot();
        self.run.checkpoints.save(&checkpoint::TrainState {
            step: out.steps_run,
            curves: out.curves.clone(),
            interval_loss: self.interval_loss,
            selected: out.selected.clone(),
            train_seconds: self.train_seconds,
            eval_seconds: self.eval_seconds,
            params,
            optimizer,
        });
    }
}
