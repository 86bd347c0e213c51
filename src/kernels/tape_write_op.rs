//! NAM-TM's tape write (`tapeWrite`, NAM §3.3) as one candle op with its own backward, for the
//! device-generic path (candle's autograd: the GPU, and evaluation on the CPU).
//!
//! Each row (an example's head) holds a tape `T` (`[L, d]`), a position `p` (`[L]`), a value
//! `v` (`[d]`) and the write and erase probabilities `pw`, `pe`:
//! `T' = T + p ⊗ (pw v − pe Tᵀ p)`. As candle ops (`kernels::nam::tape_write_with_candle_ops`)
//! that is a product, four element-wise kernels and an addition forward and some sixteen
//! kernels backward, for each of NAM-TM's two tapes at every time step. Here it is one kernel
//! each way (`src/kernels/cuda/tape_write.cu`, a block per row), after one concatenation that
//! packs the row's scalars beside its value: a candle op takes at most three operands, so the
//! op reads `(T, p, [v | pw | pe])`.
//!
//! The arithmetic per row is the tape's (`kernels::nam_manual::tape_write_forward` and
//! `tape_write_backward`, which the CPU side of this op calls): one formulation. Where it runs
//! is `kernels::fused`'s rule ([`fused::TAPE_WRITE`](super::fused::TAPE_WRITE)).

use candle_core::{CpuStorage, CustomOp3, D, Layout, Result, Shape, Storage, Tensor, bail};

use super::fused::{RealKernel, run_cpu};
use super::nam_manual::{tape_write_backward, tape_write_forward, value_under_head};
use super::real::Real;
use super::view;
#[cfg(feature = "cuda")]
use candle_core::CudaStorage;

/// `T + p ⊗ (pw v − pe Tᵀ p)` for every row: `t: [.., L, d]`, `p: [.., L]`, `v: [.., d]`,
/// `pw`, `pe`: `[..]` or anything that broadcasts to it (e.g. `[B, 1]` for every head).
pub fn tape_write(t: &Tensor, p: &Tensor, v: &Tensor, pw: &Tensor, pe: &Tensor) -> Result<Tensor> {
    let lead = &t.dims()[..t.rank().saturating_sub(2)];
    let scalar = |s: &Tensor| -> Result<Tensor> { s.broadcast_as(lead)?.contiguous()?.unsqueeze(D::Minus1) };
    let packed = Tensor::cat(&[&v.contiguous()?, &scalar(pw)?, &scalar(pe)?], D::Minus1)?;
    t.contiguous()?.apply_op3(&p.contiguous()?, &packed, Write)
}

/// The threads of the CUDA kernels' block for a row of `d` features: a multiple of 32, at
/// most 256 (a block loops over more).
pub fn threads_per_row(d: usize) -> usize {
    d.div_ceil(32).clamp(1, 8) * 32
}

/// The CUDA backward's shared memory for `d` features: `δ` and `g_old`, and two partial sums
/// per warp.
pub fn backward_shared_bytes(d: usize) -> usize {
    (2 * d + 2 * threads_per_row(d) / 32) * std::mem::size_of::<f32>()
}

/// Whether the CUDA backward's shared memory fits a block without opting in to more (48 KiB,
/// less a margin for the kernel's own): up to some 6 000 features, far above NAM-TM's.
pub fn fits_a_block(d: usize) -> bool {
    backward_shared_bytes(d) <= 47 * 1024
}

/// The forward pass on `(T, p, [v | pw | pe])`.
struct Write;

/// The backward pass on `(T, p, [v | pw | pe])`, the output's gradient `g` held here: its
/// output is `[d T | d p | d [v | pw | pe]]`, flat.
struct WriteBackward {
    g: Tensor,
}

/// `(rows, L, d)` of the operands, checked: `t` `[.., L, d]`, `p` `[.., L]`, the packed
/// `[.., d + 2]`, all contiguous.
fn geometry(t: &Layout, p: &Layout, packed: &Layout) -> Result<(usize, usize, usize)> {
    let dims = t.dims();
    if dims.len() < 2 {
        bail!("tapeWrite's fused op takes a tape [.., L, d], got {dims:?}");
    }
    let (len, d) = (dims[dims.len() - 2], dims[dims.len() - 1]);
    let lead = &dims[..dims.len() - 2];
    let rows: usize = lead.iter().product();
    let fits = p.dims().split_last() == Some((&len, lead)) && packed.dims().split_last() == Some((&(d + 2), lead));
    if !fits {
        bail!("tapeWrite's fused op: a tape {dims:?}, a position {:?}, values {:?}", p.dims(), packed.dims());
    }
    if !t.is_contiguous() || !p.is_contiguous() || !packed.is_contiguous() {
        bail!("tapeWrite's fused op takes contiguous operands");
    }
    Ok((rows, len, d))
}

/// The CPU computation of either pass, a row at a time.
struct WriteKernel {
    backward: bool,
    len: usize,
    d: usize,
}

impl RealKernel for WriteKernel {
    /// Forward: `(T, p, packed)`; backward: `(T, p, packed, g)`.
    fn run<T: Real>(&self, o: &[&[T]]) -> Vec<T> {
        let (len, d) = (self.len, self.d);
        let (tape, pos, packed) = (o[0], o[1], o[2]);
        let rows = pos.len() / len.max(1);
        let row = |r: usize| {
            let q = &packed[r * (d + 2)..][..d + 2];
            (&tape[r * len * d..][..len * d], &pos[r * len..][..len], &q[..d], q[d], q[d + 1])
        };
        let mut old = vec![T::zero(); d];
        if !self.backward {
            let mut scratch = vec![T::zero(); d];
            // SAFETY: each row writes its `len · d` elements whole, and the rows tile the tape.
            return unsafe {
                view::written(tape.len(), |out| {
                    for (r, out) in out.chunks_exact_mut(len * d).enumerate().take(rows) {
                        let (t, p, v, pw, pe) = row(r);
                        tape_write_forward(t, p, v, pw, pe, &mut old, out, &mut scratch);
                    }
                })
            };
        }
        let g = o[3];
        let mut scratch = vec![T::zero(); 3 * d];
        let (mut gp, mut gq) = (vec![T::zero(); rows * len], vec![T::zero(); rows * (d + 2)]);
        // SAFETY: as the forward's, for the tape's gradient.
        let mut out = unsafe {
            view::written(tape.len(), |gt| {
                for (r, gt) in gt.chunks_exact_mut(len * d).enumerate().take(rows) {
                    let (t, p, v, pw, pe) = row(r);
                    value_under_head(t, p, &mut old);
                    let gq = &mut gq[r * (d + 2)..][..d + 2];
                    let (gv, gscalars) = gq.split_at_mut(d);
                    let gp = &mut gp[r * len..][..len];
                    let g = &g[r * len * d..][..len * d];
                    let (gpw, gpe) = tape_write_backward(t, p, v, &old, pw, pe, g, gt, gp, gv, &mut scratch);
                    gscalars.copy_from_slice(&[gpw, gpe]);
                }
            })
        };
        out.extend(gp);
        out.extend(gq);
        out
    }
}

impl CustomOp3 for Write {
    fn name(&self) -> &'static str {
        "tape_write_fwd"
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
        let (_, len, d) = geometry(l1, l2, l3)?;
        let kernel = WriteKernel { backward: false, len, d };
        Ok((run_cpu(&kernel, &[(s1, l1), (s2, l2), (s3, l3)], "tapeWrite's fused op")?, l1.shape().clone()))
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
        let (rows, len, d) = geometry(l1, l2, l3)?;
        let operands = [(s1, l1), (s2, l2), (s3, l3)];
        let out = super::cuda_kernels::tape_write("tape_write_fwd", &operands, rows, len, d, rows * len * d)?;
        super::fused::record_launch("tape_write_fwd");
        Ok((out, l1.shape().clone()))
    }

    fn bwd(
        &self,
        t: &Tensor,
        p: &Tensor,
        packed: &Tensor,
        _out: &Tensor,
        grad: &Tensor,
    ) -> Result<(Option<Tensor>, Option<Tensor>, Option<Tensor>)> {
        let op = WriteBackward { g: grad.contiguous()? };
        let all = t.apply_op3_no_bwd(p, packed, &op)?;
        let (nt, np) = (t.elem_count(), p.elem_count());
        let gt = all.narrow(0, 0, nt)?.reshape(t.shape())?;
        let gp = all.narrow(0, nt, np)?.reshape(p.shape())?;
        let gq = all.narrow(0, nt + np, packed.elem_count())?.reshape(packed.shape())?;
        Ok((Some(gt), Some(gp), Some(gq)))
    }
}

impl CustomOp3 for WriteBackward {
    fn name(&self) -> &'static str {
        "tape_write_bwd"
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
        let (rows, len, d) = geometry(l1, l2, l3)?;
        let (storage, lg) = self.g.storage_and_layout();
        let Storage::Cpu(sg) = &*storage else { bail!("tapeWrite's fused op: operands on different devices") };
        check_gradient(lg, l1)?;
        let kernel = WriteKernel { backward: true, len, d };
        let out = run_cpu(&kernel, &[(s1, l1), (s2, l2), (s3, l3), (sg, lg)], "tapeWrite's fused op")?;
        Ok((out, Shape::from(rows * (len * d + len + d + 2))))
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
        let (rows, len, d) = geometry(l1, l2, l3)?;
        let (storage, lg) = self.g.storage_and_layout();
        let Storage::Cuda(sg) = &*storage else { bail!("tapeWrite's fused op: operands on different devices") };
        check_gradient(lg, l1)?;
        let count = rows * (len * d + len + d + 2);
        let operands = [(s1, l1), (s2, l2), (s3, l3), (sg, lg)];
        let out = super::cuda_kernels::tape_write("tape_write_bwd", &operands, rows, len, d, count)?;
        super::fused::record_launch("tape_write_bwd");
        Ok((out, Shape::from(count)))
    }
}

/// The output's gradient must be laid out as the tape.
fn check_gradient(g: &Layout, t: &Layout) -> Result<()> {
    if g.dims() != t.dims() || !g.is_contiguous() {
        bail!("tapeWrite's fused op: a gradient {:?} for a tape {:?}", g.dims(), t.dims());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::fused::testing::{assert_fused_matches, var};
    use crate::kernels::nam::tape_write_with_candle_ops as reference;

    #[test]
    fn the_fused_write_and_its_gradients_equal_candle_ops_and_autograd() -> Result<()> {
        // Three examples of two heads, a tape of 5 cells of 4 features.
        let (t, p, v) = (var(&[3, 2, 5, 4], 1.0)?, var(&[3, 2, 5], 1.0)?, var(&[3, 2, 4], 1.0)?);
        // Per head, and one probability for both heads (broadcast over them), as NAM-TM's.
        let (pw, pe) = (var(&[3, 2], 1.0)?, var(&[3, 1], 1.0)?);
        let fused = tape_write(&t, &p, &v, &pw, &pe)?;
        let plain = reference(&t, &p, &v, &pw, &pe)?;
        assert_fused_matches(&[&t, &p, &v, &pw, &pe], &[fused], &[plain], 1e-12)?;
        // The same tensor as both probabilities (`tapeWrite(T, H, v, pw, pw)`).
        let fused = tape_write(&t, &p, &v, &pw, &pw)?;
        assert_fused_matches(&[&t, &p, &v, &pw], &[fused], &[reference(&t, &p, &v, &pw, &pw)?], 1e-12)
    }

    #[test]
    fn operands_that_do_not_fit_are_an_error() -> Result<()> {
        let (t, p, v, pw) = (var(&[2, 5, 4], 1.0)?, var(&[2, 4], 1.0)?, var(&[2, 4], 1.0)?, var(&[2], 1.0)?);
        assert!(tape_write(&t, &p, &v, &pw, &pw).is_err_and(|e| e.to_string().contains("position")));
        Ok(())
    }
}
