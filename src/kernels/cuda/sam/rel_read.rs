//! `relRead(Mr, c, b)` (STM's read of its relational memory, SAM Eq. 11 on the authors' code's
//! axis) as one candle op with its own backward, for the device-generic path (candle's
//! autograd: the GPU).
//!
//! As candle ops it is a softmax, a broadcast product and a batched product forward, and
//! backward the softmax's, two products and a broadcast product and a sum for each of `p` and
//! `b`: some ten kernels a time step. Here it is one kernel forward and two backward
//! (`src/kernels/cuda/sam/rel_read.cu`: the memory's gradient with `gu = Mr g`, then the gradients
//! of `c` and `b` from `gu`). The CPU computation is the tape's (`prims::rel_read`), loop for
//! loop. Where it runs is its switch's rule (`kernels::cuda::switches`) ([`REL_READ`](REL_READ)).

use candle_core::{Layout, Result, Shape, Tensor, bail};

use crate::kernels::cpu::real::Real;
use crate::kernels::cuda::fused::BLOCK_SHARED_BYTES;
use crate::kernels::cuda::kernel::{Fused, FusedKernel, Launch, entries};
use crate::kernels::cuda::launch_shape::LaunchShape;
use crate::kernels::cuda::switches::Switch;

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
    mr.contiguous()?.apply_op3(&c.contiguous()?, &b.contiguous()?, Fused(RelRead::Forward))
}

/// The passes of the read: `Forward` `(Mr, c, b) → v`; for its backward `Memory` `(Mr, c, g, b)
/// → [d Mr | gu]` and then `Inputs` `(c, b, gu) → [d c | d b]`, each flat.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RelRead {
    Forward,
    Memory,
    Inputs,
}

/// `batch` memories of `nq` slots of `d × d2` (`d2` 0 for `Inputs`).
#[derive(Clone, Copy, Debug)]
pub struct Slots {
    batch: usize,
    nq: usize,
    d: usize,
    d2: usize,
}

/// `softmax(c)` of one example, as the tape computes it.
fn softmax<T: Real>(c: &[T]) -> Vec<T> {
    let max = c.iter().fold(c[0], |m, &v| m.max(v));
    let e: Vec<T> = c.iter().map(|&v| (v - max).exp()).collect();
    let sum = e.iter().fold(T::zero(), |s, &x| s + x);
    e.into_iter().map(|x| x / sum).collect()
}

impl FusedKernel for RelRead {
    type Sizes = Slots;

    entries! { REL_READ:
        RelRead::Forward => "rel_read_fwd",
        RelRead::Memory => "rel_read_bwd_memory",
        RelRead::Inputs => "rel_read_bwd_inputs",
    }

    /// `Mr` `[batch, nq, d, d2]` first (forward, memory), or `c` `[batch, nq]` and `b`
    /// `[batch, d]` (inputs).
    fn sizes(&self, operands: &[&Layout]) -> Result<(Shape, Slots)> {
        let count = if *self == RelRead::Memory { 4 } else { 3 };
        let slots = match (self, operands.len() == count, operands.first().map(|l| l.dims())) {
            (RelRead::Inputs, true, Some(&[batch, nq])) => {
                let &[_, d] = operands[1].dims() else { bail!("{WHAT}: b {:?}", operands[1].dims()) };
                Slots { batch, nq, d, d2: 0 }
            }
            (RelRead::Forward | RelRead::Memory, true, Some(&[batch, nq, d, d2])) => Slots { batch, nq, d, d2 },
            _ => bail!(
                "{WHAT}: operands {:?} for {}",
                operands.iter().map(|l| l.dims()).collect::<Vec<_>>(),
                self.entry()
            ),
        };
        let Slots { batch, nq, d, d2 } = slots;
        let shape = match self {
            RelRead::Forward => Shape::from((batch, d2)),
            RelRead::Memory => Shape::from(batch * nq * d * (d2 + 1)),
            RelRead::Inputs => Shape::from(batch * (nq + d)),
        };
        Ok((shape, slots))
    }

    /// The tape's computation of each pass (`prims::rel_read`'s `forward_typed` and
    /// `backward_typed`), one example at a time. Forward: `(Mr, c, b)`; memory: `(Mr, c, g, b)`;
    /// inputs: `(c, b, gu)`.
    fn cpu<T: Real>(&self, Slots { batch, nq, d, d2 }: Slots, o: &[&[T]]) -> Vec<T> {
        match self {
            RelRead::Forward => {
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
            RelRead::Memory => {
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
            RelRead::Inputs => {
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

    /// Blocks of 256 threads: the forward and `rel_read_bwd_inputs` a block per example,
    /// `rel_read_bwd_memory` a block per example and slot; shared memory for `p` (and `b`
    /// forward, `gp` for the inputs' gradients). `batch`, `nq`, `d` (and `d2` but for the
    /// inputs' pass) as the kernel's ints.
    fn launch(&self, Slots { batch, nq, d, d2 }: Slots) -> Result<Launch> {
        let (Ok(b), Ok(q), Ok(dd), Ok(_)) = (
            u32::try_from(batch),
            u32::try_from(nq),
            u32::try_from(d),
            u32::try_from(batch * nq * d * d2 + batch * nq * d),
        ) else {
            bail!("{}: {batch} memories of {nq} × {d} × {d2} are more than the kernel indexes", self.entry())
        };
        let (blocks, shared_floats, ints) = match self {
            RelRead::Forward => (b, q + dd, vec![batch, nq, d, d2]),
            RelRead::Memory => (b * q, q, vec![batch, nq, d, d2]),
            RelRead::Inputs => (b, 2 * q, vec![batch, nq, d]),
        };
        let shape = LaunchShape { blocks: blocks.max(1), threads: 256, shared_bytes: shared_floats * 4 };
        Launch::with_ints(self.entry(), shape, &ints)
    }

    fn backward(&self, operands: &[&Tensor], _out: &Tensor, grad: &Tensor) -> Result<Vec<Option<Tensor>>> {
        let (RelRead::Forward, &[mr, c, b]) = (self, operands) else {
            bail!("{WHAT}: the backward's passes have no backward")
        };
        let (n_mr, n_u) = (mr.elem_count(), c.elem_count() * b.dim(1)?);
        let memory = Fused(RelRead::Memory).apply_no_bwd(&[mr, c, &grad.contiguous()?, b])?;
        let gu = memory.narrow(0, n_mr, n_u)?;
        let inputs = Fused(RelRead::Inputs).apply_no_bwd(&[c, b, &gu])?;
        let (n_c, n_b) = (c.elem_count(), b.elem_count());
        Ok(vec![
            Some(memory.narrow(0, 0, n_mr)?.reshape(mr.shape())?),
            Some(inputs.narrow(0, 0, n_c)?.reshape(c.shape())?),
            Some(inputs.narrow(0, n_c, n_b)?.reshape(b.shape())?),
        ])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::cuda::fused::testing::{assert_fused_matches, var};

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
