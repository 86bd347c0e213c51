//! The ablation table (`memctl ablate`), in the style of the SAM paper's Table 1: one row per
//! variant (full model, then each switch turned off), with steps (and epochs, when the task
//! has a fixed training set) to converge and the final test metric, `mean ± std (n)` over
//! seeds.

use super::sheet::{Cell, Sheet, Stat};
use crate::store::RunSummary;

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
    Sheet { columns, rows }
}
