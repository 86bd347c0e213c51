//! The Kanerva machines' write after their addressing (`kanervaUpdate`, PKM Eq. 3–4) as one
//! candle op with its own backward, for the device-generic path (candle's autograd: the GPU,
//! and evaluation on the CPU).
//!
//! Per batch element and machine `i`: `u = V_i w_i`, `β_i = 1 / (w_iᵀu + η_i²)`,
//! `R_i' = R_i + β_i δ uᵀ`, `V_i' = V_i − β_i u uᵀ`. As candle ops that is some twelve kernels
//! forward and twenty-five backward a time step; here one each way
//! (`src/kernels/cuda/kanerva/kanerva_write.cu`), and the CPU's computation is the tape's own
//! (`kanerva_manual::write` and `write_backward`, one formulation of the write). Where it runs is
//! its switch's rule (`kernels::cuda::switches`) ([`KANERVA_WRITE`](KANERVA_WRITE)).
//!
//! A candle op takes at most three operands, so the small ones travel packed, a row per batch
//! element: `[w (k·m) | δ (c) | η (k)]`; and the two outputs come out as one flat buffer,
//! `[R' | V']`, which the caller views as two tensors.

use candle_core::{D, Layout, Result, Shape, Tensor, bail};

use crate::kernels::cpu::kanerva_manual::{Machines, Written, write_backward};
use crate::kernels::cpu::real::Real;
use crate::kernels::cuda::fused::BLOCK_SHARED_BYTES;
use crate::kernels::cuda::kernel::{Fused, FusedKernel, Launch, entries};
use crate::kernels::cuda::launch_shape::LaunchShape;
use crate::kernels::cuda::switches::Switch;

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
    if !crate::kernels::cuda::switches::used_for(r, KANERVA_WRITE) || (!r.device().is_cpu() && !fits) {
        return write_with_candle_ops(r, v, w, delta, eta);
    }
    let eta = match eta {
        Some(eta) => eta.broadcast_as((batch, k))?,
        None => Tensor::ones((batch, k), r.dtype(), r.device())?,
    };
    let packed = Tensor::cat(&[&w.reshape((batch, k * m))?, &delta.reshape((batch, c))?, &eta], 1)?.contiguous()?;
    let both = r.contiguous()?.apply_op3(&v.contiguous()?, &packed, Fused(Write::Forward(Machines { k, c, m })))?;
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

/// The two passes on the machines: `(r, v, [w | δ | η]) → [R' | V']` and, for its backward,
/// `(v, [w | δ | η], [R̄' | V̄']) → [V̄ | w̄ | δ̄ | η̄]` (flat; `R̄ = R̄'`, which the caller takes as
/// it is).
#[derive(Clone, Copy, Debug)]
pub enum Write {
    Forward(Machines),
    Backward(Machines),
}

impl Write {
    fn machines(self) -> Machines {
        match self {
            Write::Forward(s) | Write::Backward(s) => s,
        }
    }
}

/// The packed row's length: `k·m + c + k`.
fn packed_width(s: Machines) -> usize {
    s.k * s.m + s.c + s.k
}

/// The batch of operands laid out as `Forward` takes them.
fn batch_of(s: Machines, v: &Layout, packed: &Layout) -> Result<usize> {
    let Machines { k, m, .. } = s;
    let batch = v.dims().first().copied().unwrap_or(0);
    if v.dims() != [batch, k, m, m] || packed.dims() != [batch, packed_width(s)] {
        bail!("{WHAT}: covariances {:?} and packed operands {:?} for {s:?}", v.dims(), packed.dims());
    }
    Ok(batch)
}

impl FusedKernel for Write {
    /// The batch.
    type Sizes = usize;

    entries! { KANERVA_WRITE: Write::Forward(_) => "kanerva_write_fwd", Write::Backward(_) => "kanerva_write_bwd" }

    /// Forward: `(r, v, packed)`; backward: `(v, packed, g)`.
    fn sizes(&self, operands: &[&Layout]) -> Result<(Shape, usize)> {
        let s = self.machines();
        match (self, operands) {
            (Write::Forward(_), &[r, v, packed]) => {
                let batch = batch_of(s, v, packed)?;
                if r.dims() != [batch, s.k, s.c, s.m] {
                    bail!("{WHAT}: means {:?} for {s:?} and a batch of {batch}", r.dims());
                }
                Ok((Shape::from(batch * s.k * s.m * (s.c + s.m)), batch))
            }
            (Write::Backward(_), &[v, packed, g]) => {
                let batch = batch_of(s, v, packed)?;
                if g.dims() != [batch * s.k * s.m * (s.c + s.m)] {
                    bail!("{WHAT}: a gradient {:?} for {s:?} and a batch of {batch}", g.dims());
                }
                Ok((Shape::from(batch * (s.k * s.m * s.m + packed_width(s))), batch))
            }
            _ => bail!("{WHAT}: {} operands for {}", operands.len(), self.entry()),
        }
    }

    fn cpu<T: Real>(&self, batch: usize, operands: &[&[T]]) -> Vec<T> {
        let backward = matches!(self, Write::Backward(_));
        WriteKernel { backward, s: self.machines(), batch }.run(operands)
    }

    /// The forward a block per (example, machine), the backward a block per example; blocks
    /// of 128 threads, with [`shared_bytes`]. `batch`, `k`, `c` and `m` as the kernel's ints.
    fn launch(&self, batch: usize) -> Result<Launch> {
        let (s, backward) = (self.machines(), matches!(self, Write::Backward(_)));
        let len = if backward { batch * (s.k * s.m * s.m + packed_width(s)) } else { batch * s.k * s.m * (s.c + s.m) };
        let (Ok(_), Ok(b), Ok(k)) = (i32::try_from(len), u32::try_from(batch), u32::try_from(s.k)) else {
            bail!("{}: {len} elements are more than the kernel indexes", self.entry())
        };
        let blocks = if backward { b } else { b * k };
        let shared_bytes = shared_bytes(backward, s.c, s.m) as u32;
        let shape = LaunchShape { blocks: blocks.max(1), threads: 128, shared_bytes };
        Launch::with_ints(self.entry(), shape, &[batch, s.k, s.c, s.m])
    }

    fn backward(&self, operands: &[&Tensor], _out: &Tensor, grad: &Tensor) -> Result<Vec<Option<Tensor>>> {
        let (Write::Forward(s), &[r, v, packed]) = (*self, operands) else {
            bail!("{WHAT}'s backward has no gradient of its own")
        };
        let grad = grad.contiguous()?;
        let both = Fused(Write::Backward(s)).apply_no_bwd(&[v, packed, &grad])?;
        let (nr, nv) = (r.elem_count(), v.elem_count());
        Ok(vec![
            Some(grad.narrow(0, 0, nr)?.reshape(r.shape())?),
            Some(both.narrow(0, 0, nv)?.reshape(v.shape())?),
            Some(both.narrow(0, nv, packed.elem_count())?.reshape(packed.shape())?),
        ])
    }
}

/// The CPU computation of either pass, batch element by batch element, through the tape's write.
struct WriteKernel {
    backward: bool,
    s: Machines,
    batch: usize,
}

impl WriteKernel {
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
            crate::kernels::cpu::kanerva_manual::write(self.s, r, v, d, Some(eta), w, &zero_mu, out, r_next, v_next);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::cuda::fused::testing::{assert_fused_matches, var};

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
