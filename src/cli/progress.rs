//! Progress display: a bar per running trial on a terminal, plain lines otherwise (CI logs);
//! quiet, only failures and warnings.

use std::io::IsTerminal;
use std::sync::Mutex;

use indicatif::{MultiProgress, ProgressBar, ProgressStyle};

use crate::check::Trial;
use crate::report::numbers::{bytes, duration, sig3};
use crate::store::{RunRecord, Status};
use crate::sweep::Reporter;
use crate::sweep::placement::Waiting;
use crate::train::Observer;

pub struct Progress {
    bars: Option<MultiProgress>,
    /// The overall bar: trials settled / total, failures, ETA.
    overall: Option<ProgressBar>,
    total: usize,
    /// Trials settled so far and failures among them.
    counts: Mutex<(usize, usize)>,
    /// Only failures and warnings are printed.
    quiet: bool,
}

impl Progress {
    pub fn new(total: usize, quiet: bool) -> Progress {
        let bars = (!quiet && std::io::stderr().is_terminal()).then(MultiProgress::new);
        let overall = bars.as_ref().map(|m| {
            let bar = m.add(ProgressBar::new(total as u64));
            bar.set_style(
                ProgressStyle::with_template("trials {pos}/{len} {bar:30} {msg} [{elapsed}<{eta}]")
                    .unwrap_or_else(|_| ProgressStyle::default_bar()),
            );
            bar.set_message("0 failed");
            bar
        });
        Progress { bars, overall, total, counts: Mutex::new((0, 0)), quiet }
    }

    fn settle(&self, failed: bool) {
        if let Ok(mut c) = self.counts.lock() {
            c.0 += 1;
            c.1 += usize::from(failed);
            if let Some(b) = &self.overall {
                b.set_position(c.0 as u64);
                b.set_message(format!("{} failed", c.1));
            }
        }
    }

    /// Removes the bars (before the final summary).
    pub fn finish(&self) {
        if let Some(b) = &self.overall {
            b.finish_and_clear();
        }
    }

    /// Prints a line about progress, unless quiet.
    fn line(&self, text: &str) {
        if !self.quiet {
            self.always(text);
        }
    }

    /// Prints a line (a failure, a warning) without tearing the bars.
    fn always(&self, text: &str) {
        match &self.bars {
            Some(m) => {
                let _ = m.println(text);
            }
            None => eprintln!("{text}"),
        }
    }
}

fn label(index: usize, total: usize, trial: &Trial) -> String {
    let mut parts = vec![format!("[{}/{total}] {} {}", index + 1, trial.config.experiment, trial.config.model)];
    if !trial.config.swept.is_empty() {
        parts.push(crate::value::assignments(&trial.config.swept));
    }
    if !trial.config.swept.iter().any(|(k, _)| k == "seed") {
        parts.push(format!("seed={}", trial.config.seed));
    }
    parts.join(" ")
}

impl Reporter for Progress {
    fn trial_started(
        &self,
        index: usize,
        trial: &Trial,
        run_id: u64,
        resumed_from: Option<u64>,
    ) -> Box<dyn Observer + '_> {
        let name = format!("{} (run {run_id})", label(index, self.total, trial));
        let resumed = resumed_from.map(|s| format!(", resumed from its checkpoint at step {s}")).unwrap_or_default();
        let bar = self.bars.as_ref().map(|m| {
            let bar = match &self.overall {
                Some(o) => m.insert_before(o, ProgressBar::new(trial.config.train.steps as u64)),
                None => m.add(ProgressBar::new(trial.config.train.steps as u64)),
            };
            bar.set_style(
                // The message (loss, metrics) takes what the terminal's width leaves, so the
                // line never wraps.
                ProgressStyle::with_template("{prefix} {bar:16} {pos}/{len} [{elapsed}<{eta}] {wide_msg}")
                    .unwrap_or_else(|_| ProgressStyle::default_bar()),
            );
            bar.set_prefix(name.clone());
            bar
        });
        match &bar {
            Some(b) => b.set_position(resumed_from.unwrap_or(0)),
            None => self.line(&format!("{name}: started{resumed}")),
        }
        Box::new(TrialProgress { bar, name, progress: self, metric: Mutex::new(String::new()) })
    }

    fn trial_skipped(&self, index: usize, trial: &Trial, run_id: u64, status: Status, recorded_as: Option<&str>) {
        self.settle(false);
        // Names are not in a trial's identity: a renamed experiment's trials are done under the
        // old name, which `runs` and `results` select them by.
        let run = match recorded_as.filter(|e| *e != trial.config.experiment) {
            Some(other) => format!("run {run_id}, recorded as experiment `{other}`"),
            None => format!("run {run_id}"),
        };
        let why = match status {
            Status::Failed => format!("failed before ({run}), skipped; --retry-failed re-runs it"),
            Status::Running => format!("running in another process ({run}), skipped"),
            _ => format!("already done ({run}), skipped"),
        };
        self.line(&format!("{}: {why}", label(index, self.total, trial)));
    }

    fn trial_finished(&self, index: usize, record: &RunRecord) {
        self.settle(record.status == Status::Failed);
        let what = format!("[{}/{}] run {}", index + 1, self.total, record.id);
        let text = finished_line(&what, record);
        if record.status == Status::Failed { self.always(&text) } else { self.line(&text) }
    }

    fn trial_waits_for_memory(&self, index: usize, trial: &Trial, w: Waiting) {
        self.line(&format!(
            "{}: waits for memory: it needs about {}, and the trials running hold {} of the {} free",
            label(index, self.total, trial),
            bytes(w.needs),
            bytes(w.reserved),
            bytes(w.free)
        ));
    }

    fn warning(&self, message: &str) {
        self.always(&format!("warning: {message}"));
    }
}

/// The line a trial's end prints: `✓ [1/2] run 1 quickstart_lstm lstm: seq_accuracy 0.438,
/// accuracy 0.959, loss 0.113 (1000 steps in 53.0s)`, the metric the spec stops on first (it
/// says whether the task was solved); `✗ … failed: why`; `! … interrupted after N steps`.
fn finished_line(what: &str, record: &RunRecord) -> String {
    match record.status {
        Status::Failed => format!("✗ {what} failed: {}", record.error.as_deref().unwrap_or("unknown error")),
        Status::Interrupted => format!("! {what} interrupted after {} steps", record.steps_run),
        Status::Pruned => match &record.pruned {
            Some(p) => format!("✂ {what} {p}"),
            None => format!("✂ {what} pruned after {} steps", record.steps_run),
        },
        _ => {
            let mut names: Vec<&str> = record.config.stop_metric().into_iter().collect();
            for m in ["accuracy", "bit_error", "loss"] {
                if !names.contains(&m) {
                    names.push(m);
                }
            }
            let shown = |prefix: &str| -> Vec<String> {
                let named = names.iter().map(|m| format!("{prefix}{m}"));
                named.filter_map(|m| record.final_metrics.get(&m).map(|v| format!("{m} {}", sig3(*v)))).collect()
            };
            let mut metrics = shown("");
            let mut conv = record.steps_to_converge.map(|s| format!(", converged at step {s}")).unwrap_or_default();
            // A run that diverged after `select` chose an evaluation has that evaluation's alone.
            if metrics.is_empty() {
                metrics = shown("selected_");
                if !metrics.is_empty() {
                    conv = format!("; {}", record.stop_reason);
                }
            }
            // A resumed run's wall time is this process's, from its checkpoint on.
            let steps = match record.progress.as_ref().and_then(|p| p.resumed_from) {
                Some(from) => format!(
                    "{} steps; {} here in {}, resumed from step {from}",
                    record.steps_run,
                    record.steps_run.saturating_sub(from),
                    duration(record.wall_seconds)
                ),
                None => format!("{} steps in {}", record.steps_run, duration(record.wall_seconds)),
            };
            format!(
                "✓ {what} {} {}: {} ({steps}{conv})",
                record.config.experiment,
                record.config.model,
                metrics.join(", "),
            )
        }
    }
}

struct TrialProgress<'a> {
    bar: Option<ProgressBar>,
    name: String,
    progress: &'a Progress,
    metric: Mutex<String>,
}

impl Observer for TrialProgress<'_> {
    fn on_step(&self, step: usize, _steps: usize, loss: f64) {
        if let Some(b) = &self.bar {
            b.set_position(step as u64);
            let metric = self.metric.lock().map(|m| m.clone()).unwrap_or_default();
            b.set_message(format!("loss {} {metric}", sig3(loss)));
        }
    }

    fn on_eval(&self, step: usize, metrics: &[(&str, f64)]) {
        let text: Vec<String> = metrics.iter().map(|(k, v)| format!("val_{k} {}", sig3(*v))).collect();
        if let Ok(mut m) = self.metric.lock() {
            *m = text.iter().filter(|t| !t.starts_with("val_loss")).cloned().collect::<Vec<_>>().join(" ");
        }
        if self.bar.is_none() {
            self.progress.line(&format!("{}: step {step}: {}", self.name, text.join(", ")));
        }
    }
}

impl Drop for TrialProgress<'_> {
    fn drop(&mut self) {
        if let (Some(b), Some(m)) = (&self.bar, &self.progress.bars) {
            b.finish_and_clear();
            m.remove(b);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::Value;

    #[test]
    fn a_finished_trial_reports_the_metric_it_stops_on_first() {
        let mut r = crate::report::selection::tests::run(3, "t", "h", &[], 0.959);
        r.final_metrics.insert("seq_accuracy".into(), 0.438);
        r.config.train.insert("stop_when".into(), Value::Str("seq_accuracy >= 0.995".into()));
        (r.steps_run, r.wall_seconds, r.steps_to_converge) = (1000, 53.0, None);
        let line = finished_line("[2/2] run 3", &r);
        assert!(line.contains(": seq_accuracy 0.438, accuracy 0.959 (1000 steps in 53.0s)"), "{line}");
        r.config.train.remove("stop_when");
        let line = finished_line("[2/2] run 3", &r);
        assert!(line.contains(": accuracy 0.959 (1000"), "{line}");
        // Resumed: the wall time is that of the steps run since.
        r.progress = Some(crate::store::Progress {
            steps_total: 1000,
            updated_at: 0.0,
            resumed_from: Some(800),
            checkpoint_step: Some(800),
            max_time: None,
            deaths: 0,
        });
        let line = finished_line("[2/2] run 3", &r);
        assert!(line.ends_with(" (1000 steps; 200 here in 53.0s, resumed from step 800)"), "{line}");
        // Diverged after a selection: the selected evaluation's metrics, and why.
        r.progress = None;
        r.final_metrics = [("selected_accuracy".to_string(), 0.5), ("selected_step".into(), 400.0)].into();
        r.stop_reason = "validation loss is inf at step 600; the result is step 400's, which `select` chose".into();
        let line = finished_line("[2/2] run 3", &r);
        assert!(line.contains(": selected_accuracy 0.500 (1000 steps in 53.0s; validation loss is inf"), "{line}");
    }
}
