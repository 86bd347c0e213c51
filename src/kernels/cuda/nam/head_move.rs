//! NAM-TM's head transition (`headMove`, NAM §3.3) as one candle op with its own backward, and
//! the per-row pieces that the tape's manual backward of `headMove` (`prims::head_move`) shares
//! with it.
//!
//! Each row (an example's head) holds a position `p` over `L` cells and its move probabilities
//! `m` (`[LEFT, NO-OP, RIGHT]`, or with `JUMP` and a jump position `j`):
//!
//! - `next[l] = m₀ p[l+1] + m₁ p[l] + m₂ p[l−1] + m₃ j[l]` (indices mod `L`);
//! - from `g = d loss / d next`: `d p[l] = m₀ g[l−1] + m₁ g[l] + m₂ g[l+1]`,
//!   `d m₀ = Σ_l g[l] p[l+1]`, `d m₁ = Σ_l g[l] p[l]`, `d m₂ = Σ_l g[l] p[l−1]`,
//!   `d m₃ = Σ_l g[l] j[l]`, `d j = m₃ g`.
//!
//! Written with candle ops (two rolls, each two slices and a concatenation, four slices of the
//! moves, four products and three sums) this is about a dozen kernels forward and some thirty
//! backward, twice per NAM-TM time step; here it is one kernel each way
//! (`src/kernels/cuda/nam/head_move.cu`). Where it runs is its switch's rule
//! (`kernels::cuda::switches`) ([`HEAD_MOVE`](HEAD_MOVE)).

use candle_core::{Layout, Result, Shape, Tensor, bail};

use crate::kernels::cpu::real::Real;
use crate::kernels::cuda::kernel::{Fused, FusedKernel, Launch, entries};
use crate::kernels::cuda::launch_shape::LaunchShape;
use crate::kernels::cuda::switches::Switch;

/// NAM-TM 30.24 → 25.22 ms a step (H100, 2026-11-26).
pub const HEAD_MOVE: Switch = Switch::on("head_move");
inventory::submit! { HEAD_MOVE }

/// The backward a warp per row: NAM-TM's example 12.24 → 10.26 ms a step (H100, 2026-11-27).
pub const HEAD_MOVE_WARPS: Switch = Switch::on("head_move_warps");
inventory::submit! { HEAD_MOVE_WARPS }

/// The next position (`[.., L]`) from the position `pos` (`[.., L]`), the moves (`[.., 3]` or
/// `[.., 4]`) and, with four moves, the jump position (`[.., L]`).
pub fn head_move(pos: &Tensor, moves: &Tensor, jump: Option<&Tensor>) -> Result<Tensor> {
    let n_moves = moves.dims().last().copied();
    if n_moves != Some(if jump.is_some() { 4 } else { 3 }) {
        bail!("headMove's fused op: moves {:?} with a jump position {:?}", moves.dims(), jump.map(Tensor::dims));
    }
    let (pos, moves) = (pos.contiguous()?, moves.contiguous()?);
    // Without JUMP (three moves) the jump operand is never read: the position stands in.
    let jump = match jump {
        Some(jump) => jump.contiguous()?,
        None => pos.clone(),
    };
    pos.apply_op3(&moves, &jump, Fused(Move::Forward))
}

/// The same transition written with candle ops (what `headMove` runs where the fused op does
/// not: CUDA without `head_move`, other devices).
pub fn head_move_with_candle_ops(pos: &Tensor, moves: &Tensor, jump: Option<&Tensor>) -> Result<Tensor> {
    use candle_core::D;
    let p = |i: usize| moves.narrow(D::Minus1, i, 1); // [.., 1], broadcast over L
    let left = pos.roll(-1, D::Minus1)?; // e_i → e_{i-1}
    let right = pos.roll(1, D::Minus1)?; // e_i → e_{i+1}
    let mut next = left
        .broadcast_mul(&p(0)?)?
        .broadcast_add(&pos.broadcast_mul(&p(1)?)?)?
        .broadcast_add(&right.broadcast_mul(&p(2)?)?)?;
    if let Some(jump) = jump {
        next = next.broadcast_add(&jump.broadcast_mul(&p(3)?)?)?;
    }
    Ok(next)
}

/// The passes: `(pos, moves, jump) → next` and, for its backward, `(pos, moves, g, jump) →
/// [d pos | d moves | d jump]` (flat; no `d jump` with three moves, where `jump` is the
/// position standing in, unread), a thread per row or a warp per row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Move {
    Forward,
    Backward,
    BackwardWarps,
}

/// `rows` heads on `len` cells, with `n_moves` moves (3, or 4 with a jump).
#[derive(Clone, Copy, Debug)]
pub struct Heads {
    rows: usize,
    len: usize,
    n_moves: usize,
}

impl FusedKernel for Move {
    type Sizes = Heads;

    entries! { HEAD_MOVE:
        Move::Forward => "head_move_fwd",
        Move::Backward => "head_move_bwd",
        Move::BackwardWarps => "head_move_bwd_warps",
    }

    /// Positions `[.., L]`, moves `[.., 3 or 4]`, (backward) `g` shaped as the positions, and
    /// the jump position shaped as them.
    fn sizes(&self, operands: &[&Layout]) -> Result<(Shape, Heads)> {
        let (pos, moves, g, jump) = match (self, operands) {
            (Move::Forward, &[pos, moves, jump]) => (pos, moves, None, jump),
            (Move::Backward | Move::BackwardWarps, &[pos, moves, g, jump]) => (pos, moves, Some(g), jump),
            _ => bail!("headMove's fused op {} takes other operands, not {}", self.entry(), operands.len()),
        };
        let (Some((&len, lead)), Some(&n_moves)) = (pos.dims().split_last(), moves.dims().last()) else {
            bail!("headMove's fused op takes positions [.., L] and moves [.., 3 or 4]")
        };
        let rows: usize = lead.iter().product();
        let fits =
            moves.shape().elem_count() == rows * n_moves && matches!(n_moves, 3 | 4) && jump.dims() == pos.dims();
        if !fits {
            bail!("headMove's fused op: positions {:?}, moves {:?}, jump {:?}", pos.dims(), moves.dims(), jump.dims());
        }
        let heads = Heads { rows, len, n_moves };
        let Some(g) = g else { return Ok((pos.shape().clone(), heads)) };
        if g.dims() != pos.dims() {
            bail!("headMove's fused op: a gradient {:?} for positions {:?}", g.dims(), pos.dims());
        }
        Ok((Shape::from(rows * len * (1 + usize::from(n_moves == 4)) + rows * n_moves), heads))
    }

    fn cpu<T: Real>(&self, Heads { len, n_moves, .. }: Heads, o: &[&[T]]) -> Vec<T> {
        let jump = usize::from(n_moves == 4);
        if let Move::Forward = self {
            return forward_rows(o[0], o[1], o.get(2).filter(|_| jump == 1).copied(), len, n_moves);
        }
        let (gpos, gmoves, gjump) =
            backward_rows(o[2], o[0], o[1], o.get(3).filter(|_| jump == 1).copied(), len, n_moves);
        let mut out = gpos;
        out.extend(gmoves);
        out.extend(gjump.unwrap_or_default());
        out
    }

    /// The forward a thread per cell, the backward a thread per row (`head_move_bwd`) or a warp
    /// per row (`head_move_bwd_warps`); `rows`, `L` and the number of moves as the kernel's ints.
    fn launch(&self, Heads { rows, len, n_moves }: Heads) -> Result<Launch> {
        let (Ok(_), Ok(r), Ok(c)) = (i32::try_from(rows * len), u32::try_from(rows), u32::try_from(len)) else {
            bail!("{}: {rows} × {len} cells are more than the kernel indexes", self.entry())
        };
        let shape = match self {
            Move::Forward => LaunchShape::per_element((r * c).max(1)),
            Move::Backward => LaunchShape::per_element(r.max(1)),
            Move::BackwardWarps => LaunchShape::warp_per_row(r),
        };
        Launch::with_ints(self.entry(), shape, &[rows, len, n_moves])
    }

    /// The three gradients, each a contiguous run of the backward's one flat output.
    fn backward(&self, operands: &[&Tensor], _out: &Tensor, grad: &Tensor) -> Result<Vec<Option<Tensor>>> {
        let (Move::Forward, &[pos, moves, jump]) = (self, operands) else {
            bail!("headMove's backward pass has no gradient of its own")
        };
        let pass = if crate::kernels::cuda::switches::used_for(grad, HEAD_MOVE_WARPS) {
            Move::BackwardWarps
        } else {
            Move::Backward
        };
        let all = Fused(pass).apply_no_bwd(&[pos, moves, &grad.contiguous()?, jump])?;
        let (p, m) = (pos.elem_count(), moves.elem_count());
        let gpos = all.narrow(0, 0, p)?.reshape(pos.shape())?;
        let gmoves = all.narrow(0, p, m)?.reshape(moves.shape())?;
        let with_jump = moves.dims().last() == Some(&4);
        let gjump = with_jump.then(|| all.narrow(0, p + m, p)?.reshape(jump.shape())).transpose()?;
        Ok(vec![Some(gpos), Some(gmoves), gjump])
    }
}

/// The next position of every row.
pub fn forward_rows<T: Real>(p: &[T], m: &[T], j: Option<&[T]>, len: usize, n_moves: usize) -> Vec<T> {
    let mut out = Vec::with_capacity(p.len());
    for (r, (pr, mr)) in p.chunks_exact(len).zip(m.chunks_exact(n_moves)).enumerate() {
        for l in 0..len {
            let (prev, next) = ((l + len - 1) % len, (l + 1) % len);
            let mut v = mr[0] * pr[next] + mr[1] * pr[l] + mr[2] * pr[prev];
            if let Some(j) = j {
                v += mr[3] * j[r * len + l];
            }
            out.push(v);
        }
    }
    out
}

/// The gradients of every row's position, moves and (with four moves) jump position, from
/// `g = d loss / d next`.
pub fn backward_rows<T: Real>(
    g: &[T],
    p: &[T],
    m: &[T],
    j: Option<&[T]>,
    len: usize,
    n_moves: usize,
) -> (Vec<T>, Vec<T>, Option<Vec<T>>) {
    let (mut gpos, mut gmoves) = (vec![T::zero(); p.len()], vec![T::zero(); m.len()]);
    let mut gjump = j.map(|j| vec![T::zero(); j.len()]);
    for (i, (g, p)) in g.chunks_exact(len).zip(p.chunks_exact(len)).enumerate() {
        let mr = &m[i * n_moves..][..n_moves];
        let gm = &mut gmoves[i * n_moves..][..n_moves];
        let gp = &mut gpos[i * len..][..len];
        for l in 0..len {
            let (prev, next) = ((l + len - 1) % len, (l + 1) % len);
            gp[l] = mr[0] * g[prev] + mr[1] * g[l] + mr[2] * g[next];
            gm[0] += g[l] * p[next];
            gm[1] += g[l] * p[l];
            gm[2] += g[l] * p[prev];
        }
        if let (Some(js), Some(gj)) = (j, gjump.as_mut()) {
            let (j, gj) = (&js[i * len..][..len], &mut gj[i * len..][..len]);
            for l in 0..len {
                gm[3] += g[l] * j[l];
                gj[l] = mr[3] * g[l];
            }
        }
    }
    (gpos, gmoves, gjump)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::cuda::fused::testing::{assert_fused_matches, var};

    use super::head_move_with_candle_ops as reference;

    #[test]
    fn the_fused_move_and_its_gradients_equal_candle_ops_and_autograd() -> Result<()> {
        // Two examples of two heads on a tape of 5 cells.
        let (pos, jump) = (var(&[2, 2, 5], 1.0)?, var(&[2, 2, 5], 1.0)?);
        let (three, four) = (var(&[2, 2, 3], 1.0)?, var(&[2, 2, 4], 1.0)?);
        assert_fused_matches(
            &[&pos, &three],
            &[head_move(&pos, &three, None)?],
            &[reference(&pos, &three, None)?],
            1e-12,
        )?;
        let fused = head_move(&pos, &four, Some(&jump))?;
        assert_fused_matches(&[&pos, &four, &jump], &[fused], &[reference(&pos, &four, Some(&jump))?], 1e-12)
    }

    #[test]
    fn moves_that_do_not_fit_are_an_error() -> Result<()> {
        let (pos, four) = (var(&[2, 5], 1.0)?, var(&[2, 4], 1.0)?);
        assert!(head_move(&pos, &four, None).is_err_and(|e| e.to_string().contains("moves")));
        Ok(())
    }
}
