//! `docs/results.md` from the store: each paper table as rows of variants (runs grouped by the
//! parameters that define a variant), each metric as mean ± std over seeds, the paper's figure
//! beside it, and the wall time the runs took. The tables are described in a YAML file
//! (`specs/paper/results.yaml`), read with serde-saphyr; the numbers come only from the store.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;

use serde::Deserialize;

use super::markdown;
use super::numbers::{count, duration, sig3};
use super::provenance;
use super::selection::{Selection, key_value, metric, select};
use super::sheet::{Cell, Sheet, Stat};
use super::verdict::{self, Context, Criterion, CriterionError, Judgement, RowMatch, row_matches};
use crate::store::RunRecord;

/// The report's description.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Report {
    pub title: String,
    #[serde(default)]
    pub intro: String,
    #[serde(default)]
    pub tables: Vec<Table>,
    /// Tables grouped under headings of their own, after `tables` (the papers' scale on a GPU,
    /// then CPU scale).
    #[serde(default)]
    pub sections: Vec<Section>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Section {
    pub title: String,
    #[serde(default)]
    pub intro: String,
    pub tables: Vec<Table>,
}

impl Report {
    /// Every table, in the order the document shows them.
    pub fn all_tables(&self) -> impl Iterator<Item = &Table> {
        self.tables.iter().chain(self.sections.iter().flat_map(|s| &s.tables))
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Table {
    pub title: String,
    /// Which runs: their experiment name(s).
    pub experiments: Vec<String>,
    /// Swept or fixed values that tell the rows apart (a row per distinct combination);
    /// `model`, `task` and `experiment` may be used too.
    pub rows: Vec<String>,
    /// Final metrics to show (`accuracy`, `bit_error`, `od_easy_seq_accuracy`, ...) and
    /// `steps_to_converge` / `epochs_to_converge`.
    pub metrics: Vec<String>,
    /// How the CPU-scale setting differs from the paper's.
    #[serde(default)]
    pub scale: String,
    /// The paper's figures: a row (values of `rows`) and metric → figure.
    #[serde(default)]
    pub paper: Vec<PaperRow>,
    /// How long the paper trained, to compare with the runs' length.
    pub paper_training: Option<PaperTraining>,
    /// What must hold for the table to count as reproduced; the verdict is computed from them.
    #[serde(default)]
    pub criteria: Vec<Criterion>,
    /// Context for the reader, written after reading the numbers (the verdict is computed).
    #[serde(default)]
    pub notes: String,
    /// A model fitted to the runs: `kanerva_runtime` fits the seconds per step to
    /// `c + a·k + b·(m/k)³` over the parameters `k` and `m` (Product Kanerva Machines, Fig. 1C–D).
    #[serde(default)]
    pub fit: Option<String>,
    /// The runs each row should have (the seeds or repetitions its specs sweep). A criterion
    /// met on rows with fewer is met only so far, and so is the table.
    #[serde(default)]
    pub seeds: Option<usize>,
    /// A learning curve (`val_accuracy`, `val_loss`, ...) to draw for the table, one line per
    /// row (`report::table_curves`; drawn where `memctl results --data-dir` writes the data).
    #[serde(default)]
    pub curves: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PaperRow {
    #[serde(rename = "match")]
    pub when: RowMatch,
    pub figures: BTreeMap<String, Figure>,
}

/// A figure of the paper: its number (in the metric's own units: 0.84 for 84 % accuracy),
/// a label to show instead (for context, or a figure that is not a number), or both.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Figure {
    pub value: Option<f64>,
    pub label: Option<String>,
}

impl Figure {
    pub fn display(&self) -> String {
        match (&self.label, self.value) {
            (Some(label), _) => label.clone(),
            (None, Some(v)) => sig3(v),
            (None, None) => "·".into(),
        }
    }
}

/// The paper's training length.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PaperTraining {
    pub steps: Option<u64>,
    pub epochs: Option<f64>,
    /// In words, where numbers do not say it all ("up to 100 epochs of 100 000 sequences").
    pub label: Option<String>,
}

impl PaperTraining {
    /// The label, or the numbers.
    pub fn display(&self) -> Option<String> {
        let numbers: Vec<String> =
            [self.steps.map(|s| format!("{} steps", count(s))), self.epochs.map(|e| format!("{} epochs", sig3(e)))]
                .into_iter()
                .flatten()
                .collect();
        self.label.clone().or_else(|| (!numbers.is_empty()).then(|| numbers.join(", ")))
    }
}

/// Why a description cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum DescriptionError {
    #[error("{0}")]
    Yaml(String),
    #[error("table \"{table}\", criterion {index}: {error}")]
    Criterion { table: String, index: usize, error: CriterionError },
    #[error("table \"{table}\": a paper figure for `{metric}` has neither a value nor a label")]
    EmptyFigure { table: String, metric: String },
    #[error("table \"{table}\": the paper figure for `{metric}` is {value}, not a finite number")]
    FigureNotFinite { table: String, metric: String, value: f64 },
    #[error("the description has no tables (`tables`, or `sections` with tables)")]
    NoTables,
    #[error("table \"{table}\": `experiments` is empty; name the experiments whose runs it shows")]
    NoExperiments { table: String },
    #[error("table \"{table}\": no fit is called `{fit}` (the one there is: kanerva_runtime)")]
    UnknownFit { table: String, fit: String },
    #[error("table \"{table}\": none of its {runs} runs has {what} `{name}`; {hint}")]
    UnknownName { table: String, runs: usize, what: &'static str, name: String, hint: String },
}

/// Reads and checks a description: YAML that does not fit, and criteria that name rows,
/// metrics or paper figures the table does not have, are errors here, before any run is read.
pub fn load(text: &str) -> Result<Report, DescriptionError> {
    load_named(text, "<input>")
}

/// [`load`], with YAML errors located in `source` (the file's path) rather than `<input>`.
pub fn load_named(text: &str, source: &str) -> Result<Report, DescriptionError> {
    if text.trim().is_empty() {
        return Err(DescriptionError::Yaml(format!(
            "{source} is empty; a description holds a `title` and its `tables` (docs/results.md)"
        )));
    }
    let report: Report = serde_saphyr::from_str(text).map_err(|e| {
        let rendered = e.render_with_options(serde_saphyr::render_options! { source_name: Some(source) });
        // The CLI prints its own `error: ` before every message; saphyr's would repeat it, and
        // its advice on duplicate keys is for programs that use it, not for the file's author.
        let rendered = rendered.strip_prefix("error: ").map(str::to_owned).unwrap_or(rendered);
        DescriptionError::Yaml(
            rendered.replace(", set DuplicateKeyPolicy in Options if acceptable", " (each key once)"),
        )
    })?;
    if report.all_tables().next().is_none() {
        return Err(DescriptionError::NoTables);
    }
    for t in report.all_tables() {
        if t.experiments.is_empty() {
            return Err(DescriptionError::NoExperiments { table: t.title.clone() });
        }
        if let Some(fit) = t.fit.as_ref().filter(|f| f.as_str() != "kanerva_runtime") {
            return Err(DescriptionError::UnknownFit { table: t.title.clone(), fit: fit.clone() });
        }
        for (metric, f) in t.paper.iter().flat_map(|p| &p.figures) {
            if f.value.is_none() && f.label.is_none() {
                return Err(DescriptionError::EmptyFigure { table: t.title.clone(), metric: metric.clone() });
            }
            // A criterion against NaN or infinity would judge nothing (`≥ NaN − 0.02`).
            if let Some(value) = f.value.filter(|v| !v.is_finite()) {
                return Err(DescriptionError::FigureNotFinite {
                    table: t.title.clone(),
                    metric: metric.clone(),
                    value,
                });
            }
        }
        let paper = |m: &RowMatch, metric: &str| t.paper_number(m, metric);
        let cx = Context { row_keys: &t.rows, metrics: &t.metrics, rows: &[], paper: &paper, seeds: t.seeds };
        for (i, c) in t.criteria.iter().enumerate() {
            c.validate(&cx).map_err(|error| DescriptionError::Criterion {
                table: t.title.clone(),
                index: i + 1,
                error,
            })?;
        }
    }
    Ok(report)
}

/// Names the runs must supply, checked once a table has runs: a row key, metric or curve that
/// none of them has would show as `·` in every row, which is a typo far more often than news.
pub fn check_names(report: &Report, runs: &[RunRecord]) -> Result<(), DescriptionError> {
    for t in report.all_tables() {
        let selection = select(runs, &t.experiments, &t.rows);
        let mine: Vec<&RunRecord> = selection.runs().collect();
        if mine.is_empty() {
            continue;
        }
        let unknown = |what: &'static str, name: &str, known: BTreeSet<&str>| {
            let hint = crate::suggest::did_you_mean(name, known.iter().copied()).unwrap_or_else(|| {
                let list: Vec<&str> = known.iter().copied().collect();
                format!("they have: {}", list.join(", "))
            });
            DescriptionError::UnknownName { table: t.title.clone(), runs: mine.len(), what, name: name.into(), hint }
        };
        let keys: BTreeSet<&str> = ["model", "experiment", "task", "seed"]
            .into_iter()
            .chain(mine.iter().flat_map(|r| {
                let c = &r.config;
                c.params.keys().chain(c.task_options.keys()).chain(c.train.keys()).map(String::as_str)
            }))
            .collect();
        if let Some(k) = t.rows.iter().find(|k| !keys.contains(k.as_str())) {
            return Err(unknown("a parameter, task option or training setting", k, keys));
        }
        let metrics: BTreeSet<&str> = ["ms_per_step", "steps_to_converge", "epochs_to_converge"]
            .into_iter()
            .chain(mine.iter().flat_map(|r| r.final_metrics.keys().map(String::as_str)))
            .collect();
        if let Some(m) = t.metrics.iter().find(|m| !metrics.contains(m.as_str())) {
            return Err(unknown("a final metric", m, metrics));
        }
        let curves: BTreeSet<&str> = mine.iter().flat_map(|r| r.curves.keys().map(String::as_str)).collect();
        if let Some(c) = t.curves.as_ref().filter(|c| !curves.contains(c.as_str())) {
            return Err(unknown("a curve", c, curves));
        }
    }
    Ok(())
}

/// The experiments the store knows of: those its runs are of, and those their specs declare
/// (the experiments of a spec not run yet).
pub fn known_experiments(runs: &[RunRecord]) -> BTreeSet<String> {
    let mut known: BTreeSet<String> = runs.iter().map(|r| r.config.experiment.clone()).collect();
    let mut texts = BTreeSet::new();
    for r in runs.iter().filter(|r| texts.insert(r.spec_hash.as_str())) {
        known.extend(crate::lang::declared::declared_experiments(&r.spec_text));
    }
    known
}

/// The table's experiments that are not `known` but within two edits of one that is, each said
/// as `no run is of experiment `x` …: not run yet, or a misspelt `y`?`. Not errors: an
/// experiment of a spec that has not run at all is unknown too, and its name may well resemble
/// one that has run (`sam_table4_stm`, `sam_table2_stm`).
pub fn unknown_experiments(t: &Table, known: &BTreeSet<String>) -> Vec<String> {
    t.experiments
        .iter()
        .filter(|e| !known.contains(*e))
        .filter_map(|e| {
            let near = crate::suggest::closest_within(e, known.iter().map(String::as_str), 2)?;
            Some(format!(
                "no run is of experiment `{e}` and no run's spec declares it: not run yet, or a misspelt `{near}`?"
            ))
        })
        .collect()
}

impl Table {
    /// The paper's number for the row a criterion names: from the paper row whose match
    /// agrees with it.
    fn paper_number(&self, m: &RowMatch, metric: &str) -> Option<f64> {
        self.paper
            .iter()
            .filter(|p| p.when.iter().all(|(k, v)| m.get(k).is_some_and(|x| x.is(&v.0))))
            .find_map(|p| p.figures.get(metric)?.value)
    }

    /// The paper's training length in words, if stated.
    fn paper_length(&self) -> Option<String> {
        self.paper_training.as_ref().and_then(PaperTraining::display)
    }

    /// The paper row for a table row.
    fn paper_row(&self, key: &[String]) -> Option<&PaperRow> {
        self.paper.iter().find(|p| row_matches(&self.rows, key, &p.when))
    }

    /// Every criterion judged on the selected rows.
    pub fn judge(&self, selection: &Selection) -> Vec<Judgement> {
        let paper = |m: &RowMatch, metric: &str| self.paper_number(m, metric);
        let cx = Context {
            row_keys: &self.rows,
            metrics: &self.metrics,
            rows: &selection.rows,
            paper: &paper,
            seeds: self.seeds,
        };
        self.criteria.iter().map(|c| c.judge(&cx)).collect()
    }
}

/// `mean ± std (n)` with the sample standard deviation (n − 1); just the value when n = 1.
pub fn mean_std(values: &[f64]) -> String {
    Stat::of(values).map_or_else(|| "·".into(), |s| s.display())
}

/// Renders the report as Markdown from the store's runs.
pub fn render(report: &Report, runs: &[RunRecord]) -> String {
    render_with_figures(report, runs, &[])
}

/// As [`render`], with a figure under each table whose entry in `figures` (one per table, in
/// [`Report::all_tables`]'s order) is the link to its curves.
pub fn render_with_figures(report: &Report, runs: &[RunRecord], figures: &[Option<String>]) -> String {
    let mut figure = figures.iter().cloned().chain(std::iter::repeat(None));
    let mut out = String::new();
    let _ = writeln!(out, "# {}\n", report.title);
    if !report.intro.is_empty() {
        let _ = writeln!(out, "{}\n", report.intro.trim());
    }
    let _ = writeln!(out, "_Generated by `memctl results` from the run store; do not edit by hand._\n");
    for t in &report.tables {
        render_table(&mut out, "##", t, &select(runs, &t.experiments, &t.rows), figure.next().flatten());
    }
    for section in &report.sections {
        let _ = writeln!(out, "## {}\n", section.title);
        if !section.intro.is_empty() {
            let _ = writeln!(out, "{}\n", section.intro.trim());
        }
        for t in &section.tables {
            render_table(&mut out, "###", t, &select(runs, &t.experiments, &t.rows), figure.next().flatten());
        }
    }
    out
}

fn render_table(out: &mut String, heading: &str, t: &Table, selection: &Selection, figure: Option<String>) {
    let _ = writeln!(out, "{heading} {}\n", t.title);
    if !t.scale.is_empty() {
        let _ = writeln!(out, "{}\n", t.scale.trim());
    }
    let judgements = t.judge(selection);
    let _ = writeln!(out, "**Verdict: {}.**\n", verdict::summary(&judgements));
    for j in &judgements {
        let _ = writeln!(out, "- {}", j.line);
    }
    if !judgements.is_empty() {
        out.push('\n');
    }
    if selection.is_empty() {
        let _ = writeln!(out, "_No finished runs of {} in the store yet._\n", t.experiments.join(", "));
    } else {
        render_rows(out, t, selection);
    }
    if let (Some(metric), Some(link)) = (&t.curves, figure) {
        let _ = writeln!(out, "{}\n", super::table_curves::markdown(t, metric, &link));
    }
    if !t.notes.is_empty() {
        let _ = writeln!(out, "**Notes.** {}\n", t.notes.trim());
    }
}

/// The table's rows as a sheet: key values, each metric's mean ± std with the paper's figure
/// beside it, the spec version where rows differ in it, convergence and wall time. The
/// Markdown table and the exported JSON rows are both printed from it.
pub fn sheet(t: &Table, selection: &Selection) -> Sheet {
    let has_paper = |m: &String| t.paper.iter().any(|p| p.figures.contains_key(m));
    let mut columns: Vec<String> = t.rows.clone();
    for m in &t.metrics {
        columns.push(m.clone());
        if has_paper(m) {
            columns.push(format!("paper {m}"));
        }
    }
    // Rows of different spec versions are marked, so that a reader sees which ran together.
    let versions = selection.rows.iter().map(|r| r.version.as_str()).collect::<BTreeSet<_>>();
    if versions.len() > 1 {
        columns.push("spec".into());
    }
    let fitted = fitted_runtime(t, selection);
    if fitted.is_some() {
        columns.push("fitted ms_per_step".into());
    }
    columns.push("converged".into());
    columns.push("wall (sum)".into());
    let mut rows = vec![];
    for row in &selection.rows {
        let paper = t.paper_row(&row.key);
        let mut cells: Vec<Cell> = row.key.iter().map(|k| Cell::Text(k.clone())).collect();
        for m in &t.metrics {
            let vals: Vec<f64> = row.runs.iter().filter_map(|r| metric(r, m)).collect();
            cells.push(Stat::of(&vals).map_or(Cell::Missing, Cell::Stat));
            if has_paper(m) {
                let figure = paper.and_then(|p| p.figures.get(m));
                cells.push(figure.map_or(Cell::Missing, |f| Cell::Text(f.display())));
            }
        }
        if versions.len() > 1 {
            cells.push(Cell::Text(row.spec_hash.chars().take(8).collect()));
        }
        if let Some(fit) = &fitted {
            let predicted = row.runs.first().and_then(|r| fit.ms_per_step(r));
            cells.push(predicted.map_or(Cell::Missing, Cell::Float));
        }
        let converged = row.runs.iter().filter(|r| r.steps_to_converge.is_some()).count();
        cells.push(Cell::Text(format!("{converged}/{}", row.runs.len())));
        cells.push(Cell::Seconds(row.runs.iter().map(|r| r.seconds_over_every_process()).sum()));
        rows.push(cells);
    }
    Sheet::new(columns, rows)
}

fn render_rows(out: &mut String, t: &Table, selection: &Selection) {
    let mine: Vec<&RunRecord> = selection.runs().collect();
    out.push_str(&markdown::render(&sheet(t, selection)));
    let total: f64 = mine.iter().map(|r| r.seconds_over_every_process()).sum();
    let first = mine.iter().map(|r| r.started_at).fold(f64::INFINITY, f64::min);
    let last = mine.iter().filter_map(|r| r.ended_at).fold(0.0, f64::max);
    let _ = writeln!(
        out,
        "\n{} run{}; compute time {} (sum over runs), elapsed {} from the first start to the last end.\n",
        mine.len(),
        if mine.len() == 1 { "" } else { "s" },
        duration(total),
        duration((last - first).max(0.0))
    );
    if let Some(note) = left_out_note(selection) {
        let _ = writeln!(out, "{note}\n");
    }
    let mixed = mixed_rows(t, selection);
    if !mixed.is_empty() {
        let _ = writeln!(out, "Mixed: {}.\n", mixed.join("; "));
    }
    let _ = writeln!(out, "{}\n", trivial_note(&mine));
    let _ = writeln!(
        out,
        "{} {}\n",
        provenance::where_line(&mine),
        provenance::length_line(&mine, t.paper_length().as_deref())
    );
    if let Some(fit) = fitted_runtime(t, selection) {
        let _ = writeln!(out, "{}\n", fit.describe(&mine));
    } else if t.fit.is_some() {
        let _ = writeln!(out, "Too few runs to fit c + a·k + b·(m/k)³.\n");
    }
}

/// The tasks' trivial levels (chance, the best input-only shortcut) for the options the runs
/// used, one entry per distinct set; tasks with none are named.
fn trivial_note(runs: &[&RunRecord]) -> String {
    let mut stated = BTreeSet::new();
    let mut none = BTreeSet::new();
    for r in runs {
        let levels = crate::tasks::trivial_levels(&r.config.task, &r.config.task_options);
        if levels.is_empty() {
            none.insert(r.config.task.clone());
            continue;
        }
        // One entry per strategy: "NAME metric value, metric value".
        let mut shown: Vec<String> = vec![];
        for (i, l) in levels.iter().enumerate() {
            let score = format!("{} {}", l.metric, sig3(l.value));
            match shown.last_mut() {
                Some(last) if i > 0 && levels[i - 1].name == l.name => *last = format!("{last}, {score}"),
                _ => shown.push(format!("{} {score}", l.name)),
            }
        }
        stated.insert(format!("{}: {}", r.config.task, shown.join("; ")));
    }
    let mut parts: Vec<String> = stated.into_iter().collect();
    if !none.is_empty() {
        let lead = if parts.is_empty() { "none" } else { "None" };
        parts.push(format!("{lead} worked out for {}", none.into_iter().collect::<Vec<_>>().join(", ")));
    }
    format!("Trivial levels — {}.", parts.join(". "))
}

/// What the table leaves out, if anything: repeated runs of a trial and older spec versions.
fn left_out_note(s: &Selection) -> Option<String> {
    let mut parts = vec![];
    if s.repeats_left_out > 0 {
        parts.push(format!(
            "{} earlier run{} of trials that ran again (each trial counts once, by its newest finished run)",
            s.repeats_left_out,
            plural(s.repeats_left_out)
        ));
    }
    if s.older_versions_left_out > 0 {
        parts.push(format!(
            "{} run{} of older spec versions (a row shows the runs of its newest run's spec version)",
            s.older_versions_left_out,
            plural(s.older_versions_left_out)
        ));
    }
    (!parts.is_empty()).then(|| format!("Left out: {}.", parts.join("; ")))
}

/// Rows that average runs differing in more than the seed (a parameter, task option or
/// training setting that is not a row key, swept or set on the command line), each said as
/// `row `stm` averages lr 0.001, 0.01 (add `lr` to `rows` to split it)`.
pub fn mixed_rows(t: &Table, selection: &Selection) -> Vec<String> {
    let mut said = vec![];
    for row in &selection.rows {
        let mixed = row.mixed(&t.rows);
        if mixed.is_empty() {
            continue;
        }
        let which = if row.key.is_empty() { "the row".to_string() } else { format!("row `{}`", row.key.join(", ")) };
        let values: Vec<String> =
            mixed.iter().map(|(k, v)| format!("{k} {}", v.iter().cloned().collect::<Vec<_>>().join(", "))).collect();
        // A qualified name (`train.lr`, shadowed by a parameter) is no row key.
        let names: Vec<String> =
            mixed.iter().filter(|(k, _)| !k.contains('.')).map(|(k, _)| format!("`{k}`")).collect();
        let split =
            if names.is_empty() { String::new() } else { format!(" (add {} to `rows` to split it)", names.join(", ")) };
        said.push(format!("{which} averages runs of {} as well as seeds{split}", values.join(" and ")));
    }
    said
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// The PKM paper's run-time law, seconds per step = `c + a·k + b·(m/k)³`, fitted by least
/// squares to the table's runs (`fit: kanerva_runtime`).
struct RuntimeFit {
    /// `[c, a, b]`.
    coefficients: [f64; 3],
    r2: f64,
    runs: usize,
}

/// The table's fit, if it asks for one and its runs determine it.
fn fitted_runtime(t: &Table, selection: &Selection) -> Option<RuntimeFit> {
    if t.fit.as_deref() != Some("kanerva_runtime") {
        return None;
    }
    let points: Vec<([f64; 3], f64)> =
        selection.runs().filter_map(|r| Some((RuntimeFit::terms(r)?, metric(r, "ms_per_step")? / 1e3))).collect();
    let (coefficients, r2) = least_squares(&points)?;
    Some(RuntimeFit { coefficients, r2, runs: points.len() })
}

impl RuntimeFit {
    /// `[1, k, (m/k)³]` for a run with parameters `k` and `m`.
    fn terms(r: &RunRecord) -> Option<[f64; 3]> {
        let k = r.config.params.get("k")?.as_float()?;
        let m = r.config.params.get("m")?.as_float()?;
        Some([1.0, k, (m / k).powi(3)])
    }

    /// The law's milliseconds per step for a run's `k` and `m`.
    fn ms_per_step(&self, r: &RunRecord) -> Option<f64> {
        let x = Self::terms(r)?;
        Some(1e3 * (0..3).map(|i| self.coefficients[i] * x[i]).sum::<f64>())
    }

    /// The coefficients, R², the paper's coefficients, and the residuals (measured − fitted)
    /// of the runs: their median size and the largest.
    fn describe(&self, runs: &[&RunRecord]) -> String {
        let [c, a, b] = self.coefficients;
        let mut residuals: Vec<(f64, f64, &RunRecord)> = runs
            .iter()
            .filter_map(|r| {
                let measured = metric(r, "ms_per_step")?;
                Some((measured - self.ms_per_step(r)?, measured, *r))
            })
            .collect();
        residuals.sort_by(|x, y| x.0.abs().total_cmp(&y.0.abs()));
        let residual_note = match (residuals.get(residuals.len() / 2), residuals.last()) {
            (Some(median), Some((worst, measured, r))) => format!(
                " Residuals of the runs (measured − fitted ms per step): median size {}, largest {}{} at m = {}, k = {} \
                 (measured {}).",
                sig3(median.0.abs()),
                if *worst >= 0.0 { "+" } else { "" },
                sig3(*worst),
                key_value(r, "m"),
                key_value(r, "k"),
                sig3(*measured)
            ),
            _ => String::new(),
        };
        format!(
            "Fit of seconds per step: c + a·k + b·(m/k)³ with c = {c:.3e}, a = {a:.3e}, b = {b:.3e} (R² = {:.3}, {} runs); \
             the paper's, on its hardware: c = 0.037, a = 3.3e−8, b = 0.218.{residual_note}",
            self.r2, self.runs
        )
    }
}

/// Ordinary least squares for three coefficients (normal equations, Gaussian elimination);
/// the coefficients and R².
pub fn least_squares(points: &[([f64; 3], f64)]) -> Option<([f64; 3], f64)> {
    if points.len() < 3 {
        return None;
    }
    let mut m = [[0.0f64; 4]; 3];
    for (x, y) in points {
        for i in 0..3 {
            for j in 0..3 {
                m[i][j] += x[i] * x[j];
            }
            m[i][3] += x[i] * y;
        }
    }
    for col in 0..3 {
        let pivot = (col..3).max_by(|&a, &b| m[a][col].abs().total_cmp(&m[b][col].abs()))?;
        m.swap(col, pivot);
        if m[col][col].abs() < 1e-300 {
            return None;
        }
        for row in 0..3 {
            if row != col {
                let f = m[row][col] / m[col][col];
                #[allow(clippy::needless_range_loop)] // rows `row` and `col` of one matrix
                for k in col..4 {
                    m[row][k] -= f * m[col][k];
                }
            }
        }
    }
    let coef = [m[0][3] / m[0][0], m[1][3] / m[1][1], m[2][3] / m[2][2]];
    let mean = points.iter().map(|(_, y)| y).sum::<f64>() / points.len() as f64;
    let (mut ss_res, mut ss_tot) = (0.0, 0.0);
    for (x, y) in points {
        let pred: f64 = (0..3).map(|i| coef[i] * x[i]).sum();
        ss_res += (y - pred).powi(2);
        ss_tot += (y - mean).powi(2);
    }
    Some((coef, if ss_tot > 0.0 { 1.0 - ss_res / ss_tot } else { 1.0 }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::Value;

    #[test]
    fn mean_and_sample_std() {
        // mean 2, sample variance ((1)² + 0 + (1)²) / 2 = 1
        assert_eq!(mean_std(&[1.0, 2.0, 3.0]), "2.00 ± 1.00 (3)");
        assert_eq!(mean_std(&[0.5]), "0.500 (1)");
        assert_eq!(mean_std(&[]), "·");
    }

    #[test]
    fn least_squares_recovers_an_exact_model() {
        // y = 0.5 + 2k + 0.1 (m/k)³ at a few (k, m).
        let pts: Vec<([f64; 3], f64)> = [(1.0, 2.0), (2.0, 4.0), (3.0, 3.0), (1.0, 5.0), (4.0, 8.0)]
            .iter()
            .map(|&(k, m): &(f64, f64)| ([1.0, k, (m / k).powi(3)], 0.5 + 2.0 * k + 0.1 * (m / k).powi(3)))
            .collect();
        let ([c, a, b], r2) = least_squares(&pts).unwrap();
        assert!((c - 0.5).abs() < 1e-9 && (a - 2.0).abs() < 1e-9 && (b - 0.1).abs() < 1e-9 && (r2 - 1.0).abs() < 1e-12);
    }

    #[test]
    fn the_run_time_fit_shows_fitted_values_residuals_and_so_far_verdicts() {
        use crate::report::selection::tests::run;
        let yaml = r#"
title: R
tables:
  - title: Timing
    experiments: [exp]
    rows: [m, k]
    metrics: [ms_per_step]
    fit: kanerva_runtime
    seeds: 2
    criteria:
      - descending: {metric: ms_per_step, rows: [{m: 8, k: 1}, {m: 8, k: 2}]}
"#;
        let report = load(yaml).unwrap();
        // Seconds per step exactly 0.01 + 0.001·k + 0.0001·(m/k)³, 100 steps each.
        let points = [(8, 1), (8, 2), (8, 4), (4, 1), (4, 2), (2, 1)];
        let runs: Vec<RunRecord> = points
            .iter()
            .enumerate()
            .map(|(i, &(m, k))| {
                let mut r = run(i as u64, &format!("t{i}"), "h", &[("m", Value::Int(m)), ("k", Value::Int(k))], 0.5);
                let per_step = 0.01 + 0.001 * k as f64 + 0.0001 * (m as f64 / k as f64).powi(3);
                (r.steps_run, r.train_seconds) = (100, 100.0 * per_step);
                r
            })
            .collect();
        let md = render(&report, &runs);
        assert!(md.contains("| m | k | ms_per_step | fitted ms_per_step |"), "{md}");
        // m = 8, k = 1: 10 + 1 + 51.2 ms, measured and fitted alike.
        assert!(md.contains("| 8 | 1 | 62.2 (1) | 62.2 |"), "{md}");
        assert!(md.contains("c = 1.000e-2, a = 1.000e-3, b = 1.000e-4 (R² = 1.000, 6 runs)"), "{md}");
        let median: f64 = md.split("median size ").nth(1).and_then(|t| t.split(',').next()).unwrap().parse().unwrap();
        assert!(median.abs() < 1e-9 && md.contains(", largest "), "{md}");
        // One run per row where the table asks for two: met, but only so far.
        assert!(md.contains("**Verdict: reproduced so far (1 of 1 criteria met, 1 judged on fewer runs"), "{md}");
        assert!(md.contains("✓ so far: ms_per_step:"), "{md}");
        let misspelt = yaml.replace("fit: kanerva_runtime", "fit: kanerva");
        assert!(matches!(load(&misspelt), Err(DescriptionError::UnknownFit { .. })));
    }

    const ONE_TABLE: &str = "title: R\ntables:\n  - {title: T, experiments: [exp], rows: [d], metrics: [accuracy]}\n";

    /// An empty file is named; a key given twice is said so, without the YAML library's
    /// advice to its programmers.
    #[test]
    fn an_empty_description_and_a_key_given_twice_are_named() {
        let err = load_named("\n", "specs/x.yaml").unwrap_err().to_string();
        assert!(err.starts_with("specs/x.yaml is empty"), "{err}");
        let err = load_named("title: R\ntitle: S\n", "specs/x.yaml").unwrap_err().to_string();
        assert!(err.contains("specs/x.yaml:") && err.contains("duplicate"), "{err}");
        assert!(!err.contains("DuplicateKeyPolicy"), "{err}");
    }

    #[test]
    fn a_yaml_error_is_located_in_the_named_file() {
        let err = load_named("title: R\ntables: [{title: T, experiments: 3\n", "specs/x.yaml").unwrap_err().to_string();
        assert!(err.contains("specs/x.yaml:") && !err.contains("<input>"), "{err}");
        assert!(!err.starts_with("error:"), "the CLI adds its own `error: `: {err}");
    }

    #[test]
    fn an_experiment_no_run_has_and_no_spec_declares_gets_a_suggestion_when_one_is_close() {
        use crate::report::selection::tests::run;
        let mut r = run(1, "t0", "v1", &[("d", Value::Int(8))], 0.5);
        r.spec_text = "experiment exp { task t }\nexperiment exp_later { task t }\n".into();
        let known = known_experiments(std::slice::from_ref(&r));
        let warn = |experiments: &str| {
            let yaml = ONE_TABLE.replace("experiments: [exp]", &format!("experiments: {experiments}"));
            unknown_experiments(&load(&yaml).unwrap().tables[0], &known)
        };
        assert_eq!(
            warn("[exp, exp_latr]"),
            [
                "no run is of experiment `exp_latr` and no run's spec declares it: not run yet, or a misspelt `exp_later`?"
            ]
        );
        // Declared but not run yet, and a name close to nothing known (a spec never run): no word.
        assert!(warn("[exp_later]").is_empty());
        assert!(warn("[sam_table2_gpu]").is_empty());
    }

    #[test]
    fn an_empty_list_of_experiments_is_refused() {
        let err = load(&ONE_TABLE.replace("experiments: [exp]", "experiments: []")).unwrap_err();
        assert!(matches!(&err, DescriptionError::NoExperiments { table } if table == "T"), "{err}");
        assert_eq!(err.to_string(), "table \"T\": `experiments` is empty; name the experiments whose runs it shows");
    }

    #[test]
    fn a_paper_row_written_with_another_number_of_the_same_value_gives_the_figure() {
        let yaml = "title: R\ntables:\n  - title: T\n    experiments: [e]\n    rows: [d]\n    metrics: [accuracy]\n    \
                    paper:\n      - {match: {d: 8.0}, figures: {accuracy: {value: 0.9}}}\n    \
                    criteria:\n      - reaches_paper: {row: {d: 8}, metric: accuracy, tolerance: 0.1}\n";
        // The criterion's {d: 8} has the paper's figure of {d: 8.0}, so the description loads.
        let report = load(yaml).unwrap();
        let t = &report.tables[0];
        let eight: RowMatch = [("d".to_string(), verdict::Scalar("8".into()))].into();
        assert_eq!(t.paper_number(&eight, "accuracy"), Some(0.9));
    }

    #[test]
    fn a_row_key_metric_or_curve_no_run_has_is_an_error_with_a_suggestion() {
        use crate::report::selection::tests::run;
        let runs = [run(1, "t0", "v1", &[("d", Value::Int(8))], 0.5)];
        let check = |yaml: &str| check_names(&serde_saphyr::from_str(yaml).unwrap(), &runs);
        assert!(check(ONE_TABLE).is_ok());
        let err = check(&ONE_TABLE.replace("metrics: [accuracy]", "metrics: [accurcy]")).unwrap_err().to_string();
        assert!(err.contains("none of its 1 runs has a final metric `accurcy`; did you mean `accuracy`?"), "{err}");
        let err = check(&ONE_TABLE.replace("rows: [d]", "rows: [dd]")).unwrap_err().to_string();
        assert!(err.contains("a parameter, task option or training setting `dd`; did you mean `d`?"), "{err}");
        let err = check(&ONE_TABLE.replace("metrics: [accuracy]", "metrics: [accuracy], curves: banana")).unwrap_err();
        assert!(matches!(err, DescriptionError::UnknownName { what: "a curve", .. }), "{err}");
        // Derived metrics and built-in keys need no run to carry them; a table without runs
        // is not judged.
        assert!(
            check(&ONE_TABLE.replace("rows: [d], metrics: [accuracy]", "rows: [seed], metrics: [ms_per_step]")).is_ok()
        );
        assert!(
            check(
                &ONE_TABLE.replace("experiments: [exp]", "experiments: [other], rows: [zz]").replace("rows: [d], ", "")
            )
            .is_ok()
        );
    }

    #[test]
    fn a_row_averaging_another_swept_name_than_the_seed_is_marked_and_a_training_setting_splits_it() {
        use crate::report::selection::tests::run;
        let d = [("d", Value::Int(8))];
        // Two seeds at each of two learning rates, all of them with d = 8.
        let runs: Vec<RunRecord> = [(1e-3, 1, 0.2), (1e-3, 2, 0.4), (1e-2, 1, 0.6), (1e-2, 2, 0.8)]
            .iter()
            .enumerate()
            .map(|(i, &(lr, seed, accuracy))| {
                let mut r = run(i as u64 + 1, &format!("t{i}"), "v1", &d, accuracy);
                r.config.train.insert("lr".into(), Value::Float(lr));
                r.config.swept = vec![("seed".into(), Value::Int(seed)), ("lr".into(), Value::Float(lr))];
                r
            })
            .collect();
        let report: Report = serde_saphyr::from_str(ONE_TABLE).unwrap();
        let md = render(&report, &runs);
        assert!(md.contains("| 8 | 0.500 ± 0.258 (4) |"), "{md}");
        assert!(
            md.contains("Mixed: row `8` averages runs of lr 0.001, 0.01 as well as seeds (add `lr` to `rows`"),
            "{md}"
        );
        let by_lr: Report = serde_saphyr::from_str(&ONE_TABLE.replace("rows: [d]", "rows: [lr]")).unwrap();
        assert!(check_names(&by_lr, &runs).is_ok());
        let md = render(&by_lr, &runs);
        assert!(md.contains("| 0.001 | 0.300 ± 0.141 (2) |") && md.contains("| 0.01 | 0.700 ± 0.141 (2) |"), "{md}");
        assert!(!md.contains("Mixed"), "{md}");
    }

    #[test]
    fn a_row_averaging_a_setting_that_only_some_runs_set_is_marked() {
        use crate::report::selection::tests::run;
        let d = [("d", Value::Int(8))];
        // Three seeds of the spec, then one run given `lr=1e30` and one `steps=3000` on the
        // command line: each of those names is swept by one run only.
        let mut runs: Vec<RunRecord> = (1..=3)
            .map(|seed| {
                let mut r = run(seed, &format!("t{seed}"), "v1", &d, 0.1);
                r.config.swept = vec![("d".into(), Value::Int(8)), ("seed".into(), Value::Int(seed as i64))];
                r
            })
            .collect();
        let mut lr = run(4, "t4", "v1", &d, 0.05);
        lr.config.train.insert("lr".into(), Value::Float(1e30));
        lr.config.swept.push(("lr".into(), Value::Float(1e30)));
        let mut steps = run(5, "t5", "v1", &d, 0.5);
        steps.config.train.insert("steps".into(), Value::Int(3000));
        steps.config.swept.push(("steps".into(), Value::Int(3000)));
        // Where a run ran is not what it computed.
        steps.config.train.insert("device".into(), Value::Str("cuda:0".into()));
        runs.extend([lr, steps]);
        let report: Report = serde_saphyr::from_str(ONE_TABLE).unwrap();
        let md = render(&report, &runs);
        assert!(
            md.contains(
                "Mixed: row `8` averages runs of lr 0.001, 1e30 and steps 20, 3000 as well as seeds \
                 (add `lr`, `steps` to `rows` to split it)."
            ),
            "{md}"
        );
        // The three seeds alone are not mixed.
        assert!(!render(&report, &runs[..3]).contains("Mixed"));
    }

    #[test]
    fn a_forced_rerun_and_an_older_spec_version_are_not_extra_seeds() {
        use crate::report::selection::tests::run;
        let d = [("d", Value::Int(8))];
        let report: Report = serde_saphyr::from_str(ONE_TABLE).unwrap();
        // Trial t1 ran twice (--force); t0 ran under an older spec version.
        let runs = [run(1, "t0", "v1", &d, 0.1), run(2, "t1", "v2", &d, 0.5), run(3, "t1", "v2", &d, 0.7)];
        let md = render(&report, &runs);
        assert!(md.contains("| 8 | 0.700 (1) |"), "{md}");
        assert!(md.contains("1 earlier run of trials that ran again"), "{md}");
        assert!(md.contains("1 run of older spec versions"), "{md}");
        // The fixture's task is associative retrieval with 2 pairs: chance 0.1, and the value
        // stored most often (either of two distinct ones, or the one stored twice) 0.55.
        assert!(md.contains("Trivial levels — assocRetrieval: chance (1 of 10 digits) accuracy 0.100; the value stored most often among the 2 accuracy 0.550."), "{md}");
    }

    #[test]
    fn a_shortcut_scored_on_several_metrics_is_named_once() {
        use crate::report::selection::tests::run;
        let mut reduce = run(1, "t0", "v1", &[("d", Value::Int(8))], 0.5);
        (reduce.config.task, reduce.config.task_options) = ("reduce".into(), Default::default());
        let note = trivial_note(&[&reduce]);
        assert_eq!(
            note,
            "Trivial levels — reduce: the digits echoed (or pads only) seq_accuracy 0.0103, \
             od_easy_seq_accuracy 2.85e-4, od_hard_seq_accuracy 3.56e-5."
        );
    }

    #[test]
    fn the_description_reads_from_yaml_and_an_empty_store_is_not_run() {
        let yaml = r#"
title: Results
tables:
  - title: SAM Table 1
    experiments: [table1]
    rows: [gates, transfer]
    metrics: [accuracy, epochs_to_converge]
    paper:
      - match: {gates: true, transfer: true}
        figures: {accuracy: {value: 1.0, label: "100%"}, epochs_to_converge: {value: 10}}
    criteria:
      - reaches_paper: {row: {gates: true, transfer: true}, metric: accuracy, tolerance: 0.02}
    notes: Partly.
"#;
        let r = load(yaml).unwrap();
        assert_eq!(r.tables[0].rows, vec!["gates", "transfer"]);
        assert_eq!(r.tables[0].paper[0].figures["accuracy"].display(), "100%");
        assert_eq!(r.tables[0].paper_number(&r.tables[0].paper[0].when, "accuracy"), Some(1.0));
        let md = render(&r, &[]);
        assert_eq!(md.lines().filter(|l| l.starts_with("_No finished runs")).count(), 1);
        assert!(md.contains("**Verdict: not run (0 of 1 criteria met, 1 not run).**"), "{md}");
        assert!(
            md.contains(
                "- · not run: accuracy of {gates: true, transfer: true} (no runs) ≥ paper 1.00 − 0.0200 = 0.980"
            ),
            "{md}"
        );
    }

    #[test]
    fn the_shipped_description_states_criteria_for_every_table_and_an_empty_store_runs_none() {
        let report = load(include_str!("../../specs/paper/results.yaml")).unwrap();
        assert!(report.all_tables().all(|t| !t.criteria.is_empty()));
        let md = render(&report, &[]);
        assert_eq!(md.matches("**Verdict: not run (").count(), report.all_tables().count(), "{md}");
    }

    #[test]
    fn sections_put_their_tables_under_their_own_heading() {
        let table = |name: &str| {
            format!(
                "      - title: {name}\n        experiments: [{name}]\n        rows: [d]\n        metrics: [accuracy]\n"
            )
        };
        let yaml = format!(
            "title: R\nsections:\n  - title: At scale\n    intro: On a GPU.\n    tables:\n{}  - title: Small\n    tables:\n{}",
            table("big"),
            table("small")
        );
        let report = load(&yaml).unwrap();
        assert_eq!(report.all_tables().map(|t| t.title.as_str()).collect::<Vec<_>>(), ["big", "small"]);
        let md = render(&report, &[]);
        let headings: Vec<&str> = md.lines().filter(|l| l.starts_with('#')).collect();
        assert_eq!(headings, ["# R", "## At scale", "### big", "## Small", "### small"], "{md}");
        assert!(md.contains("## At scale\n\nOn a GPU.\n"), "{md}");
    }

    #[test]
    fn a_description_with_a_bad_criterion_is_refused_before_any_run_is_read() {
        let yaml = "title: R\ntables:\n  - title: T\n    experiments: [e]\n    rows: [d]\n    metrics: [accuracy]\n    \
                    criteria:\n      - reaches_paper: {row: {d: 8}, metric: accuracy, tolerance: 0.1}\n";
        let err = load(yaml).unwrap_err().to_string();
        assert_eq!(
            err,
            "table \"T\", criterion 1: compares with the paper, but no paper row for {d: 8} gives a number for `accuracy`"
        );
        assert!(load("title: R\ntables: []\nverdict: x\n").unwrap_err().to_string().contains("verdict"));
        assert_eq!(load("title: R\n").unwrap_err().to_string(), DescriptionError::NoTables.to_string());
    }

    /// A paper figure of NaN or infinity would make every verdict against it meaningless.
    #[test]
    fn a_paper_figure_that_is_not_a_finite_number_is_refused() {
        for value in [".nan", ".inf", "-.inf"] {
            let yaml = format!(
                "title: R\ntables:\n  - title: T\n    experiments: [e]\n    rows: [d]\n    metrics: [accuracy]\n    \
                 paper:\n      - {{match: {{d: 8}}, figures: {{accuracy: {{value: {value}}}}}}}\n"
            );
            let err = load(&yaml).unwrap_err().to_string();
            assert!(
                err.starts_with("table \"T\": the paper figure for `accuracy` is")
                    && err.ends_with("not a finite number"),
                "{value}: {err}"
            );
        }
    }
}
