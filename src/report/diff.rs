//! Two runs side by side (`memctl diff A B`): the configuration values that differ (the
//! ablation), every metric with its change, and a line diff of the specs if they differ.

use comfy_table::{CellAlignment, Table, presets::UTF8_FULL_CONDENSED};

use super::numbers::{duration, sig3};
use crate::store::RunRecord;

pub struct Diff {
    /// `(name, value in A, value in B)` for each configuration value that differs.
    pub config: Vec<(String, Option<String>, Option<String>)>,
    /// `(name, A, B)` for each metric either run has.
    pub metrics: Vec<(String, Option<f64>, Option<f64>)>,
    /// Unified diff of the spec texts, when they differ.
    pub spec: Option<String>,
}

/// Configuration as `(name, value)`: experiment, model, task, seed, then `param.`, `task.`
/// and `train.` values (the device is where it ran, not what it was, and is left out).
fn config(r: &RunRecord) -> Vec<(String, String)> {
    let mut out = vec![
        ("experiment".to_string(), r.config.experiment.clone()),
        ("model".to_string(), r.config.model.clone()),
        ("task".to_string(), r.config.task.clone()),
        ("seed".to_string(), r.config.seed.to_string()),
    ];
    out.extend(r.config.params.iter().map(|(k, v)| (format!("param.{k}"), v.to_string())));
    out.extend(r.config.task_options.iter().map(|(k, v)| (format!("task.{k}"), v.to_string())));
    out.extend(
        r.config
            .train
            .clone()
            .into_iter()
            .filter(|(k, _)| k != "device")
            .map(|(k, v)| (format!("train.{k}"), v.to_string())),
    );
    out.push(("spec".to_string(), r.spec_path.clone()));
    out
}

fn metrics(r: &RunRecord) -> Vec<(String, f64)> {
    let mut out: Vec<(String, f64)> = r.final_metrics.iter().map(|(k, v)| (k.clone(), *v)).collect();
    if let Some(s) = r.steps_to_converge {
        out.push(("steps_to_converge".into(), s as f64));
    }
    if let Some(e) = r.epochs_to_converge {
        out.push(("epochs_to_converge".into(), e));
    }
    out.push(("steps_run".into(), r.steps_run as f64));
    out.push(("wall".into(), r.seconds_over_every_process()));
    out
}

/// Union of keys in first-seen order, with each side's value.
fn merge<T: Clone>(a: &[(String, T)], b: &[(String, T)]) -> Vec<(String, Option<T>, Option<T>)> {
    let mut keys: Vec<&String> = a.iter().map(|(k, _)| k).collect();
    for (k, _) in b {
        if !keys.contains(&k) {
            keys.push(k);
        }
    }
    let get = |side: &[(String, T)], k: &String| side.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
    keys.into_iter().map(|k| (k.clone(), get(a, k), get(b, k))).collect()
}

pub fn diff(a: &RunRecord, b: &RunRecord) -> Diff {
    let config = merge(&config(a), &config(b)).into_iter().filter(|(_, x, y)| x != y).collect();
    let metrics = merge(&metrics(a), &metrics(b));
    let spec = (a.spec_text != b.spec_text).then(|| {
        similar::TextDiff::from_lines(&a.spec_text, &b.spec_text)
            .unified_diff()
            .context_radius(3)
            .header(&format!("run {} ({})", a.id, a.spec_path), &format!("run {} ({})", b.id, b.spec_path))
            .to_string()
    });
    Diff { config, metrics, spec }
}

impl Diff {
    pub fn render(&self, a: &RunRecord, b: &RunRecord) -> String {
        let (ha, hb) = (format!("run {}", a.id), format!("run {}", b.id));
        let mut out = String::new();
        if self.config.is_empty() {
            out.push_str("same configuration\n");
        } else {
            let mut t = Table::new();
            t.load_preset(UTF8_FULL_CONDENSED).set_header(vec!["differs", &ha, &hb]);
            for (k, x, y) in &self.config {
                let show = |v: &Option<String>| v.clone().unwrap_or_else(|| "·".into());
                t.add_row(vec![k.clone(), show(x), show(y)]);
            }
            out.push_str(&format!("{t}\n"));
        }
        let mut t = Table::new();
        t.load_preset(UTF8_FULL_CONDENSED).set_header(vec!["metric", &ha, &hb, "change"]);
        // Step counts are whole numbers: `40`, not `40.0`.
        let counted = |k: &str| matches!(k, "steps_run" | "steps_to_converge");
        let fmt = |k: &str, v: f64| match k {
            "wall" => duration(v),
            _ if counted(k) => format!("{v:.0}"),
            _ => sig3(v),
        };
        for (k, x, y) in &self.metrics {
            let show = |v: &Option<f64>| v.map_or("·".to_string(), |v| fmt(k, v));
            let change = match (x, y) {
                (Some(x), Some(y)) if x == y => "=".to_string(),
                (Some(x), Some(y)) if k == "wall" => {
                    format!("{}{}", if y > x { "+" } else { "-" }, duration((y - x).abs()))
                }
                (Some(x), Some(y)) => format!("{}{}", if y > x { "+" } else { "" }, fmt(k, y - x)),
                _ => String::new(),
            };
            let right = |s: String| comfy_table::Cell::new(s).set_alignment(CellAlignment::Right);
            t.add_row(vec![comfy_table::Cell::new(k), right(show(x)), right(show(y)), right(change)]);
        }
        out.push_str(&format!("{t}\n"));
        out.push_str(&format!("status: {} vs {}\n", a.status.as_str(), b.status.as_str()));
        match &self.spec {
            Some(d) => out.push_str(&format!("\nspecs differ:\n{d}")),
            None => out.push_str("same spec text\n"),
        }
        out
    }
}
