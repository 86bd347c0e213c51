//! The optimisers' updates as one CUDA kernel per parameter (`optim_update.cu`): the gradient,
//! clamped first where the step clips by value, goes in; the parameter and its state buffers
//! are rewritten in place. Written with candle's tensor operations, one RMSprop update of one
//! parameter is about fifteen kernels, each with an output of its own to allocate and free,
//! and the clamp two more: in a captured STM step, some five hundred kernels and a thousand
//! memory nodes for thirty parameters.
//!
//! CUDA only, and opt-in until `memctl doctor --check` has passed with it on a GPU
//! ([`OPTIMIZER`]); elsewhere the optimisers keep their own paths (on the CPU a fused
//! pass over the elements, `train::optim`). Each function returns `false`, launching nothing,
//! where a tensor is not laid out as the kernel reads it; the caller then updates with tensor
//! operations.
//!
//! Not a `FusedKernel` (`cuda::kernel`): it is no candle op with an output and a CPU twin, but an
//! update in place of the parameter and its state, on CUDA only.

use candle_core::{DType, Result, Tensor};

use crate::kernels::cuda::switches::Switch;

/// STM A 10.98 → 10.44 ms a step, B 19.59 → 18.78 (H100, 2026-11-26).
pub const OPTIMIZER: Switch = Switch::on("optimizer");
inventory::submit! { OPTIMIZER }

/// Whether the update of the parameter `p` runs as one fused kernel: on CUDA, in f32, when
/// [`OPTIMIZER`] is on.
pub fn applies(p: &Tensor) -> bool {
    p.device().is_cuda() && crate::kernels::cuda::switches::used_for(p, OPTIMIZER)
}

/// RMSprop's constants (PyTorch's names).
#[derive(Clone, Copy, Debug)]
pub struct RmsPropRule {
    pub lr: f64,
    pub alpha: f64,
    pub eps: f64,
    pub momentum: f64,
}

/// Adam's constants, as candle-nn's AdamW.
#[derive(Clone, Copy, Debug)]
pub struct AdamRule {
    pub lr: f64,
    pub beta1: f64,
    pub beta2: f64,
    pub eps: f64,
    pub weight_decay: f64,
}

/// RMSprop's update of `p` from `g` (clamped to ±`clamp` first, where given), rewriting `p`,
/// the square average `sq` and, with momentum, the momentum buffer `b`.
pub fn rmsprop(
    g: &Tensor,
    p: &Tensor,
    sq: &Tensor,
    b: &Tensor,
    rule: &RmsPropRule,
    clamp: Option<f64>,
) -> Result<bool> {
    if !fits(&[g, p, sq, b], p.elem_count()) {
        return Ok(false);
    }
    let (ints, floats) = rmsprop_scalars(rule, clamp);
    launch("rmsprop_update", &[g], &[p, sq, b], p.elem_count(), &ints, &floats)
}

/// `rmsprop_update`'s ints and floats after `n` (in `optim_update.cu`'s order).
pub fn rmsprop_scalars(rule: &RmsPropRule, clamp: Option<f64>) -> ([i32; 2], [f64; 6]) {
    let ints = [i32::from(rule.momentum > 0.0), i32::from(clamp.is_some())];
    (ints, [rule.alpha, 1.0 - rule.alpha, rule.eps, rule.lr, rule.momentum, clamp.unwrap_or(0.0)])
}

/// Adam's update of `p` from `g` (clamped to ±`clamp` first, where given), rewriting `p` and
/// the moments `m` and `v`; `corrections` holds this update's two bias corrections
/// `1 / (1 − β1ᵗ)` and `1 / (1 − β2ᵗ)` on the device.
pub fn adam(
    g: &Tensor,
    corrections: &Tensor,
    p: &Tensor,
    m: &Tensor,
    v: &Tensor,
    rule: &AdamRule,
    clamp: Option<f64>,
) -> Result<bool> {
    if !fits(&[g, p, m, v], p.elem_count()) || !fits(&[corrections], 2) {
        return Ok(false);
    }
    let (ints, floats) = adam_scalars(rule, clamp);
    launch("adam_update", &[g, corrections], &[p, m, v], p.elem_count(), &ints, &floats)
}

/// `adam_update`'s ints and floats after `n` (in `optim_update.cu`'s order).
pub fn adam_scalars(rule: &AdamRule, clamp: Option<f64>) -> ([i32; 1], [f64; 8]) {
    let floats = [
        rule.beta1,
        1.0 - rule.beta1,
        rule.beta2,
        1.0 - rule.beta2,
        rule.eps,
        rule.lr,
        1.0 - rule.lr * rule.weight_decay,
        clamp.unwrap_or(0.0),
    ];
    ([i32::from(clamp.is_some())], floats)
}

/// SGD's update of `p` with an existing momentum buffer `b`: `b ← μ b + g`, `p ← p − lr b`
/// (`g` clamped to ±`clamp` first, where given).
pub fn sgd_momentum(g: &Tensor, p: &Tensor, b: &Tensor, lr: f64, momentum: f64, clamp: Option<f64>) -> Result<bool> {
    if !fits(&[g, p, b], p.elem_count()) {
        return Ok(false);
    }
    let (ints, floats) = sgd_momentum_scalars(lr, momentum, clamp);
    launch("sgd_momentum_update", &[g], &[p, b], p.elem_count(), &ints, &floats)
}

/// `sgd_momentum_update`'s ints and floats after `n` (in `optim_update.cu`'s order).
pub fn sgd_momentum_scalars(lr: f64, momentum: f64, clamp: Option<f64>) -> ([i32; 1], [f64; 3]) {
    ([i32::from(clamp.is_some())], [lr, momentum, clamp.unwrap_or(0.0)])
}

/// Whether each of `tensors` is f32 on CUDA, contiguous, with `n` elements.
fn fits(tensors: &[&Tensor], n: usize) -> bool {
    tensors.iter().all(|t| t.device().is_cuda() && t.dtype() == DType::F32 && t.is_contiguous() && t.elem_count() == n)
}

#[cfg(feature = "cuda")]
fn launch(
    kernel: &'static str,
    read: &[&Tensor],
    written: &[&Tensor],
    n: usize,
    ints: &[i32],
    floats: &[f64],
) -> Result<bool> {
    let floats: Vec<f32> = floats.iter().map(|&f| f as f32).collect();
    // SAFETY: optim_update.cu's kernels take the read tensors, the written ones, then the ints and
    // the floats, in the order of the functions above, and touch element i < n of each tensor but
    // `corrections` (of which they read two); `fits` checked every tensor's layout and length.
    // The written ones are the parameter and its optimiser's own state: nothing else uses them
    // while the update runs.
    unsafe { cuda::optim_in_place(kernel, read, written, n, ints, &floats) }?;
    crate::kernels::cuda::fused::record_launch(kernel);
    Ok(true)
}

/// Without CUDA there is no tensor [`fits`] accepts.
#[cfg(not(feature = "cuda"))]
fn launch(kernel: &'static str, _: &[&Tensor], _: &[&Tensor], _: usize, _: &[i32], _: &[f64]) -> Result<bool> {
    candle_core::bail!("{kernel}: this memctl was built without CUDA")
}

/// The launch of its CUDA kernels, with the `cuda` feature.
#[cfg(feature = "cuda")]
mod cuda {
    use crate::kernels::cuda::launch_shape::LaunchShape;
    use crate::kernels::cuda::modules::{OPTIM_UPDATE, args_with, f32_view, launch_config, push_scalars};
    use candle_core::cuda_backend::WrapErr;
    use candle_core::cuda_backend::cudarc::driver::PushKernelArg;
    use candle_core::{Result, Storage, Tensor};

    /// Runs `kernel` of `optim_update.cu` over `n` elements, one thread each (grid-stride), on the
    /// f32 elements of `read` and then of `written` (each from its layout's start offset), followed
    /// by `n` and then `ints` and `floats`. The kernel rewrites the `written` tensors' memory in
    /// place.
    ///
    /// # Safety
    /// The kernel must take exactly these arguments in this order and stay within each tensor's
    /// elements; the caller has checked that every tensor is contiguous f32 on this device with
    /// the elements the kernel reads. The `written` tensors are rewritten under read locks (candle
    /// does not lend a write lock outside its crate): nothing may read or write them on the host
    /// meanwhile, and on the device the stream orders the kernel after their earlier uses.
    pub(super) unsafe fn optim_in_place(
        kernel: &str,
        read: &[&Tensor],
        written: &[&Tensor],
        n: usize,
        ints: &[i32],
        floats: &[f32],
    ) -> Result<()> {
        let Ok(count) = i32::try_from(n) else {
            candle_core::bail!("{kernel}: {n} elements are more than the kernel indexes")
        };
        if n == 0 {
            return Ok(());
        }
        let guards: Vec<_> = read.iter().chain(written).map(|t| t.storage_and_layout()).collect();
        let mut device = None;
        let views = guards
            .iter()
            .map(|(storage, layout)| {
                let Storage::Cuda(s) = &**storage else {
                    candle_core::bail!("{kernel}: an operand is not on a CUDA device")
                };
                device.get_or_insert_with(|| s.device.clone());
                f32_view(s, layout)
            })
            .collect::<Result<Vec<_>>>()?;
        let Some(dev) = device else { candle_core::bail!("{kernel}: no operands") };
        let func = OPTIM_UPDATE.function(&dev, kernel)?;
        let mut builder = args_with(&func, &views);
        builder.arg(&count);
        push_scalars(&mut builder, ints, floats);
        // SAFETY: the argument list is the kernel's (the caller's contract).
        unsafe { builder.launch(launch_config(LaunchShape::per_element(count as u32))) }.w()?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::Device;

    /// Off CUDA nothing is launched: the optimisers keep their own paths.
    #[test]
    fn on_the_cpu_no_update_is_fused() -> Result<()> {
        let t = Tensor::zeros(4, DType::F32, &Device::Cpu)?;
        assert!(!applies(&t));
        let rule = RmsPropRule { lr: 0.1, alpha: 0.99, eps: 1e-8, momentum: 0.9 };
        assert!(!rmsprop(&t, &t, &t, &t, &rule, Some(1.0))?);
        let rule = AdamRule { lr: 0.1, beta1: 0.9, beta2: 0.999, eps: 1e-8, weight_decay: 0.0 };
        assert!(!adam(&t, &t.narrow(0, 0, 2)?, &t, &t, &t, &rule, None)?);
        assert!(!sgd_momentum(&t, &t, &t, 0.1, 0.9, None)?);
        Ok(())
    }
}
