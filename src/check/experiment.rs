//! Experiments: a model with overrides, a task, training settings and a sweep, expanded into
//! trials (each with its elaborated step graph).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use super::error_kind::CheckErrorKind;
use super::limits::MAX_TRIALS;
use super::sweep::Override;
use super::{call, consteval, elaborate, model_params, settings};
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
    pub trials: Vec<Trial>,
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
    let model = *models.get(model_call.callee.name.as_str()).ok_or_else(|| {
        let mut d = CheckErrorKind::UnknownModel { name: model_call.callee.name.clone() }
            .error()
            .at(model_call.callee.span, "no such model");
        if let Some(h) = crate::suggest::did_you_mean(&model_call.callee.name, models.keys().copied()) {
            d = d.hint(h);
        } else if models.is_empty() {
            // The usual cause: the `use` line that brings the model in is missing.
            d = d.hint("this spec defines no model; bring one in with `use`, e.g. `use \"models/lstm.mem\"` (memctl's models are in its `specs/models/`; the path is relative to this file)");
        } else {
            let mut known: Vec<&str> = models.keys().copied().collect();
            known.sort_unstable();
            d = d.hint(format!("the models this spec defines or uses: {}", known.join(", ")));
        }
        d
    })?;
    let entries = model_params::table(model)?;
    let mut model_overrides: BTreeMap<String, (Value, Span)> = BTreeMap::new();
    for a in &model_call.args {
        let Some(n) = &a.name else {
            return Err(CheckErrorKind::ModelParamsUnnamed.error().at(a.value.span, "unnamed").hint(format!(
                "e.g. `model {}({} = …)`",
                model.name.name,
                entries.first().map_or("d", |e| e.name)
            )));
        };
        if !entries.iter().any(|e| e.name == n.name) {
            return Err(no_such_param(model, &entries, n));
        }
        if model_overrides.contains_key(&n.name) {
            return Err(CheckErrorKind::ParamGivenTwice { name: n.name.clone() }.error().at(n.span, "again here"));
        }
        model_overrides.insert(n.name.clone(), (consteval::eval(&a.value, &|_| None, &[])?, a.value.span));
    }

    // The task: a `task` definition (named arguments override its options), or a generator
    // called inline.
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
    let mut task_options: Vec<(Value, Span)> = vec![];
    for (spec, slot) in kind.signature().iter().zip(slots) {
        let ArgKind::Value(k) = spec.kind else {
            continue;
        };
        task_options.push(match slot {
            Some(e) => (call::coerce(&task_what, spec, k, consteval::eval(e, &|_| None, &[])?, e)?, e.span),
            None => (spec.default.value().unwrap_or(Value::Bool(false)), task_call.span),
        });
    }

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
    let mut axes: Vec<Axis> = vec![];
    for g in &groups {
        let mut targets = vec![];
        for n in &g.names {
            targets.push(axis_target(n, &entries, kind, model)?);
        }
        let mut rows = vec![];
        for row in &g.rows {
            let mut checked = vec![];
            for ((n, target), (v, span)) in g.names.iter().zip(&targets).zip(row) {
                checked.push((check_value(n, *target, v.clone(), *span, &entries, kind)?, *span));
            }
            rows.push(checked);
        }
        axes.push(Axis { names: g.names.iter().zip(targets).map(|(n, t)| (n.clone(), t)).collect(), rows });
    }

    // Instantiate once with the first trial's options to learn the target, metrics and test
    // splits (for the settings checks); the trials reuse it. The first trial's, not the
    // unswept ones: a data path set on the command line replaces one that may not exist.
    let mut first_options = task_options.clone();
    for (a, row) in axes.iter().filter_map(|a| Some((a, a.rows.first()?))) {
        for ((n, target), (v, span)) in a.names.iter().zip(row) {
            if *target == AxisTarget::TaskOption
                && let Some(i) = kind.signature().iter().position(|s| s.name == n.name)
            {
                first_options[i] = (v.clone(), *span);
            }
        }
    }
    let probe: Arc<dyn Task> = Arc::from(instantiate_task(kind, &first_options, task_call.span, sources)?);
    let block = match exp.train.first() {
        Some(s) => settings::read(s, &*probe)?,
        None => settings::Block::default(),
    };

    let total = axes.iter().try_fold(1usize, |acc, a| acc.checked_mul(a.rows.len())).filter(|t| *t <= MAX_TRIALS);
    let Some(total) = total else {
        return Err(CheckErrorKind::TooManyTrials { experiment: name.to_string() }
            .error()
            .at(exp.name.span, "too many trials"));
    };

    // Expand: the first axis varies slowest.
    let mut trials = vec![];
    let mut graphs: HashMap<String, Arc<StepGraph>> = HashMap::new();
    let mut task_cache: HashMap<String, Arc<dyn Task>> = HashMap::new();
    task_cache.insert(format!("{first_options:?}"), probe);
    for index in 0..total {
        let mut rest = index;
        let mut picks = vec![0; axes.len()];
        for (i, a) in axes.iter().enumerate().rev() {
            picks[i] = rest % a.rows.len();
            rest /= a.rows.len();
        }
        let mut given = model_overrides.clone();
        let mut swept_settings: BTreeMap<String, (Value, Span)> = BTreeMap::new();
        let mut options = task_options.clone();
        let mut seed = 0u64;
        let mut swept = vec![];
        for (a, &p) in axes.iter().zip(&picks) {
            for ((n, target), (v, span)) in a.names.iter().zip(&a.rows[p]) {
                let (v, span) = (v.clone(), *span);
                swept.push((n.name.clone(), v.clone()));
                match target {
                    AxisTarget::Param => {
                        given.insert(n.name.clone(), (v, span));
                    }
                    AxisTarget::Setting => {
                        swept_settings.insert(n.name.clone(), (v, span));
                    }
                    AxisTarget::TaskOption => {
                        if let Some(i) = kind.signature().iter().position(|s| s.name == n.name) {
                            options[i] = (v, span);
                        }
                    }
                    AxisTarget::Seed => seed = v.as_int().unwrap_or(0) as u64,
                }
            }
        }
        let params = model_params::resolve(model, &entries, &given, model_call.span)?;
        let train = settings::resolve(&block, &swept_settings, exp.name.span)?;
        let option_key = format!("{options:?}");
        let task = match task_cache.get(&option_key) {
            Some(t) => t.clone(),
            None => {
                let t: Arc<dyn Task> = Arc::from(instantiate_task(kind, &options, task_call.span, sources)?);
                task_cache.insert(option_key, t.clone());
                t
            }
        };
        let shape = elaborate::TaskShape {
            input: task.input(),
            output_size: task.target().size(),
            name: kind.name().to_string(),
        };
        let graph_key = format!("{params:?}{:?}{}", shape.input, shape.output_size);
        let graph = match graphs.get(&graph_key) {
            Some(g) => g.clone(),
            None => {
                let g = Arc::new(elaborate::elaborate(model, &params, &shape, catalog).map_err(|d| {
                    let values: Vec<String> = swept.iter().map(|(k, v)| format!("{k} = {v}")).collect();
                    if values.is_empty() {
                        d
                    } else {
                        d.hint(format!("while checking experiment `{name}` with {}", values.join(", ")))
                    }
                })?);
                graphs.insert(graph_key, g.clone());
                g
            }
        };
        let task_options =
            kind.signature().iter().zip(&options).map(|(s, (v, _))| (s.name.to_string(), v.clone())).collect();
        trials.push(Trial {
            config: TrialConfig {
                experiment: name.clone(),
                model: model.name.name.clone(),
                params,
                task: kind.name().to_string(),
                task_options,
                train,
                seed,
                swept,
            },
            graph,
            task,
        });
    }
    let applied = applicable.into_iter().map(|o| o.name.name).collect();
    Ok((ExperimentPlan { name: name.clone(), span: exp.name.span, trials }, applied))
}

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
                .at(span, format!("expected {}", super::a(k)))
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

/// Configures the task. A relative `path` option is resolved against the directory of the
/// file it is written in (as `use` paths are; the working directory for a command-line
/// override); the options keep it as written, so a trial's identity does not depend on where
/// memctl runs.
fn instantiate_task(
    kind: &dyn tasks::TaskKind,
    options: &[(Value, Span)],
    at: Span,
    sources: &SourceMap,
) -> Result<Box<dyn Task>, Diagnostic> {
    let values: Vec<Value> = options.iter().map(|(v, _)| v.clone()).collect();
    let written_in =
        kind.signature().iter().position(|s| s.name == "path").and_then(|i| options.get(i)).map_or(at, |o| o.1);
    let file = &sources.get(written_in.file).path;
    let dir = file.parent().unwrap_or(std::path::Path::new(""));
    kind.instantiate_in(&values, dir).map_err(|e| {
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
