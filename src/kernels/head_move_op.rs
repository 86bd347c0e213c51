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
//! (`src/kernels/cuda/head_move.cu`). Where it runs is its switch's rule (`kernels::switches`)
//! ([`HEAD_MOVE`](HEAD_MOVE)).

use candle_core::{CpuStorage, CustomOp2, CustomOp3, Layout, Result, Shape, Storage, Tensor, bail};

use super::fused::{RealKernel, run_cpu};
use super::launch_shape::LaunchShape;
use super::real::Real;
use super::switches::Switch;
#[cfg(feature = "cuda")]
use candle_core::CudaStorage;

/// NAM-TM 30.24 → 25.22 ms a step (H100, 2026-11-26).
pub const HEAD_MOVE: Switch = Switch::on("head_move");
inventory::submit! { HEAD_MOVE }

/// The backward a warp per row: NAM-TM's example 12.24 → 10.26 ms a step (H100, 2026-11-27).
pub const HEAD_MOVE_WARPS: Switch = Switch::on("head_move_warps");
inventory::submit! { HEAD_MOVE_WARPS }

/// The next position (`[.., L]`) from the position `pos` (`[.., L]`), the moves (`[.., 3]` or
/// `[.., 4]`) and, with four moves, the jump position (`[.., L]`).
pub fn head_move(pos: &Tensor, moves: &Tensor, jump: Option<&Tensor>) -> Result<Tensor> {
    let (pos, moves) = (pos.contiguous()?, moves.contiguous()?);
    match jump {
        Some(jump) => pos.apply_op3(&moves, &jump.contiguous()?, Move),
        None => pos.apply_op2(&moves, Move),
    }
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

/// The forward pass, on `(pos, moves)` or `(pos, moves, jump)`.
#[derive(Clone, Copy)]
struct Move;

/// The backward pass on `(pos, moves, g)`, the jump position held here: its output is
/// `[d pos | d moves | d jump]`, flat.
struct MoveBackward {
    jump: Option<Tensor>,
}

/// `(rows, L, moves)` of the operands, checked.
fn geometry(pos: &Layout, moves: &Layout, jump: Option<&Layout>) -> Result<(usize, usize, usize)> {
    let (Some((&len, lead)), Some(&n_moves)) = (pos.dims().split_last(), moves.dims().last()) else {
        bail!("headMove's fused op takes positions [.., L] and moves [.., 3 or 4]")
    };
    let rows: usize = lead.iter().product();
    let fits = moves.shape().elem_count() == rows * n_moves
        && n_moves == if jump.is_some() { 4 } else { 3 }
        && jump.is_none_or(|j| j.dims() == pos.dims());
    if !fits {
        bail!(
            "headMove's fused op: positions {:?}, moves {:?}, jump {:?}",
            pos.dims(),
            moves.dims(),
            jump.map(Layout::dims)
        );
    }
    if !pos.is_contiguous() || !moves.is_contiguous() || jump.is_some_and(|j| !j.is_contiguous()) {
        bail!("headMove's fused op takes contiguous operands");
    }
    Ok((rows, len, n_moves))
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

/// The CPU computation of either pass.
struct MoveKernel {
    backward: bool,
    len: usize,
    n_moves: usize,
}

impl RealKernel for MoveKernel {
    /// Forward: `(pos, moves, jump?)`; backward: `(pos, moves, g, jump?)`.
    fn run<T: Real>(&self, o: &[&[T]]) -> Vec<T> {
        let (len, n_moves) = (self.len, self.n_moves);
        if !self.backward {
            return forward_rows(o[0], o[1], o.get(2).copied(), len, n_moves);
        }
        let (gpos, gmoves, gjump) = backward_rows(o[2], o[0], o[1], o.get(3).copied(), len, n_moves);
        let mut out = gpos;
        out.extend(gmoves);
        out.extend(gjump.unwrap_or_default());
        out
    }
}

impl CustomOp2 for Move {
    fn name(&self) -> &'static str {
        "head_move_fwd"
    }

    fn cpu_fwd(&self, s1: &CpuStorage, l1: &Layout, s2: &CpuStorage, l2: &Layout) -> Result<(CpuStorage, Shape)> {
        let (_, len, n_moves) = geometry(l1, l2, None)?;
        let kernel = MoveKernel { backward: false, len, n_moves };
        Ok((run_cpu(&kernel, &[(s1, l1), (s2, l2)], "headMove's fused op")?, l1.shape().clone()))
    }

    #[cfg(feature = "cuda")]
    fn cuda_fwd(&self, s1: &CudaStorage, l1: &Layout, s2: &CudaStorage, l2: &Layout) -> Result<(CudaStorage, Shape)> {
        let (rows, len, n_moves) = geometry(l1, l2, None)?;
        // Without JUMP the kernel's jump operand is never read: the position stands in.
        let operands = [(s1, l1), (s2, l2), (s1, l1)];
        let out = cuda::head_move("head_move_fwd", &operands, rows, len, n_moves, rows * len)?;
        super::fused::record_launch("head_move_fwd");
        Ok((out, l1.shape().clone()))
    }

    fn bwd(
        &self,
        pos: &Tensor,
        moves: &Tensor,
        _out: &Tensor,
        grad: &Tensor,
    ) -> Result<(Option<Tensor>, Option<Tensor>)> {
        let (gpos, gmoves, _) = backward(pos, moves, None, grad)?;
        Ok((Some(gpos), Some(gmoves)))
    }
}

impl CustomOp3 for Move {
    fn name(&self) -> &'static str {
        "head_move_fwd"
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
        let (_, len, n_moves) = geometry(l1, l2, Some(l3))?;
        let kernel = MoveKernel { backward: false, len, n_moves };
        Ok((run_cpu(&kernel, &[(s1, l1), (s2, l2), (s3, l3)], "headMove's fused op")?, l1.shape().clone()))
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
        let (rows, len, n_moves) = geometry(l1, l2, Some(l3))?;
        let operands = [(s1, l1), (s2, l2), (s3, l3)];
        let out = cuda::head_move("head_move_fwd", &operands, rows, len, n_moves, rows * len)?;
        super::fused::record_launch("head_move_fwd");
        Ok((out, l1.shape().clone()))
    }

    fn bwd(
        &self,
        pos: &Tensor,
        moves: &Tensor,
        jump: &Tensor,
        _out: &Tensor,
        grad: &Tensor,
    ) -> Result<(Option<Tensor>, Option<Tensor>, Option<Tensor>)> {
        let (gpos, gmoves, gjump) = backward(pos, moves, Some(jump), grad)?;
        Ok((Some(gpos), Some(gmoves), gjump))
    }
}

/// The three gradients, each a contiguous run of the backward's one flat output.
fn backward(
    pos: &Tensor,
    moves: &Tensor,
    jump: Option<&Tensor>,
    grad: &Tensor,
) -> Result<(Tensor, Tensor, Option<Tensor>)> {
    let op = MoveBackward { jump: jump.cloned() };
    let all = pos.apply_op3_no_bwd(moves, &grad.contiguous()?, &op)?;
    let (p, m) = (pos.elem_count(), moves.elem_count());
    let gpos = all.narrow(0, 0, p)?.reshape(pos.shape())?;
    let gmoves = all.narrow(0, p, m)?.reshape(moves.shape())?;
    let gjump = jump.map(|j| all.narrow(0, p + m, p)?.reshape(j.shape())).transpose()?;
    Ok((gpos, gmoves, gjump))
}

impl CustomOp3 for MoveBackward {
    fn name(&self) -> &'static str {
        "head_move_bwd"
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
        let guard = self.jump.as_ref().map(Tensor::storage_and_layout);
        let jump = jump_storage(&guard, |s| if let Storage::Cpu(s) = s { Some(s) } else { None })?;
        let (_, len, n_moves, count) = self.geometry(l1, l2, l3, jump.map(|(_, l)| l))?;
        let mut operands = vec![(s1, l1), (s2, l2), (s3, l3)];
        operands.extend(jump);
        let kernel = MoveKernel { backward: true, len, n_moves };
        Ok((run_cpu(&kernel, &operands, "headMove's fused op")?, Shape::from(count)))
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
        let guard = self.jump.as_ref().map(Tensor::storage_and_layout);
        let jump = jump_storage(&guard, |s| if let Storage::Cuda(s) = s { Some(s) } else { None })?;
        let (rows, len, n_moves, count) = self.geometry(l1, l2, l3, jump.map(|(_, l)| l))?;
        // Without JUMP the kernel's jump operand is never read: the position stands in.
        let operands = [(s1, l1), (s2, l2), (s3, l3), jump.unwrap_or((s1, l1))];
        let kernel = match super::switches::on_cuda(HEAD_MOVE_WARPS) {
            true => "head_move_bwd_warps",
            false => "head_move_bwd",
        };
        let out = cuda::head_move(kernel, &operands, rows, len, n_moves, count)?;
        super::fused::record_launch(kernel);
        Ok((out, Shape::from(count)))
    }
}

impl MoveBackward {
    /// `(rows, L, moves)` and the output's length, with the gradient `g` laid out as the
    /// positions.
    fn geometry(
        &self,
        pos: &Layout,
        moves: &Layout,
        g: &Layout,
        jump: Option<&Layout>,
    ) -> Result<(usize, usize, usize, usize)> {
        let (rows, len, n_moves) = geometry(pos, moves, jump)?;
        if g.dims() != pos.dims() || !g.is_contiguous() {
            bail!("headMove's fused op: a gradient {:?} for positions {:?}", g.dims(), pos.dims());
        }
        Ok((rows, len, n_moves, rows * len * (1 + usize::from(jump.is_some())) + rows * n_moves))
    }
}

/// The jump position's storage on the backend `pick` accepts, and its layout, from its guard.
fn jump_storage<'a, S>(
    guard: &'a Option<(candle_core::StorageRef<'a>, &'a Layout)>,
    pick: impl Fn(&Storage) -> Option<&S>,
) -> Result<Option<(&'a S, &'a Layout)>> {
    match guard {
        Some((storage, layout)) => match pick(storage) {
            Some(s) => Ok(Some((s, *layout))),
            None => bail!("headMove's fused op: operands on different devices"),
        },
        None => Ok(None),
    }
}

/// `head_move.cu`'s `kernel`: the forward a thread per cell of `rows × cells`, the backward a
/// thread per row (`head_move_bwd`) or a warp per row (`head_move_bwd_warps`).
pub fn launch_shape(kernel: &str, rows: u32, cells: u32) -> LaunchShape {
    match kernel {
        "head_move_fwd" => LaunchShape::per_element((rows * cells).max(1)),
        "head_move_bwd_warps" => LaunchShape::warp_per_row(rows),
        _ => LaunchShape::per_element(rows.max(1)),
    }
}

/// The launch of its CUDA kernels, with the `cuda` feature.
#[cfg(feature = "cuda")]
mod cuda {
    use crate::kernels::cuda_kernels::{HEAD_MOVE, launch_config, run};
    use candle_core::{CudaStorage, Layout, Result};

    /// Runs `kernel` of `head_move.cu` on its f32 operands (contiguous, as laid out) into a new
    /// buffer of `len` elements: the forward with a thread per cell of `rows × cells`, the backward
    /// with a thread per row.
    pub(super) fn head_move(
        kernel: &str,
        operands: &[(&CudaStorage, &Layout)],
        rows: usize,
        cells: usize,
        moves: usize,
        len: usize,
    ) -> Result<CudaStorage> {
        let (Ok(_), Ok(r), Ok(c), Ok(m)) =
            (i32::try_from(rows * cells), i32::try_from(rows), i32::try_from(cells), i32::try_from(moves))
        else {
            candle_core::bail!("{kernel}: {rows} × {cells} cells are more than the kernel indexes")
        };
        let config = launch_config(super::launch_shape(kernel, r as u32, c as u32));
        // SAFETY: head_move.cu's kernels take their operands, the output, rows, cells and moves, in
        // this order, guard the threads past their count, and write every output element (the
        // forward one per cell; the backward each row's gradients in the three parts of `len`).
        unsafe { run(&HEAD_MOVE, kernel, operands, len, config, &[r, c, m], &[]) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::fused::testing::{assert_fused_matches, var};

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
