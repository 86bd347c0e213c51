//! A search's configurations with their runs, as `memctl search-report` shows them.

use crate::store::Status;
use crate::value::Value;

/// One configuration of a study and the latest run of each of its seeds.
#[derive(Clone, Debug, PartialEq)]
pub struct ConfigRuns {
    /// Its index in the study.
    pub config: usize,
    /// A value per searched name, in the search's order.
    pub values: Vec<Value>,
    pub sampler: String,
    pub seeds: Vec<SeedRun>,
    /// The rung (1 for the first) at which it was pruned, if it was.
    pub pruned_at: Option<usize>,
}

/// The latest run of one seed of a configuration (none yet: `run` is `None`).
#[derive(Clone, Debug, PartialEq)]
pub struct SeedRun {
    pub seed: u64,
    pub run: Option<u64>,
    pub status: Option<Status>,
    pub steps_run: u64,
    /// The searched metric at the end (the last evaluation for a pruned run).
    pub metric: Option<f64>,
    /// The test metric of the same name at the end (`accuracy` for `val_accuracy`), for a done run.
    pub test: Option<f64>,
}

impl ConfigRuns {
    /// Whether every seed's run is done.
    pub fn finished(&self) -> bool {
        !self.seeds.is_empty() && self.seeds.iter().all(|s| s.status == Some(Status::Done))
    }

    /// Training steps its runs took.
    pub fn steps(&self) -> u64 {
        self.seeds.iter().map(|s| s.steps_run).sum()
    }
}

/// The mean and the sample standard deviation (0 for one value) of the finite values present.
pub fn mean_sd(values: impl IntoIterator<Item = Option<f64>>) -> Option<MeanSd> {
    let v: Vec<f64> = values.into_iter().flatten().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return None;
    }
    let mean = v.iter().sum::<f64>() / v.len() as f64;
    let var = if v.len() > 1 { v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (v.len() - 1) as f64 } else { 0.0 };
    Some(MeanSd { mean, sd: var.sqrt(), n: v.len() })
}

/// A mean over seeds, its sample standard deviation (0 for one value) and how many values.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MeanSd {
    pub mean: f64,
    pub sd: f64,
    pub n: usize,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mean_and_spread_skip_missing_values() {
        assert_eq!(mean_sd([Some(1.0), None, Some(3.0)]), Some(MeanSd { mean: 2.0, sd: 2f64.sqrt(), n: 2 }));
        assert_eq!(mean_sd([Some(0.5), Some(f64::NAN)]), Some(MeanSd { mean: 0.5, sd: 0.0, n: 1 }));
        assert_eq!(mean_sd([None]), None);
    }
}
