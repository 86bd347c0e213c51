//! Gradient clipping, as PyTorch's `clip_grad_value_` and `clip_grad_norm_`, on one gradient
//! per parameter (`None` for a parameter that does not reach the loss).

use candle_core::{DType, Result, Tensor};

use crate::kernels::cpu::{real::Real, view};
use crate::prims::contract::backward::with_real;

/// Clips `grads` as a trial asks, in PyTorch's order: by value (`clip_grad_value_`), then by
/// global norm (`clip_grad_norm_`, on the device when `norm_on_device`, so that a CUDA graph
/// can hold it). A clamp by value with no norm clip after it is left to the optimiser, which
/// applies it as it reads each gradient (on CUDA inside its fused update): its limit is
/// returned, for [`Optimizer::update`](super::optim::Optimizer::update).
pub fn before_update(
    grads: &mut [Option<Tensor>],
    value: Option<f64>,
    norm: Option<f64>,
    norm_on_device: bool,
) -> Result<Option<f64>> {
    let Some(max_norm) = norm else { return Ok(value) };
    if let Some(limit) = value {
        by_value(grads, limit)?;
    }
    if norm_on_device {
        by_norm_on_device(grads, max_norm)?;
    } else {
        by_norm(grads, max_norm)?;
    }
    Ok(None)
}

/// Clamps every gradient element to `[-limit, limit]` (the SAM authors use 10).
pub fn by_value(grads: &mut [Option<Tensor>], limit: f64) -> Result<()> {
    for g in grads.iter_mut().flatten() {
        *g = clamped(g, limit)?;
    }
    Ok(())
}

/// `g` with every element clamped to `[-limit, limit]`.
pub fn clamped(g: &Tensor, limit: f64) -> Result<Tensor> {
    if g.device().is_cpu() { with_real!(g.dtype(), T => clamp::<T>(g, limit)) } else { g.clamp(-limit, limit) }
}

fn clamp<T: Real>(g: &Tensor, limit: f64) -> Result<Tensor> {
    let (lo, hi) = (T::from_f64(-limit), T::from_f64(limit));
    let clipped = view::with_slice::<T, _>(g, |s| Ok(s.iter().map(|&v| v.max(lo).min(hi)).collect::<Vec<T>>()))?;
    view::tensor(clipped, g.dims())
}

/// Rescales all gradients so that their global L2 norm is at most `max_norm`; returns the norm
/// before clipping.
pub fn by_norm(grads: &mut [Option<Tensor>], max_norm: f64) -> Result<f64> {
    let mut total = 0.0f64;
    for g in grads.iter().flatten() {
        total += g.sqr()?.sum_all()?.to_dtype(DType::F64)?.to_scalar::<f64>()?;
    }
    let norm = total.sqrt();
    let scale = max_norm / (norm + 1e-6);
    if scale < 1.0 {
        for g in grads.iter_mut().flatten() {
            *g = (&*g * scale)?;
        }
    }
    Ok(norm)
}

/// [`by_norm`] without reading the norm back to the host: the scale `min(1, max_norm /
/// (norm + 1e-6))` is computed and applied on the device, so that a CUDA graph can hold it.
pub fn by_norm_on_device(grads: &mut [Option<Tensor>], max_norm: f64) -> Result<()> {
    let mut total: Option<Tensor> = None;
    for g in grads.iter().flatten() {
        let sum = g.sqr()?.sum_all()?;
        total = Some(match total {
            None => sum,
            Some(t) => (t + sum)?,
        });
    }
    let Some(total) = total else { return Ok(()) };
    let scale = ((total.sqrt()? + 1e-6)?.recip()? * max_norm)?.clamp(0.0, 1.0)?;
    for g in grads.iter_mut().flatten() {
        *g = g.broadcast_mul(&scale)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::Device;

    #[test]
    fn clips_by_value_and_by_global_norm() -> Result<()> {
        let dev = Device::Cpu;
        let grads = || -> Result<Vec<Option<Tensor>>> {
            Ok(vec![Some(Tensor::new(&[3.0f64, -4.0], &dev)?), None, Some(Tensor::new(&[1.0f64], &dev)?)])
        };
        // Global norm √26.
        let mut g = grads()?;
        by_value(&mut g, 2.0)?;
        assert_eq!(g[0].as_ref().unwrap().to_vec1::<f64>()?, vec![2.0, -2.0]);
        assert_eq!(g[2].as_ref().unwrap().to_vec1::<f64>()?, vec![1.0]);
        assert!(g[1].is_none());
        let mut g = grads()?;
        let norm = by_norm(&mut g, 1.0)?;
        assert!((norm - 26f64.sqrt()).abs() < 1e-12);
        let ga = g[0].as_ref().unwrap().to_vec1::<f64>()?;
        let gb = g[2].as_ref().unwrap().to_vec1::<f64>()?;
        let clipped = (ga[0].powi(2) + ga[1].powi(2) + gb[0].powi(2)).sqrt();
        assert!((clipped - 1.0).abs() < 1e-6, "{clipped}");
        Ok(())
    }

    /// A clamp alone is left to the update; before a norm clip it is applied first.
    #[test]
    fn a_clamp_is_left_to_the_update_unless_a_norm_clip_follows() -> Result<()> {
        let values = |g: &[Option<Tensor>]| -> Result<Vec<f64>> { g[0].as_ref().unwrap().to_vec1::<f64>() };
        let mut g = grads_for_norm()?;
        assert_eq!(before_update(&mut g, Some(2.0), None, false)?, Some(2.0));
        assert_eq!(values(&g)?, vec![3.0, -4.0], "left as it was");
        assert_eq!(before_update(&mut g, None, None, true)?, None);
        // Clamped to [2, -2, 2] (norm √12), then scaled to norm 1.
        for on_device in [false, true] {
            let mut g = grads_for_norm()?;
            assert_eq!(before_update(&mut g, Some(2.0), Some(1.0), on_device)?, None);
            let scale = 1.0 / (12f64.sqrt() + 1e-6);
            for (a, b) in values(&g)?.iter().zip([2.0 * scale, -2.0 * scale]) {
                assert!((a - b).abs() < 1e-12, "{a} against {b}");
            }
        }
        Ok(())
    }

    #[test]
    fn clipping_by_norm_on_the_device_matches_the_host_version() -> Result<()> {
        for max_norm in [1.0, 100.0] {
            let (mut host, mut device) = (grads_for_norm()?, grads_for_norm()?);
            by_norm(&mut host, max_norm)?;
            by_norm_on_device(&mut device, max_norm)?;
            for (h, d) in host.iter().zip(&device) {
                match (h, d) {
                    (Some(h), Some(d)) => {
                        for (a, b) in h.to_vec1::<f64>()?.iter().zip(d.to_vec1::<f64>()?) {
                            assert!((a - b).abs() < 1e-12, "{a} against {b} (max norm {max_norm})");
                        }
                    }
                    (h, d) => assert_eq!(h.is_none(), d.is_none()),
                }
            }
        }
        Ok(())
    }

    fn grads_for_norm() -> Result<Vec<Option<Tensor>>> {
        let dev = Device::Cpu;
        Ok(vec![Some(Tensor::new(&[3.0f64, -4.0], &dev)?), None, Some(Tensor::new(&[12.0f64], &dev)?)])
    }
}
