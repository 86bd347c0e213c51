//! `memctl bench --dump FILE`: the initial parameters, one batch and the first step's loss
//! and gradient norms, as JSON, so that another implementation (e.g. the PyTorch reference,
//! `bench/compare_stm_torch.py`) can check it computes the same step.

use std::collections::BTreeMap;

use candle_core::{DType, Device};
use serde::Serialize;

use crate::check::Trial;
use crate::train::{Autograd, Stepper, data_seed};

#[derive(Serialize)]
pub struct Dump {
    /// name → (shape, row-major values).
    pub params: BTreeMap<String, (Vec<usize>, Vec<f32>)>,
    pub inputs: (Vec<usize>, Vec<f32>),
    pub targets: (Vec<usize>, Vec<f32>),
    pub loss: f64,
    /// name → L2 norm of d loss / d param.
    pub grad_norms: BTreeMap<String, f64>,
}

/// The first training step of `trial`, recorded (float inputs and targets only), with the
/// gradients computed as training computes them on `device` (`Autograd::default_for`).
pub fn first_step(trial: &Trial, device: &Device) -> candle_core::Result<Dump> {
    first_step_with(trial, device, Autograd::default_for(device))
}

/// [`first_step`] with a chosen gradient method.
pub fn first_step_with(trial: &Trial, device: &Device, autograd: Autograd) -> candle_core::Result<Dump> {
    let stepper = Stepper::with(trial, device, DType::F32, autograd)?;
    let mut data = trial.task.data(data_seed(trial.config.seed), device)?;
    let batch = data.train_batch(trial.config.train.batch)?;
    let flat = |t: &candle_core::Tensor| -> candle_core::Result<(Vec<usize>, Vec<f32>)> {
        Ok((t.dims().to_vec(), t.to_dtype(DType::F32)?.flatten_all()?.to_vec1::<f32>()?))
    };
    let (loss, grads) = stepper.loss_and_grads(&batch)?;
    let mut params = BTreeMap::new();
    let mut grad_norms = BTreeMap::new();
    for ((spec, var), g) in stepper.cell().graph().params.iter().zip(stepper.cell().vars()).zip(&grads) {
        params.insert(spec.name.clone(), flat(var.as_tensor())?);
        let norm = match g {
            Some(g) => g.sqr()?.sum_all()?.to_dtype(DType::F64)?.to_scalar::<f64>()?.sqrt(),
            None => 0.0,
        };
        grad_norms.insert(spec.name.clone(), norm);
    }
    Ok(Dump { params, inputs: flat(&batch.inputs)?, targets: flat(&batch.targets)?, loss, grad_norms })
}
