//! Training through the library API.

use std::sync::atomic::AtomicBool;

use candle_core::Device;
use memctl::train::{self, Autograd, Ending, Silent};

use crate::support::{tiny_spec, trials};

fn train_on_cpu(trial: &memctl::check::Trial) -> train::Outcome {
    train::train(trial, &Device::Cpu, &Silent, &AtomicBool::new(false))
}

/// The tiny spec's first trial with `from` replaced by `to` in its text, trained.
fn train_tiny_with(from: &str, to: &str) -> train::Outcome {
    let spec = tiny_spec().replace(from, to);
    assert_ne!(spec, tiny_spec(), "`{from}` is in the tiny spec");
    train_on_cpu(&trials("tiny.mem", &spec)[0])
}

#[test]
fn stm_and_lstm_overfit_a_fixed_batch() {
    for trial in trials("tiny.mem", &tiny_spec()).iter().filter(|t| t.config.seed <= 1) {
        let losses = train::fixed_batch_losses(trial, 30, &Device::Cpu).unwrap();
        let (first, last) = (losses[0], losses[losses.len() - 1]);
        assert!(last < 0.5 * first, "{}: loss {first:.3} → {last:.3} did not halve", trial.config.model);
    }
}

#[test]
fn a_trial_records_curves_and_final_metrics() {
    let trial = &trials("tiny.mem", &tiny_spec())[0];
    let out = train_on_cpu(trial);
    assert_eq!(out.ending, Ending::Done);
    assert_eq!(out.steps_run, 6);
    // Evaluations at steps 3 and 6.
    let steps: Vec<u64> = out.curves["val_accuracy"].iter().map(|(s, _)| *s).collect();
    assert_eq!(steps, vec![3, 6]);
    for m in ["accuracy", "seq_accuracy", "loss", "val_accuracy", "val_loss"] {
        let v = out.final_metrics[m];
        assert!(v.is_finite() && v >= 0.0, "{m} = {v}");
    }
    assert_eq!(out.param_count, trial.graph.param_count());
}

#[test]
fn the_same_trial_gives_the_same_result() {
    let trial = &trials("tiny.mem", &tiny_spec())[0];
    let (a, b) = (train_on_cpu(trial), train_on_cpu(trial));
    assert_eq!(a.curves, b.curves);
    assert_eq!(a.final_metrics, b.final_metrics);
}

/// The CUDA build trains through candle's autograd over device-generic tensor ops (the
/// fused CPU kernels never run there); the same path on the CPU trains, and agrees with the
/// CPU's own reverse mode.
#[test]
fn the_device_generic_path_trains_and_agrees_with_the_cpu_path() {
    for trial in trials("tiny.mem", &tiny_spec()).iter().filter(|t| t.config.seed <= 1) {
        let generic = train::train_with(trial, &Device::Cpu, Autograd::Candle, &Silent, &AtomicBool::new(false));
        let tape = train::train_with(trial, &Device::Cpu, Autograd::Tape, &Silent, &AtomicBool::new(false));
        assert_eq!(generic.ending, Ending::Done, "{}", trial.config.model);
        assert_eq!(generic.steps_run, tape.steps_run);
        // Losses, not accuracies: a prediction on the threshold may flip between the two.
        for m in ["loss", "val_loss"] {
            let (g, v) = (generic.final_metrics[m], tape.final_metrics[m]);
            assert!((g - v).abs() <= 1e-3 * v.abs().max(1.0), "{} {m}: generic {g} vs tape {v}", trial.config.model);
        }
    }
}

#[test]
fn a_diverging_loss_fails_the_trial_with_a_reason() {
    let out = train_tiny_with("optimizer = adam(lr = 1e-2)", "optimizer = sgd(lr = 1e300)");
    let Ending::Failed(reason) = &out.ending else { panic!("expected a failure, got {:?}", out.ending) };
    assert!(reason.contains("loss is") && reason.contains("at step"), "{reason}");
}

#[test]
fn stop_when_records_the_step_it_was_first_met() {
    // Loss below 100 is met at the first evaluation.
    let out = train_tiny_with("steps = 6, eval_every = 3 }", "steps = 6, eval_every = 3, stop_when = loss < 100 }");
    let conv = out.converged.expect("converged");
    assert_eq!(conv.step, 3);
    assert_eq!(conv.epoch, Some(3.0 * 16.0 / 64.0));
    assert_eq!(out.steps_run, 3);
    assert_eq!(out.stop_reason, "stop_when");
}

#[test]
fn select_reports_the_test_metrics_at_the_best_validation_as_well_as_the_last() {
    let out = train_tiny_with("steps = 6, eval_every = 3 }", "steps = 12, eval_every = 2, select = best(val_loss) }");
    assert_eq!(out.ending, Ending::Done);
    // The selected step is the first evaluation of the lowest validation loss.
    let curve = &out.curves["val_loss"];
    let best = curve.iter().map(|(_, v)| *v).fold(f64::INFINITY, f64::min);
    let step = curve.iter().find(|(_, v)| *v == best).unwrap().0;
    let m = &out.final_metrics;
    assert_eq!(m["selected_step"], step as f64);
    assert_eq!(m["selected_val_loss"], best);
    // Both evaluations are kept; at the last step they are the same parameters.
    for k in ["accuracy", "loss", "seq_accuracy"] {
        assert!(m[&format!("selected_{k}")].is_finite(), "selected_{k}");
    }
    if step == 12 {
        assert_eq!(m["selected_loss"], m["loss"]);
    }
}

/// NAM's protocol: select on a test split other than the reported one (OD-easy); its
/// metrics are evaluated at every evaluation and kept as curves.
#[test]
fn select_on_an_extra_test_split_evaluates_it_at_every_evaluation() {
    let spec = format!(
        "{}\ntask r = reduce(digits = 3, train = 64, validation = 32, test = 32)\n\
         experiment sel {{ task r  model lstm(hidden = 8)  \
         train {{ batch = 16, steps = 8, eval_every = 2, select = best(od_easy_seq_accuracy) }} }}\n",
        tiny_spec()
    );
    let trial = trials("sel.mem", &spec).into_iter().find(|t| t.config.experiment == "sel").unwrap();
    let out = train_on_cpu(&trial);
    assert_eq!(out.ending, Ending::Done, "{}", out.stop_reason);
    let steps: Vec<u64> = out.curves["od_easy_seq_accuracy"].iter().map(|(s, _)| *s).collect();
    assert_eq!(steps, vec![2, 4, 6, 8]);
    let curve = &out.curves["od_easy_seq_accuracy"];
    let best = curve.iter().map(|(_, v)| *v).fold(f64::NEG_INFINITY, f64::max);
    let m = &out.final_metrics;
    assert_eq!(m["selected_od_easy_seq_accuracy"], best);
    assert_eq!(m["selected_step"], curve.iter().find(|(_, v)| *v == best).unwrap().0 as f64);
    assert!(m.contains_key("selected_od_hard_seq_accuracy") && m.contains_key("od_hard_seq_accuracy"));
}

/// Panics in `on_step` at step `at`: a bug inside a training step, seen from outside.
struct PanicAtStep(usize);

impl train::Observer for PanicAtStep {
    fn on_step(&self, step: usize, _: usize, _: f64) {
        assert_ne!(step, self.0, "a bug at step {step}");
    }
}

#[test]
fn a_panic_mid_training_fails_the_trial_keeping_its_steps_and_curves() {
    let trial = &trials("tiny.mem", &tiny_spec())[0];
    let out = train::train(trial, &Device::Cpu, &PanicAtStep(5), &AtomicBool::new(false));
    let Ending::Failed(reason) = &out.ending else { panic!("expected a failure, got {:?}", out.ending) };
    assert!(reason.contains("internal error (panic)") && reason.contains("a bug at step 5"), "{reason}");
    assert_eq!(out.steps_run, 5);
    // The evaluation at step 3 happened; the one at step 6 did not.
    let steps: Vec<u64> = out.curves["val_accuracy"].iter().map(|(s, _)| *s).collect();
    assert_eq!(steps, vec![3]);
}

/// Records the steps of every progress report, taking `step_time` per step.
struct SlowSteps {
    step_time: std::time::Duration,
    reported: std::sync::Mutex<Vec<usize>>,
}

impl train::Observer for SlowSteps {
    fn on_step(&self, _: usize, _: usize, _: f64) {
        std::thread::sleep(self.step_time);
    }
    fn on_progress(&self, so_far: &train::Outcome) {
        self.reported.lock().unwrap().push(so_far.steps_run);
    }
}

#[test]
fn progress_is_reported_between_evaluations() {
    // Twelve steps of over REPORT_EVERY / 6 each, evaluated only at the end: between the first
    // step's report and the evaluation's, at least one more report falls.
    let spec = tiny_spec().replace("steps = 6, eval_every = 3 }", "steps = 12, eval_every = 12 }");
    let trial = &trials("tiny.mem", &spec)[0];
    let observer = SlowSteps { step_time: train::REPORT_EVERY / 6, reported: Default::default() };
    let out = train::train(trial, &Device::Cpu, &observer, &AtomicBool::new(false));
    assert_eq!(out.ending, Ending::Done);
    let reported = observer.reported.into_inner().unwrap();
    assert_eq!((reported.first(), reported.last()), (Some(&1), Some(&12)), "{reported:?}");
    assert!(reported.iter().any(|&s| s > 1 && s < 12), "no report between step 1 and the evaluation: {reported:?}");
}
