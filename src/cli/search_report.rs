//! `memctl search-report SPEC [EXPERIMENT] [KEY=VALUES...]`: what a search found.

use std::path::PathBuf;

use crate::check::Program;
use crate::cli::{context::Context, load};
use crate::store::Store;
use crate::sweep::search::Search;
use crate::sweep::study_from_runs::OtherRuns;

/// Show what a search found: its configurations, best first (mean ± sd over seeds), which the
/// pruner stopped and where, the training steps used against a full grid, and the metric
/// plotted against each searched name.
///
/// `KEY=VALUES` overrides are those the search's `memctl sweep` was given (`steps=500`,
/// `seed=1`): they make the study, as they made its trials.
#[derive(clap::Args)]
pub struct Args {
    /// Spec file.
    file: PathBuf,
    /// The experiment with the search (default: every experiment with one), then `KEY=VALUES`
    /// overrides.
    #[arg(value_name = "EXPERIMENT|KEY=VALUES")]
    rest: Vec<String>,
}

/// Why a spec's experiments give no search to report.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SearchReportError {
    #[error("no experiment `{name}` in {file}{}; {}", .suggestion.as_ref().map(|s| format!(" ({s})")).unwrap_or_default(), with_search(.searches))]
    UnknownExperiment { name: String, file: String, suggestion: Option<String>, searches: Vec<String> },
    #[error("experiment `{name}` in {file} has no `search`; {}", with_search(.searches))]
    NotASearch { name: String, file: String, searches: Vec<String> },
    #[error("no experiment with a `search` in {file}")]
    NoSearch { file: String },
}

/// `the experiments with a search: a, b`, or that there is none.
fn with_search(searches: &[String]) -> String {
    match searches {
        [] => "the file has no experiment with a `search`".into(),
        [one] => format!("the experiment with a search is `{one}`"),
        many => format!(
            "the experiments with a search are {}",
            many.iter().map(|s| format!("`{s}`")).collect::<Vec<_>>().join(", ")
        ),
    }
}

/// The experiments to report: the one named, or every one with a search.
fn chosen<'p>(
    program: &'p Program,
    experiment: Option<&str>,
    file: &str,
) -> Result<Vec<(&'p str, &'p crate::check::SearchPlan)>, SearchReportError> {
    let searches: Vec<(&str, &crate::check::SearchPlan)> =
        program.experiments.iter().filter_map(|e| Some((e.name.as_str(), e.search.as_deref()?))).collect();
    let names = || searches.iter().map(|(n, _)| n.to_string()).collect::<Vec<_>>();
    let Some(name) = experiment else {
        if searches.is_empty() {
            return Err(SearchReportError::NoSearch { file: file.into() });
        }
        return Ok(searches);
    };
    if !program.experiments.iter().any(|e| e.name == name) {
        let suggestion = crate::suggest::did_you_mean(name, searches.iter().map(|(n, _)| *n));
        return Err(SearchReportError::UnknownExperiment {
            name: name.into(),
            file: file.into(),
            suggestion,
            searches: names(),
        });
    }
    match searches.iter().find(|(n, _)| *n == name) {
        Some(s) => Ok(vec![*s]),
        None => Err(SearchReportError::NotASearch { name: name.into(), file: file.into(), searches: names() }),
    }
}

pub fn run(args: Args, ctx: &Context) -> anyhow::Result<i32> {
    let (experiment, overrides) = load::split_overrides(&args.rest);
    let Ok((_, program)) =
        load::load_checked_from(&args.file, &crate::lang::Disk, experiment.as_deref(), &overrides, ctx)
    else {
        return Ok(2);
    };
    let file = args.file.display().to_string();
    let searches = chosen(&program, experiment.as_deref(), &file)?;
    let store = Store::open_existing(&ctx.store)?;
    for (i, (name, plan)) in searches.iter().enumerate() {
        let search = Search::new(&store, plan, name);
        let (study, rows) = search.configurations_run()?;
        if i > 0 {
            println!();
        }
        if rows.is_empty() {
            println!(
                "search {name}: no configuration proposed or run in {} (`memctl sweep {file}` runs the search; \
                 `memctl import` brings its runs from the store that ran it)",
                ctx.store.display(),
            );
            if let Some(other) = search.other_runs()? {
                println!("{}", other_runs_note(name, &file, &overrides, &other));
            }
            continue;
        }
        print!("{}", crate::report::search::render(name, search.spec(), &study, &rows, search.steps_per_trial()));
    }
    Ok(0)
}

/// Says that the store's runs of the experiment are of another study, and which overrides
/// would name it.
fn other_runs_note(name: &str, file: &str, overrides: &[String], other: &OtherRuns) -> String {
    let runs = if other.count == 1 { "run".to_string() } else { format!("{} runs", other.count) };
    let mut set: Vec<String> = other.differ.iter().map(|(k, v)| format!("{k}={v}")).collect();
    if let Some(seeds) = &other.seeds {
        set.push(format!("seed={}", seeds.iter().map(u64::to_string).collect::<Vec<_>>().join(",")));
    }
    if set.is_empty() && other.searched_there.is_empty() {
        return format!(
            "the store's {runs} of experiment `{name}` belong to a search with other settings: give search-report \
             the `KEY=VALUES` overrides their `memctl sweep` was given"
        );
    }
    // The overrides given here, but those the runs set otherwise and those that fix a name
    // their search varied.
    let key = |o: &str| o.split_once('=').map_or(o.to_string(), |(k, _)| k.trim().to_string());
    let dropped: Vec<String> = set.iter().map(|s| key(s)).chain(other.searched_there.iter().cloned()).collect();
    let mut example: Vec<String> = overrides.iter().filter(|o| !dropped.contains(&key(o))).cloned().collect();
    example.extend(set.iter().cloned());
    let mut why = String::new();
    if !set.is_empty() {
        why.push_str(&format!(" with other settings, {} (as their latest run has them),", set.join(", ")));
    }
    if !other.searched_there.is_empty() {
        let names: Vec<String> = other.searched_there.iter().map(|n| format!("`{n}`")).collect();
        why.push_str(&format!(" that varied {}, which the command line fixes here,", names.join(", ")));
    }
    format!(
        "the store's {runs} of experiment `{name}` belong to a search{} give search-report the overrides their \
         `memctl sweep` was given, e.g. `memctl search-report {file} {name}{}`",
        why.trim_end_matches(',').to_string() + ":",
        example.iter().map(|e| format!(" {e}")).collect::<String>()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const SPEC: &str = concat!(
        crate::check::test_specs::tiny_lstm_on_assoc!(),
        r#"
experiment plain {
  task tiny
  model lstm
  train { batch = 16, steps = 6 }
}

experiment lr_search {
  task tiny
  model lstm
  train { batch = 16, steps = 6 }
  search { lr in [1e-3, 1e-2]  trials = 2, sampler = grid, metric = val_accuracy }
}
"#
    );

    /// An experiment name that is no experiment, or one without a search, is said to be so,
    /// with the experiments that have a search.
    #[test]
    fn an_unknown_experiment_or_one_without_a_search_names_the_searches() {
        let program = crate::check::checked_text(SPEC);
        let err = chosen(&program, Some("lr_serch"), "s.mem").err().unwrap();
        assert_eq!(
            err.to_string(),
            "no experiment `lr_serch` in s.mem (did you mean `lr_search`?); the experiment with a search is `lr_search`"
        );
        let err = chosen(&program, Some("nosuch"), "s.mem").err().unwrap();
        assert_eq!(err.to_string(), "no experiment `nosuch` in s.mem; the experiment with a search is `lr_search`");
        let err = chosen(&program, Some("plain"), "s.mem").err().unwrap();
        assert_eq!(
            err,
            SearchReportError::NotASearch {
                name: "plain".into(),
                file: "s.mem".into(),
                searches: vec!["lr_search".into()]
            }
        );
        assert_eq!(chosen(&program, Some("lr_search"), "s.mem").map(|s| s.len()).ok(), Some(1));
        assert_eq!(chosen(&program, None, "s.mem").ok().map(|s| s[0].0), Some("lr_search"));
    }

    #[test]
    fn the_note_on_other_runs_gives_the_overrides_to_pass() {
        let steps = ("steps".to_string(), crate::value::Value::Int(500));
        let other = OtherRuns { count: 16, differ: vec![steps], seeds: Some(vec![1, 3]), searched_there: vec![] };
        let note = other_runs_note("s", "search.mem", &["train=1000".to_string(), "steps=20".into()], &other);
        assert!(note.contains("16 runs of experiment `s`"), "{note}");
        assert!(note.contains("other settings, steps=500, seed=1,3 (as their latest run has them): give"), "{note}");
        assert!(note.ends_with("`memctl search-report search.mem s train=1000 steps=500 seed=1,3`"), "{note}");
    }

    /// Runs of the search without an override that fixes a searched name: the note says to
    /// drop it, and does not offer one run's sampled value as a setting.
    #[test]
    fn the_note_on_other_runs_drops_an_override_that_fixes_a_name_they_searched() {
        let other = OtherRuns { count: 12, differ: vec![], seeds: None, searched_there: vec!["lr".into()] };
        let note = other_runs_note("s", "search.mem", &["lr=1e-3".to_string(), "steps=20".into()], &other);
        assert!(
            note.contains("belong to a search that varied `lr`, which the command line fixes here: give"),
            "{note}"
        );
        assert!(note.ends_with("`memctl search-report search.mem s steps=20`"), "{note}");
    }
}
