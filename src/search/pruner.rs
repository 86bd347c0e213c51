//! Whether a trial that reached a rung goes on. A configuration is judged by the mean of its
//! seeds that have reached the rung, against the other configurations' means there:
//!
//! - **ASHA** (asynchronous successive halving, Li et al. 2020, as Optuna's
//!   `SuccessiveHalvingPruner`): it goes on if it is among the best `keep` of the
//!   configurations at the rung (at least the best one), so the first to arrive always does.
//! - **Median** (Optuna's `MedianPruner`): it goes on if it is no worse than the median of the
//!   others at the rung.
//!
//! The plateau guard: rungs start at `min_steps`, so nothing is judged before; and with
//! `patience`, a trial whose training loss fell by more than that fraction over the last
//! [`guard_window`](Pruning::guard_window) steps (the first rung's span, the same before every
//! rung) goes on whatever its metric, because memory networks often sit on a plateau of the
//! metric (the trivial 25 % of associative retrieval) while the loss still moves. A window of
//! fixed length asks the same rate of fall at every rung: measured since the previous rung, a
//! slow learner's fall over rungs a factor of 3 apart kept nearly every trial (docs/search.md).

use std::collections::BTreeMap;

use super::outcome::compare;
use crate::check::search::{PruneRule, Pruning};
pub use crate::store::study::AtRung;
use crate::store::study::{Decision, RungReport, StudyRecord};

/// The decision on `at`, given the reports already in `study` (a report of the same trial and
/// rung is replaced by `at`).
pub fn judge(pruning: &Pruning, study: &StudyRecord, at: &AtRung) -> Decision {
    let mut values: BTreeMap<usize, Vec<f64>> = BTreeMap::new();
    for r in study
        .reports
        .iter()
        .map(|r| &r.at)
        .filter(|r| r.rung == at.rung && !(r.config == at.config && r.seed == at.seed))
    {
        values.entry(r.config).or_default().push(r.value);
    }
    values.entry(at.config).or_default().push(at.value);
    let means: BTreeMap<usize, f64> =
        values.iter().map(|(c, v)| (*c, v.iter().sum::<f64>() / v.len() as f64)).collect();
    let mean = means[&at.config];
    let metric = &pruning.metric;
    let cutoff = match pruning.rule {
        PruneRule::Asha { keep } => {
            let mut all: Vec<f64> = means.values().copied().collect();
            all.sort_by(|a, b| compare(*a, *b, metric));
            let kept = ((all.len() as f64 * keep).floor() as usize).max(1);
            (all.len() > 1).then(|| all[kept - 1])
        }
        PruneRule::Median => {
            let mut others: Vec<f64> = means.iter().filter(|(c, _)| **c != at.config).map(|(_, v)| *v).collect();
            others.sort_by(|a, b| compare(*a, *b, metric));
            match others.len() {
                0 => None,
                n if n % 2 == 1 => Some(others[n / 2]),
                n => Some((others[n / 2 - 1] + others[n / 2]) / 2.0),
            }
        }
    };
    let passes = cutoff.is_none_or(|c| !mean.is_nan() && !metric.better(c, mean));
    let falling = match (at.loss, at.loss_before, pruning.patience) {
        (Some(now), Some(before), Some(patience)) if before > 0.0 => (before - now) / before > patience,
        _ => false,
    };
    Decision { keep: passes || falling, mean, cutoff, compared: means.len(), guarded: !passes && falling }
}

/// The rungs a trial at `step` has reached and not yet reported, in order.
pub fn rungs_due(pruning: &Pruning, reported: usize, step: usize) -> Vec<usize> {
    pruning.rung_steps().iter().enumerate().skip(reported).filter(|(_, s)| **s <= step).map(|(k, _)| k).collect()
}

/// The training loss a trial judged at `step` had [`guard_window`](Pruning::guard_window)
/// steps before: the last point of the curve at or before that step, else its first point.
pub fn loss_before(pruning: &Pruning, step: usize, train_loss: &[(u64, f64)]) -> Option<f64> {
    let before = step.saturating_sub(pruning.guard_window()) as u64;
    train_loss.iter().rev().find(|(s, _)| *s <= before).or(train_loss.first()).map(|(_, v)| *v)
}

/// `at` with its decision, as the study keeps it.
pub fn report(at: &AtRung, decision: Decision) -> RungReport {
    RungReport { at: at.clone(), decision }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::search::Metric;

    fn pruning(rule: PruneRule, patience: Option<f64>) -> Pruning {
        let factor = match rule {
            PruneRule::Asha { keep } => 1.0 / keep,
            PruneRule::Median => 2.0,
        };
        Pruning {
            rule,
            metric: Metric { name: "val_accuracy".into(), higher_is_better: true, span: Default::default() },
            min_steps: 100,
            rungs: 3,
            factor,
            patience,
            every: None,
        }
    }

    fn at(config: usize, seed: u64, value: f64) -> AtRung {
        AtRung { config, seed, rung: 0, step: 100, value, loss: Some(1.0), loss_before: Some(1.0) }
    }

    /// Adds trials' reports at rung 0 in order, each judged on those before it.
    fn run(p: &Pruning, trials: &[(usize, u64, f64)]) -> (StudyRecord, Vec<Decision>) {
        let mut study = StudyRecord::new("e");
        let mut decisions = vec![];
        for &(c, s, v) in trials {
            let a = at(c, s, v);
            let d = judge(p, &study, &a);
            study.reports.push(report(&a, d.clone()));
            decisions.push(d);
        }
        (study, decisions)
    }

    #[test]
    fn asha_keeps_the_first_configuration_and_then_only_the_best_third() {
        let p = pruning(PruneRule::Asha { keep: 1.0 / 3.0 }, None);
        let (_, d) = run(&p, &[(0, 1, 0.5), (1, 1, 0.4), (2, 1, 0.6), (3, 1, 0.55), (4, 1, 0.7), (5, 1, 0.3)]);
        let keeps: Vec<bool> = d.iter().map(|d| d.keep).collect();
        // 0.5 alone; 0.4 below 0.5 (1 of 2 kept); 0.6 best of 3; 0.55 below 0.6 (1 of 4);
        // 0.7 best; 0.3 below the second best of 6 (0.6).
        assert_eq!(keeps, [true, false, true, false, true, false]);
        assert_eq!(d[5].cutoff, Some(0.6));
        assert_eq!(d[5].compared, 6);
    }

    #[test]
    fn a_configuration_is_judged_by_the_mean_of_its_seeds() {
        let p = pruning(PruneRule::Asha { keep: 0.5 }, None);
        // Config 0 at 0.5; config 1's first seed at 0.6 (kept), its second at 0.3: mean 0.45,
        // below config 0's 0.5, so the second seed is pruned although 0.3 is its own value.
        let (_, d) = run(&p, &[(0, 1, 0.5), (1, 1, 0.6), (1, 2, 0.3)]);
        assert!(d[1].keep);
        assert!(!d[2].keep);
        assert!((d[2].mean - 0.45).abs() < 1e-12, "{}", d[2].mean);
        assert_eq!(d[2].cutoff, Some(0.5));
    }

    #[test]
    fn the_median_rule_stops_a_configuration_below_the_median_of_the_others() {
        let p = pruning(PruneRule::Median, None);
        let (_, d) = run(&p, &[(0, 1, 0.5), (1, 1, 0.7), (2, 1, 0.6), (3, 1, 0.59)]);
        // 0.7 ≥ 0.5; 0.6 ≥ median(0.5, 0.7) = 0.6; 0.59 < median(0.5, 0.7, 0.6) = 0.6.
        assert_eq!(d.iter().map(|d| d.keep).collect::<Vec<_>>(), [true, true, true, false]);
        assert_eq!(d[3].cutoff, Some(0.6));
    }

    /// On associative retrieval's plateau every configuration reads 25 %; one whose loss
    /// still falls fast is kept by the guard, one whose loss is flat is not.
    #[test]
    fn the_plateau_guard_keeps_a_trial_whose_loss_still_falls() {
        let p = pruning(PruneRule::Asha { keep: 1.0 / 3.0 }, Some(0.05));
        let mut study = StudyRecord::new("e");
        let first = at(0, 1, 0.30);
        study.reports.push(report(&first, judge(&p, &study, &first)));
        let falling = AtRung { loss: Some(1.30), loss_before: Some(1.386), ..at(1, 1, 0.25) };
        let d = judge(&p, &study, &falling);
        assert!(d.keep && d.guarded, "{d:?}");
        let flat = AtRung { loss: Some(1.38), loss_before: Some(1.386), ..at(2, 1, 0.25) };
        let d = judge(&p, &study, &flat);
        assert!(!d.keep && !d.guarded, "{d:?}");
    }

    /// Optuna's `MedianPruner` with `interval_steps`: with `every`, the median rule judges at
    /// every evaluation from `min_steps` on, so a configuration that falls behind between two
    /// of the rungs `factor` apart is stopped there, not at the next one.
    #[test]
    fn the_median_rule_with_every_judges_at_each_evaluation_from_min_steps() {
        let mut p = Pruning { every: Some(25), ..pruning(PruneRule::Median, None) };
        p.fit_to(210);
        assert_eq!(p.rung_steps(), [100, 125, 150, 175, 200]);
        assert_eq!(rungs_due(&p, 0, 99), Vec::<usize>::new());
        assert_eq!(rungs_due(&p, 1, 125), [1]);
        let curve = [(50, 2.0), (75, 1.8), (100, 1.5), (125, 1.4)];
        assert_eq!(loss_before(&p, 100, &curve), Some(1.8), "the first rung's loss is measured from step 75");
        assert_eq!(loss_before(&p, 125, &curve), Some(1.5), "each later one's over the same 25 steps");
        // Two configurations ahead at every evaluation; a third level with them until step
        // 150, then behind: it goes on at 100 and 125 and stops at 150 (rung 3 of 5).
        let mut study = StudyRecord::new("e");
        let mut stopped = None;
        for (rung, step) in p.rung_steps().into_iter().enumerate() {
            for (config, value) in [(0, 0.5), (1, 0.6), (2, if step < 150 { 0.55 } else { 0.4 })] {
                let a = AtRung { config, seed: 1, rung, step: step as u64, value, loss: None, loss_before: None };
                let d = judge(&p, &study, &a);
                if config == 2 && !d.keep && stopped.is_none() {
                    stopped = Some((rung, step, d.cutoff));
                }
                study.reports.push(report(&a, d));
            }
        }
        assert_eq!(stopped, Some((2, 150, Some(0.55))), "the median of 0.5 and 0.6");
    }

    #[test]
    fn rungs_start_at_min_steps_and_grow_by_the_factor() {
        let p = pruning(PruneRule::Asha { keep: 1.0 / 3.0 }, None);
        assert_eq!(p.rung_steps(), [100, 300, 900]);
        assert_eq!(rungs_due(&p, 0, 99), Vec::<usize>::new());
        assert_eq!(rungs_due(&p, 0, 350), [0, 1]);
        assert_eq!(rungs_due(&p, 1, 350), [1]);
        // The guard's window is the first rung's span, 100 − 100 / 3 ≈ 67 steps, at every rung.
        assert_eq!(p.guard_window(), 67);
        let curve = [(20, 2.0), (40, 1.8), (60, 1.5), (100, 1.4), (240, 1.3), (300, 1.2)];
        // Rung 0 at step 100: from step 33, the point at 20.
        assert_eq!(loss_before(&p, 100, &curve), Some(2.0));
        // Rung 1 at step 300: from step 233, the point at 100 (not rung 0's step).
        assert_eq!(loss_before(&p, 300, &curve), Some(1.4));
        // Before the curve's first point: that point.
        assert_eq!(loss_before(&p, 50, &curve), Some(2.0));
    }
}
