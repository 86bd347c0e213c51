//! The `memctl runs` table: one row per run, newest first.

use comfy_table::{Table, presets::UTF8_FULL_CONDENSED};

use super::numbers::{duration, sig3};
use crate::store::RunRecord;

/// Final metrics shown first, in this order, when present.
const METRIC_ORDER: &[&str] = &["accuracy", "bit_error", "loss"];

/// Columns: id, experiment, model, the parameters swept in any shown run, seed, status,
/// final test metrics, steps to converge, wall time.
pub fn table(runs: &[RunRecord]) -> Table {
    let mut swept: Vec<String> = vec![];
    for r in runs {
        for (k, _) in &r.config.swept {
            if k != "seed" && !swept.contains(k) {
                swept.push(k.clone());
            }
        }
    }
    let mut metrics: Vec<String> = vec![];
    for m in METRIC_ORDER {
        if runs.iter().any(|r| r.final_metrics.contains_key(*m)) {
            metrics.push(m.to_string());
        }
    }
    let mut header: Vec<String> = vec!["id".into(), "experiment".into(), "model".into()];
    header.extend(swept.iter().cloned());
    header.extend(["seed".into(), "status".into()]);
    header.extend(metrics.iter().cloned());
    header.extend(["to converge".into(), "steps".into(), "wall".into()]);
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED).set_header(header);
    for r in runs {
        let mut row: Vec<String> = vec![r.id.to_string(), r.config.experiment.clone(), r.config.model.clone()];
        for k in &swept {
            let v = r.config.swept.iter().find(|(n, _)| n == k).map(|(_, v)| v.to_string());
            row.push(v.unwrap_or_else(|| "·".into()));
        }
        row.push(r.config.seed.to_string());
        row.push(r.status.as_str().into());
        for m in &metrics {
            row.push(r.final_metrics.get(m).map_or("·".into(), |v| sig3(*v)));
        }
        row.push(r.steps_to_converge.map_or("·".into(), |s| s.to_string()));
        row.push(r.steps_run.to_string());
        row.push(duration(r.wall_seconds));
        t.add_row(row);
    }
    t
}
