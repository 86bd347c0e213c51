//! Loading and checking a spec for a verb, printing located errors.

use std::path::Path;

use crate::check::{self, Program};
use crate::cli::context::Context;
use crate::lang::{self, Spec};
use crate::source::{COMMAND_LINE, Span};
use crate::sweep::SpecSource;

/// A checked spec, or `Err(exit code)` after printing its errors.
pub fn load_checked(path: &Path, ctx: &Context) -> Result<(Spec, Program), i32> {
    load_checked_from(path, &lang::Disk, None, &[], ctx)
}

/// The spec text stored with each run: every file, each preceded by its path.
pub fn spec_source(path: &Path, spec: &Spec) -> SpecSource {
    let text = if spec.sources.files().count() == 1 {
        spec.sources.get(spec.main).text.clone()
    } else {
        spec.sources
            .files()
            .map(|(_, f)| format!("{}{}\n{}", lang::version::SECTION_HEADER, f.path.display(), f.text))
            .collect::<Vec<_>>()
            .join("\n")
    };
    SpecSource { path: path.display().to_string(), text }
}

/// Splits `[EXPERIMENT] [KEY=VALUES...]`.
pub fn split_overrides(rest: &[String]) -> (Option<String>, Vec<String>) {
    let mut experiment = None;
    let mut overrides = vec![];
    for a in rest {
        if a.contains('=') {
            overrides.push(a.clone());
        } else if experiment.is_none() {
            experiment = Some(a.clone());
        } else {
            overrides.push(a.clone()); // reported as a malformed override
        }
    }
    (experiment, overrides)
}

/// Where the value of `key` stands in its command-line override, if one set it: a diagnostic
/// about that value points there rather than at the spec's setting it replaced.
pub fn override_value(spec: &Spec, key: &str) -> Option<Span> {
    spec.sources.files().find_map(|(file, f)| {
        let (k, _) = f.text.split_once('=').filter(|_| f.path == Path::new(COMMAND_LINE))?;
        (k.trim() == key).then(|| Span::new(file, k.len() + 1, f.text.len()))
    })
}

/// Loads and checks a spec with command-line overrides, applied to the experiment named
/// `experiment` alone when one is (`check::check_selected`); each override is parsed as its own
/// pseudo-file `<command line>` so errors in it are located like spec errors.
pub fn load_checked_with(
    path: &Path,
    experiment: Option<&str>,
    overrides: &[String],
    ctx: &Context,
) -> Result<(Spec, Program), i32> {
    load_checked_from(path, &lang::Disk, experiment, overrides, ctx)
}

/// Like [`load_checked_with`], reading the spec's files through `reader`.
pub fn load_checked_from(
    path: &Path,
    reader: &dyn lang::SourceReader,
    experiment: Option<&str>,
    overrides: &[String],
    ctx: &Context,
) -> Result<(Spec, Program), i32> {
    let mut spec = match lang::load_with(path, reader) {
        Ok(s) => s,
        Err(e) => {
            eprint!("{}", e.render(ctx.color));
            return Err(2);
        }
    };
    let mut parsed = vec![];
    for (i, o) in overrides.iter().enumerate() {
        let Some((key, values)) = o.split_once('=') else {
            eprintln!(
                "error: `{o}` is not an override `KEY=VALUES`, and a command names one experiment at most \
                 (`{}` is the one named here; leave the name out to run every experiment of the spec)",
                experiment.unwrap_or("?")
            );
            return Err(2);
        };
        // A second value would silently win over the first; a list is what sweeps both.
        let same_key = |earlier: &&String| earlier.split_once('=').is_some_and(|(k, _)| k.trim() == key.trim());
        if let Some(first) = overrides[..i].iter().find(same_key) {
            let earlier = first.split_once('=').map_or("", |(_, v)| v);
            // A list of the two, unless one is a range: a list holds values, not ranges.
            let is_range = |v: &str| {
                v.split_once("..").is_some_and(|(a, b)| [a, b].iter().all(|n| n.trim().parse::<i64>().is_ok()))
            };
            let instead = if [earlier, values].iter().any(|v| is_range(v)) {
                "one list (`a,b,c`) or one range (`a..b`) to sweep".to_string()
            } else {
                format!("a list to sweep: `{}={earlier},{values}`", key.trim())
            };
            eprintln!(
                "error: `{}` is given twice on the command line (`{first}` and `{o}`); give one value, or {instead}",
                key.trim(),
            );
            return Err(2);
        }
        // `d=48,96` is shorthand for the list `[48, 96]`.
        let text = if has_top_level_comma(values) { format!("{key}=[{values}]") } else { o.clone() };
        let file = spec.sources.add(COMMAND_LINE, text.clone());
        let key_len = key.len();
        let name = crate::lang::ast::Ident { name: key.trim().to_string(), span: Span::new(file, 0, key_len) };
        let valid_key = !name.name.is_empty() && name.name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        let parsed_value = lang::parser::parse_expr_at(file, &text, key_len + 1);
        match (valid_key, parsed_value) {
            (true, Ok(values)) => parsed.push(check::Override { name, values }),
            (false, _) => {
                let d = crate::check::error_kind::CheckErrorKind::OverrideNotAName { key: key.to_string() }
                    .error()
                    .at(name.span, "expected a parameter, setting or task option name");
                eprint!("{}", crate::diag::Diagnostics(vec![d]).render(&spec.sources, ctx.color));
                return Err(2);
            }
            (true, Err(d)) => {
                eprint!("{}", crate::diag::Diagnostics(vec![d]).render(&spec.sources, ctx.color));
                return Err(2);
            }
        }
    }
    match check::check_selected(&spec, &parsed, experiment, &crate::prims::Primitives) {
        Ok(p) => Ok((spec, p)),
        Err(d) => {
            eprint!("{}", d.render(&spec.sources, ctx.color));
            let n = d.0.len();
            eprintln!("{}: {n} error{}", path.display(), if n == 1 { "" } else { "s" });
            Err(2)
        }
    }
}

fn has_top_level_comma(s: &str) -> bool {
    let mut depth = 0i32;
    for c in s.chars() {
        match c {
            '(' | '[' | '{' => depth += 1,
            ')' | ']' | '}' => depth -= 1,
            ',' if depth == 0 => return true,
            _ => {}
        }
    }
    false
}

/// The trials of one experiment, or of all.
pub fn select(program: &Program, experiment: Option<&str>, file: &Path) -> anyhow::Result<Vec<crate::check::Trial>> {
    if program.experiments.is_empty() {
        anyhow::bail!(
            "{} defines no experiment, so there is nothing to run (a file of models and tasks is for `use`)",
            file.display()
        );
    }
    let mut trials = vec![];
    for exp in &program.experiments {
        if experiment.is_none_or(|e| e == exp.name) {
            trials.extend(exp.trials.iter().cloned());
        }
    }
    if let Some(e) = experiment
        && trials.is_empty()
    {
        let names: Vec<&str> = program.experiments.iter().map(|p| p.name.as_str()).collect();
        anyhow::bail!("no experiment `{e}` in {} (experiments: {})", file.display(), names.join(", "));
    }
    // A trial listed twice (`seed in [1, 1]`, two experiments with the same configuration)
    // is one trial: it runs once.
    let mut seen = std::collections::HashSet::new();
    let before = trials.len();
    trials.retain(|t| seen.insert(crate::sweep::identity::trial_key(t)));
    if trials.len() < before {
        let repeats = before - trials.len();
        eprintln!(
            "note: {repeats} trial{} repeat{} another's configuration and seed exactly; each distinct trial runs once",
            if repeats == 1 { "" } else { "s" },
            if repeats == 1 { "s" } else { "" }
        );
    }
    Ok(trials)
}
