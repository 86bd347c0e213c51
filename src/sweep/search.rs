//! Running a search: workers take the study's configurations in order, each with every seed,
//! and when none is left ask the sampler for the next one; every trial is judged at its rungs
//! by the pruner. The study (its configurations and every decision) lives in the store
//! ([`crate::store::study`]) and each change to it is one exclusive session, as a trial's claim
//! is: a second sweep on the same spec, now or later, takes the configurations not yet run and
//! proposes new ones from all the results so far; a killed sweep's trials resume from their
//! checkpoints, their decisions kept. With `--pack N`, a worker trains up to `N`
//! seeds of one configuration together as a pack; a trial the pruner stops leaves its pack,
//! and the others go on.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use super::live::Judge;
use super::packs::{Packed, Packing, run_packed};
use super::{Options, Reporter, SpecSource, Summary, SweepError, TrialResult, identity};
use crate::check::SearchPlan;
use crate::check::search::Pruning;
use crate::search::outcome::{ConfigOutcome, Stage};
use crate::search::summary::{ConfigRuns, SeedRun};
use crate::search::{pruner, sampler};
use crate::store::study::{RungReport, StudyConfig, StudyRecord};
use crate::store::summary::latest_by_trial;
use crate::store::{Claim, Pruned, Rerun, RunSummary, Status, Store, StoreError, now};
use crate::train::Outcome;
use crate::value::Value;

/// One trial of the search: a configuration (its index in the study and its values) and a seed.
#[derive(Clone, Debug)]
struct Item {
    config: usize,
    values: Vec<Value>,
    seed: u64,
    /// Its position among the search's trials (configuration-major), for progress display.
    index: usize,
}

/// A search being run by this process.
pub struct Search<'a> {
    store: &'a Store,
    plan: &'a SearchPlan,
    key: String,
    experiment: String,
    queue: Mutex<Queue>,
    /// Configurations known to be pruned (by this process's trials, or seen in the study at a
    /// rung), each with the decision: their seeds still training stop at their next evaluation.
    pruned: Mutex<HashMap<usize, RungReport>>,
}

#[derive(Default)]
struct Queue {
    /// The first configuration of the study not yet queued here.
    next_config: usize,
    items: VecDeque<Item>,
    /// The sampler proposes no more (said once, by the first worker to find it).
    ended: bool,
}

impl<'a> Search<'a> {
    pub fn new(store: &'a Store, plan: &'a SearchPlan, experiment: &str) -> Search<'a> {
        Search {
            store,
            plan,
            key: crate::search::study_key(plan),
            experiment: experiment.into(),
            queue: Mutex::new(Queue::default()),
            pruned: Mutex::new(HashMap::new()),
        }
    }

    /// The study's key in the store.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// Trials the search runs at most: configurations × seeds.
    pub fn trial_count(&self) -> usize {
        self.configurations() * self.plan.spec.seeds.len()
    }

    /// `trials`, or the size of a smaller finite space.
    pub fn configurations(&self) -> usize {
        self.plan.spec.configurations()
    }

    pub fn seeds(&self) -> usize {
        self.plan.spec.seeds.len()
    }

    pub fn experiment(&self) -> &str {
        &self.experiment
    }

    /// Runs the search with `opts.jobs` trials at a time; stops starting trials once `cancel`
    /// is set. With `--force` the search starts afresh: what it proposed and every decision
    /// its pruner took are forgotten, and each trial trains again.
    pub fn run(
        &self,
        spec: &SpecSource,
        opts: &Options,
        reporter: &dyn Reporter,
        cancel: &AtomicBool,
    ) -> Result<Summary, SweepError> {
        if opts.force {
            self.start_afresh(reporter)?;
        }
        let workers = opts.jobs.clamp(1, self.trial_count().max(1));
        let pool = super::worker_pool(workers, opts.threads)?;
        let pack = self.pack_size(opts);
        let results: super::Results = Mutex::new(vec![]);
        let store_failed = AtomicBool::new(false);
        pool.scope(|scope| {
            for _ in 0..workers {
                scope.spawn(|_| {
                    loop {
                        if cancel.load(Ordering::SeqCst) || store_failed.load(Ordering::SeqCst) {
                            break;
                        }
                        let r = match self.next_items(reporter, pack) {
                            Ok(items) if items.is_empty() => break,
                            Ok(items) => self.run_items(spec, items, opts, reporter, cancel),
                            Err(e) => vec![Err(e)],
                        };
                        if super::gather(&results, r, &store_failed) {
                            break;
                        }
                    }
                });
            }
        });
        super::tally(results.into_inner().unwrap_or_default())
    }

    /// `--force`: forgets what the study proposed and decided, and its trials' checkpoints, so
    /// that every trial trains from its first step. Refused while a trial of the study trains
    /// in another process, whose workers number configurations by the study they read.
    fn start_afresh(&self, reporter: &dyn Reporter) -> Result<(), SweepError> {
        let study = self.store.study(&self.key, &self.experiment)?;
        let keys: Vec<String> = study
            .configs
            .iter()
            .flat_map(|c| {
                let values = self.values_of(c);
                self.plan.spec.seeds.iter().filter_map(move |seed| self.plan.trial(&values, *seed).ok())
            })
            .map(|t| identity::trial_key(&t))
            .collect();
        let latest = self.store.latest_summaries(&keys)?;
        if let Some(running) = latest.iter().flatten().find(|s| s.status == Status::Running) {
            return Err(SweepError::SearchRunningElsewhere { experiment: self.experiment.clone(), run: running.id });
        }
        self.store.update_study(&self.key, &self.experiment, |s| *s = StudyRecord::new(&self.experiment))?;
        for key in &keys {
            if let Err(e) = self.store.remove_checkpoint(key) {
                reporter.warning(&e.to_string());
            }
        }
        Ok(())
    }

    /// Seeds of one configuration trained together: up to `--pack N` (`auto` trains each
    /// trial of a search alone, where a sweep packs small GPU trials).
    pub fn pack_size(&self, opts: &Options) -> usize {
        match opts.pack {
            Packing::Size(n) => n,
            _ => 1,
        }
    }

    /// The next trials to run, up to `pack` seeds of one configuration: queued ones, else the
    /// seeds of the study's next configuration (proposing one when the study has no more and
    /// wants more); none when the search is complete.
    fn next_items(&self, reporter: &dyn Reporter, pack: usize) -> Result<Vec<Item>, StoreError> {
        let Ok(mut q) = self.queue.lock() else { return Ok(vec![]) };
        let seeds = &self.plan.spec.seeds;
        loop {
            if let Some(first) = q.items.pop_front() {
                let mut items = vec![first];
                while items.len() < pack && q.items.front().is_some_and(|i| i.config == items[0].config) {
                    items.extend(q.items.pop_front());
                }
                return Ok(items);
            }
            let study = self.store.study(&self.key, &self.experiment)?;
            if q.next_config < study.configs.len() {
                let c = q.next_config;
                let values = self.values_of(&study.configs[c]);
                for (i, seed) in seeds.iter().enumerate() {
                    q.items.push_back(Item {
                        config: c,
                        values: values.clone(),
                        seed: *seed,
                        index: c * seeds.len() + i,
                    });
                }
                q.next_config += 1;
                continue;
            }
            let n = study.configs.len();
            if n >= self.configurations() || q.ended {
                return Ok(vec![]);
            }
            let outcomes = self.outcomes(&study)?;
            let configs: Vec<Vec<Value>> = study.configs.iter().map(|c| self.values_of(c)).collect();
            let values = match sampler::propose(&self.plan.spec, n, &outcomes, &configs) {
                Ok(v) => v,
                Err(e) => {
                    q.ended = true;
                    reporter.warning(&format!("the search stops: {e}"));
                    return Ok(vec![]);
                }
            };
            let names = self.plan.spec.dims.iter().map(|d| d.name.name.clone());
            let config = StudyConfig {
                values: names.zip(values).collect(),
                sampler: sampler_name(&self.plan.spec.sampler).into(),
                proposed_at: now(),
            };
            // Added only if no other process added configuration `n` meanwhile (then the loop
            // takes theirs).
            self.store.update_study(&self.key, &self.experiment, |s| {
                if s.configs.len() == n {
                    s.configs.push(config);
                }
            })?;
        }
    }

    /// A stored configuration's values in the order of the searched names.
    fn values_of(&self, c: &StudyConfig) -> Vec<Value> {
        c.values_named(self.plan.spec.dims.iter().map(|d| d.name.name.as_str()))
    }

    /// What each configuration achieved so far: pruned at a rung, finished (every seed done),
    /// or failed; configurations still running have none yet.
    pub fn outcomes(&self, study: &StudyRecord) -> Result<Vec<ConfigOutcome>, StoreError> {
        let summaries = self.store.summaries()?;
        let pruned_runs = pruned_first(summaries.clone());
        let latest = latest_by_trial(summaries);
        let metric = self.plan.spec.metric.as_ref().map(|m| m.name.clone()).unwrap_or_default();
        let mut out = vec![];
        let pruner_metric = self.plan.spec.prune.as_ref().map(|p| p.metric.name.as_str());
        for (c, config) in study.configs.iter().enumerate() {
            let values = self.values_of(config);
            if let Some(p) = study.pruned_at(c) {
                // Ranked in the search's metric: the pruner's may be another one (judging by
                // validation loss a search that optimises accuracy), whose values do not compare.
                let value = if pruner_metric == Some(metric.as_str()) {
                    p.decision.mean
                } else {
                    self.mean_of_seeds(&values, &pruned_runs, &metric).unwrap_or(f64::NAN)
                };
                out.push(ConfigOutcome { config: c, stage: Stage::Pruned(p.at.rung), value });
                continue;
            }
            let mut finished = vec![];
            let mut failed = false;
            for seed in &self.plan.spec.seeds {
                let Ok(trial) = self.plan.trial(&values, *seed) else {
                    failed = true;
                    continue;
                };
                match latest.get(&identity::trial_key(&trial)) {
                    Some(s) if s.status == Status::Done => {
                        finished.push(s.metric_or_selected(&metric).unwrap_or(f64::NAN))
                    }
                    Some(s) if s.status == Status::Failed => failed = true,
                    _ => {}
                }
            }
            if failed {
                out.push(ConfigOutcome { config: c, stage: Stage::Failed, value: f64::NAN });
            } else if finished.len() == self.plan.spec.seeds.len() {
                let mean = finished.iter().sum::<f64>() / finished.len() as f64;
                out.push(ConfigOutcome { config: c, stage: Stage::Finished, value: mean });
            }
        }
        Ok(out)
    }

    /// The mean of `metric` over the latest runs of a configuration's seeds that have it
    /// (a pruned run's are its validation metrics where it stopped).
    fn mean_of_seeds(&self, values: &[Value], latest: &HashMap<String, RunSummary>, metric: &str) -> Option<f64> {
        let found: Vec<f64> = self
            .plan
            .spec
            .seeds
            .iter()
            .filter_map(|seed| self.plan.trial(values, *seed).ok())
            .filter_map(|t| latest.get(&identity::trial_key(&t))?.metric_or_selected(metric))
            .collect();
        (!found.is_empty()).then(|| found.iter().sum::<f64>() / found.len() as f64)
    }

    /// Every configuration of the study with the latest run of each seed, then those that only
    /// the runs in the store tell of (imported from the store that ran the search, say:
    /// [`super::study_from_runs`]).
    pub fn configurations_run(&self) -> Result<(StudyRecord, Vec<ConfigRuns>), StoreError> {
        let summaries = self.store.summaries()?;
        let pruned_runs = pruned_first(summaries.clone());
        let latest = latest_by_trial(summaries);
        let study = self.store.study(&self.key, &self.experiment)?;
        let study = super::study_from_runs::with_runs(study, self.store, self.plan, &self.experiment, &pruned_runs)?;
        let metric = self.plan.spec.metric.as_ref().map(|m| m.name.clone()).unwrap_or_default();
        let test_metric = metric.strip_prefix("val_").unwrap_or(&metric).to_string();
        let mut rows = vec![];
        let mut seen = HashSet::new();
        for (c, config) in study.configs.iter().enumerate() {
            let values = self.values_of(config);
            // A configuration proposed again (by a study older than proposals that skip the
            // ones tried) is the same trials: shown, and its steps counted, once.
            if !seen.insert(format!("{values:?}")) {
                continue;
            }
            let pruned_at = study.pruned_at(c).map(|r| r.at.rung + 1);
            let run_of = |key: String| if pruned_at.is_some() { pruned_runs.get(&key) } else { latest.get(&key) };
            let seeds = self
                .plan
                .spec
                .seeds
                .iter()
                .map(|seed| {
                    let run = self.plan.trial(&values, *seed).ok().and_then(|t| run_of(identity::trial_key(&t)));
                    SeedRun {
                        seed: *seed,
                        run: run.map(|r| r.id),
                        status: run.map(|r| r.status),
                        steps_run: run.map_or(0, |r| r.steps_run),
                        metric: run.and_then(|r| r.metric_or_selected(&metric)),
                        test: run.filter(|r| r.status == Status::Done).and_then(|r| r.metric_or_selected(&test_metric)),
                    }
                })
                .collect();
            rows.push(ConfigRuns { config: c, values, sampler: config.sampler.clone(), seeds, pruned_at });
        }
        Ok((study, rows))
    }

    /// The runs of this search's experiment in the store that are not its trials (a sweep of
    /// it with other overrides), if any.
    pub fn other_runs(&self) -> Result<Option<super::study_from_runs::OtherRuns>, StoreError> {
        let latest = latest_by_trial(self.store.summaries()?);
        Ok(super::study_from_runs::other_runs(self.plan, &self.experiment, &latest))
    }

    /// The searched names.
    pub fn names(&self) -> Vec<String> {
        self.plan.spec.dims.iter().map(|d| d.name.name.clone()).collect()
    }

    /// The search's spec.
    pub fn spec(&self) -> &crate::check::search::SearchSpec {
        &self.plan.spec
    }

    /// Steps a trial runs at most.
    pub fn steps_per_trial(&self) -> u64 {
        self.plan.representatives.first().map_or(0, |t| t.config.train.steps as u64)
    }

    /// Runs `items` (seeds of one configuration) as one pack, or the one alone; a seed of a
    /// configuration already pruned through another seed is recorded `pruned` without training.
    fn run_items(
        &self,
        spec: &SpecSource,
        items: Vec<Item>,
        opts: &Options,
        reporter: &dyn Reporter,
        cancel: &AtomicBool,
    ) -> Vec<Result<TrialResult, StoreError>> {
        let mut results = vec![];
        let mut to_train: Vec<(Item, crate::check::Trial)> = vec![];
        let study = match self.plan.spec.prune.as_ref().map(|_| self.store.study(&self.key, &self.experiment)) {
            Some(Err(e)) => return vec![Err(e)],
            Some(Ok(study)) => Some(study),
            None => None,
        };
        for item in items {
            let trial = match self.plan.trial(&item.values, item.seed) {
                Ok(t) => t,
                Err(d) => {
                    let values: Vec<String> = item.values.iter().map(|v| v.to_string()).collect();
                    reporter.warning(&format!(
                        "configuration {} ({}) does not check: {}",
                        item.config + 1,
                        values.join(", "),
                        d.message
                    ));
                    results.push(Ok(TrialResult::Skipped { run_id: 0, status: Status::Failed }));
                    continue;
                }
            };
            // A configuration pruned through another seed is not trained again with this one.
            if let (Some(pruning), Some(study)) = (&self.plan.spec.prune, &study)
                && let Some(p) =
                    study.pruned_at(item.config).filter(|p| study.report(item.config, item.seed, p.at.rung).is_none())
            {
                results.push(self.record_pruned_unrun(spec, &item, &trial, pruning, p, opts, reporter));
                continue;
            }
            to_train.push((item, trial));
        }
        let judges: Vec<Option<TrialJudge>> = to_train
            .iter()
            .map(|(item, _)| {
                self.plan.spec.prune.as_ref().map(|pruning| TrialJudge {
                    search: self,
                    pruning,
                    config: item.config,
                    seed: item.seed,
                    reported: Mutex::new(0),
                    pruned: Mutex::new(None),
                    reporter,
                })
            })
            .collect();
        let members: Vec<Packed<'_>> = to_train
            .iter()
            .zip(&judges)
            .map(|((item, trial), judge)| Packed {
                index: item.index,
                trial,
                judge: judge.as_ref().map(|j| j as &dyn Judge),
            })
            .collect();
        // Within the memory of its device, and on one GPU of a spread sweep.
        let keys: Vec<String> = members.iter().map(|m| super::identity::trial_key(m.trial)).collect();
        let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
        let waits = |w| {
            if let Some(m) = members.first() {
                reporter.trial_waits_for_memory(m.index, m.trial, w);
            }
        };
        match opts.memory.reserve_pack(&keys, cancel, waits) {
            Some(memory) => {
                results.extend(run_packed(self.store, spec, &members, &opts.placed(&memory), reporter, cancel))
            }
            None => results.extend(members.iter().map(|_| Ok(TrialResult::NotStarted))),
        }
        results
    }

    /// Records a trial whose configuration was pruned through another seed as `pruned` with
    /// the configuration's decision, without training it.
    #[allow(clippy::too_many_arguments)]
    fn record_pruned_unrun(
        &self,
        spec: &SpecSource,
        item: &Item,
        trial: &crate::check::Trial,
        pruning: &Pruning,
        by: &RungReport,
        opts: &Options,
        reporter: &dyn Reporter,
    ) -> Result<TrialResult, StoreError> {
        let key = identity::trial_key(trial);
        let rerun = Rerun { done: opts.force, failed: opts.retry_failed, pruned: opts.retry_pruned };
        match self.store.claim(&key, rerun, |id, _| super::new_record(id, trial, spec, opts))? {
            Claim::Run { record, .. } => {
                let mut r = *record;
                r.status = Status::Pruned;
                r.ended_at = Some(now());
                r.stop_reason = format!(
                    "its configuration was pruned at rung {} (seed {}), before this seed ran",
                    by.at.rung + 1,
                    by.at.seed
                );
                r.pruned = Some(Pruned {
                    rung: by.at.rung + 1,
                    step: 0,
                    metric: pruning.metric.name.clone(),
                    value: by.decision.mean,
                    mean: by.decision.mean,
                    cutoff: by.decision.cutoff.unwrap_or(by.decision.mean),
                });
                self.store.put(&r)?;
                reporter.trial_finished(item.index, &r);
                Ok(TrialResult::Finished(Box::new(r)))
            }
            Claim::Settled { run_id, status, experiment } => {
                reporter.trial_skipped(item.index, trial, run_id, status, Some(&experiment));
                Ok(TrialResult::Skipped { run_id, status })
            }
            Claim::RunningElsewhere { run_id, .. } => {
                reporter.trial_skipped(item.index, trial, run_id, Status::Running, None);
                Ok(TrialResult::Skipped { run_id, status: Status::Running })
            }
        }
    }
}

fn sampler_name(s: &crate::check::search::Sampler) -> &'static str {
    use crate::check::search::Sampler;
    match s {
        Sampler::Grid { .. } => "grid",
        Sampler::Random { .. } => "random",
        Sampler::Tpe { .. } => "tpe",
    }
}

/// The pruner of one running trial: at each rung it reaches, its report and the decision go
/// into the study in one session (a decision already there, from an earlier run of this trial
/// that was interrupted, stands).
struct TrialJudge<'a> {
    search: &'a Search<'a>,
    pruning: &'a Pruning,
    config: usize,
    seed: u64,
    /// Rungs handled by this run.
    reported: Mutex<usize>,
    pruned: Mutex<Option<Pruned>>,
    reporter: &'a dyn Reporter,
}

impl TrialJudge<'_> {
    /// Reports each rung `step` reached and has not reported, judged against the study; the
    /// decision that stops the trial, if one does.
    fn judge_rungs(&self, step: usize, so_far: &Outcome) -> Option<Pruned> {
        let mut reported = self.reported.lock().ok()?;
        let metric = &self.pruning.metric.name;
        let train_loss = so_far.curves.get("train_loss").map_or(&[][..], Vec::as_slice);
        for rung in pruner::rungs_due(self.pruning, *reported, step) {
            *reported = rung + 1;
            let Some(&(_, value)) = so_far.curves.get(metric).and_then(|c| c.last()) else { continue };
            let at = pruner::AtRung {
                config: self.config,
                seed: self.seed,
                rung,
                step: step as u64,
                value,
                loss: train_loss.last().map(|(_, l)| *l),
                loss_before: pruner::loss_before(self.pruning, step, train_loss),
            };
            let s = self.search;
            let decided = s.store.update_study(&s.key, &s.experiment, |study| {
                let r = match study.report(self.config, self.seed, rung) {
                    Some(r) => r.clone(),
                    None => {
                        let r = pruner::report(&at, pruner::judge(self.pruning, study, &at));
                        study.reports.push(r.clone());
                        r
                    }
                };
                (r, study.pruned_at(self.config).cloned())
            });
            let r = match decided {
                Ok((r, pruned)) => {
                    if let (Some(by), Ok(mut known)) = (pruned, s.pruned.lock()) {
                        known.entry(self.config).or_insert(by);
                    }
                    r
                }
                Err(e) => {
                    self.reporter.warning(&format!("the pruner could not record rung {}: {e}", rung + 1));
                    continue;
                }
            };
            if !r.decision.keep {
                return Some(Pruned {
                    rung: rung + 1,
                    step: r.at.step,
                    metric: metric.clone(),
                    value: r.at.value,
                    mean: r.decision.mean,
                    cutoff: r.decision.cutoff.unwrap_or(r.decision.mean),
                });
            }
        }
        None
    }

    /// A configuration is judged by the mean over its seeds, so one pruned through another
    /// seed (whose report at a rung this seed passed moved the mean past the cut-off) stops
    /// this seed too: at its next evaluation where the other seed trains in this process, else
    /// at its next rung (where it reads the study).
    fn pruned_through_another_seed(&self, step: usize, so_far: &Outcome) -> Option<Pruned> {
        let by = self.search.pruned.lock().ok()?.get(&self.config).filter(|r| r.at.seed != self.seed).cloned()?;
        let metric = &self.pruning.metric.name;
        // This seed's own value at that rung (its first evaluation there), else its latest.
        let at = self.pruning.rung_steps().get(by.at.rung).copied().unwrap_or(0) as u64;
        let curve = so_far.curves.get(metric);
        let own = curve.and_then(|c| c.iter().find(|(s, _)| *s >= at).or(c.last())).map(|(_, v)| *v);
        Some(Pruned {
            rung: by.at.rung + 1,
            step: step as u64,
            metric: metric.clone(),
            value: own.unwrap_or(by.decision.mean),
            mean: by.decision.mean,
            cutoff: by.decision.cutoff.unwrap_or(by.decision.mean),
        })
    }
}

impl Judge for TrialJudge<'_> {
    fn stop_here(&self, step: usize, so_far: &Outcome) -> Option<String> {
        let p = self.judge_rungs(step, so_far).or_else(|| self.pruned_through_another_seed(step, so_far))?;
        let reason = p.to_string();
        if let Ok(mut slot) = self.pruned.lock() {
            *slot = Some(p);
        }
        Some(reason)
    }

    fn pruned(&self) -> Option<Pruned> {
        self.pruned.lock().ok()?.clone()
    }
}

/// Each trial's latest run, or for a trial with a pruned run, its latest pruned one: the run
/// the search made of a configuration it pruned, which `ablate` may since have trained to its
/// budget in a later run.
fn pruned_first(summaries: Vec<RunSummary>) -> HashMap<String, RunSummary> {
    let (pruned, others): (Vec<RunSummary>, Vec<RunSummary>) =
        summaries.into_iter().partition(|s| s.status == Status::Pruned);
    let mut runs = latest_by_trial(others);
    runs.extend(latest_by_trial(pruned));
    runs
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::store::study::{AtRung, Decision};
    use crate::sweep::Quiet;

    const SPEC: &str = concat!(
        crate::check::test_specs::tiny_lstm_on_assoc!(),
        r#"experiment lrs {
  task tiny
  model lstm
  train { optimizer = adam(lr = 1e-3), batch = 16, steps = 100, eval_every = 20 }
  search {
    lr in [3e-2, 1e-3]
    seed in 1..2
    sampler = grid
    prune = asha(metric = val_loss, min_steps = 20, rungs = 2, keep = 1/2)
  }
}
"#
    );

    /// A trial's outcome so far with `val_loss` at the given evaluations.
    fn so_far(trial: &crate::check::Trial, val_loss: &[(u64, f64)]) -> Outcome {
        let mut o = Outcome::starting(trial);
        o.curves = BTreeMap::from([("val_loss".to_string(), val_loss.to_vec())]);
        o
    }

    fn pruned_by_seed_2() -> RungReport {
        RungReport {
            at: AtRung { config: 0, seed: 2, rung: 0, step: 20, value: 1.0, loss: None, loss_before: None },
            decision: Decision { keep: false, mean: 1.0, cutoff: Some(0.5), compared: 2, guarded: false },
        }
    }

    /// The configuration `lr = 3e-2`, as `sampler` proposed it.
    fn lr_3e_2(sampler: &str) -> StudyConfig {
        StudyConfig { values: vec![("lr".into(), Value::Float(3e-2))], sampler: sampler.into(), proposed_at: 0.0 }
    }

    fn with_search(test: impl FnOnce(&Search<'_>, &Pruning, &crate::check::Trial)) {
        let program = crate::check::checked_text(SPEC);
        let plan = program.experiments.iter().find(|e| e.name == "lrs").unwrap().search.clone().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let search = Search::new(&store, &plan, "lrs");
        let trial = plan.trial(&[Value::Float(3e-2)], 1).unwrap();
        test(&search, plan.spec.prune.as_ref().unwrap(), &trial);
    }

    fn judge<'a>(search: &'a Search<'a>, pruning: &'a Pruning, reported: usize) -> TrialJudge<'a> {
        TrialJudge {
            search,
            pruning,
            config: 0,
            seed: 1,
            reported: Mutex::new(reported),
            pruned: Mutex::new(None),
            reporter: &Quiet,
        }
    }

    /// A configuration this store's study proposed, whose trial was pruned in the store that
    /// ran it (its run imported here), is reported pruned, by the decision its run holds.
    #[test]
    fn a_proposed_configuration_pruned_in_another_store_is_reported_pruned() {
        with_search(|search, _, trial| {
            (search.store)
                .update_study(&search.key, &search.experiment, |s| s.configs.push(lr_3e_2("random")))
                .unwrap();
            let spec = crate::sweep::SpecSource { path: "s.mem".into(), text: SPEC.into() };
            let mut run = crate::sweep::new_record(1, trial, &spec, &crate::sweep::Options::one_at_a_time());
            run.status = Status::Pruned;
            run.pruned =
                Some(Pruned { rung: 1, step: 20, metric: "val_loss".into(), value: 2.0, mean: 2.0, cutoff: 1.0 });
            search.store.put(&run).unwrap();
            let (study, rows) = search.configurations_run().unwrap();
            assert_eq!(study.pruned_at(0).map(|r| (r.at.rung, r.at.seed)), Some((0, 1)), "{:?}", study.reports);
            let report = crate::report::search::render("lrs", search.spec(), &study, &rows, 60);
            assert!(report.contains("pruned at rung 1"), "{report}");
        });
    }

    /// A study that proposed one configuration twice (as studies did before proposals skipped
    /// the ones tried) shows it once, and says so.
    #[test]
    fn a_configuration_proposed_twice_is_reported_once() {
        with_search(|search, _, _| {
            let config = lr_3e_2("random");
            (search.store)
                .update_study(&search.key, &search.experiment, |s| s.configs.extend([config.clone(), config]))
                .unwrap();
            let (study, rows) = search.configurations_run().unwrap();
            assert_eq!((study.configs.len(), rows.len()), (2, 1));
            let report = crate::report::search::render("lrs", search.spec(), &study, &rows, 60);
            assert!(report.contains("1 of 2 configurations proposed (and 1 proposed again, shown once)"), "{report}");
        });
    }

    #[test]
    fn a_forced_search_forgets_the_earlier_decisions_and_judges_afresh() {
        with_search(|search, _, _| {
            // An earlier pass proposed 3e-2 and pruned it through seed 2 at its first rung.
            search
                .store
                .update_study(&search.key, &search.experiment, |s| {
                    s.configs.push(lr_3e_2("grid"));
                    s.reports.push(pruned_by_seed_2());
                })
                .unwrap();
            let spec = SpecSource { path: "t.mem".into(), text: SPEC.into() };
            let opts = Options { force: true, ..Options::one_at_a_time() };
            let summary = search.run(&spec, &opts, &Quiet, &AtomicBool::new(false)).unwrap();
            assert_eq!(summary.ran, 4, "two configurations of two seeds");
            // Alone at its rung when it got there, 3e-2 goes on; seed 2's report is this pass's.
            let study = search.store.study(&search.key, &search.experiment).unwrap();
            assert!(study.pruned_at(0).is_none(), "{:?}", study.reports);
            assert!(study.report(0, 2, 0).is_some_and(|r| r.decision.keep && r.at.value != 1.0));
        });
    }

    #[test]
    fn a_forced_search_drops_its_trials_checkpoints_and_is_refused_while_one_trains_elsewhere() {
        with_search(|search, _, trial| {
            let config = lr_3e_2("grid");
            search.store.update_study(&search.key, &search.experiment, |s| s.configs.push(config)).unwrap();
            let key = identity::trial_key(trial);
            let spec = SpecSource { path: "t.mem".into(), text: SPEC.into() };
            let opts = Options { force: true, ..Options::one_at_a_time() };
            // Seed 1 of 3e-2 trains in a live process (this one, as far as the store can tell).
            let Ok(Ok(claimed)) = super::super::claim(search.store, &spec, 0, trial, &opts, &Quiet) else {
                panic!("claimed")
            };
            let err = search.run(&spec, &opts, &Quiet, &AtomicBool::new(false)).unwrap_err();
            assert!(matches!(err, SweepError::SearchRunningElsewhere { run, .. } if run == claimed.record.id), "{err}");
            let study = search.store.study(&search.key, &search.experiment).unwrap();
            assert_eq!(study.configs.len(), 1, "the study is as it was");
            // Interrupted with a checkpoint, it trains afresh under --force, not from there.
            let mut interrupted = claimed.record;
            interrupted.status = Status::Interrupted;
            search.store.put(&interrupted).unwrap();
            search.store.save_checkpoint(&key, b"an earlier pass's state").unwrap();
            search.run(&spec, &opts, &Quiet, &AtomicBool::new(false)).unwrap();
            let rerun = search.store.latest_of_trial(&key).unwrap().unwrap();
            assert_eq!(rerun.progress.and_then(|p| p.resumed_from), None);
            assert_eq!(rerun.status, Status::Done);
        });
    }

    #[test]
    fn a_seed_stops_at_its_rung_once_a_seed_of_another_process_pruned_its_configuration() {
        with_search(|search, pruning, trial| {
            search.store.update_study(&search.key, &search.experiment, |s| s.reports.push(pruned_by_seed_2())).unwrap();
            // Alone at the rung, seed 1 (0.4) would go on: its configuration has no competitor.
            let j = judge(search, pruning, 0);
            let why = j.stop_here(20, &so_far(trial, &[(20, 0.4)])).expect("stopped");
            let p = j.pruned().unwrap();
            assert_eq!((p.rung, p.step, p.value, p.mean, p.cutoff), (1, 20, 0.4, 1.0, 0.5), "{why}");
            // Its own report stands in the study beside the deciding one.
            let study = search.store.study(&search.key, &search.experiment).unwrap();
            assert!(study.report(0, 1, 0).is_some_and(|r| r.decision.keep));
        });
    }

    #[test]
    fn a_seed_stops_at_its_next_evaluation_once_a_seed_in_this_process_pruned_its_configuration() {
        with_search(|search, pruning, trial| {
            // Seed 1 passed rung 1 (step 20) and trains on.
            let j = judge(search, pruning, 1);
            assert_eq!(j.stop_here(40, &so_far(trial, &[(20, 0.4), (40, 0.3)])), None);
            search.pruned.lock().unwrap().insert(0, pruned_by_seed_2());
            assert!(j.stop_here(60, &so_far(trial, &[(20, 0.4), (40, 0.3), (60, 0.3)])).is_some());
            let p = j.pruned().unwrap();
            assert_eq!((p.rung, p.step, p.value), (1, 60, 0.4), "its own value at the rung that decided");
            // A configuration pruned through this seed itself is not "another seed's".
            let other = TrialJudge { seed: 2, ..judge(search, pruning, 1) };
            assert_eq!(other.stop_here(60, &so_far(trial, &[(20, 1.0), (40, 1.0), (60, 1.0)])), None);
        });
    }
}
