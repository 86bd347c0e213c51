//! Gradient clipping, as PyTorch's `clip_grad_value_` and `clip_grad_norm_`.

use candle_core::backprop::GradStore;
use candle_core::{Result, Var};

/// Clamps every gradient element to `[-limit, limit]` (the SAM authors use 10).
pub fn by_value(grads: &mut GradStore, vars: &[Var], limit: f64) -> Result<()> {
    for v in vars {
        if let Some(g) = grads.get(v.as_tensor()) {
            let clipped = g.clamp(-limit, limit)?;
            grads.insert(v.as_tensor(), clipped);
        }
    }
    Ok(())
}

/// Rescales all gradients so that their global L2 norm is at most `max_norm`; returns the norm
/// before clipping.
pub fn by_norm(grads: &mut GradStore, vars: &[Var], max_norm: f64) -> Result<f64> {
    let mut total = 0.0f64;
    for v in vars {
        if let Some(g) = grads.get(v.as_tensor()) {
            total += g.sqr()?.sum_all()?.to_dtype(candle_core::DType::F64)?.to_scalar::<f64>()?;
        }
    }
    let norm = total.sqrt();
    let scale = max_norm / (norm + 1e-6);
    if scale < 1.0 {
        for v in vars {
            if let Some(g) = grads.get(v.as_tensor()) {
                let scaled = (g * scale)?;
                grads.insert(v.as_tensor(), scaled);
            }
        }
    }
    Ok(norm)
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::Device;

    #[test]
    fn clips_by_value_and_by_global_norm() -> Result<()> {
        let a = Var::new(&[3.0f64, -4.0], &Device::Cpu)?;
        let b = Var::new(&[0.0f64], &Device::Cpu)?;
        let loss = || -> Result<GradStore> {
            (a.as_tensor().sqr()?.sum_all()? * 0.5)?.add(&b.as_tensor().sum_all()?)?.backward()
        };
        // Gradients: a → [3, -4], b → [1]; global norm √26.
        let mut g = loss()?;
        by_value(&mut g, &[a.clone(), b.clone()], 2.0)?;
        assert_eq!(g.get(a.as_tensor()).unwrap().to_vec1::<f64>()?, vec![2.0, -2.0]);
        let mut g = loss()?;
        let norm = by_norm(&mut g, &[a.clone(), b.clone()], 1.0)?;
        assert!((norm - 26f64.sqrt()).abs() < 1e-12);
        let ga = g.get(a.as_tensor()).unwrap().to_vec1::<f64>()?;
        let gb = g.get(b.as_tensor()).unwrap().to_vec1::<f64>()?;
        let clipped = (ga[0].powi(2) + ga[1].powi(2) + gb[0].powi(2)).sqrt();
        assert!((clipped - 1.0).abs() < 1e-6, "{clipped}");
        Ok(())
    }
}
