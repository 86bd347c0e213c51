//! `memctl doctor --check`'s check of the optimisers' updates: a few updates of one parameter
//! on a device against the same updates on the CPU, for every optimiser the papers use.
//!
//! The model checks (`device_check`) train with RMSprop, Adam and SGD, but their small
//! gradients never reach the clamp of clipping by value, which on CUDA the fused updates
//! (`kernels::cuda::optim::optim_update`) apply inside their kernel. Here the gradients run to ±1
//! and the clamp is at 0.5, the parameter has more elements than one block of threads, and SGD's
//! second and third updates run with the momentum buffer its first one made.

use candle_core::{DType, Device, Result, Tensor, Var};

use super::sums_check::pseudo_random;
use crate::train::optim;
use crate::train_config::{OptimizerKind, TrainConfig};

/// Each case: a name, the optimiser, its momentum (RMSprop, SGD) or weight decay (Adam), and
/// the clamp of clipping by value.
pub(super) const CASES: &[(&str, OptimizerKind, f64, Option<f64>)] = &[
    ("rmsprop", OptimizerKind::RmsProp, 0.9, Some(0.5)),
    ("rmsprop, no momentum", OptimizerKind::RmsProp, 0.0, None),
    ("adam", OptimizerKind::Adam, 0.0, Some(0.5)),
    ("adam, decay", OptimizerKind::Adam, 0.01, None),
    ("sgd", OptimizerKind::Sgd, 0.9, Some(0.5)),
];

/// Elements of the parameter: an odd number, more than one block of 1 024 threads.
const ELEMENTS: usize = 3001;

/// Updates per case.
const UPDATES: usize = 3;

/// The largest difference over every case, between the parameter after [`UPDATES`] updates on
/// `device` and on the CPU, relative to the largest change the CPU's updates made to it; and
/// how many cases ran.
pub fn check(device: &Device) -> Result<(f64, usize)> {
    let mut worst = 0f64;
    for (case, &(_, kind, setting, clamp)) in CASES.iter().enumerate() {
        let start = pseudo_random(ELEMENTS, 100 + case as u64);
        let gradients: Vec<Vec<f32>> =
            (0..UPDATES).map(|u| pseudo_random(ELEMENTS, 200 + (case * UPDATES + u) as u64)).collect();
        let here = updated(device, kind, setting, clamp, &start, &gradients)?;
        let cpu = updated(&Device::Cpu, kind, setting, clamp, &start, &gradients)?;
        let moved = cpu.iter().zip(&start).map(|(p, s)| (f64::from(*p) - f64::from(*s)).abs()).fold(0.0, f64::max);
        let difference = here
            .iter()
            .zip(&cpu)
            .map(|(a, b)| (f64::from(*a) - f64::from(*b)).abs() / moved.max(f64::MIN_POSITIVE))
            .fold(0.0, |w: f64, d| if d.is_nan() || w.is_nan() { f64::NAN } else { w.max(d) });
        worst = if difference.is_nan() { f64::NAN } else { worst.max(difference) };
    }
    Ok((worst, CASES.len()))
}

/// The parameter `start` after one update by each of `gradients` on `device`, in f32.
fn updated(
    device: &Device,
    kind: OptimizerKind,
    setting: f64,
    clamp: Option<f64>,
    start: &[f32],
    gradients: &[Vec<f32>],
) -> Result<Vec<f32>> {
    let p = Var::from_tensor(&Tensor::from_slice(start, start.len(), device)?)?;
    let mut opt = optim::build(&config(kind, setting), vec![p.clone()])?;
    for g in gradients {
        opt.step(&[Some(Tensor::from_slice(g, g.len(), device)?)], clamp)?;
    }
    p.as_tensor().to_dtype(DType::F32)?.to_vec1::<f32>()
}

/// The settings of one case: lr 1e-2 (large enough for the updates to move the parameter by
/// far more than its rounding), PyTorch's other defaults.
fn config(optimizer: OptimizerKind, setting: f64) -> TrainConfig {
    let mut c = TrainConfig::plain(optimizer, 1e-2);
    match optimizer {
        OptimizerKind::Adam => c.weight_decay = setting,
        _ => c.momentum = setting,
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The CPU's updates against its own differ by exactly 0, stricter than the check's tolerance.
    #[test]
    fn on_the_cpu_the_check_finds_no_difference() -> Result<()> {
        assert_eq!(check(&Device::Cpu)?.0, 0.0);
        Ok(())
    }

    /// The check compares something: every case moves the parameter, and the clamp binds
    /// (a clamped update differs from an unclamped one).
    #[test]
    fn every_case_moves_the_parameter_and_the_clamp_binds() -> Result<()> {
        for &(name, kind, setting, clamp) in CASES {
            let start = pseudo_random(ELEMENTS, 1);
            let gradients: Vec<Vec<f32>> = (0..UPDATES).map(|u| pseudo_random(ELEMENTS, 2 + u as u64)).collect();
            let after = updated(&Device::Cpu, kind, setting, clamp, &start, &gradients)?;
            assert!(after.iter().zip(&start).any(|(a, s)| (a - s).abs() > 1e-3), "{name}: the parameter did not move");
            if clamp.is_some() {
                let unclamped = updated(&Device::Cpu, kind, setting, None, &start, &gradients)?;
                assert_ne!(after, unclamped, "{name}: the clamp changed nothing");
            }
        }
        Ok(())
    }
}
