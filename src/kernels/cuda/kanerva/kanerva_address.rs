//! The Kanerva machines' addressing and readout (`kanervaRead`, and the start of
//! `kanervaUpdate`: PKM Eq. 44–45) as one candle op with its own backward, for the
//! device-generic path (candle's autograd: the GPU, and evaluation on the CPU).
//!
//! Per batch element and machine `i`: `w_i = (R_iᵀR_i + λI)⁻¹ R_iᵀ z`, `p_i = R_i w_i`,
//! `γ_i = η_i⁻² / Σ_j η_j⁻²`, `μ = Σ_i γ_i p_i`. As candle ops that is some thirteen kernels
//! forward (a Gram matrix, a transpose, the solve, the weights, the readout) and twenty-five
//! backward; here two each way (`src/kernels/cuda/kanerva/kanerva_address.cu`: a block per example
//! and machine, the solves in f64 as on the CPU, then a small kernel that sums over the machines),
//! and the CPU's computation is the tape's own
//! (`kanerva_manual::address`, `mix` and `address_backward`). Where it runs is
//! its switch's rule (`kernels::cuda::switches`) ([`KANERVA_ADDRESS`](KANERVA_ADDRESS)).
//!
//! The code and the noises travel packed, a row per batch element: `[z (c) | η (k)]`; the two
//! outputs come out as one flat buffer, `[w | μ]`, which the caller views as two tensors.
//!
//! Not a `FusedKernel` (`cuda::kernel`): each pass is two kernels through a scratch buffer, the
//! second with its own arguments writing into the first's output (NaN over a machine that is
//! not positive definite); splitting them into two ops would copy the output once more.

use candle_core::{CpuStorage, CustomOp2, CustomOp3, Layout, Result, Shape, Tensor, bail};

use crate::kernels::cpu::kanerva_manual::{Addressed, Machines, address_backward, mix};
use crate::kernels::cpu::real::Real;
use crate::kernels::cuda::fused::{BLOCK_SHARED_BYTES, RealKernel, run_cpu};
use crate::kernels::cuda::kernel::forwards;
use crate::kernels::cuda::launch_shape::LaunchShape;
use crate::kernels::cuda::switches::Switch;
#[cfg(feature = "cuda")]
use candle_core::CudaStorage;

/// PKM (k = 4) 2.12 → 1.61 ms a step, 1.45 with `lerp` (H200, 2026-11-30).
pub const KANERVA_ADDRESS: Switch = Switch::on("kanerva_address");
inventory::submit! { KANERVA_ADDRESS }

/// How errors name the op.
const WHAT: &str = "the fused Kanerva addressing";

/// Whether [`address`] runs as one fused op for machines of `c × m` (`k` of them) in a batch
/// of `batch` on `r`'s device: where its switch runs it and, on CUDA, where a block's
/// shared memory holds its work and the kernels' ints index their buffers.
pub fn fused_for(r: &Tensor, batch: usize, k: usize, c: usize, m: usize) -> bool {
    let fits = shared_bytes(c, m) <= BLOCK_SHARED_BYTES
        && i32::try_from(batch * k * c * m + batch * (c + k)).is_ok()
        && i32::try_from(parts_len(true, batch, k, c)).is_ok()
        && u32::try_from(batch * k).is_ok();
    crate::kernels::cuda::switches::used_for(r, KANERVA_ADDRESS) && (r.device().is_cpu() || fits)
}

/// The weights `w: [B, k, m, 1]` and the readout `μ: [B, c]` of the means `r: [B, k, c, m]`
/// (contiguous, broadcast to the batch) by the code `z: [B or 1, c]` with the noises
/// `eta: [B or 1, k]` (none: 1), as one fused op (see [`fused_for`]).
pub fn address(r: &Tensor, z: &Tensor, eta: Option<&Tensor>, lambda: f64) -> Result<(Tensor, Tensor)> {
    let (batch, k, c, m) = r.dims4()?;
    let eta = match eta {
        Some(eta) => eta.broadcast_as((batch, k))?,
        None => Tensor::ones((batch, k), r.dtype(), r.device())?,
    };
    let packed = Tensor::cat(&[&z.broadcast_as((batch, c))?, &eta], 1)?.contiguous()?;
    let s = Machines { k, c, m };
    let both = r.contiguous()?.apply_op2(&packed, Address { backward: false, s, lambda })?;
    let nw = batch * k * m;
    Ok((both.narrow(0, 0, nw)?.reshape((batch, k, m, 1))?, both.narrow(0, nw, batch * c)?.reshape((batch, c))?))
}

/// A CUDA block's shared memory (one machine of one example): the factor, its diagonal and the
/// right-hand sides of `w` and `a` (`m² + 3m` doubles), then `p` and `R a` (`c` floats each).
pub fn shared_bytes(c: usize, m: usize) -> usize {
    8 * (m * m + 3 * m) + 4 * 2 * c
}

/// The floats of the CUDA kernels' scratch between their two launches: per example and machine,
/// whether its Gram matrix was positive definite and its share of the sums over the machines
/// (forward: `γ_i p_i`, `c`; backward: `γ̄_i` and `R_i a`, `1 + c`).
pub fn parts_len(backward: bool, batch: usize, k: usize, c: usize) -> usize {
    batch * k * if backward { c + 2 } else { c + 1 }
}

/// The op of either pass: forward `(r, [z | η]) → [w | μ]`, and `backward` `(r, [z | η],
/// [w̄ | μ̄]) → [R̄ | z̄ | η̄]`, each flat.
#[derive(Clone, Copy)]
struct Address {
    backward: bool,
    s: Machines,
    lambda: f64,
}

/// The batch of the contiguous operands `(r, packed)`.
fn batch_of(s: Machines, r: &Layout, packed: &Layout) -> Result<usize> {
    let batch = r.dims().first().copied().unwrap_or(0);
    if r.dims() != [batch, s.k, s.c, s.m] || packed.dims() != [batch, s.c + s.k] {
        bail!("{WHAT}: means {:?} and packed operands {:?} for {s:?}", r.dims(), packed.dims());
    }
    if !r.is_contiguous() || !packed.is_contiguous() {
        bail!("{WHAT} takes contiguous operands");
    }
    Ok(batch)
}

/// The CPU computation of either pass on `batch` examples, example by example, through the
/// tape's addressing.
struct AddressKernel {
    pass: Address,
    batch: usize,
}

impl RealKernel for AddressKernel {
    /// Forward: `(r, packed)`; backward: `(r, packed, g)`.
    fn run<T: Real>(&self, o: &[&[T]]) -> Vec<T> {
        let Address { backward, s, lambda } = self.pass;
        let Machines { k, c, m } = s;
        let (b, nr, width) = (self.batch, k * c * m, c + k);
        let (r, packed) = (o[0], o[1]);
        let mut w = vec![T::zero(); k * m];
        let mut chol = vec![0.0f64; k * m * m];
        let (mut p, mut gamma) = (vec![T::zero(); k * c], vec![T::zero(); k]);
        let mut mu = vec![T::zero(); c];
        let mut out = vec![T::zero(); if backward { b * (nr + width) } else { b * (k * m + c) }];
        let nan = T::from_f64(f64::NAN);
        for i in 0..b {
            let (ri, row) = (&r[i * nr..][..nr], &packed[i * width..][..width]);
            let (z, eta) = row.split_at(c);
            let addressed = Addressed { w: &mut w[..], chol: &mut chol[..], p: &mut p[..], gamma: &mut gamma[..] };
            // As the GPU's: a matrix that is not positive definite gives NaN.
            let solved = crate::kernels::cpu::kanerva_manual::address(s, ri, z, Some(eta), lambda, addressed).is_ok();
            if !backward {
                mix(&p, &gamma, &mut mu);
                let (w_out, mu_out) = out.split_at_mut(b * k * m);
                w_out[i * k * m..][..k * m].copy_from_slice(&w);
                mu_out[i * c..][..c].copy_from_slice(&mu);
                if !solved {
                    w_out[i * k * m..][..k * m].fill(nan);
                    mu_out[i * c..][..c].fill(nan);
                }
                continue;
            }
            let g = o[2];
            let (g_w, g_mu) = (&g[i * k * m..][..k * m], &g[b * k * m + i * c..][..c]);
            let (g_r_all, g_packed_all) = out.split_at_mut(b * nr);
            let (g_r, g_row) = (&mut g_r_all[i * nr..][..nr], &mut g_packed_all[i * width..][..width]);
            if !solved {
                g_r.fill(nan);
                g_row.fill(nan);
                continue;
            }
            let (g_z, g_eta) = g_row.split_at_mut(c);
            let saved = Addressed { w: &w[..], chol: &chol[..], p: &p[..], gamma: &gamma[..] };
            address_backward(s, ri, z, Some(eta), &saved, g_mu, Some(g_w), g_r, g_z, Some(g_eta));
        }
        out
    }
}

impl Address {
    /// The pass's first kernel, also the op's name.
    fn entry(&self) -> &'static str {
        if self.backward { "kanerva_address_bwd" } else { "kanerva_address_fwd" }
    }

    /// The batch and the output's length of the pass's operands: `(r, packed)`, and backward
    /// `g` after them.
    fn geometry<S>(&self, operands: &[(&S, &Layout)]) -> Result<(usize, usize)> {
        let s = self.s;
        match (self.backward, operands) {
            (false, &[(_, r), (_, packed)]) => {
                let batch = batch_of(s, r, packed)?;
                Ok((batch, batch * (s.k * s.m + s.c)))
            }
            (true, &[(_, r), (_, packed), (_, g)]) => {
                let batch = batch_of(s, r, packed)?;
                if g.dims() != [batch * (s.k * s.m + s.c)] || !g.is_contiguous() {
                    bail!("{WHAT}: a gradient {:?} for {s:?} and a batch of {batch}", g.dims());
                }
                Ok((batch, batch * (s.k * s.c * s.m + s.c + s.k)))
            }
            _ => bail!("{WHAT}: {} operands for {}", operands.len(), self.entry()),
        }
    }

    fn on_cpu(&self, operands: &[(&CpuStorage, &Layout)]) -> Result<(CpuStorage, Shape)> {
        let (batch, len) = self.geometry(operands)?;
        Ok((run_cpu(&AddressKernel { pass: *self, batch }, operands, WHAT)?, Shape::from(len)))
    }

    #[cfg(feature = "cuda")]
    fn on_cuda(&self, operands: &[(&CudaStorage, &Layout)]) -> Result<(CudaStorage, Shape)> {
        let (batch, len) = self.geometry(operands)?;
        let out = cuda::kanerva_address(self.backward, operands, len, batch, self.s, self.lambda)?;
        crate::kernels::cuda::fused::record_launch(self.entry());
        Ok((out, Shape::from(len)))
    }
}

impl CustomOp2 for Address {
    fn name(&self) -> &'static str {
        self.entry()
    }

    forwards!(s1: l1, s2: l2);

    fn bwd(
        &self,
        r: &Tensor,
        packed: &Tensor,
        _out: &Tensor,
        grad: &Tensor,
    ) -> Result<(Option<Tensor>, Option<Tensor>)> {
        let backward = Address { backward: true, ..*self };
        let both = r.apply_op3_no_bwd(packed, &grad.contiguous()?, &backward)?;
        let nr = r.elem_count();
        Ok((
            Some(both.narrow(0, 0, nr)?.reshape(r.shape())?),
            Some(both.narrow(0, nr, packed.elem_count())?.reshape(packed.shape())?),
        ))
    }
}

impl CustomOp3 for Address {
    fn name(&self) -> &'static str {
        self.entry()
    }

    forwards!(s1: l1, s2: l2, s3: l3);
}

/// `kanerva_address.cu`'s first kernel each way (`kanerva_address_fwd`, `kanerva_address_bwd`)
/// on `batch` examples of `k` machines of `c × m`: a block of 128 threads per example and
/// machine, with [`shared_bytes`](shared_bytes).
pub fn launch_shape(batch: u32, k: u32, c: u32, m: u32) -> LaunchShape {
    let shared_bytes = shared_bytes(c as usize, m as usize) as u32;
    LaunchShape { blocks: (batch * k).max(1), threads: 128, shared_bytes }
}

/// `kanerva_address.cu`'s sums over the machines (`kanerva_address_fwd_sum`,
/// `kanerva_address_bwd_sum`) on `batch` examples: a warp per example.
pub fn sum_launch_shape(batch: u32) -> LaunchShape {
    LaunchShape::warp_per_row(batch)
}

/// The launch of its CUDA kernels, with the `cuda` feature.
#[cfg(feature = "cuda")]
mod cuda {
    use crate::kernels::cuda::modules::{KANERVA_ADDRESS, args_with, f32_view, launch_config};
    use candle_core::cuda_backend::WrapErr;
    use candle_core::cuda_backend::cudarc::driver::PushKernelArg;
    use candle_core::{CudaStorage, Layout, Result};

    /// Runs `kanerva_address.cu` forward or `backward` on its f32 operands (contiguous, as laid out)
    /// for `batch` examples of the machines `s` with the ridge `lambda`, into a new buffer of `len`
    /// elements: the kernel of a block per example and machine, then the one that sums over the
    /// machines, through a scratch buffer of [`parts_len`](super::parts_len)
    /// floats.
    pub(super) fn kanerva_address(
        backward: bool,
        operands: &[(&CudaStorage, &Layout)],
        len: usize,
        batch: usize,
        s: crate::kernels::cpu::kanerva_manual::Machines,
        lambda: f64,
    ) -> Result<CudaStorage> {
        let (kernel, sum_kernel) = if backward {
            ("kanerva_address_bwd", "kanerva_address_bwd_sum")
        } else {
            ("kanerva_address_fwd", "kanerva_address_fwd_sum")
        };
        let parts_len = super::parts_len(backward, batch, s.k, s.c);
        let (Ok(_), Ok(_), Ok(b), Ok(k), Ok(c), Ok(m)) = (
            i32::try_from(len),
            i32::try_from(parts_len),
            i32::try_from(batch),
            i32::try_from(s.k),
            i32::try_from(s.c),
            i32::try_from(s.m),
        ) else {
            candle_core::bail!("{kernel}: {len} elements are more than the kernel indexes")
        };
        let Some((first, _)) = operands.first() else { candle_core::bail!("{kernel}: no operands") };
        let dev = first.device.clone();
        let views = operands.iter().map(|(st, l)| f32_view(st, l)).collect::<Result<Vec<_>>>()?;
        // SAFETY: between them the two kernels write every element (see below).
        let out = unsafe { dev.alloc::<f32>(len)? };
        if len == 0 || batch * s.k == 0 {
            return Ok(CudaStorage::wrap_cuda_slice(out, dev));
        }
        // Allocated and freed on the stream (cuMemAllocAsync, cuMemFreeAsync: no host
        // synchronisation, so a graph capture records both), so dropping it at the end of this
        // function, after the launches, is safe.
        // SAFETY: the first kernel writes every element before the second reads it.
        let parts = unsafe { dev.alloc::<f32>(parts_len)? };
        let lambda = lambda as f32;
        let func = KANERVA_ADDRESS.function(&dev, kernel)?;
        let mut builder = args_with(&func, &views);
        builder.arg(&out).arg(&parts).arg(&b).arg(&k).arg(&c).arg(&m).arg(&lambda);
        // SAFETY: the first kernel takes its operands (r, packed, and backward g), the output, the
        // scratch, batch, k, c, m and λ, in this order; launch_shape gives it a block per example and
        // machine with the shared memory it indexes, blocks past the last return whole, and each
        // writes its machine's w_i (forward) or R̄_i (backward) and its share of the scratch.
        unsafe { builder.launch(launch_config(super::launch_shape(b as u32, k as u32, c as u32, m as u32))) }.w()?;
        let sum = KANERVA_ADDRESS.function(&dev, sum_kernel)?;
        let mut builder = sum.builder();
        if backward {
            let Some(packed) = views.get(1) else { candle_core::bail!("{kernel}: no packed code and noises") };
            builder.arg(packed);
        }
        builder.arg(&parts).arg(&out).arg(&b).arg(&k).arg(&c).arg(&m);
        // SAFETY: the sum kernels take (backward: the packed code and noises,) the scratch, the
        // output, batch, k, c and m, in this order; a warp per example, warps past the last return,
        // and each writes its example's μ (forward) or z̄ and η̄ (backward), and NaN over its w or R̄
        // where a machine was not positive definite.
        unsafe { builder.launch(launch_config(super::sum_launch_shape(b as u32))) }.w()?;
        Ok(CudaStorage::wrap_cuda_slice(out, dev))
    }
}

#[cfg(test)]
mod tests {
    use candle_core::Var;

    use super::*;
    use crate::kernels::blocks::kanerva::{least_squares_weights, machine_weights, readout};
    use crate::kernels::cuda::fused::testing::{assert_fused_matches, var};

    /// [`address`] in candle's ops.
    fn with_candle_ops(r: &Tensor, z: &Tensor, eta: Option<&Tensor>, lambda: f64) -> Result<(Tensor, Tensor)> {
        let k = r.dim(1)?;
        let w = least_squares_weights(r, z, lambda)?;
        let mu = readout(r, &w, &machine_weights(eta, k, z)?)?;
        Ok((w, mu))
    }

    #[test]
    fn the_fused_addressing_and_its_gradients_equal_candle_ops_and_autograd() -> Result<()> {
        // Codes longer and shorter than a machine's columns; one machine or several.
        for (b, k, c, m) in [(3, 1, 5, 4), (2, 3, 3, 4)] {
            let (r, z) = (var(&[b, k, c, m], 1.0)?, var(&[b, c], 1.0)?);
            let eta = Var::from_tensor(&(var(&[1, k], 0.3)?.as_tensor().abs()? + 0.5)?)?;
            let (fw, fmu) = address(&r, &z, Some(&eta), 0.35)?;
            let (pw, pmu) = with_candle_ops(&r, &z, Some(&eta), 0.35)?;
            assert_fused_matches(&[&r, &z, &eta], &[fw, fmu], &[pw, pmu], 1e-10)?;
            let (fw, fmu) = address(&r, &z, None, 0.35)?;
            let (pw, pmu) = with_candle_ops(&r, &z, None, 0.35)?;
            assert_fused_matches(&[&r, &z], &[fw, fmu], &[pw, pmu], 1e-10)?;
        }
        Ok(())
    }

    #[test]
    fn non_finite_means_give_nan_not_an_error() -> Result<()> {
        let r = (Tensor::ones((2, 1, 3, 2), candle_core::DType::F64, &candle_core::Device::Cpu)? * f64::INFINITY)?;
        let z = Tensor::ones((2, 3), candle_core::DType::F64, &candle_core::Device::Cpu)?;
        let (w, mu) = address(&r, &z, None, 0.35)?;
        assert!(w.flatten_all()?.to_vec1::<f64>()?.iter().all(|v| v.is_nan()));
        assert!(mu.flatten_all()?.to_vec1::<f64>()?.iter().all(|v| v.is_nan()));
        Ok(())
    }
}
