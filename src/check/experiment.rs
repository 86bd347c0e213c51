//! Experiments: a model with overrides, a task, training settings and a sweep, expanded into
//! trials (each with its elaborated step graph).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use super::error_kind::CheckErrorKind;
use super::limits::MAX_TRIALS;
use super::search::{self, SearchSpec};
use super::sweep::Override;
use super::{call, consteval, data_path, elaborate, model_params, settings};
use crate::diag::Diagnostic;
use crate::graph::StepGraph;
use crate::lang::ast;
use crate::signature::{ArgKind, Catalog};
use crate::source::{SourceMap, Span};
use crate::tasks::{self, Task};
use crate::train_config::TrainConfig;
use crate::value::Value;

/// One trial's complete, resolved configuration (stored with its run).
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct TrialConfig {
    pub experiment: String,
    pub model: String,
    pub params: BTreeMap<String, Value>,
    pub task: String,
    pub task_options: BTreeMap<String, Value>,
    pub train: TrainConfig,
    pub seed: u64,
    /// The swept axes with this trial's values, in sweep order.
    pub swept: Vec<(String, Value)>,
}

/// A trial ready to run.
#[derive(Clone)]
pub struct Trial {
    pub config: TrialConfig,
    pub graph: Arc<StepGraph>,
    pub task: Arc<dyn Task>,
}

pub struct ExperimentPlan {
    pub name: String,
    pub span: Span,
    /// The trials of a sweep; for a search, its representative trials.
    pub trials: Vec<Trial>,
    /// The experiment's `search`, if it has one: its trials are chosen as it runs.
    pub search: Option<Arc<SearchPlan>>,
}

/// What a sweep axis sets.
#[derive(Clone, Copy, PartialEq, Debug)]
enum AxisTarget {
    Param,
    Setting,
    TaskOption,
    Seed,
}

/// A sweep group with each name resolved and every value checked.
struct Axis {
    names: Vec<(ast::Ident, AxisTarget)>,
    rows: Vec<Vec<(Value, Span)>>,
}

/// Expands one experiment into trials. `overrides` that name nothing in this experiment are
/// ignored here (the caller checks each applies somewhere); the names applied are returned.
pub fn plan(
    exp: &ast::Experiment,
    models: &HashMap<&str, &ast::Model>,
    task_defs: &HashMap<&str, &ast::TaskDef>,
    overrides: &[Override],
    catalog: &'static dyn Catalog,
    sources: &SourceMap,
) -> Result<(ExperimentPlan, Vec<String>), Diagnostic> {
    let name = &exp.name.name;
    let model_call = single(&exp.model, exp, "model", "model stm(d = 48)")?;
    let task_call = single(&exp.task, exp, "task", "task assocRetrieval(pairs = 4)")?;
    let model = resolve_model(model_call, models)?;
    let entries = model_params::table(model)?;
    let model_overrides = model_overrides(model, &entries, model_call)?;
    let (kind, task_options) = task_options(task_call, task_defs)?;
    if exp.train.len() > 1 {
        let at = exp.train[1].first().map_or(exp.name.span, |s| s.key.span);
        return Err(CheckErrorKind::TwoTrainBlocks { experiment: name.to_string() }
            .error()
            .at(at, "in the second block")
            .hint("merge them into one `train { … }`"));
    }
    // Sweep groups; every swept name must be something this experiment can vary.
    let applicable: Vec<Override> =
        overrides.iter().filter(|o| axis_target(&o.name, &entries, kind, model).is_ok()).cloned().collect();
    let groups = super::sweep::groups(&exp.sweep, &applicable)?;
    let axes = checked_axes(&groups, &entries, kind, model, sources)?;
    let applied = || applicable.iter().map(|o| o.name.name.clone()).collect();

    // Instantiate once with the first trial's options to learn the target, metrics and test
    // splits (for the settings checks); the trials reuse it. The first trial's, not the
    // unswept ones: a data path set on the command line replaces one that may not exist.
    let first_options = first_trial_options(&task_options, &axes, kind);
    let probe: Arc<dyn Task> = Arc::from(instantiate_task(kind, &first_options, task_call.span, sources)?);
    let block = match exp.train.first() {
        Some(s) => settings::read(s, &*probe)?,
        None => settings::Block::default(),
    };
    let maker = TrialMaker {
        experiment: name.clone(),
        model: model.clone(),
        model_span: model_call.span,
        model_overrides,
        kind,
        task_options,
        task_span: task_call.span,
        block,
        at: exp.name.span,
        catalog,
        sources: sources.clone(),
        graphs: Default::default(),
        tasks: Mutex::new(HashMap::from([(format!("{first_options:?}"), probe)])),
    };

    if let Some(block) = exp.search.first() {
        let search = search_plan(exp, block, maker, &axes, &entries, model)?;
        let trials = search.representatives.clone();
        let plan = ExperimentPlan { name: name.clone(), span: exp.name.span, trials, search: Some(Arc::new(search)) };
        return Ok((plan, applied()));
    }
    let trials = expand(exp, &axes, &maker)?;
    Ok((ExperimentPlan { name: name.clone(), span: exp.name.span, trials, search: None }, applied()))
}

/// The model an experiment's `model` line names, or an error that says which models there are.
fn resolve_model<'m>(call: &ast::Call, models: &HashMap<&str, &'m ast::Model>) -> Result<&'m ast::Model, Diagnostic> {
    if let Some(model) = models.get(call.callee.name.as_str()) {
        return Ok(model);
    }
    let mut d =
        CheckErrorKind::UnknownModel { name: call.callee.name.clone() }.error().at(call.callee.span, "no such model");
    if let Some(h) = crate::suggest::did_you_mean(&call.callee.name, models.keys().copied()) {
        d = d.hint(h);
    } else if models.is_empty() {
        // The usual cause: the `use` line that brings the model in is missing.
        d = d.hint("this spec defines no model; bring one in with `use`, e.g. `use \"models/lstm.mem\"` (memctl's models are in its `specs/models/`; the path is relative to this file)");
    } else {
        let mut known: Vec<&str> = models.keys().copied().collect();
        known.sort_unstable();
        d = d.hint(format!("the models this spec defines or uses: {}", known.join(", ")));
    }
    Err(d)
}

/// The parameters the `model` line sets (`model stm(d = 48)`), each named once and known to
/// the model.
fn model_overrides(
    model: &ast::Model,
    entries: &[model_params::ParamEntry],
    call: &ast::Call,
) -> Result<BTreeMap<String, (Value, Span)>, Diagnostic> {
    let mut set: BTreeMap<String, (Value, Span)> = BTreeMap::new();
    for a in &call.args {
        let Some(n) = &a.name else {
            return Err(CheckErrorKind::ModelParamsUnnamed.error().at(a.value.span, "unnamed").hint(format!(
                "e.g. `model {}({} = …)`",
                model.name.name,
                entries.first().map_or("d", |e| e.name)
            )));
        };
        if !entries.iter().any(|e| e.name == n.name) {
            return Err(no_such_param(model, entries, n));
        }
        if set.contains_key(&n.name) {
            return Err(CheckErrorKind::ParamGivenTwice { name: n.name.clone() }.error().at(n.span, "again here"));
        }
        set.insert(n.name.clone(), (consteval::eval(&a.value, &|_| None, &[])?, a.value.span));
    }
    Ok(set)
}

/// A task's kind and its value options, in its signature's order.
type TaskOptions = (&'static dyn tasks::TaskKind, Vec<(Value, Span)>);

/// The task's kind and options from the `task` line: a `task` definition (named arguments
/// override its options), or a generator called inline.
fn task_options(task_call: &ast::Call, task_defs: &HashMap<&str, &ast::TaskDef>) -> Result<TaskOptions, Diagnostic> {
    let (kind, task_args): (&dyn tasks::TaskKind, Vec<&ast::Arg>) = match task_defs.get(task_call.callee.name.as_str())
    {
        Some(def) => {
            let given =
                |n: &ast::Ident| task_call.args.iter().any(|b| b.name.as_ref().is_some_and(|m| m.name == n.name));
            let mut args: Vec<&ast::Arg> =
                def.call.args.iter().filter(|a| !a.name.as_ref().is_some_and(given)).collect();
            args.extend(task_call.args.iter());
            (task_kind(&def.call, task_defs)?, args)
        }
        None => (task_kind(task_call, task_defs)?, task_call.args.iter().collect()),
    };
    let task_what = format!("task `{}`", kind.name());
    let task_call_for_binding = ast::Call {
        callee: task_call.callee.clone(),
        args: task_args.iter().map(|a| (*a).clone()).collect(),
        parens: true,
        span: task_call.span,
    };
    let slots = call::bind(&task_what, kind.signature(), &task_call_for_binding)?;
    let mut options: Vec<(Value, Span)> = vec![];
    for (spec, slot) in kind.signature().iter().zip(slots) {
        let ArgKind::Value(k) = spec.kind else {
            continue;
        };
        options.push(match slot {
            Some(e) => (call::coerce(&task_what, spec, k, consteval::eval(e, &|_| None, &[])?, e)?, e.span),
            None => (spec.default.value().unwrap_or(Value::Bool(false)), task_call.span),
        });
    }
    Ok((kind, options))
}

/// The sweep's groups as axes: each name resolved to what it sets, each value checked.
fn checked_axes(
    groups: &[super::sweep::Group],
    entries: &[model_params::ParamEntry],
    kind: &dyn tasks::TaskKind,
    model: &ast::Model,
    sources: &SourceMap,
) -> Result<Vec<Axis>, Diagnostic> {
    let mut axes: Vec<Axis> = vec![];
    for g in groups {
        let mut targets = vec![];
        for n in &g.names {
            targets.push(axis_target(n, entries, kind, model)?);
        }
        let mut rows = vec![];
        for row in &g.rows {
            let mut checked = vec![];
            for ((n, target), (v, span)) in g.names.iter().zip(&targets).zip(row) {
                let mut v = check_value(n, *target, v.clone(), *span, entries, kind)?;
                if *target == AxisTarget::TaskOption && n.name == "path" && sources.is_command_line(span.file) {
                    v = data_path::from_command_line(v, sources);
                }
                checked.push((v, *span));
            }
            rows.push(checked);
        }
        axes.push(Axis { names: g.names.iter().zip(targets).map(|(n, t)| (n.clone(), t)).collect(), rows });
    }
    Ok(axes)
}

/// The task options of the sweep's first trial: `task_options` with each swept option's first
/// value.
fn first_trial_options(
    task_options: &[(Value, Span)],
    axes: &[Axis],
    kind: &dyn tasks::TaskKind,
) -> Vec<(Value, Span)> {
    let mut first = task_options.to_vec();
    for (a, row) in axes.iter().filter_map(|a| Some((a, a.rows.first()?))) {
        for ((n, target), (v, span)) in a.names.iter().zip(row) {
            if *target == AxisTarget::TaskOption
                && let Some(i) = kind.signature().iter().position(|s| s.name == n.name)
            {
                first[i] = (v.clone(), *span);
            }
        }
    }
    first
}

/// Every combination of the axes' rows as a trial, the first axis varying slowest; an error
/// past [`MAX_TRIALS`].
fn expand(exp: &ast::Experiment, axes: &[Axis], maker: &TrialMaker) -> Result<Vec<Trial>, Diagnostic> {
    let total = axes.iter().try_fold(1usize, |acc, a| acc.checked_mul(a.rows.len())).filter(|t| *t <= MAX_TRIALS);
    let Some(total) = total else {
        return Err(CheckErrorKind::TooManyTrials { experiment: exp.name.name.to_string() }
            .error()
            .at(exp.name.span, "too many trials"));
    };
    let mut trials = vec![];
    for index in 0..total {
        let mut rest = index;
        let mut picks = vec![0; axes.len()];
        for (i, a) in axes.iter().enumerate().rev() {
            picks[i] = rest % a.rows.len();
            rest /= a.rows.len();
        }
        let mut swept = vec![];
        for (a, &p) in axes.iter().zip(&picks) {
            for ((n, target), (v, span)) in a.names.iter().zip(&a.rows[p]) {
                swept.push(Swept { name: n.name.clone(), target: *target, value: v.clone(), span: *span });
            }
        }
        trials.push(maker.trial(&swept)?);
    }
    Ok(trials)
}

/// One swept or searched name's value in a trial, and what it sets.
#[derive(Clone, Debug)]
pub struct Swept {
    pub name: String,
    target: AxisTarget,
    pub value: Value,
    span: Span,
}

/// Builds an experiment's trials from the values of its swept or searched names: what the
/// checker expands a sweep with, and what a search calls for each configuration it picks.
pub struct TrialMaker {
    experiment: String,
    model: ast::Model,
    model_span: Span,
    model_overrides: BTreeMap<String, (Value, Span)>,
    kind: &'static dyn tasks::TaskKind,
    task_options: Vec<(Value, Span)>,
    task_span: Span,
    block: settings::Block,
    /// Where errors about a trial as a whole point (the experiment's name).
    at: Span,
    catalog: &'static dyn Catalog,
    sources: SourceMap,
    /// Trials with the same parameters and task shape share a graph, with the same options a task.
    graphs: Mutex<HashMap<String, Arc<StepGraph>>>,
    tasks: Mutex<HashMap<String, Arc<dyn Task>>>,
}

impl TrialMaker {
    /// The trial with these values (a `seed` among them sets the seed; 0 otherwise).
    pub fn trial(&self, swept: &[Swept]) -> Result<Trial, Diagnostic> {
        let kind = self.kind;
        let entries = model_params::table(&self.model)?;
        let mut given = self.model_overrides.clone();
        let mut swept_settings: BTreeMap<String, (Value, Span)> = BTreeMap::new();
        let mut options = self.task_options.clone();
        let mut seed = 0u64;
        for s in swept {
            let (v, span) = (s.value.clone(), s.span);
            match s.target {
                AxisTarget::Param => {
                    given.insert(s.name.clone(), (v, span));
                }
                AxisTarget::Setting => {
                    swept_settings.insert(s.name.clone(), (v, span));
                }
                AxisTarget::TaskOption => {
                    if let Some(i) = kind.signature().iter().position(|o| o.name == s.name) {
                        options[i] = (v, span);
                    }
                }
                AxisTarget::Seed => seed = v.as_int().unwrap_or(0) as u64,
            }
        }
        let swept: Vec<(String, Value)> = swept.iter().map(|s| (s.name.clone(), s.value.clone())).collect();
        let params = model_params::resolve(&self.model, &entries, &given, self.model_span)?;
        let train = settings::resolve(&self.block, &swept_settings, self.at)?;
        let option_key = format!("{options:?}");
        let cached = self.tasks.lock().ok().and_then(|t| t.get(&option_key).cloned());
        let task = match cached {
            Some(t) => t,
            None => {
                let t: Arc<dyn Task> = Arc::from(instantiate_task(kind, &options, self.task_span, &self.sources)?);
                if let Ok(mut tasks) = self.tasks.lock() {
                    tasks.insert(option_key, t.clone());
                }
                t
            }
        };
        let shape = elaborate::TaskShape {
            input: task.input(),
            output_size: task.target().size(),
            name: kind.name().to_string(),
        };
        let graph_key = format!("{params:?}{:?}{}", shape.input, shape.output_size);
        let cached = self.graphs.lock().ok().and_then(|g| g.get(&graph_key).cloned());
        let graph = match cached {
            Some(g) => g,
            None => {
                let g = Arc::new(elaborate::elaborate(&self.model, &params, &shape, self.catalog).map_err(|d| {
                    let values: Vec<String> = swept.iter().map(|(k, v)| format!("{k} = {v}")).collect();
                    if values.is_empty() {
                        d
                    } else {
                        d.hint(format!("while checking experiment `{}` with {}", self.experiment, values.join(", ")))
                    }
                })?);
                if let Ok(mut graphs) = self.graphs.lock() {
                    graphs.insert(graph_key, g.clone());
                }
                g
            }
        };
        let task_options =
            kind.signature().iter().zip(&options).map(|(s, (v, _))| (s.name.to_string(), v.clone())).collect();
        Ok(Trial {
            config: TrialConfig {
                experiment: self.experiment.clone(),
                model: self.model.name.name.clone(),
                params,
                task: kind.name().to_string(),
                task_options,
                train,
                seed,
                swept,
            },
            graph,
            task,
        })
    }
}

/// An experiment with a `search`: what to search, and how to make the trial of a configuration.
pub struct SearchPlan {
    pub spec: SearchSpec,
    /// Names fixed for every configuration (command-line overrides), set before the searched ones.
    fixed: Vec<Swept>,
    /// The names the spec searches that the command line fixes (`lr=1e-3` for `lr ~ …`).
    pub fixed_searched: Vec<String>,
    /// What each searched name sets, in the order of `spec.dims`.
    targets: Vec<AxisTarget>,
    maker: TrialMaker,
    /// Trials at the ends of each searched range, with the first seed: what `memctl check`
    /// elaborated, and what estimates of memory and time use.
    pub representatives: Vec<Trial>,
}

impl SearchPlan {
    /// A run's value of each searched name, read where that name sets it (a model parameter, a
    /// training setting, a task option, the seed), in the order of `spec.dims`; none where the
    /// run has no value for one or a value outside its domain.
    pub fn searched_values(
        &self,
        params: &BTreeMap<String, Value>,
        train: &BTreeMap<String, Value>,
        task_options: &BTreeMap<String, Value>,
        seed: u64,
    ) -> Option<Vec<Value>> {
        let seed = Value::Int(seed as i64);
        (self.spec.dims.iter().zip(&self.targets))
            .map(|(dim, target)| {
                let name = &dim.name.name;
                let value = match target {
                    AxisTarget::Param => params.get(name),
                    AxisTarget::Setting => train.get(name),
                    AxisTarget::TaskOption => task_options.get(name),
                    AxisTarget::Seed => Some(&seed),
                }?;
                dim.domain.contains(value).then(|| value.clone())
            })
            .collect()
    }

    /// The trial of a configuration (one value per searched name, in the order of
    /// `spec.dims`) with `seed`. An error is a configuration the model cannot take (a width its
    /// shapes do not allow), found only when it is drawn.
    pub fn trial(&self, values: &[Value], seed: u64) -> Result<Trial, Diagnostic> {
        let mut swept = self.fixed.clone();
        for ((dim, target), v) in self.spec.dims.iter().zip(&self.targets).zip(values) {
            let value = v.coerce(self.kind_of(*target, &dim.name.name)).unwrap_or_else(|| v.clone());
            swept.push(Swept { name: dim.name.name.clone(), target: *target, value, span: dim.span });
        }
        swept.retain(|s| s.target != AxisTarget::Seed);
        swept.push(Swept {
            name: "seed".into(),
            target: AxisTarget::Seed,
            value: Value::Int(seed as i64),
            span: self.spec.span,
        });
        self.maker.trial(&swept)
    }

    /// The trials of a search whose every searched name the command line fixes: one per seed
    /// of the search (or of a `seed` override). `None` while a name is still searched.
    pub fn fixed_trials(&self) -> Option<Result<Vec<Trial>, Diagnostic>> {
        self.spec.dims.is_empty().then(|| self.spec.seeds.iter().map(|seed| self.trial(&[], *seed)).collect())
    }

    /// The kind a searched name's values take (a float drawn for an int parameter is an error
    /// the checker reports; here a value is only widened).
    fn kind_of(&self, target: AxisTarget, name: &str) -> crate::value::Kind {
        let float = crate::value::Kind::Float;
        match target {
            AxisTarget::Param => model_params::table(&self.maker.model)
                .ok()
                .and_then(|e| e.iter().find(|e| e.name == name).map(|e| e.kind))
                .unwrap_or(float),
            AxisTarget::TaskOption => match self.maker.kind.signature().iter().find(|s| s.name == name).map(|s| s.kind)
            {
                Some(ArgKind::Value(k)) => k,
                _ => float,
            },
            AxisTarget::Setting => crate::train_config::setting(name).map_or(float, |s| s.kind),
            AxisTarget::Seed => crate::value::Kind::Int,
        }
    }
}

/// Reads and checks an experiment's `search`: each searched name sets something the
/// experiment can vary, with values of its kind; overrides given on the command line fix a
/// name (one value each); the rungs fit the step budget. Builds the representative trials.
fn search_plan(
    exp: &ast::Experiment,
    block: &ast::SearchBlock,
    maker: TrialMaker,
    overrides: &[Axis],
    entries: &[model_params::ParamEntry],
    model: &ast::Model,
) -> Result<SearchPlan, Diagnostic> {
    let name = &exp.name.name;
    if let Some(second) = exp.search.get(1) {
        return Err(CheckErrorKind::TwoSearchBlocks { experiment: name.clone() }
            .error()
            .at(second.span, "second search")
            .also(block.span, "first search")
            .hint("merge them into one `search { … }`"));
    }
    if let Some(first) = exp.sweep.iter().flatten().next() {
        let at = match first {
            ast::SweepEntry::Axis(a) => a.name.span,
            ast::SweepEntry::Zip { span, .. } | ast::SweepEntry::Random { span, .. } => *span,
        };
        return Err(CheckErrorKind::SearchAndSweep { experiment: name.clone() }
            .error()
            .at(at, "swept here")
            .also(block.span, "searched here")
            .hint("move the sweep's names into the search: `d in [48, 96]`"));
    }
    let mut spec = search::read(block, &validation_metrics(&maker))?;
    let searched: Vec<String> = spec.dims.iter().map(|d| d.name.name.clone()).collect();
    let fixed = fixed_by_overrides(&mut spec, overrides)?;
    let fixed_searched = searched.into_iter().filter(|n| !spec.dims.iter().any(|d| d.name.name == *n)).collect();
    let targets = checked_domains(&mut spec, entries, maker.kind, model)?;
    let mut plan = SearchPlan { spec, fixed, fixed_searched, targets, maker, representatives: vec![] };
    plan.representatives = representatives(&plan)?;
    if let Some(first) = plan.representatives.first() {
        let at = block
            .entries
            .iter()
            .find_map(|e| match e {
                ast::SearchEntry::Setting(s) if s.key.name == "prune" => Some(s.value.span),
                _ => None,
            })
            .unwrap_or(block.span);
        let steps = first.config.train.steps;
        if let Some(p) = plan.spec.prune.as_mut() {
            p.fit_to(steps);
        }
        search::check_rungs(&plan.spec, steps, at)?;
    }
    Ok(plan)
}

/// The metrics a search may optimise or prune on: the validation metrics of the experiment's
/// task (its target's, the loss, and the task's own).
fn validation_metrics(maker: &TrialMaker) -> Vec<String> {
    let probe = maker.tasks.lock().ok().and_then(|t| t.values().next().cloned());
    match &probe {
        Some(task) => task
            .target()
            .metrics()
            .iter()
            .copied()
            .chain(["loss"])
            .chain(task.task_metric_names().iter().copied())
            .map(|m| format!("val_{m}"))
            .collect(),
        None => vec!["val_loss".into()],
    }
}

/// The names the command line fixes (every axis here comes from an override), one value each,
/// taken out of the search and returned; a `seed` override instead sets the seeds each
/// configuration runs with.
fn fixed_by_overrides(spec: &mut SearchSpec, overrides: &[Axis]) -> Result<Vec<Swept>, Diagnostic> {
    let mut fixed = vec![];
    for a in overrides {
        for (col, (n, target)) in a.names.iter().enumerate() {
            let values: Vec<&(Value, Span)> = a.rows.iter().filter_map(|r| r.get(col)).collect();
            if *target == AxisTarget::Seed {
                spec.seeds = values.iter().filter_map(|(v, _)| v.as_int()).map(|i| i as u64).collect();
                continue;
            }
            let [(v, span)] = values[..] else {
                return Err(CheckErrorKind::SearchOverride { name: n.name.clone() }
                    .error()
                    .at(n.span, "several values")
                    .hint("the search chooses the values; fix a name with one value, e.g. `d=48`"));
            };
            spec.dims.retain(|d| d.name.name != n.name);
            fixed.push(Swept { name: n.name.clone(), target: *target, value: v.clone(), span: *span });
        }
    }
    Ok(fixed)
}

/// What each searched name sets, each listed value checked (and coerced) and each range's
/// ends checked.
fn checked_domains(
    spec: &mut SearchSpec,
    entries: &[model_params::ParamEntry],
    kind: &dyn tasks::TaskKind,
    model: &ast::Model,
) -> Result<Vec<AxisTarget>, Diagnostic> {
    let mut targets = vec![];
    for dim in &mut spec.dims {
        let target = axis_target(&dim.name, entries, kind, model)?;
        if target == AxisTarget::Seed {
            return Err(CheckErrorKind::Internal { what: "a seed among the searched names".into() }.error());
        }
        let checked = |v: Value| check_value(&dim.name, target, v, dim.span, entries, kind);
        match &mut dim.domain {
            search::Domain::Values(values) => {
                for v in values.iter_mut() {
                    *v = checked(v.clone())?;
                }
            }
            d => {
                for v in d.representatives() {
                    checked(v)?;
                }
            }
        }
        targets.push(target);
    }
    Ok(targets)
}

/// The trials that stand for a search in the checks: every combination of its domains'
/// representatives (a list's values, a range's ends), with the first seed (at most
/// [`MAX_REPRESENTATIVES`]).
fn representatives(plan: &SearchPlan) -> Result<Vec<Trial>, Diagnostic> {
    let ends: Vec<Vec<Value>> = plan.spec.dims.iter().map(|d| d.domain.representatives()).collect();
    let total = ends.iter().map(Vec::len).try_fold(1usize, |acc, n| acc.checked_mul(n)).unwrap_or(usize::MAX);
    let seed = plan.spec.seeds.first().copied().unwrap_or(0);
    let mut trials = vec![];
    for index in 0..total.min(MAX_REPRESENTATIVES) {
        let mut rest = index;
        let mut values = vec![Value::Int(0); ends.len()];
        for (i, e) in ends.iter().enumerate().rev() {
            values[i] = e[rest % e.len()].clone();
            rest /= e.len();
        }
        trials.push(plan.trial(&values, seed)?);
    }
    Ok(trials)
}

/// The most trials the checker builds to stand for a search.
const MAX_REPRESENTATIVES: usize = 256;

/// What a swept name sets: a model parameter, a train setting, a task option, or the seed.
fn axis_target(
    n: &ast::Ident,
    entries: &[model_params::ParamEntry],
    kind: &dyn tasks::TaskKind,
    model: &ast::Model,
) -> Result<AxisTarget, Diagnostic> {
    let name = n.name.as_str();
    let mut targets = vec![];
    if entries.iter().any(|e| e.name == name) {
        targets.push(AxisTarget::Param);
    }
    if crate::train_config::setting(name).is_some() {
        targets.push(AxisTarget::Setting);
    }
    if kind.signature().iter().any(|s| s.name == name) {
        targets.push(AxisTarget::TaskOption);
    }
    if name == "seed" {
        targets.push(AxisTarget::Seed);
    }
    match targets[..] {
        [t] => Ok(t),
        [] => {
            let mut d =
                CheckErrorKind::SweepUnknownParameter { name: name.to_string(), model: model.name.name.clone() }
                    .error()
                    .at(n.span, "unknown parameter");
            let names = entries.iter().map(|e| e.name).chain(["seed"]);
            if let Some(h) = crate::suggest::did_you_mean(name, names) {
                d = d.hint(h);
            } else {
                d = d.hint(format!(
                    "sweepable: the model's parameters ({}), train settings, task options, and `seed`",
                    entries.iter().map(|e| e.name).collect::<Vec<_>>().join(", ")
                ));
            }
            Err(d)
        }
        _ => Err(CheckErrorKind::Ambiguous { name: name.to_string() }
            .error()
            .at(n.span, "ambiguous")
            .hint("rename the model parameter")),
    }
}

/// Checks one swept value against what it sets.
fn check_value(
    n: &ast::Ident,
    target: AxisTarget,
    v: Value,
    span: Span,
    entries: &[model_params::ParamEntry],
    kind: &dyn tasks::TaskKind,
) -> Result<Value, Diagnostic> {
    let name = n.name.as_str();
    let expect = |k: crate::value::Kind, what: &'static str, v: Value| {
        v.coerce(k).ok_or_else(|| {
            CheckErrorKind::SweptKind { what, name: name.to_string(), expected: k, found: v.clone() }
                .error()
                .at(span, format!("expected {}", k.with_article()))
        })
    };
    match target {
        AxisTarget::Param => match entries.iter().find(|e| e.name == name) {
            Some(e) => expect(e.kind, "parameter", v),
            None => Ok(v),
        },
        AxisTarget::Setting => settings::check_swept(name, v, span),
        AxisTarget::TaskOption => match kind.signature().iter().find(|s| s.name == name).map(|s| s.kind) {
            Some(ArgKind::Value(k)) => expect(k, "task option", v),
            _ => Ok(v),
        },
        AxisTarget::Seed => match v {
            Value::Int(i) if i >= 0 => Ok(v),
            _ => Err(CheckErrorKind::Seed { found: v }.error().at(span, "not a seed")),
        },
    }
}

/// Checks a `task` definition on its own (so that one no experiment uses is checked too): a
/// known generator, arguments it has, of the right kinds.
pub fn check_task_def(def: &ast::TaskDef, task_defs: &HashMap<&str, &ast::TaskDef>) -> Result<(), Diagnostic> {
    let kind = task_kind(&def.call, task_defs)?;
    let what = format!("task `{}`", kind.name());
    let slots = call::bind(&what, kind.signature(), &def.call)?;
    for (spec, slot) in kind.signature().iter().zip(slots) {
        if let (ArgKind::Value(k), Some(e)) = (spec.kind, slot) {
            call::coerce(&what, spec, k, consteval::eval(e, &|_| None, &[])?, e)?;
        }
    }
    Ok(())
}

fn single<'a>(
    calls: &'a [ast::Call],
    exp: &ast::Experiment,
    what: &'static str,
    example: &str,
) -> Result<&'a ast::Call, Diagnostic> {
    match calls {
        [c] => Ok(c),
        [] => Err(CheckErrorKind::MissingPart { experiment: exp.name.name.clone(), what }
            .error()
            .at(exp.name.span, format!("no `{what}`"))
            .hint(format!("add e.g. `{example}`"))),
        [first, second, ..] => Err(CheckErrorKind::TwoParts { experiment: exp.name.name.clone(), what }
            .error()
            .at(second.span, "second")
            .also(first.span, "first")
            .hint("sweep over a parameter instead, or write two experiments")),
    }
}

fn task_kind(
    call: &ast::Call,
    task_defs: &HashMap<&str, &ast::TaskDef>,
) -> Result<&'static dyn tasks::TaskKind, Diagnostic> {
    tasks::get(&call.callee.name).ok_or_else(|| {
        let mut d = CheckErrorKind::UnknownTask { name: call.callee.name.clone() }
            .error()
            .at(call.callee.span, "no such task or generator");
        let mut defined: Vec<&str> = task_defs.keys().copied().collect();
        defined.sort_unstable();
        let generators: Vec<&str> = tasks::TASKS.iter().map(|t| t.name()).collect();
        d = match crate::suggest::did_you_mean(&call.callee.name, defined.iter().chain(&generators).copied()) {
            Some(h) => d.hint(h),
            None if defined.is_empty() => d.hint(format!("generators: {}", generators.join(", "))),
            None => d.hint(format!("tasks defined: {}; generators: {}", defined.join(", "), generators.join(", "))),
        };
        d
    })
}

/// Configures the task. A relative `path` option is resolved against the folder of the file
/// it is written in (as `use` paths are; [`data_path`]).
fn instantiate_task(
    kind: &dyn tasks::TaskKind,
    options: &[(Value, Span)],
    at: Span,
    sources: &SourceMap,
) -> Result<Box<dyn Task>, Diagnostic> {
    let values: Vec<Value> = options.iter().map(|(v, _)| v.clone()).collect();
    let written_in =
        kind.signature().iter().position(|s| s.name == "path").and_then(|i| options.get(i)).map_or(at, |o| o.1);
    kind.instantiate_in(&values, data_path::folder_of(written_in.file, sources)).map_err(|e| {
        let span = e
            .arg
            .and_then(|a| kind.signature().iter().position(|s| s.name == a))
            .and_then(|i| options.get(i))
            .map_or(at, |(_, s)| *s);
        let hint = e.hint.as_ref().map(|h| h.to_string());
        let d = CheckErrorKind::TaskOption { task: kind.name(), error: e }.error().at(span, "invalid option");
        match hint {
            Some(h) => d.hint(h),
            None => d,
        }
    })
}

fn no_such_param(model: &ast::Model, entries: &[model_params::ParamEntry], n: &ast::Ident) -> Diagnostic {
    let mut d = CheckErrorKind::NoSuchParameter { model: model.name.name.clone(), name: n.name.clone() }
        .error()
        .at(n.span, "unknown parameter");
    match crate::suggest::did_you_mean(&n.name, entries.iter().map(|e| e.name)) {
        Some(h) => d = d.hint(h),
        None => {
            d = d.hint(format!("its parameters: {}", entries.iter().map(|e| e.name).collect::<Vec<_>>().join(", ")))
        }
    }
    d.also(model.name.span, "model defined here")
}
