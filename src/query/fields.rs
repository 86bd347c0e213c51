//! The fields of a run that filters, sorting, columns and grouping name.
//!
//! Built in: `id`, `status`, `experiment`, `model`, `task`, `seed`, `tags`, `started`, `ended`,
//! `steps_run`, `steps_to_converge`, `epochs_to_converge`, `wall`, `progress`, `eta`,
//! `param_count`, `spec`,
//! `spec_hash`, `trial`. Any other name is a model parameter (`d`, `gates`), a task option
//! (`pairs`), a training setting (`lr`, `batch`, `steps`) or a final metric (`accuracy`,
//! `val_accuracy`), looked up in that order; `param.d`, `task.pairs`, `train.lr` and
//! `metric.loss` name one of them explicitly.

use std::collections::BTreeSet;

use crate::store::RunSummary;
use crate::value::{Value, write_list};

/// A resolved field name.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Field {
    Id,
    Status,
    Experiment,
    Model,
    Task,
    Seed,
    Tags,
    Started,
    Ended,
    StepsRun,
    StepsToConverge,
    EpochsToConverge,
    Wall,
    /// A running run's share of its steps done (0–1).
    Progress,
    /// A running run's estimated seconds to go.
    Eta,
    ParamCount,
    Spec,
    SpecHash,
    Trial,
    Param(String),
    TaskOption(String),
    Train(String),
    Metric(String),
    /// A bare name: parameter, task option, training setting or metric, first found.
    Named(String),
}

/// Built-in fields with a line of help each.
pub const BUILTINS: &[(&str, &str)] = &[
    ("id", "run id"),
    ("status", "\"running\", \"done\", \"failed\", \"interrupted\" or \"pruned\""),
    ("experiment", "experiment name"),
    ("model", "model name"),
    ("task", "task generator"),
    ("seed", "the trial's seed"),
    ("tags", "list of tags (`\"best\" in tags`)"),
    ("started", "start time (compare with a date: `started >= 2025-01-31`)"),
    ("ended", "end time"),
    ("steps_run", "training steps run"),
    ("steps_to_converge", "step at which `stop_when` held (absent if it never did)"),
    ("epochs_to_converge", "the same in epochs, for tasks with a fixed training set"),
    ("wall", "wall-clock seconds (so far, for a running run)"),
    ("progress", "a running run's share of its steps done, 0 to 1"),
    ("eta", "a running run's estimated seconds to go"),
    ("param_count", "trainable parameters"),
    ("spec", "spec file path"),
    ("spec_hash", "SHA-256 of the spec text"),
    ("trial", "trial identity"),
];

/// What kind of value a field holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    Num,
    Str,
    Bool,
    Date,
    List,
}

impl Kind {
    pub fn noun(self) -> &'static str {
        match self {
            Kind::Num => "a number",
            Kind::Str => "a string",
            Kind::Bool => "a boolean",
            Kind::Date => "a date",
            Kind::List => "a list",
        }
    }
}

/// A field's value in one run, borrowing from the summary.
#[derive(Clone, Debug, PartialEq)]
pub enum Val<'a> {
    Num(f64),
    /// A whole number (an id, a seed, an int parameter), compared exactly: past 2^53 a float
    /// would take two seeds for one.
    Int(i128),
    Str(&'a str),
    Bool(bool),
    /// Unix seconds.
    Date(f64),
    /// A day, minute or second written in a filter: from its start up to (not including) its
    /// end, in Unix seconds.
    Period(f64, f64),
    List(Vec<Val<'a>>),
}

impl Val<'_> {
    pub fn kind(&self) -> Kind {
        match self {
            Val::Num(_) | Val::Int(_) => Kind::Num,
            Val::Str(_) => Kind::Str,
            Val::Bool(_) => Kind::Bool,
            Val::Date(_) | Val::Period(..) => Kind::Date,
            Val::List(_) => Kind::List,
        }
    }

    /// A total order within a kind (numbers, then strings, ...), for sorting and grouping.
    pub fn order(&self, other: &Val) -> std::cmp::Ordering {
        use std::cmp::Ordering;
        match (self, other) {
            (Val::Int(a), Val::Int(b)) => a.cmp(b),
            (a, b) if a.as_f64().is_some() && b.as_f64().is_some() => {
                a.as_f64().unwrap_or_default().total_cmp(&b.as_f64().unwrap_or_default())
            }
            (Val::Str(a), Val::Str(b)) => a.cmp(b),
            (Val::Bool(a), Val::Bool(b)) => a.cmp(b),
            (Val::List(a), Val::List(b)) => {
                for (x, y) in a.iter().zip(b) {
                    let o = x.order(y);
                    if o != Ordering::Equal {
                        return o;
                    }
                }
                a.len().cmp(&b.len())
            }
            (a, b) => a.kind().cmp(&b.kind()),
        }
    }
}

impl Val<'_> {
    /// A number, a whole number or a date as a float; `None` for the other kinds.
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Val::Num(x) | Val::Date(x) | Val::Period(x, _) => Some(*x),
            Val::Int(i) => Some(*i as f64),
            _ => None,
        }
    }
}

impl std::fmt::Display for Val<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            // In the shortest digits that read back as the same number, with an exponent past
            // several zeros.
            Val::Num(x) if crate::value::wants_exponent(*x) => write!(f, "{x:e}"),
            Val::Num(x) => write!(f, "{x}"),
            Val::Int(i) => write!(f, "{i}"),
            Val::Str(s) => f.write_str(s),
            Val::Bool(b) => write!(f, "{b}"),
            Val::Date(t) | Val::Period(t, _) => f.write_str(&format_date(*t)),
            Val::List(items) => write_list(f, items),
        }
    }
}

/// The last second RFC 3339 can write: 9999-12-31T23:59:59Z.
pub const LAST_DATE: f64 = 253_402_300_799.0;

/// Unix seconds as `2025-01-31T14:05:09Z`; a time before 1970 as 1970's first second, and one
/// past [`LAST_DATE`] (an imported record's, say) as its number of seconds.
pub fn format_date(t: f64) -> String {
    if t.is_nan() || t > LAST_DATE {
        return format!("{t} s after 1970");
    }
    let t = std::time::UNIX_EPOCH + std::time::Duration::from_secs(t.max(0.0) as u64);
    humantime::format_rfc3339_seconds(t).to_string()
}

pub fn of_value(v: &Value) -> Val<'_> {
    match v {
        Value::Bool(b) => Val::Bool(*b),
        Value::Int(i) => Val::Int(i128::from(*i)),
        Value::Float(x) => Val::Num(*x),
        Value::Str(s) => Val::Str(s),
        Value::List(items) => Val::List(items.iter().map(of_value).collect()),
    }
}

impl Field {
    /// Resolves a name as written (`d`, `param.d`, `accuracy`); `None` for an unknown namespace.
    pub fn parse(name: &str) -> Option<Field> {
        if let Some((ns, n)) = name.split_once('.') {
            let n = n.to_string();
            return match ns {
                "param" | "params" => Some(Field::Param(n)),
                "task" => Some(Field::TaskOption(n)),
                "train" => Some(Field::Train(n)),
                "metric" | "metrics" => Some(Field::Metric(n)),
                _ => None,
            };
        }
        Some(match name {
            "id" => Field::Id,
            "status" => Field::Status,
            "experiment" => Field::Experiment,
            "model" => Field::Model,
            "task" => Field::Task,
            "seed" => Field::Seed,
            "tags" => Field::Tags,
            "started" => Field::Started,
            "ended" => Field::Ended,
            "steps_run" => Field::StepsRun,
            "steps_to_converge" => Field::StepsToConverge,
            "epochs_to_converge" => Field::EpochsToConverge,
            "wall" => Field::Wall,
            "progress" => Field::Progress,
            "eta" => Field::Eta,
            "param_count" => Field::ParamCount,
            "spec" => Field::Spec,
            "spec_hash" => Field::SpecHash,
            "trial" => Field::Trial,
            _ => Field::Named(name.to_string()),
        })
    }

    /// The value in one run; `None` when the run does not have it.
    pub fn get<'a>(&self, s: &'a RunSummary) -> Option<Val<'a>> {
        Some(match self {
            Field::Id => Val::Int(i128::from(s.id)),
            Field::Status => Val::Str(s.status.as_str()),
            Field::Experiment => Val::Str(&s.experiment),
            Field::Model => Val::Str(&s.model),
            Field::Task => Val::Str(&s.task),
            Field::Seed => Val::Int(i128::from(s.seed)),
            Field::Tags => Val::List(s.tags.iter().map(|t| Val::Str(t)).collect()),
            Field::Started => Val::Date(s.started_at),
            Field::Ended => Val::Date(s.ended_at?),
            Field::StepsRun => Val::Int(i128::from(s.steps_run)),
            Field::StepsToConverge => Val::Int(i128::from(s.steps_to_converge?)),
            Field::EpochsToConverge => Val::Num(s.epochs_to_converge?),
            Field::Wall => Val::Num(s.wall_seconds),
            Field::Progress => {
                let l = s.live.as_ref()?;
                Val::Num(s.steps_run as f64 / l.steps_total.max(1) as f64)
            }
            Field::Eta => Val::Num(s.eta_seconds()?),
            Field::ParamCount => Val::Int(i128::from(s.param_count)),
            Field::Spec => Val::Str(&s.spec_path),
            Field::SpecHash => Val::Str(&s.spec_hash),
            Field::Trial => Val::Str(&s.trial_key),
            Field::Metric(n) => Val::Num(*s.final_metrics.get(n)?),
            Field::Named(n) => match self.config_value(s) {
                Some(v) => of_value(v),
                None => Val::Num(*s.final_metrics.get(n)?),
            },
            Field::Param(_) | Field::TaskOption(_) | Field::Train(_) => of_value(self.config_value(s)?),
        })
    }

    /// The configuration value behind a parameter, task option or setting field (keeps ints
    /// and floats apart, for display).
    pub fn config_value<'a>(&self, s: &'a RunSummary) -> Option<&'a Value> {
        match self {
            Field::Param(n) => s.params.get(n),
            Field::TaskOption(n) => s.task_options.get(n),
            Field::Train(n) => s.train.get(n),
            Field::Named(n) => s.params.get(n).or_else(|| s.task_options.get(n)).or_else(|| s.train.get(n)),
            _ => None,
        }
    }

    /// A configuration name as `s` holds it, named explicitly (`param.d`, `task.pairs`,
    /// `train.lr`): a column for a parameter whose bare name is a built-in field's or a
    /// metric's (a parameter `status`), which the bare name would not reach.
    pub fn explicit_config(name: &str, s: &RunSummary) -> (String, Field) {
        if s.params.contains_key(name) {
            (format!("param.{name}"), Field::Param(name.into()))
        } else if s.task_options.contains_key(name) {
            (format!("task.{name}"), Field::TaskOption(name.into()))
        } else {
            (format!("train.{name}"), Field::Train(name.into()))
        }
    }

    /// The kind a built-in field always has.
    pub fn fixed_kind(&self) -> Option<Kind> {
        Some(match self {
            Field::Status
            | Field::Experiment
            | Field::Model
            | Field::Task
            | Field::Spec
            | Field::SpecHash
            | Field::Trial => Kind::Str,
            Field::Tags => Kind::List,
            Field::Started | Field::Ended => Kind::Date,
            Field::Param(_) | Field::TaskOption(_) | Field::Train(_) | Field::Named(_) => return None,
            _ => Kind::Num,
        })
    }

    /// [`Field::is_config`], with a bare name taken as `runs` have it: `accuracy` is an
    /// outcome, `lr` a setting.
    pub fn is_config_in(&self, runs: &[RunSummary]) -> bool {
        match self {
            Field::Named(_) => runs.iter().any(|s| self.config_value(s).is_some()),
            f => f.is_config(),
        }
    }

    /// Whether the field describes the run's configuration (parameters, settings, seed), as
    /// opposed to its outcome. A bare name counts as configuration ([`Field::is_config_in`]
    /// tells).
    pub fn is_config(&self) -> bool {
        matches!(
            self,
            Field::Experiment
                | Field::Model
                | Field::Task
                | Field::Seed
                | Field::Param(_)
                | Field::TaskOption(_)
                | Field::Train(_)
                | Field::Named(_)
        )
    }
}

/// Every field name that some run in `runs` has, built-ins included (for "did you mean").
pub fn names(runs: &[RunSummary]) -> BTreeSet<String> {
    let mut out: BTreeSet<String> = BUILTINS.iter().map(|(n, _)| n.to_string()).collect();
    let mut seen_layouts: BTreeSet<(&str, &str)> = BTreeSet::new();
    for s in runs {
        // Runs of one experiment and model share their names: look at each layout once, plus
        // metrics (which depend on how the run ended).
        if seen_layouts.insert((&s.experiment, &s.model)) {
            out.extend(s.params.keys().cloned());
            out.extend(s.task_options.keys().cloned());
            out.extend(s.train.keys().cloned());
        }
        for k in s.final_metrics.keys() {
            if !out.contains(k) {
                out.insert(k.clone());
            }
        }
    }
    out
}

/// The kinds `field` has across `runs` (empty: no run has it).
pub fn kinds(field: &Field, runs: &[RunSummary]) -> BTreeSet<Kind> {
    if let Some(k) = field.fixed_kind() {
        return [k].into();
    }
    let mut out = BTreeSet::new();
    for s in runs {
        if let Some(v) = field.get(s) {
            out.insert(v.kind());
            if out.len() == 5 {
                break;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::{LAST_DATE, Val, format_date};

    #[test]
    fn numbers_print_in_their_shortest_digits_with_an_exponent_past_many_zeros() {
        let shown = [1e37, 1e-7, 1.5e20, -2.5e-6, 0.001, 0.03, 1e-5, 100.0, 0.0, 123456.789, f64::INFINITY];
        let texts: Vec<String> = shown.iter().map(|x| Val::Num(*x).to_string()).collect();
        assert_eq!(
            texts,
            ["1e37", "1e-7", "1.5e20", "-2.5e-6", "0.001", "0.03", "0.00001", "100", "0", "123456.789", "inf"]
        );
        for (x, text) in shown.iter().zip(&texts) {
            assert_eq!(text.parse::<f64>().unwrap(), *x, "{text} reads back");
        }
    }

    #[test]
    fn any_number_of_seconds_formats_as_a_date_or_as_its_seconds() {
        assert_eq!(format_date(0.0), "1970-01-01T00:00:00Z");
        assert_eq!(format_date(-5.0), "1970-01-01T00:00:00Z");
        assert_eq!(format_date(LAST_DATE), "9999-12-31T23:59:59Z");
        assert_eq!(format_date(4e11), "400000000000 s after 1970");
        assert_eq!(format_date(1e300), format!("{} s after 1970", 1e300));
        assert_eq!(format_date(f64::NAN), "NaN s after 1970");
    }
}
