//! `memctl doctor --check`: each model family's training on a device against the CPU's.
//!
//! A GPU build can open its device and still compute wrong numbers (kernels from the wrong
//! toolkit, a reduction that loses precision, a replayed CUDA graph that reads a stale
//! buffer). CI has no GPU, so the check lives in the binary, for a user to run on their own
//! device before trusting it. For every experiment of `specs/bench/device_check.mem` (one
//! small configuration of STM, LSTM, RMC, LSAM, NAM-TM and PKM, compiled in), it reports the
//! largest relative difference from the CPU
//! - of the first step's loss and every parameter's gradient norm, and
//! - of the losses of the first few training steps (on CUDA, steps from the third on are
//!   replayed from a CUDA graph, so this checks the replay too), and
//! - of three evaluations of the trained model's loss on the same batch (with `eval_graph` on
//!   CUDA, the second is captured and the third replayed).
//!
//! The device runs candle's autograd (the path every device takes); the CPU runs its own
//! default, memctl's tape with fused manual backward passes. On the CPU itself the check
//! therefore compares the two gradient methods.

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};

use candle_core::{DType, Device, Result};

use crate::bench::dump;
use crate::check::Trial;
use crate::train::{Autograd, Stepper, data_seed};

/// The check's spec and the model files it uses, as compiled in.
const FILES: [(&str, &str); 7] = [
    ("specs/bench/device_check.mem", include_str!("../../specs/bench/device_check.mem")),
    ("specs/models/stm.mem", include_str!("../../specs/models/stm.mem")),
    ("specs/models/lstm.mem", include_str!("../../specs/models/lstm.mem")),
    ("specs/models/rmc.mem", include_str!("../../specs/models/rmc.mem")),
    ("specs/models/lsam.mem", include_str!("../../specs/models/lsam.mem")),
    ("specs/models/namtm.mem", include_str!("../../specs/models/namtm.mem")),
    ("specs/models/pkm.mem", include_str!("../../specs/models/pkm.mem")),
];

/// Differences the check accepts, relative: f32 sums in another order stay well inside.
pub const TOLERANCE: f64 = 1e-4;

/// One model's result.
#[derive(Debug, Clone)]
pub struct ModelCheck {
    pub experiment: String,
    /// Largest relative difference of the first step's loss and gradient norms.
    pub first_step: f64,
    /// Largest relative difference of the training losses, step by step.
    pub training: f64,
    pub steps: usize,
    /// How the device ran its steps (`Stepper::replay_status`).
    pub step_mode: String,
    /// Largest relative difference of the evaluations' losses after training.
    pub evaluation: f64,
    /// How the device ran its evaluations (`Stepper::eval_replay_status`).
    pub eval_mode: String,
}

impl ModelCheck {
    pub fn passed(&self) -> bool {
        self.first_step <= TOLERANCE && self.training <= TOLERANCE && self.evaluation <= TOLERANCE
    }
}

/// Evaluations after training: the first of a batch shape runs eagerly, the second is captured,
/// the third replayed (when evaluations are replayed at all).
pub const EVALUATIONS: usize = 3;

/// The compiled-in check experiments.
pub fn trials() -> std::result::Result<Vec<Trial>, String> {
    let spec = crate::lang::load_with(Path::new(FILES[0].0), &Embedded).map_err(|e| e.render(false))?;
    let program = crate::check::check(&spec, &crate::prims::Primitives).map_err(|d| d.render(&spec.sources, false))?;
    Ok(program.experiments.into_iter().filter_map(|e| e.trials.into_iter().next()).collect())
}

/// Checks `trial` on `device` against the CPU over `steps` training steps.
pub fn check(trial: &Trial, device: &Device, steps: usize) -> Result<ModelCheck> {
    let here = dump::first_step_with(trial, device, Autograd::Candle)?;
    let cpu = dump::first_step(trial, &Device::Cpu)?;
    let mut first_step = relative(here.loss, cpu.loss, cpu.loss.abs());
    let largest_norm = cpu.grad_norms.values().fold(0.0f64, |m, &n| m.max(n));
    for (name, norm) in &cpu.grad_norms {
        // A norm far below the largest is noise in both: compare against the largest's scale.
        let floor = 1e-3 * largest_norm;
        first_step = first_step.max(relative(here.grad_norms[name], *norm, norm.max(floor)));
    }
    let here = losses(trial, device, Autograd::Candle, steps)?;
    let cpu = losses(trial, &Device::Cpu, Autograd::default_for(&Device::Cpu), steps)?;
    let largest = |a: &[f64], b: &[f64]| a.iter().zip(b).map(|(a, b)| relative(*a, *b, b.abs())).fold(0.0, f64::max);
    Ok(ModelCheck {
        experiment: trial.config.experiment.clone(),
        first_step,
        training: largest(&here.training, &cpu.training),
        steps,
        step_mode: here.step_mode,
        evaluation: largest(&here.evaluations, &cpu.evaluations),
        eval_mode: here.eval_mode,
    })
}

/// What a device computed for the check's run, and how.
struct Losses {
    training: Vec<f64>,
    step_mode: String,
    evaluations: Vec<f64>,
    eval_mode: String,
}

/// The losses of `steps` training steps on one fixed batch, then of [`EVALUATIONS`]
/// evaluations of it, and how they ran.
fn losses(trial: &Trial, device: &Device, autograd: Autograd, steps: usize) -> Result<Losses> {
    let mut stepper = Stepper::with(trial, device, DType::F32, autograd)?;
    let mut data = trial.task.data(data_seed(trial.config.seed), device)?;
    let batch = data.train_batch(trial.config.train.batch)?;
    let training = (0..steps).map(|_| stepper.step(&batch)).collect::<Result<Vec<_>>>()?;
    let evaluations = (0..EVALUATIONS).map(|_| stepper.evaluation_loss(&batch)).collect::<Result<Vec<_>>>()?;
    Ok(Losses { training, step_mode: stepper.replay_status(), evaluations, eval_mode: stepper.eval_replay_status() })
}

/// `|a − b| / scale`; NaN where either is not finite, which fails the check.
fn relative(a: f64, b: f64, scale: f64) -> f64 {
    if !a.is_finite() || !b.is_finite() {
        return f64::NAN;
    }
    if a == b { 0.0 } else { (a - b).abs() / scale.max(f64::MIN_POSITIVE) }
}

/// Reads the compiled-in files; `use` paths are resolved lexically (`specs/bench/../models`).
struct Embedded;

impl crate::lang::SourceReader for Embedded {
    fn read(&self, path: &Path) -> std::io::Result<(PathBuf, Vec<u8>)> {
        let mut normal = PathBuf::new();
        for part in path.components() {
            match part {
                Component::ParentDir => {
                    normal.pop();
                }
                Component::CurDir => {}
                other => normal.push(other),
            }
        }
        let files: BTreeMap<&str, &str> = FILES.into_iter().collect();
        match normal.to_str().and_then(|p| files.get(p)) {
            Some(text) => Ok((normal, text.as_bytes().to_vec())),
            None => Err(std::io::Error::new(std::io::ErrorKind::NotFound, "not compiled into the device check")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_check_covers_every_model_family() {
        let names: Vec<String> = trials().unwrap().iter().map(|t| t.config.experiment.clone()).collect();
        assert_eq!(names, ["check_stm", "check_lstm", "check_rmc", "check_lsam", "check_namtm", "check_pkm"]);
    }

    /// On the CPU the check compares candle's autograd with memctl's tape: they must agree.
    #[test]
    fn the_cpu_passes_its_own_check() {
        for trial in trials().unwrap() {
            let c = check(&trial, &Device::Cpu, 3).unwrap();
            assert!(c.passed(), "{c:?}");
        }
    }

    #[test]
    fn a_difference_beyond_the_tolerance_fails() {
        let c = |first_step, evaluation| ModelCheck {
            experiment: "x".into(),
            first_step,
            training: 0.0,
            steps: 1,
            step_mode: String::new(),
            evaluation,
            eval_mode: String::new(),
        };
        assert!(c(5e-5, 0.0).passed());
        assert!(!c(2e-4, 0.0).passed());
        assert!(!c(f64::NAN, 0.0).passed());
        assert!(!c(0.0, 2e-4).passed(), "an evaluation beyond the tolerance fails the check");
    }
}
