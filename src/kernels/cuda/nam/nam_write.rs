//! NAM's write rule (NAM §3.1, §3.3) as one candle op with its own backward, for the
//! device-generic path (candle's autograd: the GPU, and evaluation on the CPU), in both of
//! `kernels::blocks::nam`'s layouts:
//!
//! - **tape** (`tapeWrite`, NAM-TM): a tape `T` (`[L, d]`) written at a position `p` (`[L]`),
//!   `T' = T + p ⊗ (pw v − pe Tᵀ p)`, `v` of `d`;
//! - **matrix** (`namWR`, LSAM): a memory `M` (`[dv, dk]`) written at a unit key `k` (`[dk]`),
//!   `M' = M + (pw v − pe M k) ⊗ k`, `v` of `dv`.
//!
//! As candle ops (`kernels::blocks::nam::tape_write_with_candle_ops`, `write_with_candle_ops`) each is
//! a product, four element-wise kernels and an addition (and, for the matrix, a second product)
//! forward and some sixteen kernels backward, at every time step; here it is one kernel each
//! way (`src/kernels/cuda/nam/nam_write.cu`, a block per memory), after one concatenation that
//! packs each memory's value and probabilities as `[v | pw | pe]`: a candle op takes at most three
//! operands, so the op reads `(memory, address, [v | pw | pe])`.
//!
//! The arithmetic per memory is the tape's manual backward's (`kernels::cpu::nam_manual`:
//! `tape_write_forward`/`tape_write_backward`, `write_forward`/`write_backward`, which the CPU
//! side of this op calls): one formulation. Where it runs is its switch's rule
//! (`kernels::cuda::switches`) ([`TAPE_WRITE`](TAPE_WRITE), [`NAM_WRITE`](NAM_WRITE)).

use std::mem::MaybeUninit;

use candle_core::{D, Layout, Result, Shape, Tensor, bail};

use crate::kernels::cpu::nam_manual::{
    tape_write_backward, tape_write_forward, value_under_head, write_backward, write_forward,
};
use crate::kernels::cpu::real::Real;
use crate::kernels::cpu::view;
use crate::kernels::cuda::kernel::{Fused, FusedKernel, Launch, entries};
use crate::kernels::cuda::launch_shape::LaunchShape;
use crate::kernels::cuda::switches::Switch;

/// The tape's write: NAM-TM 30.24 → 29.35 ms a step (H100, 2026-11-26).
pub const TAPE_WRITE: Switch = Switch::on("tape_write");
inventory::submit! { TAPE_WRITE }

/// The matrix's write: LSAM 14.33 → 13.79 ms a step (H100, 2026-11-26).
pub const NAM_WRITE: Switch = Switch::on("nam_write");
inventory::submit! { NAM_WRITE }

/// The tape's backward split among warps: NAM-TM's example 12.23 → 11.54 ms a step (H100, 2026-11-27).
pub const TAPE_WRITE_SPLIT: Switch = Switch::on("tape_write_split");
inventory::submit! { TAPE_WRITE_SPLIT }

/// How errors name the op.
const WHAT: &str = "the fused NAM write";

/// Which of NAM's two layouts a write has.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Orientation {
    /// `[L, d]` addressed by a position over the `L` rows; the value has `d`.
    Tape,
    /// `[dv, dk]` addressed by a key over the `dk` columns; the value has `dv`.
    Matrix,
}

impl Orientation {
    /// `(address, value)` lengths of a `rows × cols` memory.
    fn lengths(self, rows: usize, cols: usize) -> (usize, usize) {
        match self {
            Orientation::Tape => (rows, cols),
            Orientation::Matrix => (cols, rows),
        }
    }
}

/// Writes every memory of `memory` (`[.., a, b]`) at `address` (`[.., a]` for a tape, `[.., b]`
/// for a matrix) with `value` (`[.., b]` for a tape, `[.., a]` for a matrix) and the
/// probabilities `pw`, `pe` (`[..]` or anything that broadcasts to it, e.g. `[B, 1]` for every
/// head).
pub fn write(
    orientation: Orientation,
    memory: &Tensor,
    address: &Tensor,
    value: &Tensor,
    pw: &Tensor,
    pe: &Tensor,
) -> Result<Tensor> {
    let lead = &memory.dims()[..memory.rank().saturating_sub(2)];
    // Every operand to the memory's leading axes (an address or a value may be shared by the
    // batch, as candle's ops broadcast them); candle's backward of the broadcast sums back.
    let per_memory = |t: &Tensor| -> Result<Tensor> {
        let dims: Vec<usize> = lead.iter().copied().chain([t.dim(D::Minus1)?]).collect();
        t.broadcast_as(dims)?.contiguous()
    };
    let scalar = |s: &Tensor| -> Result<Tensor> { s.broadcast_as(lead)?.contiguous()?.unsqueeze(D::Minus1) };
    let packed = Tensor::cat(&[&per_memory(value)?, &scalar(pw)?, &scalar(pe)?], D::Minus1)?;
    memory.contiguous()?.apply_op3(&per_memory(address)?, &packed, Fused(NamWrite::Forward(orientation)))
}

/// The threads of the CUDA kernels' block: for a tape, a multiple of 32 over the `cols`
/// features (at most 256, a block loops over more); for a matrix, a warp per row (at most 8).
pub fn threads_per_memory(orientation: Orientation, rows: usize, cols: usize) -> usize {
    match orientation {
        Orientation::Tape => cols.div_ceil(32).clamp(1, 8) * 32,
        Orientation::Matrix => rows.clamp(1, 8) * 32,
    }
}

/// The CUDA backward's shared memory: for a tape `δ` and `g_old` (`2 cols` floats), for a
/// matrix each warp's partial key gradient (`warps · cols`); and two partial sums per warp.
pub fn backward_shared_bytes(orientation: Orientation, rows: usize, cols: usize) -> usize {
    let warps = threads_per_memory(orientation, rows, cols) / 32;
    let per_feature = match orientation {
        Orientation::Tape => 2 * cols,
        Orientation::Matrix => warps * cols,
    };
    (per_feature + 2 * warps) * std::mem::size_of::<f32>()
}

/// The warps of `tape_write_bwd_split`'s block: one per cell, up to eight.
pub fn tape_split_warps(cells: usize) -> usize {
    cells.clamp(1, 8)
}

/// `tape_write_bwd_split`'s shared memory: each warp's sums over its cells (`2 warps features`
/// floats), `δ` and `g_old` (`2 features`), two partial sums per warp.
pub fn tape_split_shared_bytes(cells: usize, features: usize) -> usize {
    let warps = tape_split_warps(cells);
    (2 * warps * features + 2 * features + 2 * warps) * std::mem::size_of::<f32>()
}

/// Whether the CUDA backward's shared memory fits a block
/// ([`crate::kernels::cuda::fused::BLOCK_SHARED_BYTES`]): up to some 6 000 features a tape row,
/// 1 400 key columns a matrix, far above NAM's sizes.
pub fn fits_a_block(orientation: Orientation, rows: usize, cols: usize) -> bool {
    backward_shared_bytes(orientation, rows, cols) <= crate::kernels::cuda::fused::BLOCK_SHARED_BYTES
}

/// The passes: `(memory, address, [value | pw | pe]) → memory'` and, for its backward,
/// `(memory, address, [value | pw | pe], g) → [d memory | d address | d [value | pw | pe]]`
/// (flat): a block per memory, or for a tape a block whose warps split the cells.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NamWrite {
    Forward(Orientation),
    Backward(Orientation),
    TapeBackwardSplit,
}

impl NamWrite {
    fn orientation(self) -> Orientation {
        match self {
            NamWrite::Forward(o) | NamWrite::Backward(o) => o,
            NamWrite::TapeBackwardSplit => Orientation::Tape,
        }
    }
}

/// The shape of one call: `count` memories of `rows × cols`, the address and value lengths.
#[derive(Clone, Copy, Debug)]
pub struct Geometry {
    count: usize,
    rows: usize,
    cols: usize,
    address: usize,
    value: usize,
}

impl Geometry {
    /// Checks the operands: the memory `[.., rows, cols]`, the address `[.., address]`, the
    /// packed `[.., value + 2]`.
    fn of(orientation: Orientation, memory: &Layout, address: &Layout, packed: &Layout) -> Result<Geometry> {
        let dims = memory.dims();
        if dims.len() < 2 {
            bail!("the fused NAM write takes a memory [.., rows, cols], got {dims:?}");
        }
        let (rows, cols) = (dims[dims.len() - 2], dims[dims.len() - 1]);
        let lead = &dims[..dims.len() - 2];
        let (address_len, value_len) = orientation.lengths(rows, cols);
        let fits = address.dims().split_last() == Some((&address_len, lead))
            && packed.dims().split_last() == Some((&(value_len + 2), lead));
        if !fits {
            bail!(
                "the fused NAM write: a memory {dims:?}, an address {:?} (position or key), values {:?}",
                address.dims(),
                packed.dims()
            );
        }
        let count = lead.iter().product();
        Ok(Geometry { count, rows, cols, address: address_len, value: value_len })
    }

    /// Elements of the backward's output.
    fn backward_len(self) -> usize {
        self.count * (self.rows * self.cols + self.address + self.value + 2)
    }
}

impl FusedKernel for NamWrite {
    type Sizes = Geometry;

    entries! { NAM_WRITE:
        NamWrite::Forward(Orientation::Tape) => "tape_write_fwd",
        NamWrite::Backward(Orientation::Tape) => "tape_write_bwd",
        NamWrite::TapeBackwardSplit => "tape_write_bwd_split",
        NamWrite::Forward(Orientation::Matrix) => "nam_write_fwd",
        NamWrite::Backward(Orientation::Matrix) => "nam_write_bwd",
    }

    /// `(memory, address, packed)`, and for the backward `g` shaped as the memory.
    fn sizes(&self, operands: &[&Layout]) -> Result<(Shape, Geometry)> {
        let (memory, address, packed, g) = match (self, operands) {
            (NamWrite::Forward(_), &[memory, address, packed]) => (memory, address, packed, None),
            (NamWrite::Backward(_) | NamWrite::TapeBackwardSplit, &[memory, address, packed, g]) => {
                (memory, address, packed, Some(g))
            }
            _ => bail!("{WHAT}: {} operands for {}", operands.len(), self.entry()),
        };
        let geometry = Geometry::of(self.orientation(), memory, address, packed)?;
        let Some(g) = g else { return Ok((memory.shape().clone(), geometry)) };
        if g.dims() != memory.dims() {
            bail!("{WHAT}: a gradient {:?} for an output {:?}", g.dims(), memory.dims());
        }
        Ok((Shape::from(geometry.backward_len()), geometry))
    }

    /// A memory at a time. Forward: `(memory, address, packed)`; backward: `(memory, address,
    /// packed, g)`.
    fn cpu<T: Real>(&self, geometry: Geometry, o: &[&[T]]) -> Vec<T> {
        let (orientation, backward) = (self.orientation(), !matches!(self, NamWrite::Forward(_)));
        let Geometry { count, rows, cols, address: na, value: nv } = geometry;
        let size = rows * cols;
        if size == 0 {
            // Empty memories: nothing to write, and the address and values get no gradient.
            return vec![T::zero(); if backward { count * (na + nv + 2) } else { 0 }];
        }
        let (memory, address, packed) = (o[0], o[1], o[2]);
        let unpack = |i: usize| {
            let q = &packed[i * (nv + 2)..][..nv + 2];
            (&memory[i * size..][..size], &address[i * na..][..na], &q[..nv], q[nv], q[nv + 1])
        };
        // `Tᵀ p` for a tape, `M k` for a matrix; and the tape's scratch.
        let (mut read, mut scratch) = (vec![T::zero(); nv], vec![T::zero(); 3 * nv]);
        if !backward {
            // SAFETY: each memory writes its `size` elements whole, and the memories tile the output.
            return unsafe {
                view::written(count * size, |out| {
                    for (i, out) in out.chunks_exact_mut(size).enumerate() {
                        let (m, a, v, pw, pe) = unpack(i);
                        match orientation {
                            Orientation::Tape => tape_write_forward(m, a, v, pw, pe, &mut read, out, &mut scratch),
                            Orientation::Matrix => write_forward(m, a, v, pw, pe, &mut read, out),
                        }
                    }
                })
            };
        }
        let g = o[3];
        let (mut g_address, mut g_packed) = (vec![T::zero(); count * na], vec![T::zero(); count * (nv + 2)]);
        // SAFETY: as the forward's, for the memory's gradient.
        let mut out = unsafe {
            view::written(count * size, |g_memory: &mut [MaybeUninit<T>]| {
                for (i, gm) in g_memory.chunks_exact_mut(size).enumerate() {
                    let (m, a, v, pw, pe) = unpack(i);
                    let ga = &mut g_address[i * na..][..na];
                    let (gv, g_scalars) = g_packed[i * (nv + 2)..][..nv + 2].split_at_mut(nv);
                    let g = &g[i * size..][..size];
                    let (gpw, gpe) = match orientation {
                        Orientation::Tape => {
                            value_under_head(m, a, &mut read);
                            tape_write_backward(m, a, v, &read, pw, pe, g, gm, ga, gv, &mut scratch)
                        }
                        Orientation::Matrix => {
                            matrix_read(m, a, &mut read);
                            write_backward(m, a, v, &read, pw, pe, g, gm, gv, ga)
                        }
                    };
                    g_scalars.copy_from_slice(&[gpw, gpe]);
                }
            })
        };
        out.extend(g_address);
        out.extend(g_packed);
        out
    }

    /// A block per memory, its threads and the backward's shared memory as
    /// [`threads_per_memory`] and [`backward_shared_bytes`] say; the split backward a warp per
    /// cell up to eight, with [`tape_split_shared_bytes`]. The number of memories, rows and
    /// cols as the kernel's ints.
    fn launch(&self, Geometry { count, rows, cols, .. }: Geometry) -> Result<Launch> {
        let Ok(blocks) = u32::try_from(count) else {
            bail!("{}: {count} memories of {rows} × {cols} are more than it indexes", self.entry())
        };
        let shape = match *self {
            NamWrite::TapeBackwardSplit => LaunchShape {
                blocks: blocks.max(1),
                threads: (tape_split_warps(rows) * 32) as u32,
                shared_bytes: tape_split_shared_bytes(rows, cols) as u32,
            },
            NamWrite::Forward(o) | NamWrite::Backward(o) => LaunchShape {
                blocks: blocks.max(1),
                threads: threads_per_memory(o, rows, cols) as u32,
                shared_bytes: match self {
                    NamWrite::Backward(_) => backward_shared_bytes(o, rows, cols) as u32,
                    _ => 0,
                },
            },
        };
        Launch::with_ints(self.entry(), shape, &[count, rows, cols])
    }

    fn backward(&self, operands: &[&Tensor], _out: &Tensor, grad: &Tensor) -> Result<Vec<Option<Tensor>>> {
        let (NamWrite::Forward(orientation), &[memory, address, packed]) = (*self, operands) else {
            bail!("{WHAT}'s backward has no gradient of its own")
        };
        // A tape's cells split among warps, where `TAPE_WRITE_SPLIT` has it and a block holds it.
        let (rows, cols) = (memory.dim(D::Minus2)?, memory.dim(D::Minus1)?);
        let split = orientation == Orientation::Tape
            && crate::kernels::cuda::switches::used_for(grad, TAPE_WRITE_SPLIT)
            && tape_split_shared_bytes(rows, cols) <= crate::kernels::cuda::fused::BLOCK_SHARED_BYTES;
        let pass = if split { NamWrite::TapeBackwardSplit } else { NamWrite::Backward(orientation) };
        let all = Fused(pass).apply_no_bwd(&[memory, address, packed, &grad.contiguous()?])?;
        let (nm, na) = (memory.elem_count(), address.elem_count());
        let g_memory = all.narrow(0, 0, nm)?.reshape(memory.shape())?;
        let g_address = all.narrow(0, nm, na)?.reshape(address.shape())?;
        let g_packed = all.narrow(0, nm + na, packed.elem_count())?.reshape(packed.shape())?;
        Ok(vec![Some(g_memory), Some(g_address), Some(g_packed)])
    }
}

/// `M k` of a matrix memory (`[dv, dk]`, `dk = k.len()`), as `write_forward` computes it.
fn matrix_read<T: Real>(m: &[T], k: &[T], mk: &mut [T]) {
    for (o, row) in mk.iter_mut().zip(m.chunks_exact(k.len())) {
        *o = crate::kernels::cpu::reduce::dot(row, k);
    }
}

#[cfg(test)]
mod tests {
    use candle_core::Var;

    use super::*;
    use crate::kernels::blocks::nam::{tape_write_with_candle_ops, write_with_candle_ops};
    use crate::kernels::cuda::fused::testing::{assert_fused_matches, var};

    /// [`write`] against the same write in candle's ops, forward and in the gradients of
    /// `memory, address, value, pw, pe`.
    fn assert_write_matches(orientation: Orientation, operands: [&Var; 5]) -> Result<()> {
        let [memory, address, value, pw, pe] = operands;
        let fused = write(orientation, memory, address, value, pw, pe)?;
        let plain = match orientation {
            Orientation::Tape => tape_write_with_candle_ops(memory, address, value, pw, pe)?,
            Orientation::Matrix => {
                // candle's product needs the key expanded to the memories' batch (the prims
                // expand it).
                let dims = [&memory.dims()[..memory.rank() - 2], &[address.dim(D::Minus1)?]].concat();
                write_with_candle_ops(memory, &address.broadcast_as(dims)?.contiguous()?, value, pw, pe)?
            }
        };
        assert_fused_matches(&operands, &[fused], &[plain], 1e-12)
    }

    #[test]
    fn the_fused_tape_write_and_its_gradients_equal_candle_ops_and_autograd() -> Result<()> {
        // Three examples of two heads, a tape of 5 cells of 4 features.
        let (t, p, v) = (var(&[3, 2, 5, 4], 1.0)?, var(&[3, 2, 5], 1.0)?, var(&[3, 2, 4], 1.0)?);
        // Per head, and one probability for both heads (broadcast over them), as NAM-TM's.
        let (pw, pe) = (var(&[3, 2], 1.0)?, var(&[3, 1], 1.0)?);
        assert_write_matches(Orientation::Tape, [&t, &p, &v, &pw, &pe])?;
        // The same tensor as both probabilities (`tapeWrite(T, H, v, pw, pw)`).
        assert_write_matches(Orientation::Tape, [&t, &p, &v, &pw, &pw])
    }

    #[test]
    fn the_fused_matrix_write_and_its_gradients_equal_candle_ops_and_autograd() -> Result<()> {
        // Three examples of two heads, memories of 3 values × 5 keys (not square, so that a
        // mix-up of the axes fails).
        let (m, k, v) = (var(&[3, 2, 3, 5], 1.0)?, var(&[3, 2, 5], 1.0)?, var(&[3, 2, 3], 1.0)?);
        let (pw, pe) = (var(&[3, 2], 1.0)?, var(&[3, 1], 1.0)?);
        assert_write_matches(Orientation::Matrix, [&m, &k, &v, &pw, &pe])
    }

    #[test]
    fn a_value_and_an_address_shared_by_the_batch_broadcast_as_with_candle_ops() -> Result<()> {
        // A batch of 3 memories written with one value (and, for the matrix, one key) for all.
        let (t, p, v) = (var(&[3, 2, 5, 4], 1.0)?, var(&[3, 2, 5], 1.0)?, var(&[1, 2, 4], 1.0)?);
        let (pw, pe) = (var(&[3, 2], 1.0)?, var(&[1, 1], 1.0)?);
        assert_write_matches(Orientation::Tape, [&t, &p, &v, &pw, &pe])?;
        let (m, k, v) = (var(&[3, 2, 3, 5], 1.0)?, var(&[1, 2, 5], 1.0)?, var(&[1, 2, 3], 1.0)?);
        assert_write_matches(Orientation::Matrix, [&m, &k, &v, &pw, &pe])
    }

    #[test]
    fn operands_that_do_not_fit_are_an_error() -> Result<()> {
        let (t, p, v, pw) = (var(&[2, 5, 4], 1.0)?, var(&[2, 4], 1.0)?, var(&[2, 4], 1.0)?, var(&[2], 1.0)?);
        let err = write(Orientation::Tape, &t, &p, &v, &pw, &pw).unwrap_err().to_string();
        assert!(err.contains("position or key"), "{err}");
        // The same operands fit a matrix of 5 values × 4 keys but for the value's length.
        assert!(write(Orientation::Matrix, &t, &p, &v, &pw, &pw).is_err());
        Ok(())
    }
}
