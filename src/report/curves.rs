//! Learning curves to plot: one series per run, or per group of runs (mean line with a band
//! over the group: min..max or mean ± sample std at each step).

use super::plot::Series;
use crate::query::Field;
use crate::store::{RunRecord, RunSummary};

/// What the band around a group's mean shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Band {
    /// Lowest to highest value over the group's runs.
    Minmax,
    /// Mean ± sample standard deviation (n − 1).
    Std,
}

/// What a curve's x axis measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum XAxis {
    /// Training steps.
    Step,
    /// Seconds of training, at the run's mean rate (its training seconds over its steps;
    /// evaluation time excluded), so runs of different speeds compare by the time they took.
    Seconds,
}

impl XAxis {
    pub fn label(self) -> &'static str {
        match self {
            XAxis::Step => "training step",
            XAxis::Seconds => "training seconds",
        }
    }

    /// Seconds per step of `r` on this axis (1 for steps).
    fn scale(self, r: &RunRecord) -> f64 {
        match self {
            XAxis::Step => 1.0,
            XAxis::Seconds if r.steps_run > 0 => r.train_seconds / r.steps_run as f64,
            XAxis::Seconds => 0.0,
        }
    }
}

/// The metric to plot when none is named: the validation curve of the metric the runs stop on
/// (`stop_when = seq_accuracy >= …` draws `val_seq_accuracy`) if every run has it, else
/// `val_accuracy` if every run has it, else the first curve every run has.
pub fn default_metric(runs: &[RunRecord]) -> Option<String> {
    let first = runs.first()?;
    let common: Vec<&String> = first.curves.keys().filter(|k| runs.iter().all(|r| r.curves.contains_key(*k))).collect();
    let stopped_on = runs.iter().filter_map(|r| r.config.stop_metric()).map(|m| format!("val_{m}"));
    let stopped_on: Vec<String> = stopped_on.collect();
    stopped_on
        .into_iter()
        .find(|m| common.contains(&m))
        .or_else(|| common.iter().find(|k| k.as_str() == "val_accuracy").or(common.first()).map(|k| k.to_string()))
}

/// `12: quickstart_stm d=48 seed=1`.
pub fn run_label(r: &RunRecord) -> String {
    let swept = crate::value::assignments(&r.config.swept);
    if swept.is_empty() {
        format!("{}: {}", r.id, r.config.experiment)
    } else {
        format!("{}: {} {swept}", r.id, r.config.experiment)
    }
}

pub fn per_run(runs: &[RunRecord], metric: &str, x: XAxis) -> Vec<Series> {
    runs.iter()
        .filter_map(|r| {
            let c = r.curves.get(metric)?;
            let scale = x.scale(r);
            Some(Series {
                label: run_label(r),
                points: c.iter().map(|(s, v)| (*s as f64 * scale, *v)).collect(),
                band: None,
            })
        })
        .collect()
}

/// One series per distinct value of `keys` (fields as in `memctl runs`): the mean over the
/// group's runs at each step where any has a point, with a band. In seconds, a group's steps
/// are placed at its runs' mean rate.
pub fn per_group(runs: &[RunRecord], metric: &str, keys: &[(String, Field)], band: Band, x: XAxis) -> Vec<Series> {
    let mut groups: Vec<(String, Vec<&RunRecord>)> = vec![];
    for r in runs {
        if !r.curves.contains_key(metric) {
            continue;
        }
        let s = RunSummary::of(r);
        let label = super::scatter::group_label(&s, keys);
        match groups.iter_mut().find(|(l, _)| *l == label) {
            Some((_, members)) => members.push(r),
            None => groups.push((label, vec![r])),
        }
    }
    groups.into_iter().map(|(label, members)| mean_series(label, &members, metric, band, x)).collect()
}

/// One group's line: the mean of its runs' `metric` curve at each step where any has a point,
/// with a band, labelled `label (n runs)`. In seconds, the steps are placed at the runs' mean
/// rate.
pub fn mean_series(label: String, members: &[&RunRecord], metric: &str, band: Band, x: XAxis) -> Series {
    fn curve<'r>(r: &'r RunRecord, metric: &str) -> &'r [(u64, f64)] {
        r.curves.get(metric).map(Vec::as_slice).unwrap_or_default()
    }
    let mut steps: Vec<u64> = members.iter().flat_map(|r| curve(r, metric).iter().map(|(s, _)| *s)).collect();
    steps.sort_unstable();
    steps.dedup();
    let scale = members.iter().map(|r| x.scale(r)).sum::<f64>() / members.len().max(1) as f64;
    let mut points = vec![];
    let mut bands = vec![];
    for step in steps {
        let values: Vec<f64> =
            members.iter().filter_map(|r| curve(r, metric).iter().find(|(s, _)| *s == step).map(|(_, v)| *v)).collect();
        let (mean, lo, hi) = spread(&values, band);
        let at = step as f64 * scale;
        points.push((at, mean));
        bands.push((at, lo, hi));
    }
    Series {
        label: format!("{label} ({} run{})", members.len(), if members.len() == 1 { "" } else { "s" }),
        points,
        band: Some(bands),
    }
}

/// Mean and band edges of values at one step (a single value: a band of zero width).
pub fn spread(values: &[f64], band: Band) -> (f64, f64, f64) {
    let n = values.len() as f64;
    let mean = values.iter().sum::<f64>() / n;
    match band {
        Band::Minmax => {
            let lo = values.iter().copied().fold(f64::INFINITY, f64::min);
            let hi = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            (mean, lo, hi)
        }
        Band::Std => {
            let std = if values.len() > 1 {
                (values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt()
            } else {
                0.0
            };
            (mean, mean - std, mean + std)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spread_is_mean_with_min_max_or_sample_std() {
        let (m, lo, hi) = spread(&[1.0, 2.0, 6.0], Band::Minmax);
        assert_eq!((m, lo, hi), (3.0, 1.0, 6.0));
        // Sample variance: ((1-3)² + (2-3)² + (6-3)²) / 2 = 7.
        let (m, lo, hi) = spread(&[1.0, 2.0, 6.0], Band::Std);
        assert_eq!(m, 3.0);
        assert!((hi - 3.0 - 7f64.sqrt()).abs() < 1e-12 && (3.0 - lo - 7f64.sqrt()).abs() < 1e-12);
        assert_eq!(spread(&[4.0], Band::Std), (4.0, 4.0, 4.0));
    }

    #[test]
    fn the_default_curve_is_the_metric_the_runs_stop_on() {
        let mut r = crate::report::selection::tests::run(1, "t1", "h", &[], 0.5);
        r.curves.clear();
        r.config.train.remove("stop_when");
        for m in ["val_accuracy", "val_loss", "val_seq_accuracy"] {
            r.curves.insert(m.into(), vec![(125, 0.5)]);
        }
        assert_eq!(default_metric(std::slice::from_ref(&r)).as_deref(), Some("val_accuracy"));
        r.config.train.insert("stop_when".into(), crate::value::Value::Str("seq_accuracy >= 0.995".into()));
        assert_eq!(default_metric(std::slice::from_ref(&r)).as_deref(), Some("val_seq_accuracy"));
        // A run without that curve: the curve every run has.
        let mut other = r.clone();
        other.curves.remove("val_seq_accuracy");
        assert_eq!(default_metric(&[r, other]).as_deref(), Some("val_accuracy"));
    }
}
