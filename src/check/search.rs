//! A `search` block into a [`SearchSpec`]: the names searched and their domains, the seeds
//! every configuration runs with, how many configurations to try, how the next one is chosen
//! (the sampler) and when a trial stops early (the pruner).
//!
//! The names are resolved (model parameter, train setting, task option) and their values
//! checked by the experiment, which knows what each name sets; here each entry is read for
//! its own form.

use super::consteval;
use super::error_kind::CheckErrorKind;
use super::limits::MAX_TRIALS;
use crate::diag::Diagnostic;
use crate::lang::ast::{self, BinaryOp, ExprKind, SearchEntry};
use crate::source::Span;
use crate::value::Value;

/// A checked `search` block.
#[derive(Clone, Debug, PartialEq)]
pub struct SearchSpec {
    pub dims: Vec<Dim>,
    /// The seeds each configuration runs with (`[0]` without a `seed` entry).
    pub seeds: Vec<u64>,
    /// Configurations to try.
    pub trials: usize,
    pub sampler: Sampler,
    pub prune: Option<Pruning>,
    /// What the search maximises or minimises: the `metric` setting, else the pruner's.
    pub metric: Option<Metric>,
    /// Where the block is written (errors about the whole search point here).
    pub span: Span,
}

impl SearchSpec {
    /// How many configurations the searched names make, where each lists its values or is an
    /// integer range (a grid, or a random or TPE search that stops once it has tried each).
    pub fn space_size(&self) -> Option<usize> {
        self.dims.iter().try_fold(1usize, |n, d| n.checked_mul(d.domain.listed()?.len()))
    }

    /// The configurations the search tries: `trials`, or fewer in a smaller finite space.
    pub fn configurations(&self) -> usize {
        self.space_size().map_or(self.trials, |size| size.min(self.trials))
    }
}

/// One searched name and the values it may take.
#[derive(Clone, Debug, PartialEq)]
pub struct Dim {
    pub name: ast::Ident,
    pub domain: Domain,
    /// Where its values or distribution are written.
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Domain {
    /// `d in [48, 96]`, `n in 1..4`, `d ~ choice([48, 96])`.
    Values(Vec<Value>),
    /// `x ~ uniform(a, b)`.
    Uniform { low: f64, high: f64 },
    /// `lr ~ loguniform(a, b)`, `0 < a < b`.
    LogUniform { low: f64, high: f64 },
    /// `n ~ randint(a, b)`, inclusive.
    IntUniform { low: i64, high: i64 },
}

impl Domain {
    /// The values of a domain a grid can walk.
    pub fn listed(&self) -> Option<Vec<Value>> {
        match self {
            Domain::Values(v) => Some(v.clone()),
            Domain::IntUniform { low, high } if high.checked_sub(*low).is_some_and(|s| s < MAX_TRIALS as i64) => {
                Some((*low..=*high).map(Value::Int).collect())
            }
            _ => None,
        }
    }

    /// Whether `v` is one of the domain's values (a whole number and its float alike).
    pub fn contains(&self, v: &Value) -> bool {
        match self {
            Domain::Values(vs) => vs.iter().any(|d| d == v || d.as_float().is_some_and(|d| v.as_float() == Some(d))),
            Domain::Uniform { low, high } | Domain::LogUniform { low, high } => {
                v.as_float().is_some_and(|x| (*low..=*high).contains(&x))
            }
            Domain::IntUniform { low, high } => v.as_int().is_some_and(|x| (*low..=*high).contains(&x)),
        }
    }

    /// A few values that stand for the domain when the checker builds trials: every listed
    /// value, or both ends of a range.
    pub fn representatives(&self) -> Vec<Value> {
        match self {
            Domain::Values(v) => v.clone(),
            Domain::Uniform { low, high } | Domain::LogUniform { low, high } => {
                vec![Value::Float(*low), Value::Float(*high)]
            }
            Domain::IntUniform { low, high } => vec![Value::Int(*low), Value::Int(*high)],
        }
    }
}

/// As written in a spec: `[16, 32]`, `loguniform(0.0001, 0.01)`.
impl std::fmt::Display for Domain {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Domain::Values(v) => crate::value::write_list(f, v),
            Domain::Uniform { low, high } => write!(f, "uniform({low}, {high})"),
            Domain::LogUniform { low, high } => write!(f, "loguniform({low}, {high})"),
            Domain::IntUniform { low, high } => write!(f, "randint({low}, {high})"),
        }
    }
}

/// How the next configuration is chosen.
#[derive(Clone, Debug, PartialEq)]
pub enum Sampler {
    /// Every combination of the listed values: the first name varying slowest, or with
    /// `order`, in the random order that seed gives (as Optuna's `GridSampler` walks its grid),
    /// so that an asynchronous pruner, which keeps the first configuration to reach a rung,
    /// does not meet the configurations sorted by their values.
    Grid { order: Option<u64> },
    /// Independent draws, seeded.
    Random { seed: u64 },
    /// Tree-structured Parzen estimators over the configurations finished so far, after
    /// `startup` random ones.
    Tpe { seed: u64, startup: usize },
}

/// When a trial is stopped early: at rungs, the first evaluations at or after
/// `min_steps · factor^k` steps (`k < rungs`), or with `every`, at or after `min_steps + k ·
/// every` up to the step budget, a configuration (the mean of its seeds) that falls below the
/// rule's cut-off stops, unless the plateau guard keeps it.
#[derive(Clone, Debug, PartialEq)]
pub struct Pruning {
    pub rule: PruneRule,
    pub metric: Metric,
    pub min_steps: usize,
    pub rungs: usize,
    pub factor: f64,
    /// The plateau guard: a trial whose training loss fell by more than this fraction over
    /// the [`guard_window`](Pruning::guard_window) before a rung is kept whatever its metric.
    pub patience: Option<f64>,
    /// The median rule judging every this many steps from `min_steps` on, instead of at rungs
    /// `factor` apart (Optuna's `MedianPruner` with `interval_steps`); `every = eval_every`
    /// judges at every evaluation. `rungs` then counts those up to the step budget.
    pub every: Option<usize>,
}

impl Pruning {
    /// The step of each rung.
    pub fn rung_steps(&self) -> Vec<usize> {
        match self.every {
            Some(every) => (0..self.rungs).map(|k| self.min_steps + k * every).collect(),
            None => {
                (0..self.rungs).map(|k| (self.min_steps as f64 * self.factor.powi(k as i32)).round() as usize).collect()
            }
        }
    }

    /// The steps over which the plateau guard measures the fall in training loss before a
    /// rung: the first rung's span (from `min_steps / factor` to `min_steps`), or `every`, the
    /// same at every rung, so that `patience` asks the same rate of fall at each.
    pub fn guard_window(&self) -> usize {
        match self.every {
            Some(every) => every.min(self.min_steps),
            None => self.min_steps - ((self.min_steps as f64 / self.factor).round() as usize).min(self.min_steps),
        }
    }

    /// With `every`, sets `rungs` to the judgements that fit a trial of `steps` steps.
    pub fn fit_to(&mut self, steps: usize) {
        if let Some(every) = self.every {
            self.rungs = if steps >= self.min_steps { (steps - self.min_steps) / every.max(1) + 1 } else { 1 };
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum PruneRule {
    /// Asynchronous successive halving: a configuration goes on past a rung if it is in the
    /// best `keep` of the configurations that reached it.
    Asha { keep: f64 },
    /// A configuration goes on past a rung if it is no worse than the median of the others
    /// there.
    Median,
}

/// A validation metric and its direction.
#[derive(Clone, Debug, PartialEq)]
pub struct Metric {
    /// As written: `val_accuracy`.
    pub name: String,
    pub higher_is_better: bool,
    pub span: Span,
}

impl Metric {
    /// Whether `a` is better than `b`.
    pub fn better(&self, a: f64, b: f64) -> bool {
        if self.higher_is_better { a > b } else { a < b }
    }
}

const SETTINGS: &[&str] = &["trials", "sampler", "prune", "metric"];
const SAMPLERS: &[&str] = &["grid", "random", "tpe"];
const PRUNERS: &[&str] = &["asha", "median", "none"];

/// Reads a `search` block; `metrics` are the validation metrics the task reports
/// (`val_accuracy`, `val_loss`).
pub fn read(block: &ast::SearchBlock, metrics: &[String]) -> Result<SearchSpec, Diagnostic> {
    let mut dims: Vec<Dim> = vec![];
    let mut seeds: Option<Vec<u64>> = None;
    let mut seen: Vec<&ast::Ident> = vec![];
    let (mut trials, mut sampler, mut prune, mut metric) = (None, None, None, None);
    let mut settings_seen: Vec<&ast::Ident> = vec![];
    for entry in &block.entries {
        let name = match entry {
            SearchEntry::Axis(a) => &a.name,
            SearchEntry::Draw(d) => &d.name,
            SearchEntry::Setting(s) => &s.key,
        };
        let list = if matches!(entry, SearchEntry::Setting(_)) { &mut settings_seen } else { &mut seen };
        super::sweep::note_swept(list, name)?;
        match entry {
            SearchEntry::Axis(a) if a.name.name == "seed" => seeds = Some(seed_values(a)?),
            SearchEntry::Axis(a) => dims.push(Dim { name: a.name.clone(), domain: axis(a)?, span: a.values.span }),
            SearchEntry::Draw(d) if d.name.name == "seed" => {
                return Err(CheckErrorKind::SearchSeedDrawn
                    .error()
                    .at(d.dist.span, "a distribution")
                    .hint("list the seeds: `seed in 1..3`"));
            }
            SearchEntry::Draw(d) => {
                dims.push(Dim { name: d.name.clone(), domain: distribution(d)?, span: d.dist.span })
            }
            SearchEntry::Setting(s) => match s.key.name.as_str() {
                "trials" => trials = Some(count(s)?),
                "sampler" => sampler = Some(read_sampler(&s.value)?),
                "prune" => prune = Some((read_prune(&s.value, metrics)?, s.value.span)),
                "metric" => metric = Some(read_metric(&s.value, metrics)?),
                other => {
                    let mut d = CheckErrorKind::SearchSetting { key: other.to_string() }
                        .error()
                        .at(s.key.span, "not a search setting")
                        .hint(format!("search settings: {}", SETTINGS.join(", ")));
                    if let Some(h) = crate::suggest::did_you_mean(other, SETTINGS.iter().copied()) {
                        d = d.hint(h);
                    }
                    return Err(d);
                }
            },
        }
    }
    if dims.is_empty() {
        return Err(CheckErrorKind::SearchNothing
            .error()
            .at(block.span, "nothing searched")
            .hint("e.g. `lr ~ loguniform(1e-4, 1e-2)` or `d in [48, 96]`"));
    }
    let sampler = sampler.unwrap_or(Sampler::Random { seed: 0 });
    let trials = trial_count(trials, &sampler, &dims, block.span)?;
    let prune = match prune {
        Some((Some(p), _)) => Some(p),
        _ => None,
    };
    let metric = metric.or_else(|| prune.as_ref().map(|p| p.metric.clone()));
    if metric.is_none() && matches!(sampler, Sampler::Tpe { .. }) {
        return Err(CheckErrorKind::SearchNeedsMetric
            .error()
            .at(block.span, "no metric")
            .hint("say what TPE optimises: `metric = val_accuracy`, or a pruner's `metric`"));
    }
    let seeds = seeds.unwrap_or_else(|| vec![0]);
    Ok(SearchSpec { dims, seeds, trials, sampler, prune, metric, span: block.span })
}

/// How many configurations a search tries: its `trials` setting (with where it stands), which
/// a grid's size bounds; without one, a grid's every combination, and an error for a grid past
/// [`MAX_TRIALS`] or a sampler that is not a grid.
fn trial_count(
    trials: Option<(usize, Span)>,
    sampler: &Sampler,
    dims: &[Dim],
    block: Span,
) -> Result<usize, Diagnostic> {
    let grid_size = match sampler {
        Sampler::Grid { .. } => {
            let mut size = 1usize;
            for d in dims {
                let Some(values) = d.domain.listed() else {
                    return Err(CheckErrorKind::GridNeedsValues { name: d.name.name.clone() }
                        .error()
                        .at(d.span, "a continuous distribution")
                        .hint(format!("list values for a grid, e.g. `{} in logspace(1e-4, 1e-2, 4)`", d.name.name)));
                };
                size = size.saturating_mul(values.len());
            }
            Some(size)
        }
        _ => None,
    };
    match (trials, grid_size) {
        (Some((n, span)), Some(size)) if n > size => Err(CheckErrorKind::SearchTrials { found: n as i64, most: size }
            .error()
            .at(span, format!("the grid has {size}"))
            .hint("a grid tries each combination once")),
        (Some((n, _)), _) => Ok(n),
        (None, Some(size)) if size <= MAX_TRIALS => Ok(size),
        (None, _) => Err(CheckErrorKind::SearchNeedsTrials
            .error()
            .at(block, "how many configurations?")
            .hint("e.g. `trials = 20`")),
    }
}

/// Checks the pruner's rungs against the trial's step budget.
pub fn check_rungs(spec: &SearchSpec, steps: usize, at: Span) -> Result<(), Diagnostic> {
    let Some(p) = &spec.prune else { return Ok(()) };
    if let Some((k, &step)) = p.rung_steps().iter().enumerate().find(|(_, s)| **s > steps) {
        return Err(CheckErrorKind::RungPastBudget { rung: k + 1, step, steps }
            .error()
            .at(at, "this pruner")
            .hint("lower `min_steps` or `rungs`, or raise `steps`"));
    }
    Ok(())
}

fn seed_values(a: &ast::SweepAxis) -> Result<Vec<u64>, Diagnostic> {
    let values = values_of(a)?;
    values
        .into_iter()
        .map(|v| match v {
            Value::Int(i) if i >= 0 => Ok(i as u64),
            v => Err(CheckErrorKind::Seed { found: v }.error().at(a.values.span, "not a seed")),
        })
        .collect()
}

fn values_of(a: &ast::SweepAxis) -> Result<Vec<Value>, Diagnostic> {
    let values = match consteval::eval(&a.values, &|_| None, &[])? {
        Value::List(items) => items,
        v => vec![v],
    };
    if values.is_empty() {
        return Err(CheckErrorKind::EmptyAxis { name: a.name.name.clone() }.error().at(a.values.span, "empty"));
    }
    Ok(values)
}

fn axis(a: &ast::SweepAxis) -> Result<Domain, Diagnostic> {
    Ok(Domain::Values(values_of(a)?))
}

/// The distributions `name ~ dist(…)` may draw from, in sweeps and searches.
const DISTRIBUTIONS: &[&str] = &["uniform", "loguniform", "randint", "choice"];

/// The domain of `name ~ dist(…)`, its arguments checked: what a search samples from, and what
/// a sweep's random draws take their values from (`sweep::draw`).
pub(super) fn distribution(d: &ast::Draw) -> Result<Domain, Diagnostic> {
    let name = d.dist.callee.name.as_str();
    let args: Vec<Value> =
        d.dist.args.iter().map(|a| consteval::eval(&a.value, &|_| None, &[])).collect::<Result<_, _>>()?;
    let bad = |why: &'static str| {
        CheckErrorKind::BadDistribution { name: name.to_string(), why }
            .error()
            .at(d.dist.span, "bad distribution")
            .hint("uniform(a, b), loguniform(a, b) with 0 < a < b, randint(a, b) (inclusive), choice([v1, v2, ...])")
    };
    match (name, args.as_slice()) {
        ("uniform" | "loguniform", [a, b]) => {
            let (Some(low), Some(high)) = (a.as_float(), b.as_float()) else {
                return Err(bad("bounds must be numbers"));
            };
            #[allow(clippy::neg_cmp_op_on_partial_ord)] // `!(a < b)` also rejects NaN bounds
            if !(low < high) {
                return Err(bad("the lower bound must be below the upper bound"));
            }
            if !(high - low).is_finite() {
                return Err(bad("the bounds, and the span between them, must be finite floats"));
            }
            if name == "uniform" {
                Ok(Domain::Uniform { low, high })
            } else if low > 0.0 {
                Ok(Domain::LogUniform { low, high })
            } else {
                Err(bad("loguniform bounds must be positive"))
            }
        }
        ("randint", [Value::Int(low), Value::Int(high)]) if low <= high => {
            Ok(Domain::IntUniform { low: *low, high: *high })
        }
        ("randint", _) => Err(bad("randint takes two integers a <= b")),
        ("choice", [Value::List(items)]) if !items.is_empty() => Ok(Domain::Values(items.clone())),
        ("choice", _) => Err(bad("choice takes a non-empty list")),
        ("uniform" | "loguniform", _) => Err(bad("wrong number of arguments")),
        _ => {
            let mut e = CheckErrorKind::UnknownDistribution { name: name.to_string() }
                .error()
                .at(d.dist.callee.span, "not a distribution")
                .hint(format!("distributions: {}", DISTRIBUTIONS.join(", ")));
            if let Some(h) = crate::suggest::did_you_mean(name, DISTRIBUTIONS.iter().copied()) {
                e = e.hint(h);
            }
            Err(e)
        }
    }
}

/// `trials = 40`: a count from 1 to the trial limit, with where it is written.
fn count(s: &ast::Setting) -> Result<(usize, Span), Diagnostic> {
    match consteval::eval(&s.value, &|_| None, &[])? {
        Value::Int(n) if n >= 1 && n as usize <= MAX_TRIALS => Ok((n as usize, s.value.span)),
        v => Err(CheckErrorKind::SearchTrials { found: v.as_int().unwrap_or(0), most: MAX_TRIALS }
            .error()
            .at(s.value.span, "not a count")),
    }
}

/// A call or a bare name (`grid`, `none`) with its arguments.
fn callee(e: &ast::Expr) -> Option<(&ast::Ident, &[ast::Arg])> {
    match &e.kind {
        ExprKind::Call(c) => Some((&c.callee, c.args.as_slice())),
        _ => None,
    }
}

fn bare_name(e: &ast::Expr) -> Option<&str> {
    match &e.kind {
        ExprKind::Name(n) => Some(n),
        _ => None,
    }
}

fn read_sampler(e: &ast::Expr) -> Result<Sampler, Diagnostic> {
    let (name, args): (&str, &[ast::Arg]) = match (bare_name(e), callee(e)) {
        (Some(n), _) => (n, &[]),
        (_, Some((c, args))) => (c.name.as_str(), args),
        _ => ("", &[]),
    };
    let unknown = || {
        let mut d = CheckErrorKind::UnknownSampler { name: name.to_string() }
            .error()
            .at(e.span, "not a sampler")
            .hint("samplers: grid, grid(seed = 1), random(seed = 1), tpe(seed = 1)");
        if let Some(h) = crate::suggest::did_you_mean(name, SAMPLERS.iter().copied()) {
            d = d.hint(h);
        }
        d
    };
    let allowed: &[&str] = match name {
        "grid" => &["seed"],
        "random" => &["seed"],
        "tpe" => &["seed", "startup"],
        _ => return Err(unknown()),
    };
    let named = named_args(name, args, allowed)?;
    let int = |key: &str, default: i64, least: i64| -> Result<i64, Diagnostic> {
        match named.iter().find(|(k, _, _)| k == key) {
            None => Ok(default),
            Some((_, Value::Int(i), _)) if *i >= least => Ok(*i),
            Some((_, _, span)) => Err(CheckErrorKind::SearchArgument {
                function: name.to_string(),
                arg: key.to_string(),
                expected: if least > 0 { "a positive integer" } else { "a non-negative integer" },
            }
            .error()
            .at(*span, "not valid here")),
        }
    };
    Ok(match name {
        "grid" => Sampler::Grid {
            order: named.iter().any(|(k, _, _)| k == "seed").then(|| int("seed", 0, 0)).transpose()?.map(|s| s as u64),
        },
        "random" => Sampler::Random { seed: int("seed", 0, 0)? as u64 },
        _ => Sampler::Tpe { seed: int("seed", 0, 0)? as u64, startup: int("startup", 4, 1)? as usize },
    })
}

/// `prune = asha(metric = val_accuracy, min_steps = 2000, rungs = 3, keep = 1/3, patience =
/// 0.05)`, `median(metric = …, min_steps = …, rungs = 3, factor = 2)` or `median(metric = …,
/// min_steps = …, every = 100)`, or `none`.
fn read_prune(e: &ast::Expr, metrics: &[String]) -> Result<Option<Pruning>, Diagnostic> {
    if bare_name(e) == Some("none") {
        return Ok(None);
    }
    let Some((callee, args)) = callee(e) else {
        return Err(unknown_pruner(bare_name(e).unwrap_or(""), e.span));
    };
    let name = callee.name.as_str();
    let allowed: &[&str] = match name {
        "asha" => &["metric", "min_steps", "rungs", "keep", "patience"],
        "median" => &["metric", "min_steps", "rungs", "factor", "every", "patience"],
        _ => return Err(unknown_pruner(name, callee.span)),
    };
    let metric_arg = args.iter().find(|a| a.name.as_ref().is_some_and(|n| n.name == "metric"));
    let named = named_args(name, args, allowed)?;
    let missing = |arg: &'static str| {
        CheckErrorKind::MissingArgument { callee: name.to_string(), arg }
            .error()
            .at(e.span, format!("no `{arg}`"))
            .hint(format!("e.g. `{name}(metric = val_accuracy, min_steps = 2000)`"))
    };
    let metric = match metric_arg {
        Some(a) => read_metric(&a.value, metrics)?,
        None => return Err(missing("metric")),
    };
    let wrong = |arg: &str, expected: &'static str, span: Span| {
        CheckErrorKind::SearchArgument { function: name.to_string(), arg: arg.to_string(), expected }
            .error()
            .at(span, "not valid here")
    };
    let get = |key: &str| named.iter().find(|(k, _, _)| k == key).map(|(_, v, s)| (v, *s));
    let positive_int = |key: &str| -> Result<Option<usize>, Diagnostic> {
        match get(key) {
            None => Ok(None),
            Some((Value::Int(i), _)) if *i >= 1 => Ok(Some(*i as usize)),
            Some((_, span)) => Err(wrong(key, "a positive integer", span)),
        }
    };
    let min_steps = positive_int("min_steps")?.ok_or_else(|| missing("min_steps"))?;
    let rungs = positive_int("rungs")?.unwrap_or(3);
    let every = positive_int("every")?;
    if every.is_some()
        && let Some((key, (_, span))) = ["rungs", "factor"].into_iter().find_map(|k| Some((k, get(k)?)))
    {
        return Err(wrong(key, "left out when `every` is given (`every` sets the rungs)", span));
    }
    let fraction = |key: &str, low_open: f64, high: f64| -> Result<Option<f64>, Diagnostic> {
        match get(key) {
            None => Ok(None),
            Some((v, span)) => match v.as_float() {
                Some(f) if f > low_open && f <= high => Ok(Some(f)),
                _ => Err(wrong(key, "a fraction above 0 and at most 1, such as `1/3`", span)),
            },
        }
    };
    let patience = fraction("patience", 0.0, 1.0)?;
    let (rule, factor) = if name == "asha" {
        let keep = fraction("keep", 0.0, 1.0)?.unwrap_or(1.0 / 3.0);
        if keep >= 1.0 {
            let span = get("keep").map_or(e.span, |(_, s)| s);
            return Err(wrong("keep", "a fraction below 1 (a pruner that keeps all prunes nothing)", span));
        }
        (PruneRule::Asha { keep }, 1.0 / keep)
    } else {
        let factor = match get("factor") {
            None => 2.0,
            Some((v, span)) => {
                v.as_float().filter(|f| *f > 1.0).ok_or_else(|| wrong("factor", "a number above 1", span))?
            }
        };
        (PruneRule::Median, factor)
    };
    Ok(Some(Pruning { rule, metric, min_steps, rungs, factor, patience, every }))
}

/// `name` at `span` is no pruner: the error lists the pruners and suggests the nearest.
fn unknown_pruner(name: &str, span: Span) -> Diagnostic {
    let d = CheckErrorKind::UnknownPruner { name: name.to_string() }
        .error()
        .at(span, "not a pruner")
        .hint("pruners: asha(metric = val_accuracy, min_steps = 2000), median(…), none");
    match crate::suggest::did_you_mean(name, PRUNERS.iter().copied()) {
        Some(h) => d.hint(h),
        None => d,
    }
}

/// Named arguments of a sampler or pruner, their values evaluated (`1/3` is a fraction here,
/// not an inexact integer division), each allowed and given once.
fn named_args(function: &str, args: &[ast::Arg], allowed: &[&str]) -> Result<Vec<(String, Value, Span)>, Diagnostic> {
    let mut out: Vec<(String, Value, Span)> = vec![];
    for a in args {
        let Some(n) = &a.name else {
            return Err(CheckErrorKind::SearchArgumentUnnamed { function: function.to_string() }
                .error()
                .at(a.value.span, "unnamed")
                .hint(format!("its arguments: {}", allowed.join(", "))));
        };
        if !allowed.contains(&n.name.as_str()) {
            let mut d = CheckErrorKind::NoSuchArgument { callee: function.to_string(), arg: n.name.clone() }
                .error()
                .at(n.span, "unknown argument")
                .hint(format!("its arguments: {}", allowed.join(", ")));
            if let Some(h) = crate::suggest::did_you_mean(&n.name, allowed.iter().copied()) {
                d = d.hint(h);
            }
            return Err(d);
        }
        if out.iter().any(|(k, _, _)| *k == n.name) {
            return Err(CheckErrorKind::ArgumentTwice { arg: n.name.clone() }.error().at(n.span, "again here"));
        }
        if n.name == "metric" {
            // Read by `read_metric`: a name, not a value.
            out.push((n.name.clone(), Value::Bool(false), a.value.span));
            continue;
        }
        let value = match &a.value.kind {
            ExprKind::Binary(BinaryOp::Div, x, y) => {
                let x = consteval::eval(x, &|_| None, &[])?;
                let y = consteval::eval(y, &|_| None, &[])?;
                match (x.as_float(), y.as_float()) {
                    (Some(x), Some(y)) if y != 0.0 => Value::Float(x / y),
                    _ => consteval::eval(&a.value, &|_| None, &[])?,
                }
            }
            _ => consteval::eval(&a.value, &|_| None, &[])?,
        };
        out.push((n.name.clone(), value, a.value.span));
    }
    Ok(out)
}

/// `metric = val_accuracy`: a validation metric of the task.
fn read_metric(e: &ast::Expr, metrics: &[String]) -> Result<Metric, Diagnostic> {
    let name = bare_name(e).unwrap_or("");
    if !metrics.iter().any(|m| m == name) {
        let mut d = CheckErrorKind::SearchMetric { metric: name.to_string() }
            .error()
            .at(e.span, "not a validation metric of the task")
            .hint(format!("metrics to search on: {}", metrics.join(", ")));
        if let Some(h) = crate::suggest::did_you_mean(name, metrics.iter().map(String::as_str)) {
            d = d.hint(h);
        }
        return Err(d);
    }
    let base = name.strip_prefix("val_").unwrap_or(name);
    Ok(Metric { name: name.to_string(), higher_is_better: crate::tasks::higher_is_better(base), span: e.span })
}
