//! (Product) Kanerva Machine addressing and readout, shared by `kanervaUpdate` and `kanervaRead`
//! (PKM paper §2, Eq. 2 and 44–45/52–53).
//!
//! Memory layout: the `k` machines' means are packed as `R: [B, k, c, m_i]` (machine `i`'s
//! `c × m_i` mean `R_i`, the PKM paper's orientation; the DKM code stores the transpose).
//! Everything is batched over `B × k` with batched matmuls.

use candle_core::{D, Result, Tensor};

use crate::kernels::cuda::kanerva::kanerva_address;
use crate::kernels::cuda::kanerva::spd_solve::{gram, scaled_eye, spd_solve};

/// The addressing and readout of the means `R` by a code `z`, which `kanervaRead` puts out and
/// `kanervaUpdate` starts from: `r`, the means broadcast to the batch `[B, k, c, m]`; `w`, the
/// weights ([`least_squares_weights`]); `mu`, the readout `[B, c]` ([`readout`]).
pub struct Address {
    pub r: Tensor,
    pub w: Tensor,
    pub mu: Tensor,
}

/// [`Address`] of `r: [B or 1, k, c, m]` by `z: [B or 1, c]` with the noises `eta` (as the
/// primitive takes them, `[B or 1, k or 1]`), broadcast to `batch`: one fused op where
/// [`KANERVA_ADDRESS`](kanerva_address::KANERVA_ADDRESS) has it (`kanerva_address`), else
/// candle's.
pub fn address(r: &Tensor, z: &Tensor, eta: Option<&Tensor>, k: usize, batch: usize, lambda: f64) -> Result<Address> {
    let (_, k_r, c, m) = r.dims4()?;
    let r = r.broadcast_as((batch, k_r, c, m))?.contiguous()?;
    let eta = eta.map(|eta| eta_per_machine(eta, k)).transpose()?;
    if kanerva_address::fused_for(&r, batch, k_r, c, m) {
        let (w, mu) = kanerva_address::address(&r, z, eta.as_ref(), lambda)?;
        return Ok(Address { r, w, mu });
    }
    let w = least_squares_weights(&r, z, lambda)?;
    let mu = readout(&r, &w, &machine_weights(eta.as_ref(), k, z)?)?;
    Ok(Address { r, w, mu })
}

/// Addressing weights per machine: the ridge solution `w_i = (R_iᵀR_i + λI)⁻¹ R_iᵀ z`, i.e.
/// `argmin_w ‖z − R_i w‖² + λ‖w‖²` (the MAP of `w` under the prior `N(0, I)`).
/// `r: [B, k, c, m]`, `z: [B or 1, c]` → `w: [B, k, m, 1]`.
pub fn least_squares_weights(r: &Tensor, z: &Tensor, lambda: f64) -> Result<Tensor> {
    let (batch, k, c, m) = r.dims4()?;
    let rt = r.transpose(2, 3)?.contiguous()?; // [B, k, m, c]
    let a = gram(r)?.broadcast_add(&scaled_eye(m, lambda, r)?)?; // [B, k, m, m]
    let z = z.reshape((z.dim(0)?, 1, c, 1))?.broadcast_as((batch, k, c, 1))?.contiguous()?;
    spd_solve(&a, &rt.matmul(&z)?)
}

/// Machine weights `γ_i = (1/η_i²) / Σ_j (1/η_j²)` from the effective noises `η: [B or 1, k]`
/// (`η_i = σ_i / √r_i`), or `1/k` each without `η`. Returns `[B or 1, k]`.
pub fn machine_weights(eta: Option<&Tensor>, k: usize, like: &Tensor) -> Result<Tensor> {
    match eta {
        Some(eta) => {
            let precision = eta.sqr()?.recip()?;
            precision.broadcast_div(&precision.sum_keepdim(D::Minus1)?)
        }
        None => Tensor::full(1.0 / k as f64, (1, k), like.device())?.to_dtype(like.dtype()),
    }
}

/// The product readout `μ_z = Σ_i γ_i R_i w_i`: `r: [B, k, c, m]`, `w: [B, k, m, 1]`,
/// `gamma: [B or 1, k]` → `[B, c]`.
pub fn readout(r: &Tensor, w: &Tensor, gamma: &Tensor) -> Result<Tensor> {
    let rw = r.matmul(w)?.squeeze(D::Minus1)?; // [B, k, c]
    rw.broadcast_mul(&gamma.unsqueeze(D::Minus1)?)?.sum(1)
}

/// `η` broadcast to `[B or 1, k]` (a single shared noise may be given as `[B or 1, 1]`).
pub fn eta_per_machine(eta: &Tensor, k: usize) -> Result<Tensor> {
    eta.broadcast_as((eta.dim(0)?, k))
}

#[cfg(test)]
mod tests {
    use candle_core::Device;

    use super::*;

    #[test]
    fn weights_are_the_ridge_solution() {
        // One machine, R = I₂ (c = m = 2): w = z / (1 + λ).
        let dev = Device::Cpu;
        let r = Tensor::new(&[[[[1.0f64, 0.0], [0.0, 1.0]]]], &dev).unwrap();
        let z = Tensor::new(&[[2.0f64, -1.0]], &dev).unwrap();
        let w = least_squares_weights(&r, &z, 0.25).unwrap().flatten_all().unwrap().to_vec1::<f64>().unwrap();
        assert!((w[0] - 1.6).abs() < 1e-12 && (w[1] + 0.8).abs() < 1e-12, "{w:?}");
    }

    #[test]
    fn machine_weights_are_normalised_precisions() {
        let dev = Device::Cpu;
        let eta = Tensor::new(&[[1.0f64, 2.0], [0.5, 0.5]], &dev).unwrap();
        let g = machine_weights(Some(&eta), 2, &eta).unwrap().to_vec2::<f64>().unwrap();
        assert!((g[0][0] - 0.8).abs() < 1e-12 && (g[0][1] - 0.2).abs() < 1e-12, "{g:?}");
        assert!((g[1][0] - 0.5).abs() < 1e-12, "{g:?}");
        let uniform = machine_weights(None, 4, &eta).unwrap().to_vec2::<f64>().unwrap();
        assert_eq!(uniform, vec![vec![0.25; 4]]);
    }
}
