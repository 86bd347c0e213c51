//! A search's study as its runs tell it, for a store that holds the runs but not the study: the
//! study stays in the store that ran the search, and `memctl import` brings runs only.
//!
//! A run belongs to the search when the search's own trial for the run's values of the searched
//! names and its seed is the run's trial (same trial key). Its configurations are numbered in
//! the order their first run started; a pruned run's record holds the decision that stopped it.
//! What the runs cannot tell (the decisions that kept a trial, the sampler) stays empty.

use std::collections::HashMap;

use crate::check::SearchPlan;
use crate::store::study::{AtRung, Decision, FROM_RUNS, RungReport, StudyConfig, StudyRecord};
use crate::store::{RunSummary, Status, Store, StoreError};
use crate::value::Value;

/// The study of `experiment`'s search `plan` rebuilt from each trial's latest run in `latest`
/// (empty when none of them is the search's).
pub fn rebuild(
    store: &Store,
    plan: &SearchPlan,
    experiment: &str,
    latest: &HashMap<String, RunSummary>,
) -> Result<StudyRecord, StoreError> {
    // Each configuration's values, with when its first run started and its pruned runs.
    let mut configs: Vec<(Vec<Value>, f64, Vec<u64>)> = vec![];
    for run in latest.values().filter(|r| r.experiment == experiment && plan.spec.seeds.contains(&r.seed)) {
        let Some(values) = searched_values(plan, run) else { continue };
        let belongs = plan.trial(&values, run.seed).is_ok_and(|t| super::identity::trial_key(&t) == run.trial_key);
        if !belongs {
            continue;
        }
        let at = match configs.iter().position(|(v, ..)| *v == values) {
            Some(at) => at,
            None => {
                configs.push((values, run.started_at, vec![]));
                configs.len() - 1
            }
        };
        let (_, first, pruned) = &mut configs[at];
        *first = first.min(run.started_at);
        if run.status == Status::Pruned {
            pruned.push(run.id);
        }
    }
    configs.sort_by(|a, b| a.1.total_cmp(&b.1));
    let mut study = StudyRecord::new(experiment);
    for (c, (values, proposed_at, pruned)) in configs.into_iter().enumerate() {
        let names = plan.spec.dims.iter().map(|d| d.name.name.clone());
        study.configs.push(StudyConfig { values: names.zip(values).collect(), sampler: FROM_RUNS.into(), proposed_at });
        for id in pruned {
            let record = store.get(id)?;
            let Some(p) = record.pruned else { continue };
            study.reports.push(RungReport {
                at: AtRung {
                    config: c,
                    seed: record.config.seed,
                    rung: p.rung.saturating_sub(1),
                    step: p.step,
                    value: p.value,
                    loss: None,
                    loss_before: None,
                },
                decision: Decision { keep: false, mean: p.mean, cutoff: Some(p.cutoff), compared: 0, guarded: false },
            });
        }
    }
    Ok(study)
}

/// The run's value of each searched name (a model parameter, a training setting or a task
/// option), in the search's order; none where the run lacks one.
fn searched_values(plan: &SearchPlan, run: &RunSummary) -> Option<Vec<Value>> {
    plan.spec
        .dims
        .iter()
        .map(|d| {
            let name = &d.name.name;
            run.params.get(name).or_else(|| run.train.get(name)).or_else(|| run.task_options.get(name)).cloned()
        })
        .collect()
}
