//! One trial's training loop, a step at a time, so that a trial trains alone ([`super::train`])
//! or beside others in a pack ([`super::pack`]) with the same bookkeeping: batches, curves,
//! validation, `select`, `stop_when`, `max_time`, progress reports and checkpoints.
//!
//! A stop request (`cancel`: Ctrl-C, SIGTERM) is honoured between steps and between an
//! evaluation's batches. Either way the trial checkpoints where it stands ([`Stage`]) and a
//! resumed run ends as the run that was never stopped ends.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use candle_core::{DType, Device};

use super::checkpoint::{self, Checkpoints, Stage};
use super::evaluation::{Evaluations, evaluation_batch};
use super::{
    Autograd, Converged, Ending, Observer, Outcome, REPORT_EVERY, Stepper, TrainError, data_seed, non_finite_advice,
    push,
};
use crate::check::Trial;
use crate::tasks::{Batch, TaskData};

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
    /// Training is over: the rest of the step it resumed in ended the trial.
    ended: bool,
}

impl<'a> TrialRun<'a> {
    /// Builds the trial's stepper and data, and resumes from its checkpoint if it has one,
    /// doing first what was left of the step it stopped in (before any training time counts).
    pub fn start(run: Run<'a>, out: &mut Outcome) -> Result<TrialRun<'a>, TrainError> {
        let (trial, device) = (run.trial, run.device);
        let cfg = &trial.config.train;
        let mut stepper = Stepper::with(trial, device, DType::F32, run.autograd)?;
        let mut data = trial.task.data(data_seed(trial.config.seed), device)?;
        let mut this_run = (0.0, 0.0);
        let mut interval_loss = (0.0, 0usize);
        let mut resumed_in = Stage::Stepped;
        if let Some(state) = run.checkpoints.resume(device).map_err(TrainError::Resume)? {
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
            resumed_in = state.stage;
        }
        let mut trial = TrialRun {
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
            ended: false,
        };
        trial.ended = !trial.finish_resumed_step(resumed_in, out)?;
        Ok(trial)
    }

    /// What the step that a resumed run stopped in had left to do, by where it stopped: its
    /// evaluation, or (training over) the test evaluation that [`TrialRun::finish`] runs.
    /// `false`: the trial trains no further.
    fn finish_resumed_step(&mut self, stage: Stage, out: &mut Outcome) -> Result<bool, TrainError> {
        match stage {
            Stage::Stepped => Ok(true),
            Stage::Evaluating => self.evaluate_after_step(out),
            Stage::Testing { stop_reason, converged } => {
                (out.stop_reason, out.converged) = (stop_reason, converged);
                Ok(false)
            }
        }
    }

    /// The next step's batch; `None` when training is over (all steps run, or the step it
    /// resumed in ended it), or the trial is stopped from outside (then it ends
    /// `interrupted`, with a checkpoint).
    pub fn next_batch(&mut self, out: &mut Outcome) -> Result<Option<Batch>, TrainError> {
        let cfg = &self.run.trial.config.train;
        if self.ended || out.steps_run >= cfg.steps {
            return Ok(None);
        }
        if self.run.cancel.load(Ordering::Relaxed) {
            self.stop_on_request(out, Stage::Stepped);
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
            if diverged_after_selection(out, "training", value, step) {
                return Ok(false);
            }
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
        if (step.is_multiple_of(cfg.eval_every) || step == cfg.steps || self.out_of_time())
            && !self.evaluate_after_step(out)?
        {
            return Ok(false);
        }
        // After the step's evaluation, so that a resumed run goes on from a whole step.
        if checkpoints.every().is_some_and(|every| self.last_checkpoint.elapsed() >= every) {
            self.save(out, Stage::Stepped);
            self.last_checkpoint = Instant::now();
        }
        Ok(true)
    }

    /// The evaluation due after the step just taken (`out.steps_run`), recorded, and what it
    /// decides: `false` when the trial stops here (`stop_when`, `max_time`, its observer, or a
    /// stop request during the evaluation, which checkpoints to evaluate again on resuming).
    fn evaluate_after_step(&mut self, out: &mut Outcome) -> Result<bool, TrainError> {
        let Run { trial, observer, .. } = self.run;
        let cfg = &trial.config.train;
        let step = out.steps_run;
        let t0 = Instant::now();
        let evaluation = self.evaluations().after_step(step, out);
        self.eval_seconds += t0.elapsed().as_secs_f64();
        let evaluation = match evaluation {
            Ok(Some(evaluation)) => evaluation,
            // Nothing of the step's evaluation is recorded: a resumed run evaluates again.
            Ok(None) => {
                self.stop_on_request(out, Stage::Evaluating);
                return Ok(false);
            }
            Err(e) => {
                self.close_loss_interval(step, out);
                return Err(e.into());
            }
        };
        self.close_loss_interval(step, out);
        evaluation.record(step, trial, out);
        observer.on_eval(step, &evaluation.metrics);
        if let Some(&(_, value)) = evaluation.metrics.iter().find(|(n, v)| *n == "loss" && !v.is_finite()) {
            if diverged_after_selection(out, "validation", value, step) {
                return Ok(false);
            }
            // Past step 1 the advice is about the updates, which made these parameters.
            let advice = non_finite_advice(step + 1, cfg);
            return Err(TrainError::NonFiniteValidation { step, value, advice });
        }
        (out.train_seconds, out.eval_seconds) = (self.train_seconds, self.eval_seconds);
        observer.on_progress(out);
        self.last_progress = Instant::now();
        if let Some(stop) = &cfg.stop_when {
            let met = evaluation
                .metrics
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
        if self.out_of_time() {
            out.stop_reason = "max_time".into();
            return Ok(false);
        }
        if let Some(reason) = observer.stop_here(step, out) {
            out.ending = Ending::Pruned;
            out.stop_reason = reason;
            return Ok(false);
        }
        Ok(true)
    }

    /// Whether the trial has used up its `max_time` of training.
    fn out_of_time(&self) -> bool {
        self.run.trial.config.train.max_time.is_some_and(|t| self.train_seconds >= t)
    }

    /// The mean training loss since the last evaluation, as a `train_loss` point at `step`.
    fn close_loss_interval(&mut self, step: usize, out: &mut Outcome) {
        push(out, "train_loss", step, self.interval_loss.0 / self.interval_loss.1.max(1) as f64);
        self.interval_loss = (0.0, 0);
    }

    /// The trial's evaluations with its weights now, stopped by a stop request.
    fn evaluations(&self) -> Evaluations<'_> {
        let (trial, stop) = (self.run.trial, self.run.cancel);
        Evaluations { stepper: &self.stepper, data: self.data.as_ref(), batch: self.eval_batch, trial, stop }
    }

    /// Ends the trial `interrupted` on a stop request, with a checkpoint taken at `stage`.
    fn stop_on_request(&self, out: &mut Outcome, stage: Stage) {
        out.ending = Ending::Interrupted;
        out.stop_reason = "interrupted".into();
        self.save(out, stage);
    }

    /// Ends the run: the test evaluation of a trial that ended `Done`, and its timings.
    pub fn finish(mut self, out: &mut Outcome) -> Result<(), TrainError> {
        out.train_seconds = self.train_seconds;
        // A diverged trial's weights are not tested: its result is its selected evaluation.
        if out.ending == Ending::Done && out.diverged_at.is_none() {
            let testing = || Stage::Testing { stop_reason: out.stop_reason.clone(), converged: out.converged.clone() };
            // `keep_checkpoint` keeps the trained weights, whenever the last periodic checkpoint was.
            if self.run.trial.config.train.keep_checkpoint {
                self.save(out, testing());
            }
            let t0 = Instant::now();
            let tests = self.evaluations().tests(None)?;
            self.eval_seconds += t0.elapsed().as_secs_f64();
            match tests {
                Some(metrics) => out.final_metrics = metrics,
                None => {
                    let ended = testing();
                    self.stop_on_request(out, ended);
                }
            }
        }
        if let Some(selected) = out.selected.as_ref().filter(|_| out.ending == Ending::Done) {
            out.final_metrics.insert("selected_step".into(), selected.step as f64);
            for (k, v) in &selected.metrics {
                out.final_metrics.insert(format!("selected_{k}"), *v);
            }
        }
        if matches!(out.ending, Ending::Done | Ending::Pruned) && out.diverged_at.is_none() {
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

    /// Saves a checkpoint of where the trial stands, taken at `stage` of its step.
    fn save(&self, out: &Outcome, stage: Stage) {
        let (params, optimizer) = self.stepper.snapshot();
        self.run.checkpoints.save(&checkpoint::TrainState {
            step: out.steps_run,
            curves: out.curves.clone(),
            interval_loss: self.interval_loss,
            selected: out.selected.clone(),
            train_seconds: self.train_seconds,
            eval_seconds: self.eval_seconds,
            stage,
            params,
            optimizer,
        });
    }
}

/// With `select`, a loss that is not finite ends the trial with the evaluation chosen before
/// it, as a stop rule would (`done`, untested at its diverged weights); `false` without a
/// selection, where it fails.
fn diverged_after_selection(out: &mut Outcome, which: &str, value: f64, step: usize) -> bool {
    let Some(chosen) = out.selected.as_ref().map(|s| s.step) else { return false };
    out.stop_reason =
        format!("{which} loss is {value} at step {step}; the result is step {chosen}'s, which `select` chose");
    out.diverged_at = Some(step);
    true
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

    use candle_core::Device;

    use super::super::checkpoint::{Checkpoints, NoCheckpoints, Stage, TrainState};
    use super::super::pack::{PackMember, train_pack};
    use super::super::{Autograd, Ending, Observer, Outcome, TrainError, train_resumable};
    use super::{Run, TrialRun};
    use std::collections::BTreeMap;

    /// 40 steps evaluated every 10, with `train` settings `extra` (`select`, `stop_when`).
    fn spec(extra: &str) -> String {
        format!(
            r#"
task tiny = assocRetrieval(pairs = 2, train = 256, validation = 96, test = 96)
model rnn(d = 8) {{
  state h = zeros(d)
  step token {{ h = tanh(linear(embed(token, d), d) + linear(h, d))  out linear(h, output_size) }}
}}
experiment e {{
  task tiny
  model rnn
  train {{ optimizer = adam(lr = 1e-2), batch = 8, steps = 40, eval_every = 10{extra} }}
}}
"#
        )
    }

    /// Checkpoints kept in memory, as bytes (so that the stage goes through the header).
    #[derive(Default)]
    struct InMemory(Mutex<Option<Vec<u8>>>);

    impl InMemory {
        fn stage(&self) -> Stage {
            let bytes = self.0.lock().unwrap().clone().expect("a checkpoint");
            TrainState::from_bytes(&bytes, &Device::Cpu).unwrap().stage
        }
    }

    impl Checkpoints for InMemory {
        fn resume(&self, device: &Device) -> candle_core::Result<Option<TrainState>> {
            Ok(self.0.lock().unwrap().as_ref().map(|b| TrainState::from_bytes(b, device).unwrap()))
        }
        fn every(&self) -> Option<std::time::Duration> {
            None
        }
        fn save(&self, state: &TrainState) {
            *self.0.lock().unwrap() = Some(state.to_bytes().unwrap());
        }
    }

    /// A checkpoint the device cannot take (out of memory on a busy GPU).
    struct DeviceFull(InMemory);

    impl Checkpoints for DeviceFull {
        fn resume(&self, _: &Device) -> candle_core::Result<Option<TrainState>> {
            Err(candle_core::Error::Msg("out of memory".into()))
        }
        fn every(&self) -> Option<std::time::Duration> {
            Some(std::time::Duration::ZERO)
        }
        fn save(&self, state: &TrainState) {
            self.0.save(state)
        }
    }

    /// A checkpoint that cannot be restored ends the trial interrupted at once: it neither
    /// trains from step 0 nor saves over the checkpoint, which the next sweep resumes from.
    #[test]
    fn a_checkpoint_the_device_cannot_take_interrupts_the_trial_and_is_kept() {
        let checkpoints = DeviceFull(InMemory::default());
        let (out, _) = train(&spec(""), &checkpoints, None);
        assert_eq!(out.ending, Ending::Interrupted, "{}", out.stop_reason);
        assert!(out.stop_reason.contains("could not be restored") && out.stop_reason.contains("out of memory"));
        assert_eq!(out.steps_run, 0);
        assert!(checkpoints.0.0.lock().unwrap().is_none(), "nothing saved over the checkpoint");
    }

    /// An update that overflows the parameters shows first in the evaluation after it (the
    /// step's training loss was taken before it): the trial fails there, curves kept, rather
    /// than end `done` with noise for test metrics.
    #[test]
    fn a_validation_loss_that_is_not_finite_fails_the_trial() {
        let text = spec("").replace("adam(lr = 1e-2)", "sgd(lr = 1e300)").replace("steps = 40", "steps = 1");
        let (out, _) = train(&text, &NoCheckpoints, None);
        assert!(matches!(out.ending, Ending::Failed(_)), "{:?}: {}", out.ending, out.stop_reason);
        assert!(out.stop_reason.starts_with("validation loss is NaN at step 1"), "{}", out.stop_reason);
        assert!(out.curves["train_loss"][0].1.is_finite() && out.curves["val_loss"][0].1.is_nan());
        assert!(!out.final_metrics.contains_key("accuracy"), "no test evaluation");
    }

    /// `keep_checkpoint` keeps the trained weights: a checkpoint at the last step is saved
    /// before the test evaluation, where no periodic one was due; without it none is.
    #[test]
    fn keep_checkpoint_saves_the_trained_weights() {
        let checkpoints = InMemory::default();
        let (out, _) = train(&spec(", keep_checkpoint = true"), &checkpoints, None);
        assert_eq!(out.ending, Ending::Done, "{}", out.stop_reason);
        let bytes = checkpoints.0.lock().unwrap().clone().expect("a checkpoint");
        assert_eq!(TrainState::from_bytes(&bytes, &Device::Cpu).unwrap().step, 40);
        assert!(matches!(checkpoints.stage(), Stage::Testing { .. }));
        let none = InMemory::default();
        train(&spec(""), &none, None);
        assert!(none.0.lock().unwrap().is_none());
    }

    /// With `select`, a validation loss that is not finite stops the trial, which keeps the
    /// evaluation chosen before it (an evaluation with that loss is never chosen), untested
    /// at its diverged weights.
    #[test]
    fn a_diverged_trial_with_select_keeps_its_selected_evaluation() {
        // The first update leaves the loss finite, the second overflows it.
        let text = spec(", select = best(val_accuracy)")
            .replace("adam(lr = 1e-2)", "sgd(lr = 3e36)")
            .replace("steps = 40, eval_every = 10", "steps = 4, eval_every = 1");
        let (out, _) = train(&text, &NoCheckpoints, None);
        assert_eq!(out.ending, Ending::Done, "{}", out.stop_reason);
        assert_eq!((out.diverged_at, out.steps_run), (Some(2), 2), "{}", out.stop_reason);
        assert!(out.stop_reason.contains("at step 2; the result is step 1's"), "{}", out.stop_reason);
        assert_eq!(out.final_metrics.get("selected_step"), Some(&1.0));
        assert!(out.final_metrics["selected_accuracy"].is_finite());
        let plain: Vec<&String> = out.final_metrics.keys().filter(|k| !k.starts_with("selected_")).collect();
        assert!(plain.is_empty(), "no test of the diverged weights, no last validation: {plain:?}");
    }

    /// A training loss that is not finite, between evaluations, ends a trial with a selection
    /// as a diverged validation loss does (`done`, its selected metrics only); one without a
    /// selection fails.
    #[test]
    fn a_training_loss_that_diverges_after_a_selection_keeps_it() {
        let program = crate::check::checked_text(&spec(", select = best(val_accuracy)"));
        let trial = &program.experiments[0].trials[0];
        let stop = AtomicBool::new(false);
        let run = Run {
            trial,
            device: &Device::Cpu,
            autograd: Autograd::Tape,
            observer: &crate::train::Silent,
            cancel: &stop,
            checkpoints: &NoCheckpoints,
        };
        let mut out = Outcome::starting(trial);
        let mut trial_run = TrialRun::start(run, &mut out).unwrap();
        assert!(matches!(trial_run.after_step(f64::NAN, &mut out), Err(TrainError::NonFinite { step: 1, .. })));
        let metrics = BTreeMap::from([("accuracy".to_string(), 0.75)]);
        out.selected = Some(crate::train::evaluation::Selected { step: 10, value: 0.5, metrics });
        out.steps_run = 12;
        assert!(!trial_run.after_step(f64::INFINITY, &mut out).unwrap(), "the trial stops");
        assert_eq!(out.stop_reason, "training loss is inf at step 13; the result is step 10's, which `select` chose");
        trial_run.finish(&mut out).unwrap();
        assert_eq!((out.ending, out.diverged_at), (Ending::Done, Some(13)));
        let metrics: Vec<(&str, f64)> = out.final_metrics.iter().map(|(k, v)| (k.as_str(), *v)).collect();
        assert_eq!(metrics, [("selected_accuracy", 0.75), ("selected_step", 10.0)]);
    }

    /// Where a stop request comes in: after a step (before its evaluation), or after the
    /// evaluation that follows it (before the next step, or the final test evaluation).
    #[derive(Clone, Copy)]
    enum Request {
        AfterStep(usize),
        AfterValidation(usize),
    }

    /// Sets the stop request at `at`, and counts the evaluations after steps.
    struct Requests<'a> {
        stop: &'a AtomicBool,
        at: Option<Request>,
        evaluations: AtomicUsize,
    }

    impl Observer for Requests<'_> {
        fn on_step(&self, step: usize, _: usize, _: f64) {
            if matches!(self.at, Some(Request::AfterStep(s)) if s == step) {
                self.stop.store(true, Ordering::Relaxed);
            }
        }
        fn on_eval(&self, step: usize, _: &[(&str, f64)]) {
            self.evaluations.fetch_add(1, Ordering::Relaxed);
            if matches!(self.at, Some(Request::AfterValidation(s)) if s == step) {
                self.stop.store(true, Ordering::Relaxed);
            }
        }
    }

    /// The run's outcome and how many evaluations after steps it ran.
    fn train(text: &str, checkpoints: &dyn Checkpoints, at: Option<Request>) -> (Outcome, usize) {
        let program = crate::check::checked_text(text);
        let trial = &program.experiments[0].trials[0];
        let stop = AtomicBool::new(false);
        let observer = Requests { stop: &stop, at, evaluations: AtomicUsize::new(0) };
        let outcome = train_resumable(trial, &Device::Cpu, Autograd::Tape, &observer, &stop, checkpoints);
        (outcome, observer.evaluations.into_inner())
    }

    /// What a run records, timings aside.
    fn recorded(o: &Outcome) -> impl PartialEq + std::fmt::Debug {
        let Outcome { ending, stop_reason, curves, final_metrics, selected, steps_run, converged, .. } = o.clone();
        (ending, stop_reason, curves, final_metrics, selected, steps_run, converged)
    }

    /// With `train` settings `extra` and a stop request at `request`, the trial ends
    /// interrupted after `steps` steps, and its resumed run records what the run never stopped
    /// records: the checkpoint's stage, the run never stopped, and the evaluations after steps
    /// that the resumed run ran.
    fn stopped_and_resumed(extra: &str, request: Request, steps: usize) -> (Stage, Outcome, usize) {
        let text = spec(extra);
        let (never_stopped, _) = train(&text, &NoCheckpoints, None);
        assert_eq!(never_stopped.ending, Ending::Done);
        let checkpoints = InMemory::default();
        let (stopped, _) = train(&text, &checkpoints, Some(request));
        assert_eq!((&stopped.ending, stopped.stop_reason.as_str()), (&Ending::Interrupted, "interrupted"));
        assert_eq!(stopped.steps_run, steps);
        assert!(stopped.final_metrics.is_empty(), "{:?}", stopped.final_metrics);
        let stage = checkpoints.stage();
        let (resumed, evaluations) = train(&text, &checkpoints, None);
        assert_eq!(recorded(&resumed), recorded(&never_stopped));
        (stage, never_stopped, evaluations)
    }

    #[test]
    fn a_trial_stopped_in_a_validation_resumes_with_that_validation() {
        let (stage, _, evaluations) = stopped_and_resumed(", select = best(val_accuracy)", Request::AfterStep(20), 20);
        assert_eq!(stage, Stage::Evaluating);
        assert_eq!(evaluations, 3, "steps 20, 30 and 40");
    }

    #[test]
    fn a_trial_stopped_in_its_final_test_evaluation_resumes_with_that_alone() {
        let (stage, _, evaluations) =
            stopped_and_resumed(", select = best(val_accuracy)", Request::AfterValidation(40), 40);
        assert_eq!(stage, Stage::Testing { stop_reason: "steps".into(), converged: None });
        assert_eq!(evaluations, 0);
    }

    #[test]
    fn a_trial_that_met_stop_when_and_was_stopped_in_its_test_evaluation_does_not_train_on() {
        let (stage, never_stopped, evaluations) =
            stopped_and_resumed(", stop_when = loss < 1000", Request::AfterValidation(10), 10);
        assert_eq!(evaluations, 0);
        assert_eq!(never_stopped.converged.as_ref().map(|c| c.step), Some(10));
        assert_eq!(stage, Stage::Testing { stop_reason: "stop_when".into(), converged: never_stopped.converged });
    }

    /// The outcomes of the two seeds of `text` trained as one pack, with a stop request after
    /// step `stop_after` (seen by both), each with its checkpoints.
    fn pack(text: &str, checkpoints: [&dyn Checkpoints; 2], stop_after: Option<usize>) -> Vec<Outcome> {
        let program = crate::check::checked_text(text);
        let trials = &program.experiments[0].trials;
        let stop = AtomicBool::new(false);
        let requests = |at| Requests { stop: &stop, at, evaluations: AtomicUsize::new(0) };
        let observers = [requests(stop_after.map(Request::AfterStep)), requests(None)];
        let members: Vec<PackMember<'_>> = (0..2)
            .map(|i| PackMember { trial: &trials[i], observer: &observers[i], checkpoints: checkpoints[i] })
            .collect();
        let mut outcomes = vec![None, None];
        train_pack(&members, &Device::Cpu, &stop, &mut |i, outcome| outcomes[i] = Some(outcome));
        outcomes.into_iter().map(|o| o.expect("each trial ends")).collect()
    }

    #[test]
    fn a_pack_stopped_in_its_trials_validations_resumes_with_them() {
        let text =
            spec(", select = best(val_accuracy)").replace("  model rnn\n", "  model rnn\n  sweep { seed in 1..2 }\n");
        let never_stopped = pack(&text, [&NoCheckpoints, &NoCheckpoints], None);
        let checkpoints = [InMemory::default(), InMemory::default()];
        let stopped = pack(&text, [&checkpoints[0], &checkpoints[1]], Some(30));
        for (i, (outcome, saved)) in stopped.iter().zip(&checkpoints).enumerate() {
            assert_eq!((&outcome.ending, outcome.steps_run), (&Ending::Interrupted, 30), "trial {i}");
            assert_eq!(saved.stage(), Stage::Evaluating, "trial {i}");
        }
        let resumed = pack(&text, [&checkpoints[0], &checkpoints[1]], None);
        for i in 0..2 {
            assert_eq!(recorded(&resumed[i]), recorded(&never_stopped[i]), "trial {i}");
        }
    }
}
