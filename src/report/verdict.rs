//! A results table's criteria of reproduction, stated as data in the description, and the
//! verdict computed from them: reproduced (every criterion met), not reproduced (none met),
//! partly reproduced (some), or not run (no criterion could be judged). A criterion whose rows
//! have no runs is "not run", never met. Where the table asks for a number of runs per row
//! (`seeds`) and a criterion's rows have fewer, it is met or unmet "so far", and so is the
//! table's verdict: more seeds may still overturn it.

use std::collections::BTreeMap;
use std::fmt;

use serde::Deserialize;

use super::numbers::sig3;
use super::selection::{Row, metric};
use crate::tasks::higher_is_better;

/// A row named by some of its key values: `{model: stm, nq: 8}`. Values are compared as the
/// table shows them (`8`, `true`, `stm`), numbers by value ([`Scalar::is`]).
pub type RowMatch = BTreeMap<String, Scalar>;

/// A YAML scalar read as text (`8`, `true` and `"8"` are the same row value).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Scalar(pub String);

impl Scalar {
    /// Whether a row value, as the table shows it, is this one: numbers by value (`8.0` is the
    /// row `8`, `1e-7` the row `0.0000001`), anything else by its text.
    pub fn is(&self, shown: &str) -> bool {
        self.0 == shown || matches!((self.0.parse::<f64>(), shown.parse::<f64>()), (Ok(a), Ok(b)) if a == b)
    }
}

/// Whether two row matches name the same values (numbers by value).
pub fn same_match(a: &RowMatch, b: &RowMatch) -> bool {
    a.len() == b.len() && a.iter().all(|(k, v)| b.get(k).is_some_and(|w| v.is(&w.0)))
}

impl<'de> Deserialize<'de> for Scalar {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Scalar, D::Error> {
        struct Text;
        impl serde::de::Visitor<'_> for Text {
            type Value = Scalar;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a row value (text, a number or a boolean)")
            }
            fn visit_str<E>(self, v: &str) -> Result<Scalar, E> {
                Ok(Scalar(v.into()))
            }
            fn visit_i64<E>(self, v: i64) -> Result<Scalar, E> {
                Ok(Scalar(v.to_string()))
            }
            fn visit_u64<E>(self, v: u64) -> Result<Scalar, E> {
                Ok(Scalar(v.to_string()))
            }
            fn visit_f64<E>(self, v: f64) -> Result<Scalar, E> {
                Ok(Scalar(crate::value::Value::Float(v).to_string()))
            }
            fn visit_bool<E>(self, v: bool) -> Result<Scalar, E> {
                Ok(Scalar(v.to_string()))
            }
        }
        d.deserialize_any(Text)
    }
}

/// One criterion, written as a one-key map: `at_least: {row: {…}, metric: accuracy, value: 0.98}`.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Criterion {
    /// The row's mean is at least `value`.
    AtLeast(Threshold),
    /// The row's mean is at most `value`.
    AtMost(Threshold),
    /// The row's mean is below `value`.
    Below(Threshold),
    /// The row's mean is above `value`.
    Above(Threshold),
    /// The row's mean is as good as the paper's figure for it, give or take `tolerance`:
    /// at least figure − tolerance for a metric where higher is better, at most figure +
    /// tolerance otherwise.
    ReachesPaper(Tolerance),
    /// The rows' means strictly decrease in the order listed (`nq8 > nq4 > nq1`).
    Descending(Order),
    /// The rows' means strictly increase in the order listed.
    Ascending(Order),
    /// The rows' means lie within `tolerance` of each other (the paper's "similar for k = 1..15").
    Similar(Spread),
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Threshold {
    pub row: RowMatch,
    pub metric: String,
    pub value: f64,
    /// What must hold of another row for this one to count: a criterion that asks for failure
    /// (`below` for an ablation) is met only while the full model succeeds in the same table,
    /// so a table where nothing learnt cannot meet it.
    #[serde(default)]
    pub given: Option<Given>,
}

/// `given: {row: {gates: true}, at_least: 0.95}`: another row's mean of the same metric, at
/// least (or at most) a value.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Given {
    pub row: RowMatch,
    #[serde(default)]
    pub at_least: Option<f64>,
    #[serde(default)]
    pub at_most: Option<f64>,
}

impl Given {
    fn holds(&self, mean: f64) -> bool {
        self.at_least.is_none_or(|v| mean >= v) && self.at_most.is_none_or(|v| mean <= v)
    }

    /// "≥ 0.950", as the verdict line shows it.
    fn claim(&self) -> String {
        match (self.at_least, self.at_most) {
            (Some(lo), _) => format!("≥ {}", sig3(lo)),
            (_, Some(hi)) => format!("≤ {}", sig3(hi)),
            _ => String::new(),
        }
    }
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Tolerance {
    pub row: RowMatch,
    pub metric: String,
    pub tolerance: f64,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Order {
    pub rows: Vec<RowMatch>,
    pub metric: String,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Spread {
    pub rows: Vec<RowMatch>,
    pub metric: String,
    pub tolerance: f64,
}

/// Why a criterion cannot be judged against its table, whatever the runs.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CriterionError {
    #[error("names `{key}`, which is not one of the table's rows ({keys})")]
    UnknownRowKey { key: String, keys: String },
    #[error("judges `{metric}`, which is not one of the table's metrics ({metrics})")]
    UnknownMetric { metric: String, metrics: String },
    #[error("compares with the paper, but no paper row for {row} gives a number for `{metric}`")]
    NoPaperNumber { row: String, metric: String },
    #[error("`{criterion}` compares rows, so it needs at least two; it names {n}")]
    TooFewRows { criterion: &'static str, n: usize },
    #[error("names the row {row} twice: a row compared with itself")]
    RowTwice { row: String },
    #[error("has a threshold or tolerance that is not a finite number")]
    NotFinite,
    #[error("has the tolerance {tolerance}, below zero; a tolerance is how far off still counts, 0 or more")]
    NegativeTolerance { tolerance: f64 },
    #[error("has a `given` that needs exactly one of `at_least` and `at_most`")]
    GivenNeedsOneBound,
}

/// What a criterion's check came to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    Met,
    /// Met, but a row it names has fewer runs than the table asks for.
    MetSoFar,
    /// Unmet, and a row it names has fewer runs than the table asks for.
    UnmetSoFar,
    Unmet,
    /// A row it names has no runs (or no value of its metric).
    NotRun,
    /// A row match fits several rows: it needs more keys.
    Ambiguous,
}

/// A criterion's outcome and the line that shows the numbers that decided it.
#[derive(Clone, Debug, PartialEq)]
pub struct Judgement {
    pub outcome: Outcome,
    pub line: String,
}

/// A table's verdict.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    Reproduced,
    PartlyReproduced,
    NotReproduced,
    NotRun,
    /// The description states no criteria for the table.
    NoCriteria,
}

impl Verdict {
    /// All met → reproduced; none → not reproduced; some → partly. A criterion not run counts
    /// as not met, so a table is "reproduced" only when every criterion was run and met. Met
    /// or unmet "so far" count as met or unmet; [`summary`] says "so far".
    pub fn of(judgements: &[Judgement]) -> Verdict {
        let count = |f: &dyn Fn(Outcome) -> bool| judgements.iter().filter(|j| f(j.outcome)).count();
        let met = count(&|o| matches!(o, Outcome::Met | Outcome::MetSoFar));
        let decided = count(&|o| matches!(o, Outcome::Met | Outcome::MetSoFar | Outcome::Unmet | Outcome::UnmetSoFar));
        match (judgements.len(), decided, met) {
            (0, _, _) => Verdict::NoCriteria,
            (_, 0, _) => Verdict::NotRun,
            (n, _, m) if m == n => Verdict::Reproduced,
            (_, _, 0) => Verdict::NotReproduced,
            _ => Verdict::PartlyReproduced,
        }
    }

    /// Whether a criterion was judged on fewer runs than its table asks for.
    pub fn only_so_far(judgements: &[Judgement]) -> bool {
        judgements.iter().any(|j| matches!(j.outcome, Outcome::MetSoFar | Outcome::UnmetSoFar))
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Reproduced => "reproduced",
            Verdict::PartlyReproduced => "partly reproduced",
            Verdict::NotReproduced => "not reproduced",
            Verdict::NotRun => "not run",
            Verdict::NoCriteria => "no criteria stated",
        }
    }
}

/// "reproduced (3 of 3 criteria met)", "partly reproduced (1 of 3 met, 1 not run)".
pub fn summary(judgements: &[Judgement]) -> String {
    let verdict = Verdict::of(judgements);
    let n = judgements.len();
    if n == 0 {
        return verdict.as_str().into();
    }
    let count = |o: Outcome| judgements.iter().filter(|j| j.outcome == o).count();
    let short = count(Outcome::MetSoFar) + count(Outcome::UnmetSoFar);
    let mut parts = vec![format!("{} of {n} criteria met", count(Outcome::Met) + count(Outcome::MetSoFar))];
    for (number, what) in [
        (short, "judged on fewer runs than the table asks for"),
        (count(Outcome::NotRun), "not run"),
        (count(Outcome::Ambiguous), "ambiguous"),
    ] {
        if number > 0 {
            parts.push(format!("{number} {what}"));
        }
    }
    let so_far = if Verdict::only_so_far(judgements) { " so far" } else { "" };
    format!("{}{so_far} ({})", verdict.as_str(), parts.join(", "))
}

/// What a criterion is checked against: the table's row keys, metrics, rows and the paper's
/// numbers.
pub struct Context<'a, 'r> {
    pub row_keys: &'a [String],
    pub metrics: &'a [String],
    pub rows: &'a [Row<'r>],
    /// The paper's number for a row match and metric, if the description gives one.
    pub paper: &'a dyn Fn(&RowMatch, &str) -> Option<f64>,
    /// The runs each row should have (the table's `seeds`); a criterion met on fewer is met
    /// only so far.
    pub seeds: Option<usize>,
}

impl Criterion {
    /// Its key in the description (`at_least`, `similar`).
    fn name(&self) -> &'static str {
        match self {
            Criterion::AtLeast(_) => "at_least",
            Criterion::AtMost(_) => "at_most",
            Criterion::Below(_) => "below",
            Criterion::Above(_) => "above",
            Criterion::ReachesPaper(_) => "reaches_paper",
            Criterion::Descending(_) => "descending",
            Criterion::Ascending(_) => "ascending",
            Criterion::Similar(_) => "similar",
        }
    }

    fn metric(&self) -> &str {
        match self {
            Criterion::AtLeast(t) | Criterion::AtMost(t) | Criterion::Below(t) | Criterion::Above(t) => &t.metric,
            Criterion::ReachesPaper(t) => &t.metric,
            Criterion::Descending(o) | Criterion::Ascending(o) => &o.metric,
            Criterion::Similar(s) => &s.metric,
        }
    }

    /// A threshold's condition on another row.
    fn given(&self) -> Option<&Given> {
        match self {
            Criterion::AtLeast(t) | Criterion::AtMost(t) | Criterion::Below(t) | Criterion::Above(t) => {
                t.given.as_ref()
            }
            _ => None,
        }
    }

    /// The rows it names; a threshold's `given` row comes second.
    fn rows(&self) -> Vec<&RowMatch> {
        match self {
            Criterion::AtLeast(t) | Criterion::AtMost(t) | Criterion::Below(t) | Criterion::Above(t) => {
                std::iter::once(&t.row).chain(t.given.as_ref().map(|g| &g.row)).collect()
            }
            Criterion::ReachesPaper(t) => vec![&t.row],
            Criterion::Descending(o) | Criterion::Ascending(o) => o.rows.iter().collect(),
            Criterion::Similar(s) => s.rows.iter().collect(),
        }
    }

    /// Checks the criterion against its table, before any run is looked at.
    pub fn validate(&self, cx: &Context) -> Result<(), CriterionError> {
        for row in self.rows() {
            if let Some(key) = row.keys().find(|k| !cx.row_keys.contains(k)) {
                return Err(CriterionError::UnknownRowKey { key: key.clone(), keys: cx.row_keys.join(", ") });
            }
        }
        if !cx.metrics.iter().any(|m| m == self.metric()) {
            return Err(CriterionError::UnknownMetric { metric: self.metric().into(), metrics: cx.metrics.join(", ") });
        }
        match self {
            Criterion::AtLeast(t) | Criterion::AtMost(t) | Criterion::Below(t) | Criterion::Above(t)
                if !t.value.is_finite() =>
            {
                Err(CriterionError::NotFinite)
            }
            _ if self.given().is_some_and(|g| g.at_least.is_some() == g.at_most.is_some()) => {
                Err(CriterionError::GivenNeedsOneBound)
            }
            _ if self.given().is_some_and(|g| !g.at_least.or(g.at_most).is_some_and(f64::is_finite)) => {
                Err(CriterionError::NotFinite)
            }
            Criterion::ReachesPaper(Tolerance { tolerance, .. }) | Criterion::Similar(Spread { tolerance, .. })
                if !tolerance.is_finite() =>
            {
                Err(CriterionError::NotFinite)
            }
            Criterion::ReachesPaper(Tolerance { tolerance, .. }) | Criterion::Similar(Spread { tolerance, .. })
                if *tolerance < 0.0 =>
            {
                Err(CriterionError::NegativeTolerance { tolerance: *tolerance })
            }
            Criterion::ReachesPaper(t) if (cx.paper)(&t.row, &t.metric).is_none() => {
                Err(CriterionError::NoPaperNumber { row: show_match(&t.row, cx.row_keys), metric: t.metric.clone() })
            }
            Criterion::Descending(Order { rows, .. })
            | Criterion::Ascending(Order { rows, .. })
            | Criterion::Similar(Spread { rows, .. }) => {
                if rows.len() < 2 {
                    return Err(CriterionError::TooFewRows { criterion: self.name(), n: rows.len() });
                }
                // A strict order of a row against itself always fails.
                let twice =
                    rows.iter().enumerate().find_map(|(i, r)| rows[..i].iter().find(|first| same_match(first, r)));
                twice.map_or(Ok(()), |row| Err(CriterionError::RowTwice { row: show_match(row, cx.row_keys) }))
            }
            _ => Ok(()),
        }
    }

    /// Judges the criterion on the table's rows, with the numbers that decided it.
    pub fn judge(&self, cx: &Context) -> Judgement {
        let metric = self.metric();
        let found: Vec<(String, Result<Mean, Missing>)> =
            self.rows().into_iter().map(|m| (show_match(m, cx.row_keys), mean_of(cx, m, metric))).collect();
        let shown = |(label, mean): &(String, Result<Mean, Missing>)| match mean {
            Ok(m) => format!("{label} {}", m.show()),
            Err(Missing::Ambiguous) => format!("{label} (matches several rows: name more keys)"),
            Err(Missing::NoRuns) => format!("{label} (no runs)"),
            Err(Missing::NoValue) => format!("{label} (no `{metric}` in its runs)"),
        };
        let joined = |op: &str| found.iter().map(shown).collect::<Vec<_>>().join(op);
        let means: Result<Vec<f64>, Outcome> =
            found.iter().map(|(_, m)| m.map(|m| m.mean).map_err(Missing::outcome)).collect();
        // A threshold's `given` row is the second of `found`.
        let given = self.given();
        let first = |test: &dyn Fn(f64) -> bool| {
            means.as_ref().map(|ms| test(ms[0]) && given.is_none_or(|g| g.holds(ms[1]))).map_err(|o| *o)
        };
        let single = |claim: String| match given {
            Some(g) => format!("{metric} of {} {claim}, given {} {}", shown(&found[0]), shown(&found[1]), g.claim()),
            None => format!("{metric} of {} {claim}", shown(&found[0])),
        };
        let (passed, line) = match self {
            Criterion::AtLeast(t) => (first(&|m| m >= t.value), single(format!("≥ {}", sig3(t.value)))),
            Criterion::AtMost(t) => (first(&|m| m <= t.value), single(format!("≤ {}", sig3(t.value)))),
            Criterion::Below(t) => (first(&|m| m < t.value), single(format!("< {}", sig3(t.value)))),
            Criterion::Above(t) => (first(&|m| m > t.value), single(format!("> {}", sig3(t.value)))),
            Criterion::ReachesPaper(t) => {
                let paper = (cx.paper)(&t.row, metric).unwrap_or(f64::NAN);
                let higher = higher_is_better(metric);
                let bound = if higher { paper - t.tolerance } else { paper + t.tolerance };
                let (op, sign) = if higher { ("≥", "−") } else { ("≤", "+") };
                let claim = format!("{op} paper {} {sign} {} = {}", sig3(paper), sig3(t.tolerance), sig3(bound));
                (first(&|m| if higher { m >= bound } else { m <= bound }), single(claim))
            }
            Criterion::Descending(_) => {
                (means.map(|ms| ms.windows(2).all(|w| w[0] > w[1])), format!("{metric}: {}", joined(" > ")))
            }
            Criterion::Ascending(_) => {
                (means.map(|ms| ms.windows(2).all(|w| w[0] < w[1])), format!("{metric}: {}", joined(" < ")))
            }
            Criterion::Similar(s) => {
                let spread = means.map(|ms| {
                    ms.iter().copied().fold(f64::NEG_INFINITY, f64::max)
                        - ms.iter().copied().fold(f64::INFINITY, f64::min)
                });
                let said = spread.map_or(String::new(), |d| format!(": spread {}", sig3(d)));
                let line = format!("{metric}: {}{said} ≤ {}", joined(" ~ "), sig3(s.tolerance));
                (spread.map(|d| d <= s.tolerance), line)
            }
        };
        let fewest = found.iter().filter_map(|(_, m)| m.as_ref().ok().map(|m| m.n)).min();
        let short = cx.seeds.zip(fewest).filter(|(wanted, n)| n < wanted);
        let outcome = match (outcome_of(passed), short) {
            (Outcome::Met, Some(_)) => Outcome::MetSoFar,
            (Outcome::Unmet, Some(_)) => Outcome::UnmetSoFar,
            (o, _) => o,
        };
        let line = match short {
            Some((wanted, n)) => format!("{line} — n = {n} of the {wanted} runs a row should have"),
            None => line,
        };
        Judgement { outcome, line: format!("{} {line}", mark(outcome)) }
    }
}

/// A row's mean of a metric over its runs, and how many runs.
#[derive(Clone, Copy, Debug)]
struct Mean {
    mean: f64,
    n: usize,
}

impl Mean {
    fn show(&self) -> String {
        format!("= {} (n = {})", sig3(self.mean), self.n)
    }
}

/// Why a row has no mean to judge.
#[derive(Clone, Copy, Debug)]
enum Missing {
    NoRuns,
    /// Its runs do not have the metric (runs made before the spec recorded it).
    NoValue,
    Ambiguous,
}

impl Missing {
    fn outcome(self) -> Outcome {
        match self {
            Missing::NoRuns | Missing::NoValue => Outcome::NotRun,
            Missing::Ambiguous => Outcome::Ambiguous,
        }
    }
}

fn mean_of(cx: &Context, m: &RowMatch, metric_name: &str) -> Result<Mean, Missing> {
    let matching: Vec<&Row> = cx.rows.iter().filter(|r| row_matches(cx.row_keys, &r.key, m)).collect();
    let row = match matching[..] {
        [] => return Err(Missing::NoRuns),
        [row] => row,
        _ => return Err(Missing::Ambiguous),
    };
    let values: Vec<f64> = row.runs.iter().filter_map(|r| metric(r, metric_name)).collect();
    if values.is_empty() {
        return Err(Missing::NoValue);
    }
    Ok(Mean { mean: values.iter().sum::<f64>() / values.len() as f64, n: values.len() })
}

/// Whether a row's key values agree with every value the match names.
pub fn row_matches(row_keys: &[String], key: &[String], m: &RowMatch) -> bool {
    m.iter().all(|(k, v)| row_keys.iter().position(|r| r == k).is_some_and(|i| key.get(i).is_some_and(|x| v.is(x))))
}

fn outcome_of(passed: Result<bool, Outcome>) -> Outcome {
    match passed {
        Ok(true) => Outcome::Met,
        Ok(false) => Outcome::Unmet,
        Err(o) => o,
    }
}

fn mark(o: Outcome) -> &'static str {
    match o {
        Outcome::Met => "✓",
        Outcome::MetSoFar => "✓ so far:",
        Outcome::UnmetSoFar => "✗ so far:",
        Outcome::Unmet => "✗",
        Outcome::NotRun => "· not run:",
        Outcome::Ambiguous => "? ambiguous:",
    }
}

/// `{d: 32, gates: true}`, as the description writes it, keys in the table's row order.
pub fn show_match(m: &RowMatch, row_keys: &[String]) -> String {
    let mut pairs: Vec<(&String, &Scalar)> = m.iter().collect();
    pairs.sort_by_key(|(k, _)| row_keys.iter().position(|r| r == *k));
    format!("{{{}}}", pairs.iter().map(|(k, v)| format!("{k}: {}", v.0)).collect::<Vec<_>>().join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::selection::tests::run;
    use crate::store::RunRecord;
    use crate::value::Value;

    fn criteria(yaml: &str) -> Vec<Criterion> {
        serde_saphyr::from_str(yaml).unwrap()
    }

    /// Rows keyed by `nq`, each with the accuracies given.
    fn runs(rows: &[(i64, &[f64])]) -> Vec<RunRecord> {
        let mut out = vec![];
        for (nq, accs) in rows {
            for a in *accs {
                let id = out.len() as u64;
                out.push(run(id, &format!("t{id}"), "h", &[("nq", Value::Int(*nq))], *a));
            }
        }
        out
    }

    fn judge_all(cs: &[Criterion], runs: &[RunRecord]) -> Vec<Judgement> {
        judge_with_seeds(cs, runs, None)
    }

    fn judge_with_seeds(cs: &[Criterion], runs: &[RunRecord], seeds: Option<usize>) -> Vec<Judgement> {
        let keys = ["nq".to_string()];
        let metrics = ["accuracy".to_string()];
        let sel = crate::report::selection::select(runs, &["exp".into()], &keys);
        let paper = |m: &RowMatch, _: &str| (m.get("nq").map(|v| v.0.as_str()) == Some("8")).then_some(0.98);
        let cx = Context { row_keys: &keys, metrics: &metrics, rows: &sel.rows, paper: &paper, seeds };
        cs.iter().map(|c| c.validate(&cx).map(|()| c.judge(&cx)).unwrap()).collect()
    }

    const THREE: &str = r#"
- reaches_paper: {row: {nq: 8}, metric: accuracy, tolerance: 0.02}
- descending: {metric: accuracy, rows: [{nq: 8}, {nq: 4}, {nq: 1}]}
- below: {row: {nq: 1}, metric: accuracy, value: 0.3}
"#;

    #[test]
    fn every_criterion_met_is_reproduced_with_its_numbers() {
        let js = judge_all(&criteria(THREE), &runs(&[(8, &[0.97, 0.99]), (4, &[0.9]), (1, &[0.25])]));
        assert_eq!(Verdict::of(&js), Verdict::Reproduced);
        assert_eq!(js[0].line, "✓ accuracy of {nq: 8} = 0.980 (n = 2) ≥ paper 0.980 − 0.0200 = 0.960");
        assert_eq!(
            js[1].line,
            "✓ accuracy: {nq: 8} = 0.980 (n = 2) > {nq: 4} = 0.900 (n = 1) > {nq: 1} = 0.250 (n = 1)"
        );
        assert_eq!(js[2].line, "✓ accuracy of {nq: 1} = 0.250 (n = 1) < 0.300");
        assert_eq!(summary(&js), "reproduced (3 of 3 criteria met)");
    }

    #[test]
    fn met_on_fewer_runs_than_the_table_asks_is_reproduced_only_so_far() {
        let rows = runs(&[(8, &[0.97, 0.99, 0.98]), (4, &[0.9]), (1, &[0.25, 0.2, 0.3])]);
        let js = judge_with_seeds(&criteria(THREE), &rows, Some(3));
        assert_eq!(js.iter().map(|j| j.outcome).collect::<Vec<_>>(), [Outcome::Met, Outcome::MetSoFar, Outcome::Met]);
        assert!(js[1].line.starts_with("✓ so far: accuracy:"), "{}", js[1].line);
        assert!(js[1].line.ends_with("— n = 1 of the 3 runs a row should have"), "{}", js[1].line);
        assert_eq!(Verdict::of(&js), Verdict::Reproduced);
        assert_eq!(
            summary(&js),
            "reproduced so far (3 of 3 criteria met, 1 judged on fewer runs than the table asks for)"
        );
        // Unmet on too few runs is unmet so far, and so is the verdict.
        let unmet = judge_with_seeds(&criteria(THREE), &runs(&[(8, &[0.5]), (4, &[0.4]), (1, &[0.35])]), Some(3));
        assert_eq!(unmet[0].outcome, Outcome::UnmetSoFar);
        assert!(
            unmet[0].line.starts_with("✗ so far:") && unmet[0].line.contains("n = 1 of the 3"),
            "{}",
            unmet[0].line
        );
        assert!(summary(&unmet).starts_with("partly reproduced so far ("), "{}", summary(&unmet));
        // Enough runs everywhere: plainly reproduced.
        let enough = judge_with_seeds(&criteria(THREE), &rows, Some(1));
        assert!(!Verdict::only_so_far(&enough));
        assert_eq!(summary(&enough), "reproduced (3 of 3 criteria met)");
    }

    #[test]
    fn some_met_is_partly_and_none_met_is_not_reproduced() {
        let partly = judge_all(&criteria(THREE), &runs(&[(8, &[0.5]), (4, &[0.4]), (1, &[0.35])]));
        assert_eq!(
            partly.iter().map(|j| j.outcome).collect::<Vec<_>>(),
            [Outcome::Unmet, Outcome::Met, Outcome::Unmet]
        );
        assert_eq!(Verdict::of(&partly), Verdict::PartlyReproduced);
        let none = judge_all(&criteria(THREE), &runs(&[(8, &[0.5]), (4, &[0.5]), (1, &[0.5])]));
        assert_eq!(Verdict::of(&none), Verdict::NotReproduced);
    }

    #[test]
    fn similar_rows_are_within_the_tolerance_of_each_other() {
        let similar = criteria("- similar: {metric: accuracy, rows: [{nq: 1}, {nq: 4}], tolerance: 0.05}");
        let close = judge_all(&similar, &runs(&[(1, &[0.5]), (4, &[0.53])]));
        assert_eq!(
            close[0].line,
            "✓ accuracy: {nq: 1} = 0.500 (n = 1) ~ {nq: 4} = 0.530 (n = 1): spread 0.0300 ≤ 0.0500"
        );
        let far = judge_all(&similar, &runs(&[(1, &[0.5]), (4, &[0.6])]));
        assert_eq!(far[0].outcome, Outcome::Unmet);
    }

    #[test]
    fn a_criterion_without_runs_is_not_run_and_never_met() {
        let js = judge_all(&criteria(THREE), &runs(&[(8, &[0.99]), (1, &[0.2])]));
        assert_eq!(js[1].outcome, Outcome::NotRun);
        assert!(js[1].line.contains("{nq: 4} (no runs)"), "{}", js[1].line);
        assert_eq!(summary(&js), "partly reproduced (2 of 3 criteria met, 1 not run)");
        let empty = judge_all(&criteria(THREE), &[]);
        assert_eq!(Verdict::of(&empty), Verdict::NotRun);
        assert!(empty.iter().all(|j| j.line.starts_with("· not run:")));
    }

    #[test]
    fn a_malformed_criterion_is_refused_with_a_reason() {
        let err = |yaml: &str| serde_saphyr::from_str::<Vec<Criterion>>(yaml).unwrap_err().to_string();
        assert!(err("- at_leest: {row: {nq: 1}, metric: accuracy, value: 1}").contains("at_leest"));
        assert!(err("- at_least: {row: {nq: 1}, metric: accuracy, valeu: 1}").contains("valeu"));
        assert!(err("- at_least: {row: {nq: 1}, metric: accuracy}").contains("value"));
        let keys = ["nq".to_string()];
        let metrics = ["accuracy".to_string()];
        let paper = |_: &RowMatch, _: &str| None;
        let cx = Context { row_keys: &keys, metrics: &metrics, rows: &[], paper: &paper, seeds: None };
        let check = |yaml: &str| criteria(yaml)[0].validate(&cx).unwrap_err();
        assert!(matches!(
            check("- above: {row: {d: 1}, metric: accuracy, value: 1}"),
            CriterionError::UnknownRowKey { .. }
        ));
        assert!(matches!(
            check("- above: {row: {nq: 1}, metric: acc, value: 1}"),
            CriterionError::UnknownMetric { .. }
        ));
        assert!(matches!(
            check("- reaches_paper: {row: {nq: 1}, metric: accuracy, tolerance: 0.1}"),
            CriterionError::NoPaperNumber { .. }
        ));
        assert_eq!(
            check("- ascending: {metric: accuracy, rows: [{nq: 1}]}"),
            CriterionError::TooFewRows { criterion: "ascending", n: 1 }
        );
        assert_eq!(
            check("- similar: {metric: accuracy, rows: [{nq: 1}, {nq: 4}], tolerance: .nan}"),
            CriterionError::NotFinite
        );
        assert_eq!(
            check("- below: {row: {nq: 1}, metric: accuracy, value: 0.3, given: {row: {nq: 8}}}"),
            CriterionError::GivenNeedsOneBound
        );
        assert_eq!(
            check("- below: {row: {nq: 1}, metric: accuracy, value: 0.3, given: {row: {nq: 8}, at_least: .nan}}"),
            CriterionError::NotFinite
        );
        assert!(matches!(
            check("- below: {row: {nq: 1}, metric: accuracy, value: 0.3, given: {row: {d: 8}, at_least: 0.9}}"),
            CriterionError::UnknownRowKey { .. }
        ));
    }

    #[test]
    fn a_criterion_that_cannot_be_met_or_compares_nothing_is_refused() {
        let keys = ["nq".to_string()];
        let metrics = ["accuracy".to_string()];
        let paper = |_: &RowMatch, _: &str| Some(0.9);
        let cx = Context { row_keys: &keys, metrics: &metrics, rows: &[], paper: &paper, seeds: None };
        let check = |yaml: &str| criteria(yaml)[0].validate(&cx);
        let similar_one = check("- similar: {metric: accuracy, rows: [{nq: 1}], tolerance: 0.1}").unwrap_err();
        assert_eq!(similar_one, CriterionError::TooFewRows { criterion: "similar", n: 1 });
        assert_eq!(similar_one.to_string(), "`similar` compares rows, so it needs at least two; it names 1");
        for yaml in [
            "- descending: {metric: accuracy, rows: [{nq: 8}, {nq: 4}, {nq: 8}]}",
            "- ascending: {metric: accuracy, rows: [{nq: 8}, {nq: 8.0}]}",
            "- similar: {metric: accuracy, rows: [{nq: 8}, {nq: \"8\"}], tolerance: 0.1}",
        ] {
            let err = check(yaml).unwrap_err();
            assert_eq!(err, CriterionError::RowTwice { row: "{nq: 8}".into() }, "{yaml}");
            assert_eq!(err.to_string(), "names the row {nq: 8} twice: a row compared with itself");
        }
        for yaml in [
            "- reaches_paper: {row: {nq: 8}, metric: accuracy, tolerance: -5}",
            "- similar: {metric: accuracy, rows: [{nq: 1}, {nq: 4}], tolerance: -0.5}",
        ] {
            assert!(matches!(check(yaml), Err(CriterionError::NegativeTolerance { .. })), "{yaml}");
        }
        assert!(check("- reaches_paper: {row: {nq: 8}, metric: accuracy, tolerance: 0}").is_ok());
        assert!(check("- descending: {metric: accuracy, rows: [{nq: 8}, {nq: 4}]}").is_ok());
    }

    #[test]
    fn a_row_value_written_as_another_number_of_the_same_value_names_the_row() {
        // `{nq: 8.0}` is the row of the integer 8; a text that is no number stays text.
        let js = judge_all(
            &criteria("- at_least: {row: {nq: 8.0}, metric: accuracy, value: 0.5}"),
            &runs(&[(8, &[0.9]), (4, &[0.2])]),
        );
        assert_eq!(js[0].line, "✓ accuracy of {nq: 8.0} = 0.900 (n = 1) ≥ 0.500");
        assert!(Scalar("1e-7".into()).is("0.0000001") && Scalar("8".into()).is("8.0"));
        assert!(!Scalar("8".into()).is("8x") && !Scalar("true".into()).is("1") && Scalar("stm".into()).is("stm"));
    }

    #[test]
    fn a_failure_criterion_is_met_only_given_success_elsewhere_in_the_table() {
        let failing = "- below: {row: {nq: 1}, metric: accuracy, value: 0.3, given: {row: {nq: 8}, at_least: 0.95}}";
        let js = judge_all(&criteria(failing), &runs(&[(8, &[0.99]), (1, &[0.25])]));
        assert_eq!(js[0].outcome, Outcome::Met);
        assert_eq!(js[0].line, "✓ accuracy of {nq: 1} = 0.250 (n = 1) < 0.300, given {nq: 8} = 0.990 (n = 1) ≥ 0.950");
        let nothing_learnt = judge_all(&criteria(failing), &runs(&[(8, &[0.26]), (1, &[0.25])]));
        assert_eq!(nothing_learnt[0].outcome, Outcome::Unmet, "{}", nothing_learnt[0].line);
        let full_not_run = judge_all(&criteria(failing), &runs(&[(1, &[0.25])]));
        assert_eq!(full_not_run[0].outcome, Outcome::NotRun);
    }
}
