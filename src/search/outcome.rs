//! What a configuration achieved, for the sampler to learn from: how far it got (finished, or
//! pruned at a rung) and its metric there. Configurations compare by how far they got first
//! (a finished one beats any pruned one), then by the metric, as Optuna's TPE ranks pruned
//! trials.

use std::cmp::Ordering;

use crate::check::search::Metric;

/// How far a configuration got.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Stage {
    /// A seed failed: the worst.
    Failed,
    /// Pruned at this rung (0 for the first).
    Pruned(usize),
    /// Every seed finished.
    Finished,
}

impl Stage {
    fn level(self) -> i64 {
        match self {
            Stage::Failed => -1,
            Stage::Pruned(r) => r as i64,
            Stage::Finished => i64::MAX,
        }
    }
}

/// A configuration's result: its index in the study, how far it got and its mean metric there.
#[derive(Clone, Debug, PartialEq)]
pub struct ConfigOutcome {
    pub config: usize,
    pub stage: Stage,
    /// The mean over its seeds (NaN when unknown, as for a failed one).
    pub value: f64,
}

/// Best first: further stage, then better metric (NaN last), then lower index.
pub fn rank(outcomes: &mut [ConfigOutcome], metric: &Metric) {
    outcomes.sort_by(|a, b| {
        b.stage
            .level()
            .cmp(&a.stage.level())
            .then_with(|| compare(a.value, b.value, metric))
            .then_with(|| a.config.cmp(&b.config))
    });
}

/// `Less` when `a` is better.
pub fn compare(a: f64, b: f64, metric: &Metric) -> Ordering {
    match (a.is_nan(), b.is_nan()) {
        (true, true) => Ordering::Equal,
        (true, false) => Ordering::Greater,
        (false, true) => Ordering::Less,
        _ if metric.better(a, b) => Ordering::Less,
        _ if metric.better(b, a) => Ordering::Greater,
        _ => Ordering::Equal,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn accuracy() -> Metric {
        Metric { name: "val_accuracy".into(), higher_is_better: true, span: Default::default() }
    }

    #[test]
    fn a_finished_configuration_ranks_above_a_pruned_one_whatever_their_metrics() {
        let mut o = vec![
            ConfigOutcome { config: 0, stage: Stage::Pruned(0), value: 0.9 },
            ConfigOutcome { config: 1, stage: Stage::Finished, value: 0.3 },
            ConfigOutcome { config: 2, stage: Stage::Pruned(1), value: 0.5 },
            ConfigOutcome { config: 3, stage: Stage::Failed, value: f64::NAN },
            ConfigOutcome { config: 4, stage: Stage::Finished, value: 0.6 },
        ];
        rank(&mut o, &accuracy());
        assert_eq!(o.iter().map(|c| c.config).collect::<Vec<_>>(), [4, 1, 2, 0, 3]);
    }
}
