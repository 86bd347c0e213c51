//! The checker: names, arities, kinds and shapes, before anything runs.
//!
//! `check(spec)` resolves every experiment into trials with elaborated step graphs, or
//! returns every located error it found (one per broken model or experiment).

mod call;
mod consteval;
pub mod elaborate;
pub mod experiment;
mod model_params;
mod settings;
pub mod suggest;

use std::collections::HashMap;

pub use call::signature_list as call_signature;
pub use experiment::{ExperimentPlan, Trial, TrialConfig};

use crate::diag::{Diagnostic, Diagnostics};
use crate::lang::{Spec, ast};

/// A checked spec: its experiments, expanded.
pub struct Program {
    pub experiments: Vec<ExperimentPlan>,
    /// Models no experiment in this file uses (checked when an experiment uses them).
    pub unused_models: Vec<String>,
}

/// Checks a parsed spec.
pub fn check(spec: &Spec) -> Result<Program, Diagnostics> {
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
            errors.push(
                Diagnostic::error(format!("model `{}` has two `step` blocks", m.name.name)).at(*extra, "second step"),
            );
        }
    }
    for t in &ast.tasks {
        if let Err(d) = experiment::check_task_def(t, &tasks) {
            errors.push(d);
        }
    }
    let mut experiments = vec![];
    for e in &ast.experiments {
        match experiment::plan(e, &models, &tasks) {
            Ok(p) => experiments.push(p),
            Err(d) => errors.push(d),
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
    let unused_models =
        ast.models.iter().map(|m| m.name.name.clone()).filter(|m| !used.contains(&m.as_str())).collect();
    Ok(Program { experiments, unused_models })
}

/// `an int`, `a float`, `a bool`, `a str`, `a list`: a kind with its article.
pub(crate) fn a(kind: crate::value::Kind) -> String {
    let article = if kind == crate::value::Kind::Int { "an" } else { "a" };
    format!("{article} {kind}")
}

/// Items by name; a repeated name is an error pointing at both definitions.
fn unique<'a, T>(
    items: &'a [T],
    name: impl Fn(&T) -> &ast::Ident,
    what: &str,
    errors: &mut Vec<Diagnostic>,
) -> HashMap<&'a str, &'a T> {
    let mut map: HashMap<&str, &T> = HashMap::new();
    for item in items {
        let n = name(item);
        if let Some(prev) = map.get(n.name.as_str()) {
            errors.push(
                Diagnostic::error(format!("{what} `{}` is defined twice", n.name))
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
