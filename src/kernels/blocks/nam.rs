//! Neural Attention Memory kernels (NAM paper §3.1, §3.3, §3.5), batch-first and batched over
//! heads: every function takes tensors whose leading axes (batch, heads, ...) are folded by
//! candle's batched matmul, so there is no Rust loop over examples or heads.
//!
//! Two layouts of the same read/write rules:
//! - **matrix** memory `M: [.., dv, dk]` (value × key, the paper's `M ∈ R^{dv×dk}`):
//!   [`write`], [`read`];
//! - **tape** `T: [.., L, d]` (one row per tape position, the transpose of the paper's
//!   `T = Σ_i v_i e_iᵀ`) addressed by a position vector `p: [.., L]`: [`tape_write`],
//!   [`tape_read`]. `tape_write(T, p, ..) = write(Tᵀ, p, ..)ᵀ`, without the transposes.

use candle_core::{D, Result, Tensor};

use crate::kernels::cuda;
use crate::kernels::cuda::nam::nam_write::Orientation;

pub use crate::kernels::cpu::nam_manual::EPS;

/// `μ(x) = x / max(‖x‖₂, eps)` along the last axis, as PyTorch's `F.normalize`.
///
/// Computed as `x / sqrt(max(Σx², eps²))` — the same value — so that an all-zero vector gets
/// PyTorch's finite gradient (`1/eps` per element, from `x / eps`) instead of the NaN that
/// differentiating `sqrt` at 0 would give.
///
/// One fused op where its switch runs it (`cuda::nam::l2_normalize::L2_NORMALIZE`), else
/// candle's ops.
pub fn l2_normalize(x: &Tensor) -> Result<Tensor> {
    if cuda::switches::used_for(x, cuda::nam::l2_normalize::L2_NORMALIZE) {
        return cuda::nam::l2_normalize::l2_normalize(x);
    }
    l2_normalize_with_candle_ops(x)
}

/// [`l2_normalize`] in candle's ops.
pub fn l2_normalize_with_candle_ops(x: &Tensor) -> Result<Tensor> {
    let norm = x.sqr()?.sum_keepdim(D::Minus1)?.maximum(EPS * EPS)?.sqrt()?;
    x.broadcast_div(&norm)
}

/// Expands a batch-shared tensor (batch axis 1) to `batch` examples, for matmuls (which,
/// unlike element-wise ops, do not broadcast). Contiguous on return.
pub fn expand_batch(t: &Tensor, batch: usize) -> Result<Tensor> {
    if t.dim(0)? == batch {
        return t.contiguous();
    }
    let mut dims = t.dims().to_vec();
    dims[0] = batch;
    t.broadcast_as(dims)?.contiguous()
}

/// The batch size of several inputs, some of which may be shared (batch axis 1).
pub fn batch_of(ts: &[&Tensor]) -> Result<usize> {
    let mut b = 1;
    for t in ts {
        b = b.max(t.dim(0)?);
    }
    Ok(b)
}

/// WR (NAM §3.1): `M + pw v kᵀ − pe M k kᵀ = M + (pw v − pe M k) kᵀ`.
///
/// `m: [N.., dv, dk]`, `k: [N.., dk]` (already unit), `v: [N.., dv]`; `pw`, `pe`: `[N..]` or
/// anything that broadcasts against it (e.g. batch 1). `m` and `k` must share the leading axes.
///
/// One fused op where its switch runs it (`cuda::nam::nam_write::NAM_WRITE`), else candle's ops.
pub fn write(m: &Tensor, k: &Tensor, v: &Tensor, pw: &Tensor, pe: &Tensor) -> Result<Tensor> {
    if fused_write_runs(m, Orientation::Matrix, cuda::nam::nam_write::NAM_WRITE) {
        return cuda::nam::nam_write::write(Orientation::Matrix, m, k, v, pw, pe);
    }
    write_with_candle_ops(m, k, v, pw, pe)
}

/// Whether the fused write (`kernels::cuda::nam::nam_write`) runs on `memory` (`[.., rows, cols]`):
/// as its switch says, and on CUDA only where its backward's shared memory fits a block.
fn fused_write_runs(memory: &Tensor, orientation: Orientation, op: cuda::switches::Switch) -> bool {
    let (rows, cols) = match memory.dims() {
        [.., rows, cols] => (*rows, *cols),
        _ => return false,
    };
    let fits = memory.device().is_cpu() || cuda::nam::nam_write::fits_a_block(orientation, rows, cols);
    cuda::switches::used_for(memory, op) && fits
}

/// [`write`] in candle's ops.
pub fn write_with_candle_ops(m: &Tensor, k: &Tensor, v: &Tensor, pw: &Tensor, pe: &Tensor) -> Result<Tensor> {
    let k_col = k.unsqueeze(D::Minus1)?; // [.., dk, 1]
    let mk = m.matmul(&k_col)?; // [.., dv, 1]
    let pw = pw.unsqueeze(D::Minus1)?.unsqueeze(D::Minus1)?;
    let pe = pe.unsqueeze(D::Minus1)?.unsqueeze(D::Minus1)?;
    let delta = v.unsqueeze(D::Minus1)?.broadcast_mul(&pw)?.broadcast_sub(&mk.broadcast_mul(&pe)?)?;
    // The rank-1 update as a `[dv × 1] @ [1 × dk]` product: its backward is two GEMVs instead
    // of a broadcast product and strided sums (measured 2–3× faster end to end).
    m.broadcast_add(&delta.matmul(&k.unsqueeze(D::Minus2)?)?)
}

/// RD (NAM §3.1): `pr · M q`. `m: [N.., dv, dk]`, `q: [N.., dk]` (already unit), `pr: [N..]`
/// (broadcastable) → `[N.., dv]`.
pub fn read(m: &Tensor, q: &Tensor, pr: &Tensor) -> Result<Tensor> {
    let mq = m.matmul(&q.unsqueeze(D::Minus1)?)?.squeeze(D::Minus1)?;
    mq.broadcast_mul(&pr.unsqueeze(D::Minus1)?)
}

/// WR on a tape (NAM §3.3): `T + p ⊗ (pw v − pe Tᵀ p)`.
/// `t: [N.., L, d]`, `p: [N.., L]`, `v: [N.., d]`, `pw`, `pe`: `[N..]` (broadcastable).
/// One fused op where its switch runs it (`cuda::nam::nam_write::TAPE_WRITE`), else candle's ops.
pub fn tape_write(t: &Tensor, p: &Tensor, v: &Tensor, pw: &Tensor, pe: &Tensor) -> Result<Tensor> {
    if fused_write_runs(t, Orientation::Tape, cuda::nam::nam_write::TAPE_WRITE) {
        return cuda::nam::nam_write::write(Orientation::Tape, t, p, v, pw, pe);
    }
    tape_write_with_candle_ops(t, p, v, pw, pe)
}

/// [`tape_write`] in candle's ops.
pub fn tape_write_with_candle_ops(t: &Tensor, p: &Tensor, v: &Tensor, pw: &Tensor, pe: &Tensor) -> Result<Tensor> {
    let p_row = p.unsqueeze(D::Minus2)?; // [.., 1, L]
    let old = p_row.matmul(t)?; // [.., 1, d]: the value under the head
    let pw = pw.unsqueeze(D::Minus1)?.unsqueeze(D::Minus1)?;
    let pe = pe.unsqueeze(D::Minus1)?.unsqueeze(D::Minus1)?;
    let delta = v.unsqueeze(D::Minus2)?.broadcast_mul(&pw)?.broadcast_sub(&old.broadcast_mul(&pe)?)?;
    t.broadcast_add(&p.unsqueeze(D::Minus1)?.broadcast_mul(&delta)?)
}

/// RD on a tape (NAM §3.3): `pr · Tᵀ p`. `t: [N.., L, d]`, `p: [N.., L]`, `pr: [N..]` → `[N.., d]`.
pub fn tape_read(t: &Tensor, p: &Tensor, pr: &Tensor) -> Result<Tensor> {
    let r = p.unsqueeze(D::Minus2)?.matmul(t)?.squeeze(D::Minus2)?;
    r.broadcast_mul(&pr.unsqueeze(D::Minus1)?)
}

#[cfg(test)]
mod tests {
    use candle_core::{Device, Tensor, Var};

    use super::*;

    #[test]
    fn normalize_matches_f_normalize_and_has_a_finite_gradient_at_zero() -> Result<()> {
        let dev = Device::Cpu;
        let x = Tensor::new(&[[3.0f64, 4.0], [0.0, 0.0]], &dev)?;
        assert_eq!(l2_normalize(&x)?.to_vec2::<f64>()?, vec![vec![0.6, 0.8], vec![0.0, 0.0]]);
        let v = Var::from_tensor(&x)?;
        let g = l2_normalize(v.as_tensor())?.sum_all()?.backward()?;
        let g = g.get(v.as_tensor()).map(|g| g.to_vec2::<f64>()).transpose()?.unwrap_or_default();
        assert!(g.iter().flatten().all(|x| x.is_finite()), "gradient {g:?}");
        assert_eq!(g[1], vec![1.0 / EPS, 1.0 / EPS]); // d(x / eps)/dx, as F.normalize
        Ok(())
    }

    #[test]
    fn tape_write_is_the_transposed_matrix_write() -> Result<()> {
        let dev = Device::Cpu;
        let t = Tensor::randn(0f64, 1.0, (2, 5, 3), &dev)?;
        let p = Tensor::randn(0f64, 1.0, (2, 5), &dev)?;
        let v = Tensor::randn(0f64, 1.0, (2, 3), &dev)?;
        let pw = Tensor::new(&[0.3f64, 0.9], &dev)?;
        let pe = Tensor::new(&[0.7f64, 0.2], &dev)?;
        let a = tape_write(&t, &p, &v, &pw, &pe)?;
        let b = write(&t.transpose(1, 2)?.contiguous()?, &p, &v, &pw, &pe)?.transpose(1, 2)?;
        let diff = (a - b)?.abs()?.max_all()?.to_scalar::<f64>()?;
        assert!(diff < 1e-12, "{diff}");
        let ra = tape_read(&t, &p, &pw)?;
        let rb = read(&t.transpose(1, 2)?.contiguous()?, &p, &pw)?;
        assert!((ra - rb)?.abs()?.max_all()?.to_scalar::<f64>()? < 1e-12);
        Ok(())
    }
}
