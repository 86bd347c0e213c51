//! The dashboard's JSON answers: the same views `memctl runs`, `show`, `diff` and `plot`
//! give, read from the store on every request (so running trials show as they train).
//! Nothing here writes the store.

use std::collections::BTreeSet;

use serde_json::{Value as Json, json};

use super::unknown_name::UnknownName;
use crate::cli::runs::listed;
use crate::query::{self, Field};
use crate::report::curves::{self, Band, XAxis};
use crate::report::scatter::{self, Axis, Of};
use crate::report::sheet::Cell;
use crate::report::{ablation, diff, json as sheet_json, show, view};
use crate::store::{RunRecord, RunSummary, Status, Store, StoreError};

/// A request's answer: an HTTP status and a JSON body.
pub struct Answer {
    pub status: u16,
    pub body: String,
}

impl Answer {
    fn ok(body: String) -> Answer {
        Answer { status: 200, body }
    }
    /// An error: `{"error": message}`, the shape of every error the dashboard answers under
    /// `/api/`.
    pub fn error(status: u16, message: &str) -> Answer {
        Answer { status, body: json!({ "error": message }).to_string() }
    }
    fn bad(message: String) -> Answer {
        Answer::error(400, &message)
    }
    /// A name nothing in the store has: 404, with the names there are (`known`).
    fn unknown(e: UnknownName) -> Answer {
        Answer { status: 404, body: json!({ "error": e.to_string(), "known": e.known() }).to_string() }
    }
    /// A store that cannot be read is the server's trouble (503: busy, damaged), unless the
    /// run asked for does not exist (404).
    fn store(e: StoreError) -> Answer {
        let status = if matches!(e, StoreError::NoSuchRun(_)) { 404 } else { 503 };
        Answer::error(status, &e.to_string())
    }
}

/// Most rows the runs table sends; the page says how many more matched.
const MOST_ROWS: usize = 500;
/// Most runs whose curves one answer reads (each is a whole record).
const MOST_CURVES: usize = 500;

/// The store's runs as `memctl runs` lists them (superseded attempts hidden unless `all=1`),
/// filtered by `where`; a malformed filter is the 400 answer with the CLI's located error.
fn filtered(store: &Store, q: &Params) -> Result<(Vec<RunSummary>, Option<query::Query>), Answer> {
    let summaries = store.summaries().map_err(Answer::store)?;
    let (runs, _) = listed(summaries, q.get("all") == Some("1"));
    let filter = match q.nonempty("where") {
        Some(text) => Some(query::prepare(text, &runs).map_err(|e| {
            let (d, sources) = *e;
            Answer::bad(d.render(&sources, false))
        })?),
        None => None,
    };
    Ok((runs, filter))
}

/// `GET /api/runs?where=…&group_by=a,b&sort=-x&columns=a,b&all=1`: the runs table, as
/// `{"columns": [...], "rows": [{...}], "matched": n, "running": n, "available": [...],
/// "durations": [...]}`, the same sheet `memctl runs --format json` prints (plus each run's
/// `id`, so rows can be picked). Without `columns`, a compact set that fits a laptop's screen
/// (`available` lists `memctl runs`'s default columns, to pick from). `running` counts the
/// running runs the filter keeps (the page refreshes while it is above 0); `durations` names
/// the columns in seconds, which the page shows as the CLI does (`53.0s`, `3m05s`).
pub fn runs(store: &Store, q: &Params) -> Answer {
    let (runs, filter) = match filtered(store, q) {
        Ok(f) => f,
        Err(a) => return a,
    };
    let shown: Vec<&RunSummary> = runs.iter().filter(|r| filter.as_ref().is_none_or(|f| f.matches(r))).collect();
    let running = shown.iter().filter(|r| r.status == Status::Running).count();
    let available = view::default_column_names(&shown);
    let sort = q.nonempty("sort").map(|s| match s.strip_prefix('-') {
        Some(name) => (name.to_string(), true),
        None => (s.to_string(), false),
    });
    let group_by = q.list("group_by");
    let mut columns = q.list("columns");
    if columns.is_none() && group_by.is_none() {
        columns = Some(view::compact_column_names(&shown));
    }
    if let (Some(c), None) = (&mut columns, &group_by)
        && !c.iter().any(|c| c == "id")
    {
        c.insert(0, "id".into());
    }
    let every_run = every_run(q);
    let v = view::View { filter, sort, limit: None, columns, only_changed: false, group_by, every_run };
    let mut sheet = match view::build(&runs, &v) {
        Ok(s) => s,
        Err(e) => return Answer::bad(format!("error: {e}")),
    };
    let matched = sheet.rows.len();
    sheet.rows.truncate(MOST_ROWS);
    let durations: Vec<&String> = sheet
        .columns
        .iter()
        .enumerate()
        .filter(|(c, _)| sheet.rows.iter().any(|row| matches!(row[*c], Cell::Seconds(_))))
        .map(|(_, name)| name)
        .collect();
    let rows = sheet_json::row_objects(&sheet);
    let answer = json!({
        "columns": sheet.columns, "rows": rows, "matched": matched, "running": running,
        "available": available, "durations": durations,
    });
    Answer::ok(answer.to_string())
}

/// `GET /api/run/ID`: one run as `memctl show` prints it (YAML), its spec, and all its curves
/// by training step (`{"curves": {"val_loss": [[step, value]], …}}`).
pub fn run(store: &Store, id: &str) -> Answer {
    let Ok(id) = id.parse::<u64>() else { return Answer::bad(format!("`{id}` is not a run id")) };
    match store.get(id) {
        Ok(r) => {
            let r = crate::store::as_seen(r);
            let text = show::yaml(&r).unwrap_or_else(|e| format!("cannot show run {id}: {e}"));
            let curves: serde_json::Map<String, Json> = r
                .curves
                .iter()
                .map(|(name, points)| (name.clone(), points.iter().map(|(s, v)| json!([*s as f64, *v])).collect()))
                .collect();
            let answer = json!({
                "id": id, "label": curves::run_label(&r), "show": text, "spec": r.spec_text,
                "status": r.status.as_str(), "curves": curves,
            });
            Answer::ok(answer.to_string())
        }
        Err(e) => Answer::store(e),
    }
}

/// `GET /api/curves?ids=1,2,3&metric=val_loss&x=step|seconds`: one series per run;
/// `GET /api/curves?where=…&group_by=a,b&band=std|minmax`: one series per group of the runs
/// the filter keeps, the mean over its runs with a band (as `memctl plot --group-by`).
/// Answers `{metric, metrics, x, series: [{label, points: [[x, y]], band: [[x, lo, hi]]}]}`;
/// without `metric`, the one `memctl plot` picks.
pub fn curves(store: &Store, q: &Params) -> Answer {
    let x = match choice::<XAxis>(q, "x", XAxis::Step) {
        Ok(x) => x,
        Err(a) => return a,
    };
    let band = match choice::<Band>(q, "band", Band::Std) {
        Ok(b) => b,
        Err(a) => return a,
    };
    let grouped = q.list("group_by").is_some_and(|g| !g.is_empty());
    let (ids, keys): (Vec<u64>, _) = if !grouped {
        let listed = q.get("ids").unwrap_or_default();
        let mut ids = vec![];
        for id in listed.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            match id.parse() {
                Ok(id) if !ids.contains(&id) => ids.push(id),
                Ok(_) => {}
                Err(_) => return Answer::bad(format!("ids: `{id}` is not a run id (ids=1,4,7)")),
            }
        }
        (ids, vec![])
    } else {
        let (runs, filter, keys) = match grouped_view(store, q) {
            Ok(v) => v,
            Err(a) => return a,
        };
        let kept = runs.iter().filter(|r| filter.as_ref().is_none_or(|f| f.matches(r))).collect();
        (counted(kept, q).iter().map(|r| r.id).collect(), keys)
    };
    let capped = ids.len() > MOST_CURVES;
    // A run deleted since the page listed it is left out, and named in `missing`.
    let asked = &ids[..ids.len().min(MOST_CURVES)];
    let records: Vec<RunRecord> = match store.get_present(asked) {
        Ok(r) => r.into_iter().map(crate::store::as_seen).collect(),
        Err(e) => return Answer::store(e),
    };
    let missing: Vec<u64> = asked.iter().copied().filter(|id| !records.iter().any(|r| r.id == *id)).collect();
    let metrics: BTreeSet<&String> = records.iter().flat_map(|r| r.curves.keys()).collect();
    let Some(metric) = q.nonempty("metric").map(str::to_string).or_else(|| curves::default_metric(&records)) else {
        return Answer::ok(json!({ "metric": null, "metrics": metrics, "series": [] }).to_string());
    };
    // Without runs there is nothing to know the metric by: their empty plot is the answer. (The
    // metric picked when none is named is one the runs have.)
    if !records.is_empty() && !metrics.contains(&metric) {
        return Answer::unknown(UnknownName::Curve { name: metric, known: metrics.into_iter().cloned().collect() });
    }
    // Each run's series names its run (`id`), so that the page colours its row as its curve.
    let (series, series_runs): (_, Vec<Option<u64>>) = if keys.is_empty() {
        let drawn = records.iter().filter(|r| r.curves.contains_key(&metric)).map(|r| Some(r.id));
        (curves::per_run(&records, &metric, x), drawn.collect())
    } else {
        (curves::per_group(&records, &metric, &keys, band, x), vec![])
    };
    let series: Vec<Json> = series
        .into_iter()
        .enumerate()
        .map(|(i, s)| {
            let band = s.band.map(|b| b.iter().map(|(x, lo, hi)| [*x, *lo, *hi]).collect::<Vec<_>>());
            let points = s.points.iter().map(|(x, y)| [*x, *y]).collect::<Vec<_>>();
            json!({ "label": s.label, "id": series_runs.get(i).copied().flatten(), "points": points, "band": band })
        })
        .collect();
    Answer::ok(
        json!({
            "metric": metric, "metrics": metrics, "x": x.label(), "series": series,
            "capped": capped, "drawn": records.len(), "matched": ids.len(), "missing": missing,
        })
        .to_string(),
    )
}

/// `GET /api/scatter?where=…&group_by=a,b&metric=accuracy`: a final metric against each
/// parameter the kept runs swept, one panel per parameter, one point per finished run (grouped:
/// per group and value, the mean of the group's runs there), and the same runs in parallel
/// coordinates (an axis per swept parameter, or per group key, and a line per run or group):
/// `{metric, metrics, grouped, panels: [{name, axis: "linear"|"log"|"categories", categories,
/// points: [[x, y, id]] or, grouped, [[x, y, group, n]]}], parallel: {axes: [{name, axis,
/// categories}], lines: [{id, group, n, values: [x or null], y}]}}`. Without `metric`, the
/// one the runs stop on (else `accuracy`).
pub fn scatter(store: &Store, q: &Params) -> Answer {
    let (runs, filter, keys) = match grouped_view(store, q) {
        Ok(v) => v,
        Err(a) => return a,
    };
    let kept: Vec<&RunSummary> = runs.iter().filter(|r| filter.as_ref().is_none_or(|f| f.matches(r))).collect();
    let kept = if keys.is_empty() { kept } else { counted(kept, q) };
    let finals: BTreeSet<&String> =
        kept.iter().filter(|r| r.status == Status::Done).flat_map(|r| r.final_metrics.keys()).collect();
    let metric = match q.nonempty("metric") {
        // Without finished runs there is nothing to know the metric by: their empty view is the answer.
        Some(m) if !finals.is_empty() && !finals.iter().any(|f| *f == m) => {
            let known = finals.into_iter().cloned().collect();
            return Answer::unknown(UnknownName::Metric { name: m.to_string(), known });
        }
        Some(m) => Some(m.to_string()),
        None => scatter::default_metric(&kept),
    };
    let grouped = !keys.is_empty();
    let Some(metric) = metric else {
        let parallel = json!({ "axes": [], "lines": [] });
        let answer =
            json!({ "metric": null, "metrics": finals, "grouped": grouped, "panels": [], "parallel": parallel });
        return Answer::ok(answer.to_string());
    };
    let panels: Vec<Json> = scatter::panels(&kept, &metric, &keys)
        .into_iter()
        .map(|p| {
            let (axis, categories) = axis_json(p.axis);
            let points: Vec<Json> = p
                .points
                .iter()
                .map(|pt| match &pt.of {
                    Of::Run(id) => json!([pt.x, pt.y, id]),
                    Of::Group { label, n } => json!([pt.x, pt.y, label, n]),
                })
                .collect();
            json!({ "name": p.name, "axis": axis, "categories": categories, "points": points })
        })
        .collect();
    let parallel = scatter::parallel(&kept, &metric, &keys);
    let axes: Vec<Json> = parallel
        .axes
        .into_iter()
        .map(|(name, a)| {
            let (axis, categories) = axis_json(a);
            json!({ "name": name, "axis": axis, "categories": categories })
        })
        .collect();
    let lines: Vec<Json> = parallel
        .lines
        .iter()
        .map(|l| {
            let (id, group, n) = match &l.of {
                Of::Run(id) => (Some(*id), None, None),
                Of::Group { label, n } => (None, Some(label), Some(n)),
            };
            json!({ "id": id, "group": group, "n": n, "values": l.values, "y": l.y })
        })
        .collect();
    let parallel = json!({ "axes": axes, "lines": lines });
    Answer::ok(
        json!({ "metric": metric, "metrics": finals, "grouped": grouped, "panels": panels, "parallel": parallel })
            .to_string(),
    )
}

/// An axis as the page reads it: its kind, and its categories (empty unless categorical).
fn axis_json(axis: Axis) -> (&'static str, Vec<String>) {
    match axis {
        Axis::Linear => ("linear", vec![]),
        Axis::Log => ("log", vec![]),
        Axis::Categories(c) => ("categories", c),
    }
}

/// `GET /api/ablation?experiment=NAME&where=…&metric=…`: the ablation table `memctl ablate`
/// prints, read back from the experiment's runs in the store (variants named by which of
/// the model's switches is off).
pub fn ablation(store: &Store, q: &Params) -> Answer {
    let Some(experiment) = q.nonempty("experiment") else {
        return Answer::bad("the ablation table needs an experiment".into());
    };
    let (runs, filter) = match filtered(store, q) {
        Ok(f) => f,
        Err(a) => return a,
    };
    if !runs.iter().any(|r| r.experiment == experiment) {
        let known: BTreeSet<&String> = runs.iter().map(|r| &r.experiment).collect();
        let known = known.into_iter().cloned().collect();
        return Answer::unknown(UnknownName::Experiment { name: experiment.to_string(), known });
    }
    let kept: Vec<&RunSummary> = runs
        .iter()
        .filter(|r| r.experiment == experiment && r.status == Status::Done)
        .filter(|r| filter.as_ref().is_none_or(|f| f.matches(r)))
        .collect();
    let kept = counted(kept, q);
    let rows = ablation::rows_from_runs(&kept);
    let finals: BTreeSet<&String> = kept.iter().flat_map(|r| r.final_metrics.keys()).collect();
    let metric = match q.nonempty("metric") {
        // Without finished runs there is nothing to know the metric by: their empty table is the answer.
        Some(m) if !kept.is_empty() && !finals.iter().any(|f| *f == m) => {
            let known = finals.into_iter().cloned().collect();
            let experiment = experiment.to_string();
            return Answer::unknown(UnknownName::FinalMetric { name: m.to_string(), experiment, known });
        }
        Some(m) => m.to_string(),
        None => ablation::default_metric(&rows),
    };
    let sheet = ablation::sheet(&rows, &metric);
    let rows = sheet_json::row_objects(&sheet);
    Answer::ok(json!({ "columns": sheet.columns, "rows": rows, "metric": metric }).to_string())
}

/// `GET /api/diff?a=ID&b=ID`: what differs between two runs, as `memctl diff` prints it.
pub fn diff(store: &Store, q: &Params) -> Answer {
    let id = |k: &str| q.get(k).and_then(|s| s.parse::<u64>().ok());
    let (Some(a), Some(b)) = (id("a"), id("b")) else { return Answer::bad("diff needs two run ids, a and b".into()) };
    match (store.get(a), store.get(b)) {
        (Ok(ra), Ok(rb)) => {
            let (ra, rb) = (crate::store::as_seen(ra), crate::store::as_seen(rb));
            Answer::ok(json!({ "text": diff::diff(&ra, &rb).render(&ra, &rb) }).to_string())
        }
        (Err(e), _) | (_, Err(e)) => Answer::store(e),
    }
}

/// `all=1`: groups count every run, a trial run again (`--force`) as often as it ran.
fn every_run(q: &Params) -> bool {
    q.get("all") == Some("1")
}

/// The runs a group counts: each trial's latest run among `runs`, as `memctl runs --group-by`
/// counts them, or with `all=1` every run.
fn counted<'a>(runs: Vec<&'a RunSummary>, q: &Params) -> Vec<&'a RunSummary> {
    if every_run(q) { runs } else { crate::store::summary::latest_of_each_trial(runs).0 }
}

/// [`filtered`] runs and the fields of `group_by` they are grouped by.
type GroupedView = (Vec<RunSummary>, Option<query::Query>, Vec<(String, Field)>);

fn grouped_view(store: &Store, q: &Params) -> Result<GroupedView, Answer> {
    let (runs, filter) = filtered(store, q)?;
    let keys = group_keys(q, &runs)?;
    Ok((runs, filter, keys))
}

/// The fields of `group_by`, as the runs table reads them: a name in no namespace, or one no
/// run of `all` (the store) has, is a 400, as `runs` and `plot` refuse it.
fn group_keys(q: &Params, all: &[RunSummary]) -> Result<Vec<(String, Field)>, Answer> {
    let mut keys = vec![];
    for k in q.list("group_by").unwrap_or_default() {
        match crate::report::view::field_of(&k, all) {
            Ok(f) => keys.push((k, f)),
            Err(e) => return Err(Answer::bad(e.to_string())),
        }
    }
    Ok(keys)
}

/// A choice among a CLI option's values (`x=seconds`, `band=minmax`), spelt as on the command
/// line; `default` when absent.
fn choice<T: clap::ValueEnum>(q: &Params, key: &str, default: T) -> Result<T, Answer> {
    match q.nonempty(key) {
        None => Ok(default),
        Some(v) => T::from_str(v, false).map_err(|_| {
            let names: Vec<String> = T::value_variants()
                .iter()
                .filter_map(|t| t.to_possible_value())
                .map(|p| format!("`{}`", p.get_name()))
                .collect();
            Answer::bad(format!("{key} is one of {}, not `{v}`", names.join(", ")))
        }),
    }
}

/// A request's query parameters, percent-decoded.
pub struct Params(Vec<(String, String)>);

impl Params {
    pub fn parse(query: &str) -> Params {
        Params(form_urlencoded::parse(query.as_bytes()).map(|(k, v)| (k.into_owned(), v.into_owned())).collect())
    }
    pub fn get(&self, key: &str) -> Option<&str> {
        self.0.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }
    /// The value, unless it is missing or blank.
    pub fn nonempty(&self, key: &str) -> Option<&str> {
        self.get(key).filter(|v| !v.trim().is_empty())
    }
    /// A comma-separated list, unless it is missing or blank.
    pub fn list(&self, key: &str) -> Option<Vec<String>> {
        self.nonempty(key).map(|s| s.split(',').map(|c| c.trim().to_string()).filter(|c| !c.is_empty()).collect())
    }
}
