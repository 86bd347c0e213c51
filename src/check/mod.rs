//! The checker: names, arities, kinds and shapes, before anything runs.
//!
//! `check(spec)` resolves every experiment into trials with elaborated step graphs, or
//! returns every located error it found (one per broken model or experiment).

mod call;
mod consteval;
mod data_path;
pub mod elaborate;
pub mod error_kind;
pub mod experiment;
pub mod limits;
mod model_params;
pub mod search;
mod settings;
mod sweep;
#[cfg(test)]
pub(crate) mod test_specs;

use std::collections::HashMap;

pub use call::signature_list as call_signature;
pub use experiment::{ExperimentPlan, SearchPlan, Trial, TrialConfig};
pub use sweep::Override;

use crate::diag::{Diagnostic, Diagnostics};
use crate::lang::{Spec, ast};
use crate::signature::Catalog;
use error_kind::CheckErrorKind;

/// A checked spec: its experiments, expanded.
pub struct Program {
    pub experiments: Vec<ExperimentPlan>,
    /// Models no experiment in this file uses (checked when an experiment uses them).
    pub unused_models: Vec<String>,
}

/// Checks a parsed spec against the primitives `catalog` offers (memctl's own:
/// `prims::Primitives`).
pub fn check(spec: &Spec, catalog: &'static dyn Catalog) -> Result<Program, Diagnostics> {
    check_with(spec, &[], catalog)
}

/// A spec's text (named `t.mem`) parsed and checked against memctl's primitives, for tests: a
/// diagnostic panics with its rendering.
#[cfg(test)]
pub fn checked_text(text: &str) -> Program {
    let spec = crate::lang::parse_str("t.mem", text).unwrap();
    check(&spec, &crate::prims::Primitives).unwrap_or_else(|d| panic!("{}", d.render(&spec.sources, false)))
}

/// Checks a parsed spec with command-line overrides (`d=48,96`): each replaces the sweep of
/// that name, or adds one, in every experiment where the name means something.
pub fn check_with(spec: &Spec, overrides: &[Override], catalog: &'static dyn Catalog) -> Result<Program, Diagnostics> {
    check_selected(spec, overrides, None, catalog)
}

/// [`check_with`], the overrides applied to the experiment named `only` alone when one is
/// named (`memctl sweep spec.mem e k=15`): the spec's other experiments are checked as written,
/// so that an override meant for one cannot break another (`k=15` where another's `m = 100`
/// must divide by `k`). An `only` that names no experiment applies the overrides to none; the
/// verb then says that no such experiment exists.
pub fn check_selected(
    spec: &Spec,
    overrides: &[Override],
    only: Option<&str>,
    catalog: &'static dyn Catalog,
) -> Result<Program, Diagnostics> {
    let ast = &spec.ast;
    let mut errors: Vec<Diagnostic> = vec![];
    let models = unique(&ast.models, |m| &m.name, "model", &mut errors);
    let tasks = unique(&ast.tasks, |t| &t.name, "task", &mut errors);
    let _ = unique(&ast.experiments, |e| &e.name, "experiment", &mut errors);
    for m in &ast.models {
        if let Err(d) = model_params::table(m) {
            errors.push(d);
        }
        for extra in &m.extra_steps {
            errors.push(CheckErrorKind::TwoSteps { model: m.name.name.clone() }.error().at(*extra, "second step"));
        }
    }
    for t in &ast.tasks {
        if let Err(d) = experiment::check_task_def(t, &tasks) {
            errors.push(d);
        }
    }
    let mut experiments = vec![];
    let mut applied: Vec<String> = vec![];
    for e in &ast.experiments {
        let overrides = if only.is_none_or(|name| name == e.name.name) { overrides } else { &[] };
        match experiment::plan(e, &models, &tasks, overrides, catalog, &spec.sources) {
            Ok((p, names)) => {
                experiments.push(p);
                applied.extend(names);
            }
            Err(d) => errors.push(d),
        }
    }
    let selected_exists = only.is_none_or(|name| ast.experiments.iter().any(|e| e.name.name == name));
    if errors.is_empty() && selected_exists {
        for o in overrides.iter().filter(|o| !applied.contains(&o.name.name)) {
            let hint = match o.name.name.as_str() {
                "stop_when" | "select" => format!("`{}` is a condition, set in the experiment's `train` block", o.name.name),
                _ => "overrides name a model parameter (`d=48,96`), a train setting (`lr=1e-3`), a task option, or `seed`"
                    .to_string(),
            };
            errors.push(
                CheckErrorKind::OverrideSetsNothing { name: o.name.name.clone() }
                    .error()
                    .at(o.name.span, "sets nothing")
                    .hint(hint),
            );
        }
    }
    // The same mistake reached through several experiments is reported once.
    let mut seen = vec![];
    errors.retain(|d| {
        let key = (d.message.clone(), d.primary.as_ref().map(|l| l.span));
        if seen.contains(&key) {
            false
        } else {
            seen.push(key);
            true
        }
    });
    if !errors.is_empty() {
        return Err(Diagnostics(errors));
    }
    let used: Vec<&str> = experiments.iter().flat_map(|p| p.trials.first().map(|t| t.config.model.as_str())).collect();
    let unused: Vec<&ast::Model> = ast.models.iter().filter(|m| !used.contains(&m.name.name.as_str())).collect();
    for m in &unused {
        if let Err(d) = probe(m, catalog) {
            errors.push(d);
        }
    }
    if !errors.is_empty() {
        return Err(Diagnostics(errors));
    }
    let unused_models = unused.iter().map(|m| m.name.name.clone()).collect();
    Ok(Program { experiments, unused_models })
}

/// Checks a model no experiment uses (a library file) with its defaults on probe tasks: token
/// inputs and vector inputs (16 wide), 10 outputs. It is accepted if either fits; a model with
/// a parameter that has no default cannot be probed and is checked where it is used.
fn probe(model: &ast::Model, catalog: &'static dyn Catalog) -> Result<(), Diagnostic> {
    let entries = model_params::table(model)?;
    if entries.iter().any(|e| e.default.is_none()) {
        return Ok(());
    }
    let params = model_params::resolve(model, &entries, &Default::default(), model.name.span)?;
    let mut first_error = None;
    for input in [crate::graph::Ty::Tensor(vec![16]), crate::graph::Ty::Tokens(16)] {
        let shape = elaborate::TaskShape { input, output_size: 10, name: "probe".into() };
        match elaborate::elaborate(model, &params, &shape, catalog) {
            Ok(_) => return Ok(()),
            Err(d) => {
                first_error.get_or_insert(d);
            }
        }
    }
    let note = format!(
        "`{}` is not used by an experiment here: it was checked with its defaults on a probe task \
         (16-wide vectors or tokens in, 10 outputs)",
        model.name.name
    );
    Err(first_error.map_or_else(
        || CheckErrorKind::Internal { what: "probe failed without a diagnostic".into() }.error(),
        |d| d.hint(note),
    ))
}

/// Items by name; a repeated name is an error pointing at both definitions.
fn unique<'a, T>(
    items: &'a [T],
    name: impl Fn(&T) -> &ast::Ident,
    what: &'static str,
    errors: &mut Vec<Diagnostic>,
) -> HashMap<&'a str, &'a T> {
    let mut map: HashMap<&str, &T> = HashMap::new();
    for item in items {
        let n = name(item);
        if let Some(prev) = map.get(n.name.as_str()) {
            errors.push(
                CheckErrorKind::DefinedTwice { what, name: n.name.clone() }
                    .error()
                    .at(n.span, "second definition")
                    .also(name(prev).span, "first definition")
                    .hint(format!("rename one of them; {what} names must be unique")),
            );
            continue;
        }
        map.insert(&n.name, item);
    }
    map
}
