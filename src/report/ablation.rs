//! The ablation table (`memctl ablate`), in the style of the SAM paper's Table 1: one row per
//! variant (full model, then each switch turned off), with steps (and epochs, when the task
//! has a fixed training set) to converge and the final test metric, `mean ± std (n)` over
//! seeds.

use super::sheet::{Cell, Sheet, Stat};
use crate::store::RunSummary;
use crate::value::Value;

/// One row's runs: the variant's name (`full`, `w/o gates`), the values of other swept
/// parameters (`d=48`, may be empty) and its runs (one per seed).
pub struct Row {
    pub variant: String,
    pub other: String,
    pub runs: Vec<RunSummary>,
}

pub fn sheet(rows: &[Row], metric: &str) -> Sheet {
    let epochs = rows.iter().flat_map(|r| &r.runs).any(|r| r.epochs_to_converge.is_some());
    let other = rows.iter().any(|r| !r.other.is_empty());
    let mut columns = vec!["variant".to_string()];
    if other {
        columns.push("with".into());
    }
    columns.extend(["runs".to_string(), "steps_to_converge".to_string()]);
    if epochs {
        columns.push("epochs_to_converge".into());
    }
    columns.push(metric.to_string());
    let stat = |v: Vec<f64>| Stat::of(&v).map_or(Cell::Missing, Cell::Stat);
    let rows = rows
        .iter()
        .map(|r| {
            let mut row = vec![Cell::Text(r.variant.clone())];
            if other {
                row.push(Cell::Text(r.other.clone()));
            }
            row.push(Cell::Int(r.runs.len() as i64));
            row.push(stat(r.runs.iter().filter_map(|s| s.steps_to_converge.map(|v| v as f64)).collect()));
            if epochs {
                row.push(stat(r.runs.iter().filter_map(|s| s.epochs_to_converge).collect()));
            }
            row.push(stat(r.runs.iter().filter_map(|s| s.final_metrics.get(metric).copied()).collect()));
            row
        })
        .collect();
    Sheet::new(columns, rows)
}

/// The final metric an ablation table reports when none is named: `accuracy` if any run has
/// it, else the first test metric (not `val_…`) of the first run that has one.
pub fn default_metric(rows: &[Row]) -> String {
    let runs = || rows.iter().flat_map(|r| &r.runs);
    if runs().any(|s| s.final_metrics.contains_key("accuracy")) {
        return "accuracy".to_string();
    }
    runs().flat_map(|s| s.final_metrics.keys()).find(|k| !k.starts_with("val_")).cloned().unwrap_or("accuracy".into())
}

/// The rows of an ablation table read back from the store, from the runs of one experiment:
/// its switches are the boolean model parameters whose value differs between the runs; a run
/// with every switch on is the `full` model, one with only `S` off is `w/o S`, as `memctl
/// ablate` names them (other combinations are not leave-one-out variants and are left out).
/// Runs split further by the other values their sweep set.
pub fn rows_from_runs(runs: &[&RunSummary]) -> Vec<Row> {
    let switch = |name: &str| {
        let mut values = runs.iter().filter_map(|r| match r.params.get(name) {
            Some(Value::Bool(on)) => Some(*on),
            _ => None,
        });
        values.next().is_some_and(|first| values.any(|v| v != first))
    };
    let switches: Vec<&String> = runs.first().map_or(vec![], |r| r.params.keys().filter(|k| switch(k)).collect());
    let mut rows: Vec<Row> = vec![];
    for r in runs {
        let off: Vec<&&String> =
            switches.iter().filter(|s| matches!(r.params.get(s.as_str()), Some(Value::Bool(false)))).collect();
        let variant = match off.as_slice() {
            [] => "full".to_string(),
            [one] => format!("w/o {one}"),
            _ => continue,
        };
        let other = r
            .swept
            .iter()
            .filter(|k| k.as_str() != "seed" && !switches.contains(k))
            .map(|k| {
                let v = r.params.get(k).or_else(|| r.task_options.get(k)).or_else(|| r.train.get(k));
                format!("{k}={}", v.map_or("·".to_string(), |v| v.to_string()))
            })
            .collect::<Vec<_>>()
            .join(" ");
        match rows.iter_mut().find(|row| row.variant == variant && row.other == other) {
            Some(row) => row.runs.push((*r).clone()),
            None => rows.push(Row { variant, other, runs: vec![(*r).clone()] }),
        }
    }
    // The full model first, then the variants in the order of their switches' names.
    rows.sort_by(|a, b| (a.variant != "full", &a.variant, &a.other).cmp(&(b.variant != "full", &b.variant, &b.other)));
    rows
}
