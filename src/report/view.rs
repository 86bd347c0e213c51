//! From run summaries to a [`Sheet`]: filter, sort, limit, choose columns, or group runs and
//! summarise each group (`memctl runs`).

use std::collections::HashMap;

use super::sheet::{Cell, Sheet, Stat};
use crate::query::{Field, Query, Val, fields};
use crate::store::RunSummary;
use crate::suggest::did_you_mean;

/// What `memctl runs` was asked to show.
#[derive(Clone, Debug, Default)]
pub struct View {
    pub filter: Option<Query>,
    /// Column or field to sort by, and whether descending. Default: newest run first (or
    /// groups in order of their values).
    pub sort: Option<(String, bool)>,
    pub limit: Option<usize>,
    /// Exactly these columns (with `group_by`: the columns to summarise).
    pub columns: Option<Vec<String>>,
    /// Hide configuration columns whose value is the same in every row.
    pub only_changed: bool,
    /// One row per distinct combination of these fields.
    pub group_by: Option<Vec<String>>,
    /// Groups count every run, not only each trial's latest (a trial run again with
    /// `--force` would otherwise count twice, as two samples of one seed).
    pub every_run: bool,
}

/// Final metrics shown first, in this order, when present.
const METRIC_ORDER: &[&str] = &["accuracy", "bit_error", "loss"];

/// A name in the options (`--sort`, `--columns`, `--group-by`) that is not a field or column;
/// the filter was checked already, by the query compiler.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ViewError {
    #[error("`{name}`: unknown namespace (use param., task., train. or metric.)")]
    UnknownNamespace { name: String },
    #[error("no run has a field `{name}`{}", .suggestion.as_ref().map(|s| format!("; {s}")).unwrap_or_default())]
    NoSuchField { name: String, suggestion: Option<String> },
    /// Grouped runs sort by one of the sheet's columns (a key, `runs`, or a summarised one).
    #[error("cannot sort groups by `{name}`: it is not a column (columns: {})", .columns.join(", "))]
    NotAGroupColumn { name: String, columns: Vec<String> },
}

/// Builds the sheet; errors are names in the options no run has. `runs` is the whole store,
/// oldest first.
pub fn build(runs: &[RunSummary], view: &View) -> Result<Sheet, ViewError> {
    let names = Names { all: runs };
    let mut shown: Vec<&RunSummary> = match &view.filter {
        Some(q) => runs.iter().filter(|r| q.matches(r)).collect(),
        None => runs.iter().collect(),
    };
    match &view.group_by {
        Some(keys) if view.every_run => grouped(&names, &shown, keys, view),
        Some(keys) => {
            let (latest, left_out) = crate::store::summary::latest_of_each_trial(shown);
            Ok(Sheet { left_out, ..grouped(&names, &latest, keys, view)? })
        }
        None => {
            shown.reverse();
            if let Some((col, desc)) = &view.sort {
                let f = names.field(col)?;
                sort_by_field(&mut shown, &f, *desc);
            }
            if let Some(n) = view.limit {
                shown.truncate(n);
            }
            let mut columns: Vec<(String, Field)> = match &view.columns {
                Some(cols) => {
                    each_once(cols).map(|c| Ok((c.clone(), names.field(c)?))).collect::<Result<_, ViewError>>()?
                }
                None => default_columns(&shown, view.only_changed),
            };
            let mut rows: Vec<Vec<Cell>> =
                shown.iter().map(|r| columns.iter().map(|(_, f)| cell(f, r)).collect()).collect();
            if view.only_changed {
                drop_constant(&mut columns, &mut rows, |f| f.is_config_in(names.all));
            }
            Ok(Sheet::new(columns.into_iter().map(|(n, _)| n).collect(), rows))
        }
    }
}

/// Resolves column names, reporting ones no run has.
struct Names<'a> {
    all: &'a [RunSummary],
}

impl Names<'_> {
    fn field(&self, name: &str) -> Result<Field, ViewError> {
        field_of(name, self.all)
    }
}

/// The field `name` names, where some run of `all` (the whole store) has it: a typo would
/// otherwise make an empty column, or one group of every run.
pub fn field_of(name: &str, all: &[RunSummary]) -> Result<Field, ViewError> {
    let f = Field::parse(name).ok_or_else(|| ViewError::UnknownNamespace { name: name.to_string() })?;
    if !all.is_empty() && fields::kinds(&f, all).is_empty() {
        let names = fields::names(all);
        let suggestion = did_you_mean(name, names.iter().map(String::as_str));
        return Err(ViewError::NoSuchField { name: name.to_string(), suggestion });
    }
    Ok(f)
}

/// A run's value of `field` as a cell (ints stay ints, times become dates and durations).
pub fn cell(field: &Field, r: &RunSummary) -> Cell {
    if let Some(v) = field.config_value(r) {
        return Cell::of_value(v);
    }
    match field {
        Field::Id => Cell::Int(r.id as i64),
        Field::Seed => Cell::Int(r.seed as i64),
        Field::StepsRun => Cell::Int(r.steps_run as i64),
        Field::StepsToConverge => r.steps_to_converge.map_or(Cell::Missing, |s| Cell::Int(s as i64)),
        Field::ParamCount => Cell::Int(r.param_count as i64),
        Field::Wall => Cell::Seconds(r.wall_seconds),
        Field::Eta => r.eta_seconds().map_or(Cell::Missing, Cell::Seconds),
        Field::Progress => match &r.live {
            Some(l) => Cell::Text(format!("{}/{}", r.steps_run, l.steps_total)),
            None => Cell::Missing,
        },
        Field::Tags => Cell::List(r.tags.iter().map(|t| Cell::Text(t.clone())).collect()),
        _ => match field.get(r) {
            None => Cell::Missing,
            Some(Val::Num(x)) => Cell::Float(x),
            Some(Val::Int(i)) => i64::try_from(i).map_or(Cell::Text(i.to_string()), Cell::Int),
            Some(Val::Date(t)) => Cell::Date(t),
            Some(v) => Cell::Text(v.to_string()),
        },
    }
}

/// The columns asked for, each once (`--columns id,id` would repeat a JSON object's key).
fn each_once(cols: &[String]) -> impl Iterator<Item = &String> {
    cols.iter().enumerate().filter(|(i, c)| !cols[..*i].contains(c)).map(|(_, c)| c)
}

/// Sorts by `f`, runs without it last, and NaN (a diverged run's metric) with them.
fn sort_by_field(runs: &mut [&RunSummary], f: &Field, desc: bool) {
    fn ordered<'a>(f: &Field, r: &'a RunSummary) -> Option<crate::query::fields::Val<'a>> {
        f.get(r).filter(|v| !v.as_f64().is_some_and(f64::is_nan))
    }
    runs.sort_by(|a, b| match (ordered(f, a), ordered(f, b)) {
        (Some(x), Some(y)) if desc => y.order(&x),
        (Some(x), Some(y)) => x.order(&y),
        (Some(_), None) => std::cmp::Ordering::Less,
        (None, Some(_)) => std::cmp::Ordering::Greater,
        (None, None) => std::cmp::Ordering::Equal,
    });
}

/// The test metrics (not `val_…`) some run has: accuracy, bit_error, loss first.
fn metrics(runs: &[&RunSummary]) -> Vec<String> {
    let mut all: Vec<&String> = vec![];
    for r in runs {
        for k in r.final_metrics.keys() {
            if !k.starts_with("val_") && !all.contains(&k) {
                all.push(k);
            }
        }
    }
    let rank = |m: &str| METRIC_ORDER.iter().position(|o| *o == m).unwrap_or(METRIC_ORDER.len());
    all.sort_by(|a, b| rank(a).cmp(&rank(b)).then(a.cmp(b)));
    // Running runs have no test metrics yet: their latest validation ones stand in.
    let mut latest: Vec<&String> = vec![];
    for r in runs.iter().filter(|r| r.live.is_some()) {
        for k in r.final_metrics.keys().filter(|k| k.starts_with("val_")) {
            if !latest.contains(&k) && !k.ends_with("loss") {
                latest.push(k);
            }
        }
    }
    latest.sort();
    all.into_iter().chain(latest).cloned().collect()
}

/// id, experiment, model, the swept parameters (with `only_changed`: every configuration
/// value), seed, status, test metrics, steps to converge, steps run, wall time, tags.
fn default_columns(runs: &[&RunSummary], every_config: bool) -> Vec<(String, Field)> {
    let mut cols: Vec<(String, Field)> = vec![("id".into(), Field::Id)];
    let push = |cols: &mut Vec<(String, Field)>, name: &str, f: Field| {
        if !cols.iter().any(|(n, _)| n == name) {
            cols.push((name.to_string(), f));
        }
    };
    push(&mut cols, "experiment", Field::Experiment);
    push(&mut cols, "model", Field::Model);
    if every_config {
        push(&mut cols, "task", Field::Task);
    }
    for r in runs {
        let names: Vec<&String> = if every_config {
            r.params.keys().chain(r.task_options.keys()).chain(r.train.keys()).collect()
        } else {
            r.swept.iter().filter(|k| *k != "seed").collect()
        };
        for k in names {
            let (name, field) = config_column(r, k);
            push(&mut cols, &name, field);
        }
    }
    push(&mut cols, "seed", Field::Seed);
    push(&mut cols, "status", Field::Status);
    for m in metrics(runs) {
        let (name, field) = metric_column(runs, &m);
        push(&mut cols, &name, field);
    }
    push(&mut cols, "steps_to_converge", Field::StepsToConverge);
    push(&mut cols, "steps_run", Field::StepsRun);
    push(&mut cols, "wall", Field::Wall);
    if runs.iter().any(|r| r.live.is_some()) {
        push(&mut cols, "progress", Field::Progress);
        push(&mut cols, "eta", Field::Eta);
    }
    if runs.iter().any(|r| !r.tags.is_empty()) {
        push(&mut cols, "tags", Field::Tags);
    }
    cols
}

/// The column of run `r`'s configuration value `k`: named `k`, or `param.k` where a built-in
/// field takes that name (a parameter `status`), since a bare name finds the built-in first.
fn config_column(r: &RunSummary, k: &str) -> (String, Field) {
    let held = Field::Named(k.to_string()).config_value(r).is_some();
    if held && fields::BUILTINS.iter().any(|(b, _)| *b == k) {
        Field::explicit_config(k, r)
    } else {
        (k.to_string(), Field::Named(k.to_string()))
    }
}

/// The column of final metric `m`: named `m`, or `metric.m` where some run has a
/// configuration value of that name (a parameter `accuracy`), since a bare name finds
/// parameters, task options and settings before metrics.
fn metric_column(runs: &[&RunSummary], m: &str) -> (String, Field) {
    let field = Field::Metric(m.to_string());
    if runs.iter().any(|r| Field::Named(m.to_string()).config_value(r).is_some()) {
        (format!("metric.{m}"), field)
    } else {
        (m.to_string(), field)
    }
}

/// The names of the columns `memctl runs` shows by default for `runs`.
pub fn default_column_names(runs: &[&RunSummary]) -> Vec<String> {
    default_columns(runs, false).into_iter().map(|(n, _)| n).collect()
}

/// Few columns, to fit a laptop's screen (the dashboard's default): id, status, experiment,
/// model, the swept values, the metric the runs stop on (`stop_when`; else the first test
/// metric), progress and eta while a run trains, steps run, wall time, tags.
pub fn compact_column_names(runs: &[&RunSummary]) -> Vec<String> {
    let mut cols: Vec<String> = vec![];
    let mut push = |name: &str| {
        if !cols.iter().any(|c| c == name) {
            cols.push(name.to_string());
        }
    };
    for name in ["id", "status", "experiment", "model"] {
        push(name);
    }
    for r in runs {
        r.swept.iter().for_each(|k| push(&config_column(r, k).0));
    }
    let has = |m: &str| runs.iter().any(|r| r.final_metrics.contains_key(m));
    let stopped_on: Vec<&str> = runs.iter().filter_map(|r| crate::store::record::stop_metric(&r.train)).collect();
    let mut shown_metric = false;
    for m in &stopped_on {
        // A finished run's test value, or a training run's latest validation one.
        for name in [m.to_string(), format!("val_{m}")] {
            if has(&name) && (!name.starts_with("val_") || runs.iter().any(|r| r.live.is_some())) {
                push(&metric_column(runs, &name).0);
                shown_metric = true;
            }
        }
    }
    if !shown_metric && let Some(m) = metrics(runs).first() {
        push(&metric_column(runs, m).0);
    }
    if runs.iter().any(|r| r.live.is_some()) {
        push("progress");
        push("eta");
    }
    push("steps_run");
    push("wall");
    if runs.iter().any(|r| !r.tags.is_empty()) {
        push("tags");
    }
    cols
}

/// Removes columns (those `eligible`) whose cells are equal in every row.
fn drop_constant(columns: &mut Vec<(String, Field)>, rows: &mut [Vec<Cell>], eligible: impl Fn(&Field) -> bool) {
    let keep: Vec<bool> =
        (0..columns.len()).map(|c| !eligible(&columns[c].1) || rows.windows(2).any(|w| w[0][c] != w[1][c])).collect();
    let mut i = 0;
    columns.retain(|_| {
        i += 1;
        keep[i - 1]
    });
    for row in rows {
        let mut i = 0;
        row.retain(|_| {
            i += 1;
            keep[i - 1]
        });
    }
}

/// Groups whose keys read alike but whose runs trained on different tasks (an experiment name
/// used in two spec files): each one's experiment cell says which (`quickstart_lstm (task
/// palindromes)`, or the spec file when the task names match too).
fn name_apart(groups: &mut [(Vec<Cell>, Vec<&RunSummary>)], experiment: usize) {
    let labels: Vec<Option<String>> = (0..groups.len())
        .map(|i| {
            let others: Vec<&RunSummary> =
                (0..groups.len()).filter(|&j| j != i && groups[j].0 == groups[i].0).map(|j| groups[j].1[0]).collect();
            let first = groups[i].1[0];
            let why = if others.iter().all(|o| o.task != first.task) {
                format!("task {}", first.task)
            } else {
                first.spec_path.clone()
            };
            (!others.is_empty()).then(|| format!("{} ({why})", first.experiment))
        })
        .collect();
    for (group, label) in groups.iter_mut().zip(labels) {
        if let Some(label) = label {
            group.0[experiment] = Cell::Text(label);
        }
    }
}

/// A group's cell of a summarised column: `mean ± std (n)` of a number (a bool as 0 or 1);
/// of anything else (an id, a date, a status) the value its runs share, or `·` where they
/// differ, since a mean of ids or start times means nothing.
fn summary_cell(f: &Field, members: &[&RunSummary]) -> Cell {
    let vals: Vec<Option<Val>> = members.iter().map(|r| f.get(r)).collect();
    let numeric =
        *f != Field::Id && vals.iter().flatten().all(|v| matches!(v, Val::Num(_) | Val::Int(_) | Val::Bool(_)));
    if numeric {
        let values: Vec<f64> = vals
            .iter()
            .flatten()
            .filter_map(|v| match v {
                Val::Bool(b) => Some(f64::from(u8::from(*b))),
                v => v.as_f64(),
            })
            .collect();
        return Stat::of(&values).map_or(Cell::Missing, Cell::Stat);
    }
    let cells: Vec<Cell> = members.iter().map(|r| cell(f, r)).collect();
    match cells.split_first() {
        Some((first, rest)) if rest.iter().all(|c| c == first) => first.clone(),
        _ => Cell::Missing,
    }
}

/// One row per group: the key values, `runs`, then `mean ± std (n)` of each summarised column.
fn grouped(names: &Names, runs: &[&RunSummary], keys: &[String], view: &View) -> Result<Sheet, ViewError> {
    let mut key_fields: Vec<(String, Field)> = vec![];
    for k in keys {
        let key = not_the_count(k, names.field(k)?, runs);
        if !key_fields.contains(&key) {
            key_fields.push(key);
        }
    }
    // A key is not also summarised (its mean is the key).
    let summarised: Vec<(String, Field)> = (summarised_columns(names, runs, keys, view)?.into_iter())
        .map(|(n, f)| not_the_count(&n, f, runs))
        .filter(|(n, f)| !key_fields.iter().any(|(kn, kf)| kn == n || kf == f))
        .collect();
    let statistics: Vec<&String> =
        summarised.iter().filter(|(_, f)| summarised_as_statistic(f, runs)).map(|(n, _)| n).collect();
    let groups = groups_of(runs, &key_fields);
    let mut columns: Vec<String> = key_fields.iter().map(|(n, _)| n.clone()).collect();
    columns.push("runs".into());
    columns.extend(summarised.iter().map(|(n, _)| n.clone()));
    let mut rows: Vec<Vec<Cell>> = groups
        .into_iter()
        .map(|(key, members)| {
            let mut row = key;
            row.push(Cell::Int(members.len() as i64));
            for (_, f) in &summarised {
                row.push(summary_cell(f, &members));
            }
            row
        })
        .collect();
    if let Some((col, desc)) = &view.sort {
        let c = columns
            .iter()
            .position(|n| n == col)
            .ok_or_else(|| ViewError::NotAGroupColumn { name: col.clone(), columns: columns.clone() })?;
        rows.sort_by(|a, b| a[c].order_missing_last(&b[c], *desc));
    }
    if let Some(n) = view.limit {
        rows.truncate(n);
    }
    if view.only_changed {
        let mut cols: Vec<(String, Field)> = columns
            .iter()
            .map(|n| (n.clone(), key_fields.iter().find(|(k, _)| k == n).map_or(Field::Id, |(_, f)| f.clone())))
            .collect();
        drop_constant(&mut cols, &mut rows, |f| f.is_config_in(names.all));
        columns = cols.into_iter().map(|(n, _)| n).collect();
    }
    // A group of other values (a text parameter in one model, a number in another) may still
    // have a statistic in a column not declared one.
    let stats = (columns.iter().enumerate())
        .map(|(c, n)| statistics.contains(&n) || rows.iter().any(|r| matches!(r.get(c), Some(Cell::Stat(_)))))
        .collect();
    Ok(Sheet { columns, rows, stats, left_out: 0 })
}

/// A grouped view's key column: named as asked, but `runs` (a parameter) as `param.runs`,
/// since `runs` names the group's count.
fn not_the_count(name: &str, field: Field, runs: &[&RunSummary]) -> (String, Field) {
    match runs.iter().find(|r| name == "runs" && field.config_value(r).is_some()) {
        Some(r) => Field::explicit_config(name, r),
        None => (name.to_string(), field),
    }
}

/// Whether a group's `field` is summarised as `mean ± std (n)`: a number by kind, or, for a
/// configuration value, a number (or flag) in every run that has it; not an id.
fn summarised_as_statistic(field: &Field, runs: &[&RunSummary]) -> bool {
    match field.fixed_kind() {
        Some(kind) => kind == fields::Kind::Num && *field != Field::Id,
        None => runs.iter().filter_map(|r| field.get(r)).all(|v| matches!(v, Val::Num(_) | Val::Int(_) | Val::Bool(_))),
    }
}

/// The columns a grouped view summarises over each group: those asked for (less the keys), or
/// by default every metric and the steps (and epochs) to converge.
fn summarised_columns(
    names: &Names,
    runs: &[&RunSummary],
    keys: &[String],
    view: &View,
) -> Result<Vec<(String, Field)>, ViewError> {
    if let Some(cols) = &view.columns {
        return each_once(cols).filter(|c| !keys.contains(c)).map(|c| Ok((c.clone(), names.field(c)?))).collect();
    }
    let mut cols: Vec<(String, Field)> = metrics(runs).iter().map(|m| metric_column(runs, m)).collect();
    cols.push(("steps_to_converge".into(), Field::StepsToConverge));
    if runs.iter().any(|r| r.epochs_to_converge.is_some()) {
        cols.push(("epochs_to_converge".into(), Field::EpochsToConverge));
    }
    Ok(cols)
}

/// The runs grouped by their cells of `key_fields`, sorted by key (missing cells last; equal
/// keys in order of first appearance).
fn groups_of<'r>(runs: &[&'r RunSummary], key_fields: &[(String, Field)]) -> Vec<(Vec<Cell>, Vec<&'r RunSummary>)> {
    let by_experiment = key_fields.iter().position(|(_, f)| *f == Field::Experiment);
    let mut index: HashMap<String, usize> = HashMap::new();
    let mut groups: Vec<(Vec<Cell>, Vec<&RunSummary>)> = vec![];
    for r in runs {
        let key: Vec<Cell> = key_fields.iter().map(|(_, f)| cell(f, r)).collect();
        // Two spec files may name different experiments alike: their runs, on different
        // data, are not averaged together.
        let data = by_experiment.map(|_| format!("{:?}{:?}", r.task, r.task_options)).unwrap_or_default();
        let hashable = format!("{key:?}{data}");
        match index.get(&hashable) {
            Some(&i) => groups[i].1.push(r),
            None => {
                index.insert(hashable, groups.len());
                groups.push((key, vec![r]));
            }
        }
    }
    if let Some(e) = by_experiment {
        name_apart(&mut groups, e);
    }
    groups.sort_by(|a, b| {
        let mut cells = a.0.iter().zip(&b.0).map(|(x, y)| x.order_missing_last(y, false));
        cells.find(|o| o.is_ne()).unwrap_or(std::cmp::Ordering::Equal)
    });
    groups
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::{View, build};
    use crate::store::RunSummary;
    use crate::value::Value;

    /// Two runs that sweep parameters named as a built-in field, a metric and the group count.
    fn clashing() -> Vec<RunSummary> {
        (1..=2)
            .map(|i| {
                let mut r = RunSummary::example();
                r.id = i;
                r.trial_key = format!("trial{i}");
                r.swept = ["status", "accuracy", "runs"].map(String::from).to_vec();
                let mut params = (*r.params).clone();
                for name in &r.swept {
                    params.insert(name.clone(), Value::Int(10 * i as i64));
                }
                r.params = Arc::new(params);
                r
            })
            .collect()
    }

    #[test]
    fn a_column_asked_for_twice_is_shown_once() {
        let runs = clashing();
        let view =
            View { columns: Some(vec!["id".into(), "id".into(), "seed".into(), "id".into()]), ..View::default() };
        assert_eq!(build(&runs, &view).unwrap().columns, ["id", "seed"]);
    }

    /// A diverged run's NaN metric sorts last either way, with the runs that have none, and so
    /// does a group whose mean it makes NaN.
    #[test]
    fn nan_sorts_last_whichever_way_runs_and_groups_are_sorted() {
        let runs: Vec<RunSummary> = [0.5, f64::NAN, 0.9]
            .into_iter()
            .enumerate()
            .map(|(i, accuracy)| {
                let mut r = RunSummary::example();
                r.id = i as u64 + 1;
                r.seed = i as u64 + 1;
                r.trial_key = format!("trial{i}");
                r.final_metrics.insert("accuracy".into(), accuracy);
                r
            })
            .collect();
        for (desc, order) in [(true, ["0.900", "0.500", "NaN"]), (false, ["0.500", "0.900", "NaN"])] {
            let sort = Some(("accuracy".to_string(), desc));
            let view = View { sort: sort.clone(), columns: Some(vec!["accuracy".into()]), ..View::default() };
            let sheet = build(&runs, &view).unwrap();
            assert_eq!(sheet.rows.iter().map(|r| r[0].display()).collect::<Vec<_>>(), order, "desc {desc}");
            let grouped = View { sort, group_by: Some(vec!["seed".into()]), ..View::default() };
            let sheet = build(&runs, &grouped).unwrap();
            let at = sheet.columns.iter().position(|c| c == "accuracy").unwrap();
            let means: Vec<String> = sheet.rows.iter().map(|r| r[at].display()).collect();
            assert!(means[2].starts_with("NaN"), "desc {desc}: {means:?}");
        }
    }

    /// A parameter named `status` or `accuracy` and the run's status and accuracy each get a
    /// column, named as `--where`, `--sort` and `--columns` find them: a bare name is a
    /// built-in field first, then a parameter, then a metric.
    #[test]
    fn a_parameter_named_as_a_built_in_field_or_a_metric_does_not_take_its_column() {
        let runs = clashing();
        let sheet = build(&runs, &View::default()).unwrap();
        let at = |name: &str| sheet.columns.iter().position(|c| c == name).unwrap_or_else(|| panic!("{name}"));
        assert_eq!(sheet.rows[0][at("status")].display(), "interrupted");
        assert_eq!(sheet.rows[0][at("param.status")].display(), "20");
        assert_eq!(sheet.rows[0][at("accuracy")].display(), "20");
        assert_eq!(sheet.rows[0][at("metric.accuracy")].display(), "0.875");
        assert_eq!(sheet.rows[0][at("runs")].display(), "20", "no count to clash with here");
        // Every default column name finds its own column when asked for by name.
        let asked = View { columns: Some(sheet.columns.clone()), ..View::default() };
        assert_eq!(build(&runs, &asked).unwrap().rows, sheet.rows);
        let shown: Vec<&RunSummary> = runs.iter().collect();
        let compact = super::compact_column_names(&shown);
        for name in ["status", "param.status", "accuracy", "metric.accuracy"] {
            assert!(compact.iter().any(|c| c == name), "{name} in {compact:?}");
        }
    }

    /// A key of a grouped view is one column: asked for twice, or also a summarised metric, or
    /// named as the group count.
    #[test]
    fn a_grouped_views_columns_are_unique_and_its_keys_keep_their_values() {
        let runs = clashing();
        let grouped = |keys: &[&str]| {
            let view = View { group_by: Some(keys.iter().map(|k| k.to_string()).collect()), ..View::default() };
            build(&runs, &view).unwrap()
        };
        let unique = |columns: &[String]| {
            let mut sorted = columns.to_vec();
            sorted.sort();
            sorted.dedup();
            sorted.len() == columns.len()
        };
        for keys in [&["d", "d"][..], &["metric.accuracy"], &["accuracy"], &["runs"], &["param.runs", "runs"]] {
            let sheet = grouped(keys);
            assert!(unique(&sheet.columns), "{keys:?}: {:?}", sheet.columns);
            assert_eq!(sheet.rows.len(), if keys == ["d", "d"] || keys == ["metric.accuracy"] { 1 } else { 2 });
            assert!(!sheet.stats[0], "{keys:?}: the key is not a statistic: {:?}", sheet.columns);
        }
        let by_metric = grouped(&["metric.accuracy"]);
        assert_eq!(by_metric.columns[..2], ["metric.accuracy", "runs"]);
        assert_eq!(by_metric.rows[0][0].display(), "0.875");
        let by_count_name = grouped(&["runs"]);
        assert_eq!(by_count_name.columns[..2], ["param.runs", "runs"]);
        assert_eq!(by_count_name.rows[0][0].display(), "10");
        assert!(grouped(&["accuracy"]).columns.starts_with(&[
            "accuracy".into(),
            "runs".into(),
            "metric.accuracy".into()
        ]));
    }

    /// A trial run twice (`--force`) counts once in a group, by its latest run, and the earlier
    /// run is counted as left out; `every_run` counts both.
    #[test]
    fn a_group_counts_each_trial_once_by_its_latest_run() {
        let run = |id: u64, trial: &str, accuracy: f64| {
            let mut r = RunSummary::example();
            (r.id, r.trial_key) = (id, trial.to_string());
            r.final_metrics = [("accuracy".to_string(), accuracy)].into();
            r
        };
        let runs = vec![run(1, "a", 0.5), run(2, "b", 0.7), run(3, "a", 0.9)];
        let view = View { group_by: Some(vec!["experiment".into()]), ..View::default() };
        let sheet = build(&runs, &view).unwrap();
        let at = |sheet: &super::Sheet, name: &str| sheet.columns.iter().position(|c| c == name).unwrap();
        assert_eq!(sheet.rows[0][at(&sheet, "runs")].display(), "2");
        assert!(sheet.rows[0][at(&sheet, "accuracy")].display().starts_with("0.800 ± "), "{:?}", sheet.rows);
        assert_eq!(sheet.left_out, 1);
        let every = build(&runs, &View { every_run: true, ..view }).unwrap();
        assert_eq!((every.rows[0][at(&every, "runs")].display(), every.left_out), ("3".to_string(), 0));
    }
}
