//! A final metric against each swept parameter: one panel per parameter, one point per
//! finished run (the dashboard's parameters view). Pure: runs in, panels out.

use crate::query::{Field, Val};
use crate::store::{RunSummary, Status};

/// One parameter's panel: where each run sits on it and what it scored.
#[derive(Clone, Debug, PartialEq)]
pub struct Panel {
    /// The parameter as swept (`lr`, `d`, `gates`).
    pub name: String,
    pub axis: Axis,
    /// `(x, metric, run id)`; for a categorical axis, x is the index of the run's value in
    /// `categories`.
    pub points: Vec<(f64, f64, u64)>,
}

/// How a panel's x axis reads its parameter.
#[derive(Clone, Debug, PartialEq)]
pub enum Axis {
    /// Numbers on a linear axis.
    Linear,
    /// Positive numbers spread over two or more decades (learning rates, weight decays): a log axis.
    Log,
    /// Booleans and strings: one column per value, in the order first met.
    Categories(Vec<String>),
}

/// Values at least this many times apart (and all positive) are drawn on a log axis.
const LOG_RATIO: f64 = 100.0;

/// The panels for `metric` over `runs`: one per parameter that some run swept (the seed
/// aside, which is not a setting), for the finished runs that have the metric.
pub fn panels(runs: &[&RunSummary], metric: &str) -> Vec<Panel> {
    let scored: Vec<(&RunSummary, f64)> = runs
        .iter()
        .filter(|r| r.status == Status::Done)
        .filter_map(|r| r.final_metrics.get(metric).filter(|v| v.is_finite()).map(|v| (*r, *v)))
        .collect();
    let mut names: Vec<&String> = vec![];
    for (r, _) in &scored {
        for name in &r.swept {
            if name != "seed" && !names.contains(&name) {
                names.push(name);
            }
        }
    }
    names.into_iter().filter_map(|name| panel(name, &scored)).collect()
}

fn panel(name: &str, scored: &[(&RunSummary, f64)]) -> Option<Panel> {
    let field = Field::parse(name)?;
    let values: Vec<(Val, f64, u64)> = scored.iter().filter_map(|(r, y)| Some((field.get(r)?, *y, r.id))).collect();
    if values.is_empty() {
        return None;
    }
    let numbers: Option<Vec<f64>> = values
        .iter()
        .map(|(v, _, _)| match v {
            Val::Num(x) if x.is_finite() => Some(*x),
            _ => None,
        })
        .collect();
    let (axis, points) = match numbers {
        Some(xs) => {
            let (lo, hi) = xs.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), x| (lo.min(*x), hi.max(*x)));
            let axis = if lo > 0.0 && hi / lo >= LOG_RATIO { Axis::Log } else { Axis::Linear };
            (axis, xs.into_iter().zip(&values).map(|(x, (_, y, id))| (x, *y, *id)).collect())
        }
        None => {
            let mut categories: Vec<String> = vec![];
            let mut points = vec![];
            for (v, y, id) in &values {
                let text = v.to_string();
                let at = match categories.iter().position(|c| *c == text) {
                    Some(i) => i,
                    None => {
                        categories.push(text);
                        categories.len() - 1
                    }
                };
                points.push((at as f64, *y, *id));
            }
            (Axis::Categories(categories), points)
        }
    };
    Some(Panel { name: name.to_string(), axis, points })
}

/// The final metric the view shows when none is named: the one the runs stop on
/// (`stop_when`), else `accuracy`, else the first test metric (not `val_…`) a finished run has.
pub fn default_metric(runs: &[&RunSummary]) -> Option<String> {
    let done = || runs.iter().filter(|r| r.status == Status::Done);
    let has = |m: &str| done().any(|r| r.final_metrics.contains_key(m));
    let stopped_on = runs.iter().filter_map(|r| crate::store::record::stop_metric(&r.train));
    for m in stopped_on.chain(["accuracy"]) {
        if has(m) {
            return Some(m.to_string());
        }
    }
    done().flat_map(|r| r.final_metrics.keys()).find(|k| !k.starts_with("val_")).cloned()
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::Arc;

    use super::*;
    use crate::value::Value;

    fn run(id: u64, lr: f64, gates: bool, accuracy: Option<f64>) -> RunSummary {
        RunSummary {
            id,
            trial_key: format!("t{id}"),
            status: Status::Done,
            experiment: "e".into(),
            model: "stm".into(),
            task: "assocRetrieval".into(),
            seed: 1,
            swept: vec!["lr".into(), "gates".into(), "seed".into()],
            params: Arc::new([("lr".to_string(), Value::Float(lr)), ("gates".to_string(), Value::Bool(gates))].into()),
            task_options: Arc::default(),
            train: Arc::default(),
            final_metrics: accuracy.map(|a| ("accuracy".to_string(), a)).into_iter().collect::<BTreeMap<_, _>>(),
            steps_run: 100,
            steps_to_converge: None,
            epochs_to_converge: None,
            tags: vec![],
            started_at: 0.0,
            ended_at: None,
            wall_seconds: 1.0,
            param_count: 10,
            spec_path: "x.mem".into(),
            spec_hash: "h".into(),
            live: None,
        }
    }

    #[test]
    fn each_swept_parameter_but_the_seed_gets_a_panel_of_the_finished_runs() {
        let runs = [run(1, 1e-4, true, Some(0.5)), run(2, 1e-2, false, Some(0.9)), run(3, 1e-3, true, None)];
        let mut failed = run(4, 1e-3, true, Some(0.1));
        failed.status = Status::Failed;
        let all: Vec<&RunSummary> = runs.iter().chain([&failed]).collect();
        let panels = panels(&all, "accuracy");
        assert_eq!(
            panels,
            [
                Panel { name: "lr".into(), axis: Axis::Log, points: vec![(1e-4, 0.5, 1), (1e-2, 0.9, 2)] },
                Panel {
                    name: "gates".into(),
                    axis: Axis::Categories(vec!["true".into(), "false".into()]),
                    points: vec![(0.0, 0.5, 1), (1.0, 0.9, 2)],
                },
            ]
        );
        assert_eq!(default_metric(&all).as_deref(), Some("accuracy"));
        assert!(super::panels(&all, "nosuch").is_empty());
    }

    #[test]
    fn values_within_two_decades_stay_on_a_linear_axis() {
        let runs = [run(1, 0.1, true, Some(0.5)), run(2, 0.5, true, Some(0.9))];
        let all: Vec<&RunSummary> = runs.iter().collect();
        assert_eq!(panels(&all, "accuracy")[0].axis, Axis::Linear);
    }
}
