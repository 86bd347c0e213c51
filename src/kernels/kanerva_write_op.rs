//! The Kanerva machines' write after their addressing (`kanervaUpdate`, PKM Eq. 3–4) as one
//! candle op with its own backward, for the device-generic path (candle's autograd: the GPU,
//! and evaluation on the CPU).
//!
//! Per batch element and machine `i`: `u = V_i w_i`, `β_i = 1 / (w_iᵀu + η_i²)`,
//! `R_i' = R_i + β_i δ uᵀ`, `V_i' = V_i − β_i u uᵀ`. As candle ops that is some twelve kernels
//! forward and twenty-five backward a time step; here one each way
//! (`src/kernels/cuda/kanerva_write.cu`), and the CPU's computation is the tape's own
//! (`kanerva_manual::write` and `write_backward`, one formulation of the write). Where it runs is
//! its switch's rule (`kernels::switches`) ([`KANERVA_WRITE`](KANERVA_WRITE)).
//!
//! A candle op takes at most three operands, so the small ones travel packed, a row per batch
//! element: `[w (k·m) | δ (c) | η (k)]`; and the two outputs come out as one flat buffer,
//! `[R' | V']`, which the caller views as two tensors.

use candle_core::{CpuStorage, CustomOp3, D, Layout, Result, Shape, Tensor, bail};

use super::fused::{BLOCK_SHARED_BYTES, RealKernel, run_cpu};
use super::kanerva_manual::{Machines, Written, write_backward};
use super::launch_shape::LaunchShape;
use super::real::Real;
use super::switches::Switch;
#[cfg(feature = "cuda")]
use candle_core::CudaStorage;

/// PKM (k = 4) 2.78 → 2.17 ms a step (H100, 2026-11-27).
pub const KANERVA_WRITE: Switch = Switch::on("kanerva_write");
inventory::submit! { KANERVA_WRITE }

/// How errors name the op.
const WHAT: &str = "the fused Kanerva write";

/// The new means and covariances `(R', V')` from the means `r: [B, k, c, m]` and covariances
/// `v: [B, k, m, m]` (both broadcast to the batch), the weights `w: [B, k, m, 1]`, the residual
/// `δ = z − μ: [B, c]` and the noises `eta: [B or 1, k]` (none: 1). One fused op where
/// its switch runs it, else candle's ops.
pub fn write(r: &Tensor, v: &Tensor, w: &Tensor, delta: &Tensor, eta: Option<&Tensor>) -> Result<(Tensor, Tensor)> {
    let (batch, k, c, m) = r.dims4()?;
    let fits = shared_bytes(true, c, m) <= BLOCK_SHARED_BYTES
        && i32::try_from(batch * k * c * m + batch * k * m * m).is_ok()
        && u32::try_from(batch * k).is_ok();
    if !super::switches::used_for(r, KANERVA_WRITE) || (!r.device().is_cpu() && !fits) {
        return write_with_candle_ops(r, v, w, delta, eta);
    }
    let eta = match eta {
        Some(eta) => eta.broadcast_as((batch, k))?,
        None => Tensor::ones((batch, k), r.dtype(), r.device())?,
    };
    let packed = Tensor::cat(&[&w.reshape((batch, k * m))?, &delta.reshape((batch, c))?, &eta], 1)?.contiguous()?;
    let both = r.contiguous()?.apply_op3(&v.contiguous()?, &packed, Forward(Machines { k, c, m }))?;
    let (nr, nv) = (batch * k * c * m, batch * k * m * m);
    Ok((both.narrow(0, 0, nr)?.reshape(r.shape())?, both.narrow(0, nr, nv)?.reshape(v.shape())?))
}

/// [`write`] in candle's ops.
pub fn write_with_candle_ops(
    r: &Tensor,
    v: &Tensor,
    w: &Tensor,
    delta: &Tensor,
    eta: Option<&Tensor>,
) -> Result<(Tensor, Tensor)> {
    let (batch, _, c, _) = r.dims4()?;
    let u = v.matmul(w)?; // V_i w_i: [B, k, m, 1]
    let noise = match eta {
        Some(eta) => eta.sqr()?.unsqueeze(D::Minus1)?.unsqueeze(D::Minus1)?, // [B|1, k, 1, 1]
        None => Tensor::ones((1, 1, 1, 1), r.dtype(), r.device())?,
    };
    let beta = (w * &u)?.sum_keepdim(2)?.broadcast_add(&noise)?.recip()?; // [B, k, 1, 1]
    let u_row = u.transpose(2, 3)?; // [B, k, 1, m]
    let delta = delta.reshape((batch, 1, c, 1))?;
    let r_next = r.broadcast_add(&delta.broadcast_mul(&u_row.broadcast_mul(&beta)?)?)?;
    let v_next = v.broadcast_sub(&u.broadcast_mul(&u_row)?.broadcast_mul(&beta)?)?; // (u uᵀ) β: exactly symmetric
    Ok((r_next, v_next))
}

/// The shared memory of a CUDA block: the forward's `u` (`m` floats); the backward's `u`, `ū`
/// and `V̄'u` (`m` each), `R̄'u` and `δ̄` (`c` each).
pub fn shared_bytes(backward: bool, c: usize, m: usize) -> usize {
    4 * if backward { 3 * m + 2 * c } else { m }
}

/// `(r, v, [w | δ | η]) → [R' | V']`, flat.
struct Forward(Machines);

/// `(v, [w | δ | η], [R̄' | V̄']) → [V̄ | w̄ | δ̄ | η̄]`, flat (`R̄ = R̄'`, which the caller takes as it is).
struct Backward(Machines);

/// The packed row's length: `k·m + c + k`.
fn packed_width(s: Machines) -> usize {
    s.k * s.m + s.c + s.k
}

/// The batch of contiguous operands laid out as `Forward` takes them.
fn batch_of(s: Machines, v: &Layout, packed: &Layout) -> Result<usize> {
    let Machines { k, m, .. } = s;
    let batch = v.dims().first().copied().unwrap_or(0);
    if v.dims() != [batch, k, m, m] || packed.dims() != [batch, packed_width(s)] {
        bail!("{WHAT}: covariances {:?} and packed operands {:?} for {s:?}", v.dims(), packed.dims());
    }
    if !v.is_contiguous() || !packed.is_contiguous() {
        bail!("{WHAT} takes contiguous operands");
    }
    Ok(batch)
}

/// The CPU computation of either pass, batch element by batch element, through the tape's write.
struct WriteKernel {
    backward: bool,
    s: Machines,
    batch: usize,
}

impl RealKernel for WriteKernel {
    /// Forward: `(r, v, packed)`; backward: `(v, packed, g)`.
    fn run<T: Real>(&self, o: &[&[T]]) -> Vec<T> {
        let Machines { k, c, m } = self.s;
        let (b, width) = (self.batch, packed_width(self.s));
        let (nr, nv) = (k * c * m, k * m * m);
        let zero_mu = vec![T::zero(); c];
        let (mut u, mut beta, mut delta) = (vec![T::zero(); k * m], vec![T::zero(); k], vec![T::zero(); c]);
        // The tape's write computes δ = z − μ: given z = δ and μ = 0 it takes δ as it is.
        let write_row = |r: &[T], v: &[T], row: &[T], out: Written<&mut [T]>, r_next: &mut [T], v_next: &mut [T]| {
            let (w, d, eta) = (&row[..k * m], &row[k * m..][..c], &row[k * m + c..]);
            super::kanerva_manual::write(self.s, r, v, d, Some(eta), w, &zero_mu, out, r_next, v_next);
        };
        if !self.backward {
            let (r, v, packed) = (o[0], o[1], o[2]);
            let mut out = vec![T::zero(); b * (nr + nv)];
            let (r_out, v_out) = out.split_at_mut(b * nr);
            for i in 0..b {
                let (rn, vn) = (&mut r_out[i * nr..][..nr], &mut v_out[i * nv..][..nv]);
                let out = Written { u: &mut u[..], beta: &mut beta[..], delta: &mut delta[..] };
                write_row(&r[i * nr..][..nr], &v[i * nv..][..nv], &packed[i * width..][..width], out, rn, vn);
            }
            return out;
        }
        let (v, packed, g) = (o[0], o[1], o[2]);
        let (g_rn_all, g_vn_all) = g.split_at(b * nr);
        let mut out = vec![T::zero(); b * (nv + width)];
        let (g_v_all, g_packed_all) = out.split_at_mut(b * nv);
        let (zero_r, mut scratch_r, mut scratch_v) = (vec![T::zero(); nr], vec![T::zero(); nr], vec![T::zero(); nv]);
        let mut g_r = vec![T::zero(); nr];
        let mut g_mu = vec![T::zero(); c];
        for i in 0..b {
            let (vi, row) = (&v[i * nv..][..nv], &packed[i * width..][..width]);
            // The forward's u, β and δ again (the means do not enter them).
            let out = Written { u: &mut u[..], beta: &mut beta[..], delta: &mut delta[..] };
            write_row(&zero_r, vi, row, out, &mut scratch_r, &mut scratch_v);
            let (w, eta) = (&row[..k * m], &row[k * m + c..]);
            let g_row = &mut g_packed_all[i * width..][..width];
            let (g_w, rest) = g_row.split_at_mut(k * m);
            let (g_delta, g_eta) = rest.split_at_mut(c);
            let saved = Written { u: &u[..], beta: &beta[..], delta: &delta[..] };
            g_r.fill(T::zero());
            write_backward(
                self.s,
                vi,
                Some(eta),
                w,
                &saved,
                &g_rn_all[i * nr..][..nr],
                &g_vn_all[i * nv..][..nv],
                &mut g_r,
                &mut g_v_all[i * nv..][..nv],
                g_delta,
                Some(g_eta),
                &mut g_mu,
                g_w,
            );
        }
        out
    }
}

impl CustomOp3 for Forward {
    fn name(&self) -> &'static str {
        "kanerva_write_fwd"
    }

    fn cpu_fwd(
        &self,
        s1: &CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
        s3: &CpuStorage,
        l3: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        let (batch, len) = forward_geometry(self.0, l1, l2, l3)?;
        let kernel = WriteKernel { backward: false, s: self.0, batch };
        Ok((run_cpu(&kernel, &[(s1, l1), (s2, l2), (s3, l3)], WHAT)?, Shape::from(len)))
    }

    #[cfg(feature = "cuda")]
    fn cuda_fwd(
        &self,
        s1: &CudaStorage,
        l1: &Layout,
        s2: &CudaStorage,
        l2: &Layout,
        s3: &CudaStorage,
        l3: &Layout,
    ) -> Result<(CudaStorage, Shape)> {
        let (batch, len) = forward_geometry(self.0, l1, l2, l3)?;
        let operands = [(s1, l1), (s2, l2), (s3, l3)];
        let out = cuda::kanerva_write("kanerva_write_fwd", &operands, len, batch, self.0)?;
        super::fused::record_launch("kanerva_write_fwd");
        Ok((out, Shape::from(len)))
    }

    fn bwd(
        &self,
        r: &Tensor,
        v: &Tensor,
        packed: &Tensor,
        _out: &Tensor,
        grad: &Tensor,
    ) -> Result<(Option<Tensor>, Option<Tensor>, Option<Tensor>)> {
        let grad = grad.contiguous()?;
        let both = v.apply_op3_no_bwd(packed, &grad, &Backward(self.0))?;
        let (nr, nv) = (r.elem_count(), v.elem_count());
        Ok((
            Some(grad.narrow(0, 0, nr)?.reshape(r.shape())?),
            Some(both.narrow(0, 0, nv)?.reshape(v.shape())?),
            Some(both.narrow(0, nv, packed.elem_count())?.reshape(packed.shape())?),
        ))
    }
}

/// The batch and the output's length of the forward's operands `(r, v, packed)`.
fn forward_geometry(s: Machines, r: &Layout, v: &Layout, packed: &Layout) -> Result<(usize, usize)> {
    let batch = batch_of(s, v, packed)?;
    if r.dims() != [batch, s.k, s.c, s.m] || !r.is_contiguous() {
        bail!("{WHAT}: means {:?} for {s:?} and a batch of {batch}", r.dims());
    }
    Ok((batch, batch * s.k * s.m * (s.c + s.m)))
}

impl CustomOp3 for Backward {
    fn name(&self) -> &'static str {
        "kanerva_write_bwd"
    }

    fn cpu_fwd(
        &self,
        s1: &CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
        s3: &CpuStorage,
        l3: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        let (batch, len) = backward_geometry(self.0, l1, l2, l3)?;
        let kernel = WriteKernel { backward: true, s: self.0, batch };
        Ok((run_cpu(&kernel, &[(s1, l1), (s2, l2), (s3, l3)], WHAT)?, Shape::from(len)))
    }

    #[cfg(feature = "cuda")]
    fn cuda_fwd(
        &self,
        s1: &CudaStorage,
        l1: &Layout,
        s2: &CudaStorage,
        l2: &Layout,
        s3: &CudaStorage,
        l3: &Layout,
    ) -> Result<(CudaStorage, Shape)> {
        let (batch, len) = backward_geometry(self.0, l1, l2, l3)?;
        let operands = [(s1, l1), (s2, l2), (s3, l3)];
        let out = cuda::kanerva_write("kanerva_write_bwd", &operands, len, batch, self.0)?;
        super::fused::record_launch("kanerva_write_bwd");
        Ok((out, Shape::from(len)))
    }
}

/// The batch and the output's length of the backward's operands `(v, packed, g)`.
fn backward_geometry(s: Machines, v: &Layout, packed: &Layout, g: &Layout) -> Result<(usize, usize)> {
    let batch = batch_of(s, v, packed)?;
    if g.dims() != [batch * s.k * s.m * (s.c + s.m)] || !g.is_contiguous() {
        bail!("{WHAT}: a gradient {:?} for {s:?} and a batch of {batch}", g.dims());
    }
    Ok((batch, batch * (s.k * s.m * s.m + packed_width(s))))
}

/// `kanerva_write.cu` on `batch` examples of `k` machines of `c × m`: the forward a block per
/// (example, machine), the backward a block per example; blocks of 128 threads, with
/// [`shared_bytes`](shared_bytes).
pub fn launch_shape(backward: bool, batch: u32, k: u32, c: u32, m: u32) -> LaunchShape {
    let blocks = if backward { batch } else { batch * k };
    let shared_bytes = shared_bytes(backward, c as usize, m as usize) as u32;
    LaunchShape { blocks: blocks.max(1), threads: 128, shared_bytes }
}

/// The launch of its CUDA kernels, with the `cuda` feature.
#[cfg(feature = "cuda")]
mod cuda {
    use crate::kernels::cuda_kernels::{KANERVA_WRITE, launch_config, run};
    use candle_core::{CudaStorage, Layout, Result};

    /// Runs `kernel` of `kanerva_write.cu` on its f32 operands (contiguous, as laid out) for
    /// `batch` examples of the machines `s`, into a new buffer of `len` elements.
    pub(super) fn kanerva_write(
        kernel: &str,
        operands: &[(&CudaStorage, &Layout)],
        len: usize,
        batch: usize,
        s: crate::kernels::kanerva_manual::Machines,
    ) -> Result<CudaStorage> {
        let (Ok(_), Ok(b), Ok(k), Ok(c), Ok(m)) =
            (i32::try_from(len), i32::try_from(batch), i32::try_from(s.k), i32::try_from(s.c), i32::try_from(s.m))
        else {
            candle_core::bail!("{kernel}: {len} elements are more than the kernel indexes")
        };
        let backward = kernel == "kanerva_write_bwd";
        let config = launch_config(super::launch_shape(backward, b as u32, k as u32, c as u32, m as u32));
        // SAFETY: kanerva_write.cu's kernels take their three operands, the output, batch, k, c and
        // m, in this order; launch_shape gives them the blocks and the shared memory they index,
        // blocks past the last return whole, and between them they write every output element
        // (forward: R' and V'; backward: V̄ and every packed gradient).
        unsafe { run(&KANERVA_WRITE, kernel, operands, len, config, &[b, k, c, m], &[]) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::fused::testing::{assert_fused_matches, var};

    /// Operands of a write: symmetric positive definite covariances, noises away from 0.
    fn operands(b: usize, k: usize, c: usize, m: usize) -> Result<[candle_core::Var; 5]> {
        let a = var(&[b, k, m, m], 0.3)?;
        let spd = (a.matmul(&a.transpose(2, 3)?)?
            + Tensor::eye(m, candle_core::DType::F64, a.device())?.broadcast_as((b, k, m, m))?)?;
        Ok([
            var(&[b, k, c, m], 1.0)?,
            candle_core::Var::from_tensor(&spd)?,
            var(&[b, k, m, 1], 1.0)?,
            var(&[b, c], 1.0)?,
            candle_core::Var::from_tensor(&(var(&[1, k], 0.3)?.as_tensor().abs()? + 0.5)?)?,
        ])
    }

    #[test]
    fn the_fused_write_and_its_gradients_equal_candle_ops_and_autograd() -> Result<()> {
        // Machines of another width than their code, one or several, with noises or without.
        for (b, k, c, m) in [(3, 1, 5, 4), (2, 3, 4, 2)] {
            let [r, v, w, delta, eta] = operands(b, k, c, m)?;
            for eta in [Some(eta.as_tensor()), None] {
                let (rn, vn) = write(&r, &v, &w, &delta, eta)?;
                let (rp, vp) = write_with_candle_ops(&r, &v, &w, &delta, eta)?;
                let vars: Vec<&candle_core::Var> = [&r, &v, &w, &delta].into_iter().collect();
                assert_fused_matches(&vars, &[rn, vn], &[rp, vp], 1e-12)?;
            }
            // The noises' gradient, shared by the batch ([1, k]).
            let (rn, vn) = write(&r, &v, &w, &delta, Some(eta.as_tensor()))?;
            let (rp, vp) = write_with_candle_ops(&r, &v, &w, &delta, Some(eta.as_tensor()))?;
            assert_fused_matches(&[&eta], &[rn, vn], &[rp, vp], 1e-12)?;
        }
        Ok(())
    }
}
