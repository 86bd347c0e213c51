//! The data behind a results table as one JSON document (`memctl results --data-dir`): the
//! verdict and its criteria, the rows as `memctl runs --format json` prints a sheet, the
//! trivial levels, and every run behind the rows (configuration, final metrics, curves, spec
//! version, machine and build), without the spec text a record also keeps.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value as Json;

use super::json;
use super::results::{Table, sheet};
use super::selection::Selection;
use super::verdict::{self, Outcome};
use crate::store::{Environment, RunRecord, StoredConfig};
use crate::tasks::TrivialLevel;

#[derive(Serialize)]
struct TableData<'a> {
    title: &'a str,
    experiments: &'a [String],
    verdict: String,
    criteria: Vec<CriterionData>,
    rows: Vec<Json>,
    trivial_levels: BTreeMap<&'a str, Vec<TrivialLevel>>,
    left_out: LeftOut,
    runs: Vec<RunData<'a>>,
}

#[derive(Serialize)]
struct CriterionData {
    outcome: &'static str,
    line: String,
}

#[derive(Serialize)]
struct LeftOut {
    repeated_runs: usize,
    older_spec_versions: usize,
}

/// A run as the table used it.
#[derive(Serialize)]
struct RunData<'a> {
    id: u64,
    trial_key: &'a str,
    spec_path: &'a str,
    spec_hash: &'a str,
    config: &'a StoredConfig,
    final_metrics: &'a BTreeMap<String, f64>,
    curves: &'a BTreeMap<String, Vec<(u64, f64)>>,
    steps_run: u64,
    steps_to_converge: Option<u64>,
    epochs_to_converge: Option<f64>,
    stop_reason: &'a str,
    param_count: u64,
    started_at: f64,
    ended_at: Option<f64>,
    wall_seconds: f64,
    train_seconds: f64,
    /// The device, CPUs and host, and the memctl version (the record keeps no commit).
    environment: &'a Environment,
}

impl<'a> RunData<'a> {
    fn of(r: &'a RunRecord) -> RunData<'a> {
        RunData {
            id: r.id,
            trial_key: &r.trial_key,
            spec_path: &r.spec_path,
            spec_hash: &r.spec_hash,
            config: &r.config,
            final_metrics: &r.final_metrics,
            curves: &r.curves,
            steps_run: r.steps_run,
            steps_to_converge: r.steps_to_converge,
            epochs_to_converge: r.epochs_to_converge,
            stop_reason: &r.stop_reason,
            param_count: r.param_count,
            started_at: r.started_at,
            ended_at: r.ended_at,
            wall_seconds: r.wall_seconds,
            train_seconds: r.train_seconds,
            environment: &r.environment,
        }
    }
}

/// The table's data as pretty-printed JSON.
pub fn render(t: &Table, selection: &Selection) -> Result<String, serde_json::Error> {
    let judgements = t.judge(selection);
    let runs: Vec<&RunRecord> = selection.runs().collect();
    let mut trivial_levels = BTreeMap::new();
    for r in &runs {
        trivial_levels
            .entry(r.config.task.as_str())
            .or_insert_with(|| crate::tasks::trivial_levels(&r.config.task, &r.config.task_options));
    }
    let data = TableData {
        title: &t.title,
        experiments: &t.experiments,
        verdict: verdict::summary(&judgements),
        criteria: judgements
            .iter()
            .map(|j| CriterionData { outcome: outcome_name(j.outcome), line: j.line.clone() })
            .collect(),
        rows: json::row_objects(&sheet(t, selection)),
        trivial_levels,
        left_out: LeftOut {
            repeated_runs: selection.repeats_left_out,
            older_spec_versions: selection.older_versions_left_out,
        },
        runs: runs.into_iter().map(RunData::of).collect(),
    };
    serde_json::to_string_pretty(&data)
}

fn outcome_name(o: Outcome) -> &'static str {
    match o {
        Outcome::Met => "met",
        Outcome::Unmet => "unmet",
        Outcome::NotRun => "not run",
        Outcome::Ambiguous => "ambiguous",
    }
}

/// A file name for a table: its title in lower case, words joined by `-`
/// (`SAM Table 1: STM ablations` → `sam-table-1-stm-ablations`).
pub fn slug(title: &str) -> String {
    let words: Vec<String> =
        title.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).map(str::to_lowercase).collect();
    if words.is_empty() { "table".into() } else { words.join("-") }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::selection::{select, tests::run};
    use crate::value::Value;

    #[test]
    fn a_tables_data_has_its_verdict_rows_and_runs() {
        let yaml = "title: R\ntables:\n  - title: T\n    experiments: [exp]\n    rows: [d]\n    metrics: [accuracy]\n    \
                    criteria:\n      - at_least: {row: {d: 8}, metric: accuracy, value: 0.5}\n";
        let report = crate::report::results::load(yaml).unwrap();
        let runs = [run(1, "a", "h", &[("d", Value::Int(8))], 0.5), run(2, "a", "h", &[("d", Value::Int(8))], 0.7)];
        let t = &report.tables[0];
        let json: Json = serde_json::from_str(&render(t, &select(&runs, &t.experiments, &t.rows)).unwrap()).unwrap();
        assert_eq!(json["verdict"], "reproduced (1 of 1 criteria met)");
        assert_eq!(json["criteria"][0]["outcome"], "met");
        assert_eq!(json["rows"][0]["accuracy"], serde_json::json!({"mean": 0.7, "std": null, "n": 1}));
        assert_eq!(json["left_out"]["repeated_runs"], 1);
        assert_eq!(json["runs"].as_array().map(Vec::len), Some(1));
        assert_eq!(json["runs"][0]["id"], 2);
        assert_eq!(json["runs"][0]["environment"]["device"], "cpu");
        assert!(json["runs"][0].get("spec_text").is_none());
        assert_eq!(json["trivial_levels"]["assocRetrieval"][0]["value"], 0.1);
    }

    #[test]
    fn slugs_are_lower_case_words() {
        assert_eq!(
            slug("SAM Table 1: STM ablations on associative retrieval"),
            "sam-table-1-stm-ablations-on-associative-retrieval"
        );
        assert_eq!(
            slug("Product Kanerva Machine Fig. 2C: RGB binding, k = 2 × 30"),
            "product-kanerva-machine-fig-2c-rgb-binding-k-2-30"
        );
        assert_eq!(slug("::"), "table");
    }
}
