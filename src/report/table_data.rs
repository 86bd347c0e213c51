//! The data behind a results table as one JSON document (`memctl results --data-dir`): the
//! verdict and its criteria, the rows as `memctl runs --format json` prints a sheet, the
//! trivial levels, and every run behind the rows as its whole record (configuration, final
//! metrics, curves, spec version, machine and build), with each spec text stated once in
//! `spec_texts` instead of in every record. `memctl import` rebuilds the runs from it, so a
//! committed data file is enough to regenerate its table.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value as Json;

use super::json;
use super::results::{Table, sheet};
use super::selection::Selection;
use super::verdict::{self, Outcome};
use crate::store::RunRecord;
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
    /// Whole records, but for `spec_text` (in `spec_texts`, by the record's `spec_hash`).
    runs: Vec<Json>,
    spec_texts: BTreeMap<&'a str, &'a str>,
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
        runs: runs.iter().map(|r| without_spec_text(r)).collect::<Result<_, _>>()?,
        spec_texts: runs.iter().map(|r| (r.spec_hash.as_str(), r.spec_text.as_str())).collect(),
    };
    serde_json::to_string_pretty(&data)
}

fn without_spec_text(r: &RunRecord) -> Result<Json, serde_json::Error> {
    let mut json = serde_json::to_value(r)?;
    if let Some(fields) = json.as_object_mut() {
        fields.remove("spec_text");
    }
    Ok(json)
}

fn outcome_name(o: Outcome) -> &'static str {
    match o {
        Outcome::Met => "met",
        Outcome::MetSoFar => "met so far",
        Outcome::UnmetSoFar => "unmet so far",
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
        assert_eq!(json["runs"][0]["status"], "done");
        assert_eq!(json["spec_texts"]["h"], runs[1].spec_text.as_str());
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
