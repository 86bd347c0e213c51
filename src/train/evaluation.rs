//! Evaluations: a held-out split's metrics, what a trial evaluates after a step (validation,
//! and what `select` keeps) and its test splits at the end. A trial's evaluations stop between
//! two batches when the trial is told to stop, so that Ctrl-C or a scheduler's SIGTERM ends
//! it within one batch, not one evaluation (on the CPU, SAM Table 1's validation set alone
//! takes about a minute); the trial then checkpoints to evaluate again when it resumes.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};

use candle_core::Device;
use serde::{Deserialize, Serialize};

use super::loss::{self, MetricSums};
use super::{Outcome, Stepper, push};
use crate::check::Trial;
use crate::tasks::{Batch, Split, TaskData};

/// A split's metrics, by name.
pub type Metrics = Vec<(&'static str, f64)>;

/// The evaluation a `select` rule chose: where, the metric's value, and the test splits'
/// metrics there (keyed as in `final_metrics`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Selected {
    pub step: usize,
    pub value: f64,
    pub metrics: BTreeMap<String, f64>,
}

/// Sequences per evaluation batch. Metrics are sums, so the size changes speed, not results.
/// Evaluation keeps no activations for a backward, so it can take larger batches than
/// training; on a GPU, where an eager forward costs a launch per op, much larger ones.
pub fn evaluation_batch(train_batch: usize, device: &Device) -> usize {
    evaluation_batch_on(train_batch, device.is_cpu())
}

/// [`evaluation_batch`] on the CPU (`on_cpu`) or a GPU.
pub fn evaluation_batch_on(train_batch: usize, on_cpu: bool) -> usize {
    let twice = train_batch.saturating_mul(2);
    if on_cpu { twice.clamp(64, 512) } else { twice.max(1024) }
}

/// Metrics on a held-out split of `trial`'s task with detached weights (no autograd graph is
/// built): the target's, then the task's own ([`crate::tasks::Task::task_metrics`]).
pub fn evaluate(
    stepper: &Stepper,
    data: &dyn TaskData,
    split: Split,
    batch: usize,
    limit: Option<usize>,
    trial: &Trial,
) -> candle_core::Result<Metrics> {
    let evaluations = Evaluations { stepper, data, batch, trial, stop: &NEVER };
    Ok(evaluations.split(split, limit)?.unwrap_or_default())
}

/// The names a trial's `final_metrics` can hold, known before it trains: each test split's
/// metrics as [`Evaluations::tests`] keys them, the last validation's (`val_*`) and, with
/// `select`, the selected evaluation's (`selected_*`, `selected_step`).
pub fn final_metric_names(trial: &Trial) -> Vec<String> {
    let task = &*trial.task;
    let base = task.metric_names();
    let mut tests = vec![];
    for (i, split) in task.test_splits().iter().enumerate() {
        tests.extend(base.iter().map(|m| if i == 0 { m.to_string() } else { format!("{split}_{m}") }));
    }
    let mut names = tests.clone();
    names.extend(base.iter().map(|m| format!("val_{m}")));
    if trial.config.train.select.is_some() {
        names.push("selected_step".into());
        names.extend(tests.iter().map(|m| format!("selected_{m}")));
    }
    names
}

/// The stop request of evaluations that nothing stops.
static NEVER: AtomicBool = AtomicBool::new(false);

/// The batches of `split` an evaluation reads: whole batches of at most `batch` sequences,
/// until `limit` sequences (`eval_size`) are reached, or all of them.
pub fn evaluation_batches(
    data: &dyn TaskData,
    split: Split,
    batch: usize,
    limit: Option<usize>,
) -> candle_core::Result<Vec<Batch>> {
    let mut seen = 0;
    let mut kept = vec![];
    for b in data.eval_batches(split, batch)? {
        if limit.is_some_and(|l| seen >= l) {
            break;
        }
        seen += b.batch_size()?;
        kept.push(b);
    }
    Ok(kept)
}

/// What an evaluation gives: its result, or `None` when the trial was told to stop first.
pub(super) type Unless<T> = candle_core::Result<Option<T>>;

/// A trial's evaluations with its current weights, stopped by `stop`.
pub(super) struct Evaluations<'a> {
    pub stepper: &'a Stepper,
    pub data: &'a dyn TaskData,
    /// Sequences per batch ([`evaluation_batch`]).
    pub batch: usize,
    pub trial: &'a Trial,
    pub stop: &'a AtomicBool,
}

/// The evaluation after a step, not yet recorded: so that one stopped half-way leaves the
/// trial's outcome as it was before it.
pub(super) struct StepEvaluation {
    /// The validation metrics.
    pub metrics: Metrics,
    /// With `select` on a test split: that split's index and metrics (curves `<split>_<metric>`).
    split: Option<(usize, Metrics)>,
    /// With `select`, when this evaluation improves on the best so far.
    selected: Option<Selected>,
}

impl Evaluations<'_> {
    /// A split's metrics (`limit` sequences of it at most), or `None` when the stop request
    /// comes before its last batch has run.
    fn split(&self, split: Split, limit: Option<usize>) -> Unless<Metrics> {
        let task = &*self.trial.task;
        let target = task.target();
        let mut sums = MetricSums::default();
        let mut own: Vec<(&'static str, f64, f64)> = vec![];
        for b in evaluation_batches(self.data, split, self.batch, limit)? {
            if self.stop.load(Ordering::Relaxed) {
                return Ok(None);
            }
            let logits = self.stepper.evaluation_forward(&b.inputs, &b.scored)?;
            let l = loss::loss(target, &logits, &b.targets)?;
            sums.add(target, &logits, &b.targets, &l)?;
            for (name, sum, count) in task.task_metrics(&b, &logits)? {
                match own.iter_mut().find(|(n, ..)| *n == name) {
                    Some(m) => (m.1, m.2) = (m.1 + sum, m.2 + count),
                    None => own.push((name, sum, count)),
                }
            }
        }
        let mut metrics = sums.metrics(target)?;
        // A metric that nothing counted towards (no valid tour, say) is left out, not NaN.
        metrics.extend(
            own.into_iter()
                .filter(|m| m.2 > 0.0)
                .map(|(name, sum, count)| (name, task.task_metric_value(name, sum / count))),
        );
        Ok(Some(metrics))
    }

    /// Every test split's metrics, keyed as `final_metrics` keeps them: the first split's bare
    /// (`accuracy`), the others' prefixed (`od_easy_accuracy`). A split in `known` (its index
    /// and metrics, just evaluated with these weights) is not evaluated again.
    pub fn tests(&self, known: Option<(usize, &[(&'static str, f64)])>) -> Unless<BTreeMap<String, f64>> {
        let mut out = BTreeMap::new();
        for (i, split) in self.trial.task.test_splits().iter().enumerate() {
            let metrics = match known {
                Some((k, metrics)) if k == i => metrics.to_vec(),
                _ => {
                    let Some(metrics) = self.split(Split::Test(i), None)? else { return Ok(None) };
                    metrics
                }
            };
            for (name, v) in metrics {
                let key = if i == 0 { name.to_string() } else { format!("{split}_{name}") };
                out.insert(key, v);
            }
        }
        Ok(Some(out))
    }

    /// The evaluation due after `step`: the validation split (`eval_size` of it), and with
    /// `select` its metric (evaluating its split when it is a test split's) and, when that
    /// improves on `so_far`'s best, the test splits.
    pub fn after_step(&self, step: usize, so_far: &Outcome) -> Unless<StepEvaluation> {
        let Some(metrics) = self.split(Split::Validation, self.trial.config.train.eval_size)? else {
            return Ok(None);
        };
        // An evaluation whose loss is not finite is never selected: the weights diverged.
        let diverged = metrics.iter().any(|(n, v)| *n == "loss" && !v.is_finite());
        let Some(select) = self.trial.config.train.select.as_ref().filter(|_| !diverged) else {
            return Ok(Some(StepEvaluation { metrics, split: None, selected: None }));
        };
        let split = match select.split {
            None => None,
            Some(i) => {
                let Some(split_metrics) = self.split(Split::Test(i), None)? else { return Ok(None) };
                Some((i, split_metrics))
            }
        };
        let read_from = split.as_ref().map_or(&metrics, |(_, m)| m);
        let value = read_from.iter().find(|(n, _)| *n == select.base).map(|(_, v)| *v);
        let mut selected = None;
        if let Some(value) = value.filter(|&v| select.improves(v, so_far.selected.as_ref().map(|s| s.value))) {
            let known = split.as_ref().map(|(i, m)| (*i, m.as_slice()));
            let Some(mut at) = self.tests(known)? else { return Ok(None) };
            at.extend(metrics.iter().map(|(n, v)| (format!("val_{n}"), *v)));
            selected = Some(Selected { step, value, metrics: at });
        }
        Ok(Some(StepEvaluation { metrics, split, selected }))
    }
}

impl StepEvaluation {
    /// Records the evaluation at `step`: its curve points, and the evaluation `select` keeps.
    pub fn record(&self, step: usize, trial: &Trial, out: &mut Outcome) {
        for (name, v) in &self.metrics {
            push(out, &format!("val_{name}"), step, *v);
        }
        if let Some((i, metrics)) = &self.split {
            let split = trial.task.test_splits()[*i];
            for (name, v) in metrics {
                push(out, &format!("{split}_{name}"), step, *v);
            }
        }
        if let Some(selected) = &self.selected {
            out.selected = Some(selected.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// NAM's palindromes: three test splits, the later two prefixed; `select` adds the
    /// selected evaluation's.
    #[test]
    fn final_metric_names_follow_the_test_splits_the_validation_and_select() {
        let spec = |train: &str| {
            format!(
                "model lstm(hidden = 8) {{\n  state c = zeros(hidden)\n  state h = zeros(hidden)\n  step token {{\n    \
                 c, h = lstmCell(c, h, embed(token, 8))\n    out linear(h, output_size)\n  }}\n}}\n\
                 task p = palindrome(train = 64, validation = 32, test = 32)\n\
                 experiment e {{\n  task p\n  model lstm\n  train {{ batch = 16, steps = 6{train} }}\n}}\n"
            )
        };
        let names =
            |train: &str| final_metric_names(&crate::check::checked_text(&spec(train)).experiments[0].trials[0]);
        let plain = names("");
        for m in ["accuracy", "seq_accuracy", "loss", "od_easy_accuracy", "od_hard_seq_accuracy", "val_seq_accuracy"] {
            assert!(plain.contains(&m.to_string()), "{m} in {plain:?}");
        }
        assert!(!plain.iter().any(|m| m.starts_with("selected_") || m.starts_with("val_od_")), "{plain:?}");
        let selected = names(", select = best(val_accuracy)");
        for m in ["selected_step", "selected_accuracy", "selected_od_hard_seq_accuracy"] {
            assert!(selected.contains(&m.to_string()), "{m} in {selected:?}");
        }
    }
}
