//! One run, everything recorded, readable: `memctl show RUN` (YAML).

use std::collections::BTreeMap;

use serde::Serialize;

use super::numbers::duration;
use crate::query::fields::format_date;
use crate::store::RunRecord;
use crate::value::Value;

#[derive(Serialize)]
struct Shown<'a> {
    id: u64,
    status: &'static str,
    experiment: &'a str,
    model: &'a str,
    task: &'a str,
    seed: u64,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tags: &'a Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<&'a str>,
    stop_reason: &'a str,
    /// Where a search's pruner stopped it, and the cut-off it missed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pruned: Option<&'a crate::store::Pruned>,
    started: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    ended: Option<String>,
    /// The swept values of this trial.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    swept: BTreeMap<&'a str, &'a Value>,
    parameters: &'a BTreeMap<String, Value>,
    task_options: &'a BTreeMap<String, Value>,
    train: BTreeMap<String, Value>,
    final_metrics: &'a BTreeMap<String, f64>,
    steps_run: u64,
    /// While running: how far along, and the time left at its pace so far.
    #[serde(skip_serializing_if = "Option::is_none")]
    progress: Option<ShownProgress>,
    #[serde(skip_serializing_if = "Option::is_none")]
    steps_to_converge: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    epochs_to_converge: Option<f64>,
    /// One line per curve: `{points: 12, first: [25, 0.31], last: [...], best: [...]}`.
    curves: BTreeMap<&'a str, serde_saphyr::FlowMap<CurveSummary>>,
    param_count: u64,
    flops_per_step: u64,
    time: Time,
    environment: &'a crate::store::Environment,
    trial: &'a str,
    spec_path: &'a str,
    spec_hash: &'a str,
    spec: serde_saphyr::LitStr<'a>,
}

#[derive(Serialize)]
struct ShownProgress {
    steps: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    eta: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    resumed_from_step: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    checkpoint_step: Option<u64>,
    updated: String,
}

#[derive(Serialize)]
struct Time {
    /// From this run's start (for a resumed run, its process's start) to its end.
    wall: String,
    /// Over every process that trained the run.
    train: String,
    eval: String,
    /// A run resumed from a checkpoint: the step it resumed from, and its time over every
    /// process (its wall time counts only the last).
    #[serde(skip_serializing_if = "Option::is_none")]
    resumed_from_step: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    over_every_process: Option<String>,
}

/// First, last and best point of a curve (`[step, value]`).
#[derive(Serialize, Debug, PartialEq)]
pub struct CurveSummary {
    pub points: usize,
    pub first: (u64, f64),
    pub last: (u64, f64),
    /// Highest for accuracies, lowest for losses, errors and lengths.
    pub best: (u64, f64),
}

/// Whether lower values of a curve or metric are better: see [`crate::tasks::higher_is_better`].
pub fn lower_is_better(name: &str) -> bool {
    !crate::tasks::higher_is_better(name)
}

pub fn curve_summary(name: &str, points: &[(u64, f64)]) -> Option<CurveSummary> {
    let first = *points.first()?;
    let last = *points.last()?;
    let better = |a: f64, b: f64| if lower_is_better(name) { a < b } else { a > b };
    let best = points.iter().copied().fold(first, |acc, p| if better(p.1, acc.1) { p } else { acc });
    Some(CurveSummary { points: points.len(), first, last, best })
}

/// The run as YAML.
pub fn yaml(r: &RunRecord) -> Result<String, serde_saphyr::SerializeError> {
    let shown = Shown {
        id: r.id,
        status: r.status.as_str(),
        experiment: &r.config.experiment,
        model: &r.config.model,
        task: &r.config.task,
        seed: r.config.seed,
        tags: &r.tags,
        error: r.error.as_deref(),
        stop_reason: &r.stop_reason,
        pruned: r.pruned.as_ref(),
        started: format_date(r.started_at),
        ended: r.ended_at.map(format_date),
        swept: r.config.swept.iter().map(|(k, v)| (k.as_str(), v)).collect(),
        parameters: &r.config.params,
        task_options: &r.config.task_options,
        train: r.config.train.clone(),
        final_metrics: &r.final_metrics,
        steps_run: r.steps_run,
        progress: r.progress.as_ref().filter(|_| r.status == crate::store::Status::Running).map(|p| ShownProgress {
            steps: format!("{}/{}", r.steps_run, p.steps_total),
            eta: p.eta_seconds(r.steps_run, r.train_seconds).map(duration),
            resumed_from_step: p.resumed_from,
            checkpoint_step: p.checkpoint_step,
            updated: format_date(p.updated_at),
        }),
        steps_to_converge: r.steps_to_converge,
        epochs_to_converge: r.epochs_to_converge,
        curves: r
            .curves
            .iter()
            .filter_map(|(k, c)| Some((k.as_str(), serde_saphyr::FlowMap(curve_summary(k, c)?))))
            .collect(),
        param_count: r.param_count,
        flops_per_step: r.flops_per_step,
        time: {
            let resumed_from_step = r.progress.as_ref().and_then(|p| p.resumed_from);
            Time {
                wall: duration(r.wall_seconds),
                train: duration(r.train_seconds),
                eval: duration(r.eval_seconds),
                resumed_from_step,
                over_every_process: resumed_from_step.map(|_| duration(r.seconds_over_every_process())),
            }
        },
        environment: &r.environment,
        trial: &r.trial_key,
        spec_path: &r.spec_path,
        spec_hash: &r.spec_hash,
        spec: serde_saphyr::LitStr(&r.spec_text),
    };
    serde_saphyr::to_string(&shown)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn best_is_lowest_for_losses_and_highest_otherwise() {
        let pts = [(100, 0.5), (200, 0.2), (300, 0.3)];
        let loss = curve_summary("val_loss", &pts).unwrap();
        assert_eq!((loss.first, loss.last, loss.best, loss.points), ((100, 0.5), (300, 0.3), (200, 0.2), 3));
        let acc = curve_summary("val_accuracy", &pts).unwrap();
        assert_eq!(acc.best, (100, 0.5));
        // A tour is better shorter; a share of valid tours higher.
        assert_eq!(curve_summary("val_tour_length", &pts).unwrap().best, (200, 0.2));
        assert_eq!(curve_summary("n10_valid_tours", &pts).unwrap().best, (100, 0.5));
        assert!(curve_summary("x", &[]).is_none());
    }
}
