//! `relRead(Mr, c, b)` (STM's read of its relational memory, SAM Eq. 11 on the authors' code's
//! axis) as one candle op with its own backward, for the device-generic path (candle's
//! autograd: the GPU).
//!
//! As candle ops it is a softmax, a broadcast product and a batched product forward, and
//! backward the softmax's, two products and a broadcast product and a sum for each of `p` and
//! `b`: some ten kernels a time step. Here it is one kernel forward and two backward
//! (`src/kernels/cuda/rel_read.cu`: the memory's gradient with `gu = Mr g`, then the gradients
//! of `c` and `b` from `gu`). The CPU computation is the tape's (`prims::rel_read`), loop for
//! loop. Where it runs is its switch's rule (`kernels::switches`) ([`REL_READ`](REL_READ)).

use candle_core::{CpuStorage, CustomOp3, Layout, Result, Shape, Storage, Tensor, bail};

use super::fused::{BLOCK_SHARED_BYTES, RealKernel, run_cpu};
use super::launch_shape::LaunchShape;
use super::real::Real;
use super::switches::Switch;
#[cfg(feature = "cuda")]
use candle_core::CudaStorage;

/// Off until measured on a GPU (the standing says what the measurement is).
pub const REL_READ: Switch =
    Switch::awaits_gpu("rel_read", "STM's step with and without it, after `doctor --check` with it");
inventory::submit! { REL_READ }

/// How errors name the op.
const WHAT: &str = "the fused relational read";

/// Whether the fused op takes these operands: `Mr` `[batch, nq, d, d2]`, `c` `[batch, nq]`,
/// `b` `[batch, d]`, one float type, one device, and a block's shared memory holds `p` and `b`.
pub fn fits(mr: &Tensor, c: &Tensor, b: &Tensor) -> bool {
    let (&[batch, nq, d, _], &[cb, cq], &[bb, bd]) = (mr.dims(), c.dims(), b.dims()) else { return false };
    (cb, cq, bb, bd) == (batch, nq, batch, d)
        && mr.dtype() == c.dtype()
        && mr.dtype() == b.dtype()
        && mr.device().same_device(c.device())
        && mr.device().same_device(b.device())
        && mr.elem_count() > 0
        && (nq + d) * 4 <= BLOCK_SHARED_BYTES
        && (mr.device().is_cpu() || u32::try_from(mr.elem_count() + batch * nq * d).is_ok())
}

/// `v[f] = Σ_n Σ_e softmax(c)[n] b[e] Mr[n, e, f]`, `[batch, d2]`, for operands [`fits`] takes.
pub fn rel_read(mr: &Tensor, c: &Tensor, b: &Tensor) -> Result<Tensor> {
    if !fits(mr, c, b) {
        bail!("{WHAT} takes Mr [batch, nq, d, d2], c [batch, nq], b [batch, d], got {mr:?}, {c:?}, {b:?}");
    }
    mr.contiguous()?.apply_op3(&c.contiguous()?, &b.contiguous()?, ReadOp { pass: Pass::Forward, held_b: None })
}

/// One pass of the read as a candle op: `Forward` `(Mr, c, b) → v`; `Memory` `(Mr, c, g)` and
/// the held `b` → `[d Mr | gu]`, flat (a candle op takes three operands); `Inputs`
/// `(c, b, gu) → [d c | d b]`, flat. Only the forward has a backward.
struct ReadOp {
    pass: Pass,
    held_b: Option<Tensor>,
}

/// `(batch, nq, d, d2)` of a pass's first two operands (`d2` 0 for `Inputs`).
fn geometry(pass: Pass, l1: &Layout, l2: &Layout) -> Result<(usize, usize, usize, usize)> {
    match (pass, l1.dims(), l2.dims()) {
        (Pass::Inputs, &[batch, nq], &[_, d]) => Ok((batch, nq, d, 0)),
        (Pass::Forward | Pass::Memory, &[batch, nq, d, d2], _) => Ok((batch, nq, d, d2)),
        _ => bail!("{WHAT}: operands {:?} and {:?}", l1.dims(), l2.dims()),
    }
}

/// How many elements a pass puts out.
fn output_len(pass: Pass, (batch, nq, d, d2): (usize, usize, usize, usize)) -> usize {
    match pass {
        Pass::Forward => batch * d2,
        Pass::Memory => batch * nq * d * (d2 + 1),
        Pass::Inputs => batch * (nq + d),
    }
}

/// The tape's computation of each pass (`prims::rel_read`'s `forward_typed` and
/// `backward_typed`), on one example at a time.
struct ReadKernel {
    pass: Pass,
    nq: usize,
    d: usize,
    d2: usize,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Pass {
    Forward,
    Memory,
    Inputs,
}

/// `softmax(c)` of one example, as the tape computes it.
fn softmax<T: Real>(c: &[T]) -> Vec<T> {
    let max = c.iter().fold(c[0], |m, &v| m.max(v));
    let e: Vec<T> = c.iter().map(|&v| (v - max).exp()).collect();
    let sum = e.iter().fold(T::zero(), |s, &x| s + x);
    e.into_iter().map(|x| x / sum).collect()
}

impl RealKernel for ReadKernel {
    /// Forward: `(Mr, c, b)`; memory: `(Mr, c, g, b)`; inputs: `(c, b, gu)`.
    fn run<T: Real>(&self, o: &[&[T]]) -> Vec<T> {
        let (nq, d, d2) = (self.nq, self.d, self.d2);
        let batch = if self.pass == Pass::Inputs { o[0].len() / nq } else { o[0].len() / (nq * d * d2) };
        match self.pass {
            Pass::Forward => {
                let (mr, c, b) = (o[0], o[1], o[2]);
                let mut v = vec![T::zero(); batch * d2];
                for ex in 0..batch {
                    let p = softmax(&c[ex * nq..][..nq]);
                    let m = &mr[ex * nq * d * d2..][..nq * d * d2];
                    let vs = &mut v[ex * d2..][..d2];
                    for (r, row) in m.chunks_exact(d2).enumerate() {
                        let u = p[r / d] * b[ex * d + r % d];
                        for (o, &mv) in vs.iter_mut().zip(row) {
                            *o += u * mv;
                        }
                    }
                }
                v
            }
            Pass::Memory => {
                let (mr, c, g, b) = (o[0], o[1], o[2], o[3]);
                let mut out = Vec::with_capacity(mr.len() + batch * nq * d);
                let mut gu = Vec::with_capacity(batch * nq * d);
                for ex in 0..batch {
                    let p = softmax(&c[ex * nq..][..nq]);
                    let gs = &g[ex * d2..][..d2];
                    for (r, row) in mr[ex * nq * d * d2..][..nq * d * d2].chunks_exact(d2).enumerate() {
                        let u = p[r / d] * b[ex * d + r % d];
                        out.extend(gs.iter().map(|&gf| u * gf));
                        gu.push(row.iter().zip(gs).fold(T::zero(), |acc, (&mv, &gf)| acc + mv * gf));
                    }
                }
                out.extend(gu);
                out
            }
            Pass::Inputs => {
                let (c, b, gu) = (o[0], o[1], o[2]);
                let (mut gc, mut gb) = (vec![T::zero(); batch * nq], vec![T::zero(); batch * d]);
                for ex in 0..batch {
                    let p = softmax(&c[ex * nq..][..nq]);
                    let (bs, us) = (&b[ex * d..][..d], &gu[ex * nq * d..][..nq * d]);
                    let mut gp = vec![T::zero(); nq];
                    for (n, gpn) in gp.iter_mut().enumerate() {
                        for (e, gbe) in gb[ex * d..][..d].iter_mut().enumerate() {
                            *gpn += us[n * d + e] * bs[e];
                            *gbe += us[n * d + e] * p[n];
                        }
                    }
                    let dot = p.iter().zip(&gp).fold(T::zero(), |acc, (&pn, &g)| acc + pn * g);
                    for n in 0..nq {
                        gc[ex * nq + n] = p[n] * (gp[n] - dot);
                    }
                }
                gc.extend(gb);
                gc
            }
        }
    }
}

impl CustomOp3 for ReadOp {
    fn name(&self) -> &'static str {
        match self.pass {
            Pass::Forward => "rel_read_fwd",
            Pass::Memory => "rel_read_bwd_memory",
            Pass::Inputs => "rel_read_bwd_inputs",
        }
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
        let sizes = geometry(self.pass, l1, l2)?;
        let (_, nq, d, d2) = sizes;
        let kernel = ReadKernel { pass: self.pass, nq, d, d2 };
        let held = self.held_b.as_ref().map(Tensor::storage_and_layout);
        let mut operands = vec![(s1, l1), (s2, l2), (s3, l3)];
        if let Some((storage, layout)) = &held {
            let Storage::Cpu(b) = &**storage else { bail!("{WHAT}: b is not on the CPU") };
            operands.push((b, layout));
        }
        Ok((run_cpu(&kernel, &operands, WHAT)?, self.output_shape(sizes)))
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
        let sizes = geometry(self.pass, l1, l2)?;
        let held = self.held_b.as_ref().map(Tensor::storage_and_layout);
        let mut operands = vec![(s1, l1), (s2, l2), (s3, l3)];
        if let Some((storage, layout)) = &held {
            let Storage::Cuda(b) = &**storage else { bail!("{WHAT}: b is not on a CUDA device") };
            if !layout.is_contiguous() {
                bail!("{WHAT} takes a contiguous b");
            }
            operands.push((b, layout));
        }
        let out = cuda::rel_read(self.name(), &operands, sizes, output_len(self.pass, sizes))?;
        super::fused::record_launch(self.name());
        Ok((out, self.output_shape(sizes)))
    }

    fn bwd(
        &self,
        mr: &Tensor,
        c: &Tensor,
        b: &Tensor,
        _out: &Tensor,
        grad: &Tensor,
    ) -> Result<(Option<Tensor>, Option<Tensor>, Option<Tensor>)> {
        if self.pass != Pass::Forward {
            bail!("{WHAT}: the backward's passes have no backward");
        }
        let (n_mr, n_u) = (mr.elem_count(), c.elem_count() * b.dim(1)?);
        let memory = ReadOp { pass: Pass::Memory, held_b: Some(b.clone()) };
        let memory = mr.apply_op3_no_bwd(c, &grad.contiguous()?, &memory)?;
        let gu = memory.narrow(0, n_mr, n_u)?;
        let inputs = c.apply_op3_no_bwd(b, &gu, &ReadOp { pass: Pass::Inputs, held_b: None })?;
        let (n_c, n_b) = (c.elem_count(), b.elem_count());
        Ok((
            Some(memory.narrow(0, 0, n_mr)?.reshape(mr.shape())?),
            Some(inputs.narrow(0, 0, n_c)?.reshape(c.shape())?),
            Some(inputs.narrow(0, n_c, n_b)?.reshape(b.shape())?),
        ))
    }
}

impl ReadOp {
    fn output_shape(&self, sizes: (usize, usize, usize, usize)) -> Shape {
        match self.pass {
            Pass::Forward => Shape::from((sizes.0, sizes.3)),
            _ => Shape::from(output_len(self.pass, sizes)),
        }
    }
}

/// `rel_read.cu`'s `kernel`, blocks of 256 threads: the forward and `rel_read_bwd_inputs` a
/// block per example, `rel_read_bwd_memory` a block per example and slot; shared memory for `p`
/// (and `b` forward, `gp` for the inputs' gradients).
pub fn launch_shape(kernel: &str, batch: u32, nq: u32, d: u32) -> LaunchShape {
    let (blocks, shared_floats) = match kernel {
        "rel_read_fwd" => (batch, nq + d),
        "rel_read_bwd_memory" => (batch * nq, nq),
        _ => (batch, 2 * nq),
    };
    LaunchShape { blocks: blocks.max(1), threads: 256, shared_bytes: shared_floats * 4 }
}

/// The launch of its CUDA kernels, with the `cuda` feature.
#[cfg(feature = "cuda")]
mod cuda {
    use crate::kernels::cuda_kernels::{REL_READ, launch_config, run};
    use candle_core::{CudaStorage, Layout, Result};

    /// Runs `kernel` of `rel_read.cu` on its f32 operands (contiguous, as laid out) into a new
    /// buffer of `len` elements, for `batch` examples of `nq` slots of `d × d2`.
    pub(super) fn rel_read(
        kernel: &str,
        operands: &[(&CudaStorage, &Layout)],
        (batch, nq, d, d2): (usize, usize, usize, usize),
        len: usize,
    ) -> Result<CudaStorage> {
        let (Ok(b), Ok(q), Ok(dd), Ok(dd2), Ok(_)) = (
            i32::try_from(batch),
            i32::try_from(nq),
            i32::try_from(d),
            i32::try_from(d2),
            u32::try_from(batch * nq * d * d2 + batch * nq * d),
        ) else {
            candle_core::bail!("{kernel}: {batch} memories of {nq} × {d} × {d2} are more than the kernel indexes")
        };
        let config = launch_config(super::launch_shape(kernel, b as u32, q as u32, dd as u32));
        // SAFETY: rel_read.cu's kernels take their operands, the output, batch, nq, d (and d2 but for
        // rel_read_bwd_inputs), in this order; launch_shape gives the shared memory each indexes
        // (p, and b or gp), blocks past the last return whole, and each writes its example's (or
        // slot's) share of the output, len being v (batch d2), [d Mr | gu] or [d c | d b].
        match kernel {
            "rel_read_bwd_inputs" => unsafe { run(&REL_READ, kernel, operands, len, config, &[b, q, dd], &[]) },
            _ => unsafe { run(&REL_READ, kernel, operands, len, config, &[b, q, dd, dd2], &[]) },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::fused::testing::{assert_fused_matches, var};

    /// relRead in candle's ops, as `prims::rel_read`'s candle forward computes it.
    fn with_candle_ops(mr: &Tensor, c: &Tensor, b: &Tensor) -> Result<Tensor> {
        let (batch, nq, d, d2) = mr.dims4()?;
        let e = c.broadcast_sub(&c.max_keepdim(1)?)?.exp()?;
        let p = e.broadcast_div(&e.sum_keepdim(1)?)?;
        let pb = p.unsqueeze(2)?.broadcast_mul(&b.unsqueeze(1)?)?.reshape((batch, 1, nq * d))?;
        pb.matmul(&mr.reshape((batch, nq * d, d2))?)?.reshape((batch, d2))
    }

    #[test]
    fn the_fused_relational_read_and_its_gradients_equal_candle_ops_and_autograd() -> Result<()> {
        // Not square in any pair of axes, so that a mix-up of them fails.
        let (mr, c, b) = (var(&[3, 2, 4, 5], 1.0)?, var(&[3, 2], 1.0)?, var(&[3, 4], 1.0)?);
        assert_fused_matches(&[&mr, &c, &b], &[rel_read(&mr, &c, &b)?], &[with_candle_ops(&mr, &c, &b)?], 1e-12)
    }

    #[test]
    fn operands_it_does_not_take_are_refused() -> Result<()> {
        let t = |dims: &[usize]| var(dims, 1.0).map(|v| v.as_tensor().clone());
        let (mr, c, b) = (t(&[3, 2, 4, 5])?, t(&[3, 2])?, t(&[3, 4])?);
        assert!(fits(&mr, &c, &b));
        assert!(!fits(&mr, &t(&[3, 3])?, &b), "c of another number of slots");
        assert!(!fits(&mr, &c, &t(&[3, 5])?), "b along the last axis");
        assert!(!fits(&t(&[3, 8, 5])?, &c, &b), "a memory of three axes");
        assert!(rel_read(&mr, &c, &t(&[3, 5])?).is_err());
        Ok(())
    }
}
