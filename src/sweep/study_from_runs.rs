//! A search's configurations as its runs tell them, beside those its study in this store
//! proposed: runs imported from the store that ran the search (the study stays there; `memctl
//! import` brings runs only), or left by an earlier study of the same names.
//!
//! A run belongs to the search when its values of the searched names lie in their domains and
//! the search's own trial for those values and the run's seed is the run's trial (same trial
//! key). Configurations known only from runs are numbered after the study's, in the order their
//! first run started. A pruned run's record holds the decision that stopped it, which also
//! stands for the study's own where one of its configurations was pruned in another store.
//! What runs cannot tell (the decisions that kept a trial, the sampler) stays empty.

use std::collections::HashMap;

use crate::check::SearchPlan;
use crate::store::study::{AtRung, Decision, FROM_RUNS, RungReport, StudyConfig, StudyRecord};
use crate::store::{RunSummary, Status, Store, StoreError};
use crate::value::Value;

/// `study` with the configurations of `experiment`'s search `plan` that only the runs in
/// `latest` (each trial's latest run) tell of added after its own.
pub fn with_runs(
    mut study: StudyRecord,
    store: &Store,
    plan: &SearchPlan,
    experiment: &str,
    latest: &HashMap<String, RunSummary>,
) -> Result<StudyRecord, StoreError> {
    let names: Vec<String> = plan.spec.dims.iter().map(|d| d.name.name.clone()).collect();
    // A configuration is known by its first seed's trial (values of one kind or another alike).
    let first_seed = plan.spec.seeds.first().copied().unwrap_or(0);
    let key_of = |values: &[Value]| plan.trial(values, first_seed).ok().map(|t| super::identity::trial_key(&t));
    let proposed: Vec<Option<String>> =
        study.configs.iter().map(|c| key_of(&c.values_named(names.iter().map(String::as_str)))).collect();
    let mut found: Vec<Found> = vec![];
    // Pruned runs of configurations this study proposed but did not judge (their runs came
    // from another store): (configuration, run).
    let mut pruned_elsewhere: Vec<(usize, u64)> = vec![];
    for run in latest.values().filter(|r| r.experiment == experiment && plan.spec.seeds.contains(&r.seed)) {
        let Some(values) = plan.searched_values(&run.params, &run.train, &run.task_options, run.seed) else {
            continue;
        };
        let belongs = plan.trial(&values, run.seed).is_ok_and(|t| super::identity::trial_key(&t) == run.trial_key);
        if !belongs {
            continue;
        }
        let key = key_of(&values);
        if let Some(config) = proposed.iter().position(|p| *p == key) {
            let judged_here =
                study.reports.iter().any(|r| r.at.config == config && r.at.seed == run.seed && !r.decision.keep);
            if run.status == Status::Pruned && !judged_here {
                pruned_elsewhere.push((config, run.id));
            }
            continue;
        }
        let at = match found.iter().position(|f| f.key == key) {
            Some(at) => at,
            None => {
                found.push(Found { values, key, first_started: run.started_at, pruned: vec![] });
                found.len() - 1
            }
        };
        let f = &mut found[at];
        f.first_started = f.first_started.min(run.started_at);
        if run.status == Status::Pruned {
            f.pruned.push(run.id);
        }
    }
    found.sort_by(|a, b| a.first_started.total_cmp(&b.first_started));
    for Found { values, first_started: proposed_at, pruned, .. } in found {
        let config = study.configs.len();
        study.configs.push(StudyConfig {
            values: names.iter().cloned().zip(values).collect(),
            sampler: FROM_RUNS.into(),
            proposed_at,
        });
        pruned_elsewhere.extend(pruned.into_iter().map(|id| (config, id)));
    }
    for (config, id) in pruned_elsewhere {
        if let Some(report) = pruning_of(store, config, id)? {
            study.reports.push(report);
        }
    }
    Ok(study)
}

/// The decision that pruned run `id`, as its record holds it, as a report on `config`.
fn pruning_of(store: &Store, config: usize, id: u64) -> Result<Option<RungReport>, StoreError> {
    let record = store.get(id)?;
    let Some(p) = record.pruned else { return Ok(None) };
    Ok(Some(RungReport {
        at: AtRung {
            config,
            seed: record.config.seed,
            rung: p.rung.saturating_sub(1),
            step: p.step,
            value: p.value,
            loss: None,
            loss_before: None,
        },
        decision: Decision { keep: false, mean: p.mean, cutoff: Some(p.cutoff), compared: 0, guarded: false },
    }))
}

/// Runs of a search's experiment that are not its trials: most often a sweep of it given
/// other `KEY=VALUE` overrides (`steps=500`), which made another study.
#[derive(Debug, Clone, PartialEq)]
pub struct OtherRuns {
    pub count: usize,
    /// What the latest of them sets otherwise than the search's trials (the searched names
    /// aside), as overrides: `[("steps", 500)]`.
    pub differ: Vec<(String, Value)>,
    /// Their seeds, where these are not the search's (a sweep given `seed=1`).
    pub seeds: Option<Vec<u64>>,
    /// Names the spec searches that the command line fixes here to another value than the
    /// latest of them has: most often, a search run without that override.
    pub searched_there: Vec<String>,
}

/// The runs in `latest` of `experiment` that do not belong to its search `plan`, if any.
pub fn other_runs(plan: &SearchPlan, experiment: &str, latest: &HashMap<String, RunSummary>) -> Option<OtherRuns> {
    let belongs = |run: &RunSummary| {
        plan.spec.seeds.contains(&run.seed)
            && plan
                .searched_values(&run.params, &run.train, &run.task_options, run.seed)
                .and_then(|values| plan.trial(&values, run.seed).ok())
                .is_some_and(|t| super::identity::trial_key(&t) == run.trial_key)
    };
    let others: Vec<&RunSummary> = latest.values().filter(|r| r.experiment == experiment && !belongs(r)).collect();
    let last = others.iter().max_by(|a, b| a.started_at.total_cmp(&b.started_at))?;
    let base = crate::store::StoredConfig::of(&plan.representatives.first()?.config);
    let searched = |name: &str| plan.spec.dims.iter().any(|d| d.name.name == name);
    let mut differ = vec![];
    let mut searched_there = vec![];
    for (mine, theirs) in
        [(&base.params, &last.params), (&base.task_options, &last.task_options), (&base.train, &last.train)]
    {
        for (name, value) in theirs.iter() {
            if searched(name)
                || crate::train_config::NOT_IN_IDENTITY.contains(&name.as_str())
                || mine.get(name) == Some(value)
            {
                continue;
            }
            if plan.fixed_searched.contains(name) {
                searched_there.push(name.clone());
            } else {
                differ.push((name.clone(), value.clone()));
            }
        }
    }
    let mut seeds: Vec<u64> = others.iter().map(|r| r.seed).collect();
    seeds.sort_unstable();
    seeds.dedup();
    let seeds = (seeds != plan.spec.seeds).then_some(seeds);
    Some(OtherRuns { count: others.len(), differ, seeds, searched_there })
}

/// A configuration the runs tell of.
struct Found {
    values: Vec<Value>,
    /// Its first seed's trial key.
    key: Option<String>,
    /// When its first run started (Unix seconds).
    first_started: f64,
    /// Its pruned runs.
    pruned: Vec<u64>,
}
