//! A final metric against each swept parameter: one panel per parameter, one point per
//! finished run, or per group and value when the runs are grouped (the dashboard's
//! parameters view). Pure: runs in, panels out.

use std::collections::HashMap;
use std::hash::Hash;

use crate::query::{Field, Val};
use crate::store::{RunSummary, Status};

/// One parameter's panel: where each run (or group) sits on it and what it scored.
#[derive(Clone, Debug, PartialEq)]
pub struct Panel {
    /// The parameter as swept (`lr`, `d`, `gates`).
    pub name: String,
    pub axis: Axis,
    /// For a categorical axis, a point's x is the index of its value in `categories`.
    pub points: Vec<Point>,
}

/// A point of a panel: a run's metric, or the mean of a group's runs at one value.
#[derive(Clone, Debug, PartialEq)]
pub struct Point {
    pub x: f64,
    pub y: f64,
    pub of: Of,
}

/// What a point or line stands for.
#[derive(Clone, Debug, PartialEq)]
pub enum Of {
    Run(u64),
    /// A group as `memctl runs --group-by` and the grouped curves name it (`d=48 gates=true`),
    /// and how many runs its mean is over.
    Group {
        label: String,
        n: usize,
    },
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

/// The fields a view groups by (`d`, `param.lr`), as the runs table parses them.
pub type Keys = [(String, Field)];

/// A finished run that has the metric, and its value.
type Scored<'r> = (&'r RunSummary, f64);

fn scored<'r>(runs: &[&'r RunSummary], metric: &str) -> Vec<Scored<'r>> {
    runs.iter()
        .filter(|r| r.status == Status::Done)
        .filter_map(|r| r.final_metrics.get(metric).filter(|v| v.is_finite()).map(|v| (*r, *v)))
        .collect()
}

/// The parameters some scored run swept, the seed aside (it is not a setting), in the order met.
fn swept_names<'r>(scored: &[Scored<'r>]) -> Vec<&'r String> {
    let mut names: Vec<&String> = vec![];
    for (r, _) in scored {
        for name in &r.swept {
            if name != "seed" && !names.contains(&name) {
                names.push(name);
            }
        }
    }
    names
}

/// A run's group label: `name=value` for each key, `·` where it has none (as the grouped
/// curves label their lines).
pub fn group_label(r: &RunSummary, keys: &Keys) -> String {
    keys.iter()
        .map(|(name, f)| format!("{name}={}", f.get(r).map_or("·".to_string(), |v| v.to_string())))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The panels for `metric` over `runs`: one per parameter that some run swept (the seed
/// aside), over the finished runs that have the metric. Grouped by `keys` (when not empty),
/// a panel has a point per group and value: the mean of the group's runs there.
pub fn panels(runs: &[&RunSummary], metric: &str, keys: &Keys) -> Vec<Panel> {
    let scored = scored(runs, metric);
    swept_names(&scored)
        .into_iter()
        .filter_map(|name| {
            let field = Field::parse(name)?;
            let (axis, placed) = place(&field, &scored)?;
            let points = if keys.is_empty() {
                placed.into_iter().map(|(x, (r, y))| Point { x, y, of: Of::Run(r.id) }).collect()
            } else {
                // x as bits: a key to group by (the same value is the same number).
                group_means(placed.into_iter().map(|(x, (r, y))| ((group_label(r, keys), x.to_bits()), y, r.id)))
                    .into_iter()
                    .map(|((label, x), y, n, _)| Point { x: f64::from_bits(x), y, of: Of::Group { label, n } })
                    .collect()
            };
            Some(Panel { name: name.clone(), axis, points })
        })
        .collect()
}

/// Where `field` puts each scored run that has it on an axis, and which axis: numbers on a
/// linear or log axis, anything else in categories. `None` when no run has it.
fn place<'r>(field: &Field, scored: &[Scored<'r>]) -> Option<(Axis, Vec<(f64, Scored<'r>)>)> {
    let values: Vec<(Val, Scored<'r>)> = scored.iter().filter_map(|s| Some((field.get(s.0)?, *s))).collect();
    if values.is_empty() {
        return None;
    }
    let numbers: Option<Vec<f64>> = values
        .iter()
        .map(|(v, _)| match v {
            Val::Num(x) if x.is_finite() => Some(*x),
            Val::Int(i) => Some(*i as f64),
            _ => None,
        })
        .collect();
    Some(match numbers {
        Some(xs) => {
            let (lo, hi) = xs.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), x| (lo.min(*x), hi.max(*x)));
            let axis = if lo > 0.0 && hi / lo >= LOG_RATIO { Axis::Log } else { Axis::Linear };
            (axis, xs.into_iter().zip(values).map(|(x, (_, s))| (x, s)).collect())
        }
        None => {
            let mut categories: Vec<String> = vec![];
            let mut placed = vec![];
            for (v, s) in values {
                let text = v.to_string();
                let at = match categories.iter().position(|c| *c == text) {
                    Some(i) => i,
                    None => {
                        categories.push(text);
                        categories.len() - 1
                    }
                };
                placed.push((at as f64, s));
            }
            (Axis::Categories(categories), placed)
        }
    })
}

/// The mean of the values under each key, the count, and the first run met under it (by id),
/// keys in the order first met.
fn group_means<K: Hash + Eq + Clone>(items: impl Iterator<Item = (K, f64, u64)>) -> Vec<(K, f64, usize, u64)> {
    let mut out: Vec<(K, f64, usize, u64)> = vec![];
    let mut index: HashMap<K, usize> = HashMap::new();
    for (key, y, id) in items {
        match index.get(&key) {
            Some(&i) => {
                out[i].1 += y;
                out[i].2 += 1;
            }
            None => {
                index.insert(key.clone(), out.len());
                out.push((key, y, 1, id));
            }
        }
    }
    for (_, sum, n, _) in &mut out {
        *sum /= *n as f64;
    }
    out
}

/// Parallel coordinates: an axis per dimension, the metric's last, and a line per run or group.
#[derive(Clone, Debug, PartialEq)]
pub struct Parallel {
    /// The dimensions before the metric: each name and its axis.
    pub axes: Vec<(String, Axis)>,
    pub lines: Vec<Line>,
}

/// One run's (or group's) line: its place on each axis (`None` where it has no value) and
/// its metric (a group's mean).
#[derive(Clone, Debug, PartialEq)]
pub struct Line {
    pub of: Of,
    pub values: Vec<Option<f64>>,
    pub y: f64,
}

/// The parallel coordinates of `metric` over `runs`: ungrouped, an axis per swept parameter
/// (the seed aside) and a line per finished run that has the metric; grouped by `keys`, an
/// axis per key and a line per group, at the mean of its runs.
pub fn parallel(runs: &[&RunSummary], metric: &str, keys: &Keys) -> Parallel {
    let scored = scored(runs, metric);
    let dims: Vec<(String, Field)> = if keys.is_empty() {
        swept_names(&scored).into_iter().filter_map(|n| Some((n.clone(), Field::parse(n)?))).collect()
    } else {
        keys.to_vec()
    };
    let mut axes = vec![];
    // For each axis, each run's place on it, by run id.
    let mut places: Vec<HashMap<u64, f64>> = vec![];
    for (name, field) in &dims {
        if let Some((axis, placed)) = place(field, &scored) {
            axes.push((name.clone(), axis));
            places.push(placed.into_iter().map(|(x, (r, _))| (r.id, x)).collect());
        }
    }
    let at = |id: u64| -> Vec<Option<f64>> { places.iter().map(|p| p.get(&id).copied()).collect() };
    let lines = if keys.is_empty() {
        scored.iter().map(|(r, y)| Line { of: Of::Run(r.id), values: at(r.id), y: *y }).collect()
    } else {
        // A group's runs share its keys' values, so any of its runs places it on every axis.
        group_means(scored.iter().map(|(r, y)| (group_label(r, keys), *y, r.id)))
            .into_iter()
            .map(|(label, y, n, id)| Line { of: Of::Group { label, n }, values: at(id), y })
            .collect()
    };
    Parallel { axes, lines }
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
            swept: vec!["lr".into(), "gates".into(), "seed".into()],
            params: Arc::new([("lr".to_string(), Value::Float(lr)), ("gates".to_string(), Value::Bool(gates))].into()),
            final_metrics: accuracy.map(|a| ("accuracy".to_string(), a)).into_iter().collect::<BTreeMap<_, _>>(),
            ..RunSummary::made_up(id)
        }
    }

    fn at(x: f64, y: f64, id: u64) -> Point {
        Point { x, y, of: Of::Run(id) }
    }

    fn group(x: f64, y: f64, label: &str, n: usize) -> Point {
        Point { x, y, of: Of::Group { label: label.into(), n } }
    }

    fn keys(names: &[&str]) -> Vec<(String, Field)> {
        names.iter().map(|n| (n.to_string(), Field::parse(n).unwrap())).collect()
    }

    #[test]
    fn each_swept_parameter_but_the_seed_gets_a_panel_of_the_finished_runs() {
        let runs = [run(1, 1e-4, true, Some(0.5)), run(2, 1e-2, false, Some(0.9)), run(3, 1e-3, true, None)];
        let mut failed = run(4, 1e-3, true, Some(0.1));
        failed.status = Status::Failed;
        let all: Vec<&RunSummary> = runs.iter().chain([&failed]).collect();
        let panels = panels(&all, "accuracy", &[]);
        assert_eq!(
            panels,
            [
                Panel { name: "lr".into(), axis: Axis::Log, points: vec![at(1e-4, 0.5, 1), at(1e-2, 0.9, 2)] },
                Panel {
                    name: "gates".into(),
                    axis: Axis::Categories(vec!["true".into(), "false".into()]),
                    points: vec![at(0.0, 0.5, 1), at(1.0, 0.9, 2)],
                },
            ]
        );
        assert_eq!(default_metric(&all).as_deref(), Some("accuracy"));
        assert!(super::panels(&all, "nosuch", &[]).is_empty());
    }

    #[test]
    fn values_within_two_decades_stay_on_a_linear_axis() {
        let runs = [run(1, 0.1, true, Some(0.5)), run(2, 0.5, true, Some(0.9))];
        let all: Vec<&RunSummary> = runs.iter().collect();
        assert_eq!(panels(&all, "accuracy", &[])[0].axis, Axis::Linear);
    }

    #[test]
    fn grouped_a_panel_has_the_mean_of_each_group_at_each_value() {
        let runs = [
            run(1, 0.1, true, Some(0.5)),
            run(2, 0.1, true, Some(0.7)),
            run(3, 0.2, true, Some(0.9)),
            run(4, 0.1, false, Some(0.2)),
        ];
        let all: Vec<&RunSummary> = runs.iter().collect();
        let panels = panels(&all, "accuracy", &keys(&["gates"]));
        let mean = (0.5 + 0.7) / 2.0;
        assert_eq!(
            panels[0].points,
            [group(0.1, mean, "gates=true", 2), group(0.2, 0.9, "gates=true", 1), group(0.1, 0.2, "gates=false", 1)]
        );
        assert_eq!(
            panels[1].points,
            [group(0.0, (0.5 + 0.7 + 0.9) / 3.0, "gates=true", 3), group(1.0, 0.2, "gates=false", 1)]
        );
    }

    #[test]
    fn parallel_coordinates_have_a_line_per_run_or_group_and_the_metric_last() {
        let runs = [run(1, 1e-4, true, Some(0.5)), run(2, 1e-2, false, Some(0.9)), run(3, 1e-2, true, Some(0.7))];
        let all: Vec<&RunSummary> = runs.iter().collect();
        let p = parallel(&all, "accuracy", &[]);
        assert_eq!(
            p.axes,
            [
                ("lr".to_string(), Axis::Log),
                ("gates".to_string(), Axis::Categories(vec!["true".into(), "false".into()]))
            ]
        );
        assert_eq!(
            p.lines,
            [
                Line { of: Of::Run(1), values: vec![Some(1e-4), Some(0.0)], y: 0.5 },
                Line { of: Of::Run(2), values: vec![Some(1e-2), Some(1.0)], y: 0.9 },
                Line { of: Of::Run(3), values: vec![Some(1e-2), Some(0.0)], y: 0.7 },
            ]
        );
        let grouped = parallel(&all, "accuracy", &keys(&["gates"]));
        assert_eq!(grouped.axes, [("gates".to_string(), Axis::Categories(vec!["true".into(), "false".into()]))]);
        let of = |label: &str, n| Of::Group { label: label.into(), n };
        assert_eq!(
            grouped.lines,
            [
                Line { of: of("gates=true", 2), values: vec![Some(0.0)], y: (0.5 + 0.7) / 2.0 },
                Line { of: of("gates=false", 1), values: vec![Some(1.0)], y: 0.9 },
            ]
        );
    }
}
