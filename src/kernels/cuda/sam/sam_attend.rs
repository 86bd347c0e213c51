//! `samRead`'s outer product attention (SAM Eq. 5–8, the authors' form) on its normalised
//! projection, as one candle op with its own backward, and the per-example pieces that the
//! tape's manual backward of `samRead` (`prims::sam_read`) shares with it.
//!
//! The input `y` is `[B, n, 3nq]`: row `e` of an example holds `[q[·, e] | k[·, e] | v[·, e]]`,
//! so `q[s, e] = y[e, s]`, `k[j, e] = y[e, nq + j]`, `v[j, f] = y[f, 2nq + j]`. With the
//! attention weights `A[s, e, j] = tanh(q[s, e] k[j, e])`:
//!
//! - `R[s, e, f] = Σ_j A[s, e, j] v[j, f]` (the output, `[B, nq, n, n]`);
//! - from `G = d loss / d R`, with `gA[s, e, j] = Σ_f G[s, e, f] v[j, f]`:
//!   `d q[s, e] = Σ_j gA (1 − A²) k[j, e]`, `d k[j, e] = Σ_s gA (1 − A²) q[s, e]`,
//!   `d v[j, f] = Σ_{s, e} A[s, e, j] G[s, e, f]`.
//!
//! Written with candle ops (`kernels::blocks::opa` after a transpose and three slices of the
//! projection) this is about five kernels forward, each slice's and the transpose's backward
//! a few more, and some fifteen for the attention's own backward, at every STM time step; here
//! it is one kernel each way (`src/kernels/cuda/sam/sam_attend.cu`). Where it runs is
//! its switch's rule (`kernels::cuda::switches`) ([`SAM_ATTEND`](SAM_ATTEND)), on CUDA for the
//! shapes that [`fits_a_block`] takes.

use candle_core::{Layout, Result, Shape, Tensor, bail};
use rayon::prelude::*;

use crate::kernels::cpu::gemm::{Mat, MatMut, Par, matmul};
use crate::kernels::cpu::par::multiversion;
use crate::kernels::cpu::real::Real;
use crate::kernels::cuda::kernel::{Fused, FusedKernel, Launch, entries};
use crate::kernels::cuda::launch_shape::LaunchShape;
use crate::kernels::cuda::switches::Switch;

/// STM A 5.99 → 5.20 ms a step, B 14.56 → 14.17 (H100, 2026-11-26).
pub const SAM_ATTEND: Switch = Switch::on("sam_attend");
inventory::submit! { SAM_ATTEND }

/// The most queries the CUDA kernels take (`MAX_QUERIES` in `sam_attend.cu`): the backward
/// keeps a register per query.
pub const MAX_QUERIES: usize = 16;

/// The CUDA kernels' shared memory for `n` rows and `nq` queries: the forward stages a query's
/// weights and `v` (`2 nq n` floats); the backward `v` in its row blocks (`nq n`) and its
/// column blocks' partial sums (8 warps × `nq` × 32 lanes).
pub fn shared_bytes(backward: bool, n: usize, nq: usize) -> usize {
    let floats = if backward { (nq * n).max(8 * nq * 32) } else { 2 * nq * n };
    floats * std::mem::size_of::<f32>()
}

/// Whether the CUDA kernels take `n` rows and `nq` queries: at most [`MAX_QUERIES`], and both
/// passes' shared memory within a block's ([`crate::kernels::cuda::fused::BLOCK_SHARED_BYTES`]):
/// up to about 1 500 rows at STM's 4 queries, 750 at 8. Elsewhere `samRead` runs candle's ops.
pub fn fits_a_block(n: usize, nq: usize) -> bool {
    let limit = crate::kernels::cuda::fused::BLOCK_SHARED_BYTES;
    (1..=MAX_QUERIES).contains(&nq) && shared_bytes(false, n, nq) <= limit && shared_bytes(true, n, nq) <= limit
}

/// `R` (`[B, nq, n, n]`) from the normalised projection `y` (`[B, n, 3nq]`).
pub fn attend(y: &Tensor, nq: usize) -> Result<Tensor> {
    Fused(Attend::Forward { nq }).apply(&[y])
}

/// The two passes, for `nq` queries: `y → R` and, for its backward, `(y, G) → d loss / d y`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Attend {
    Forward { nq: usize },
    Backward { nq: usize },
}

/// `batch` examples of `n` rows and `nq` queries.
#[derive(Clone, Copy, Debug)]
pub struct Examples {
    batch: usize,
    n: usize,
    nq: usize,
}

impl FusedKernel for Attend {
    type Sizes = Examples;

    entries! { SAM_ATTEND: Attend::Forward { .. } => "sam_attend_fwd", Attend::Backward { .. } => "sam_attend_bwd" }

    /// The projection `y` (`[B, n, 3nq]`), and for the backward `G` (`[B, nq, n, n]`).
    fn sizes(&self, operands: &[&Layout]) -> Result<(Shape, Examples)> {
        let (y, g, nq) = match (*self, operands) {
            (Attend::Forward { nq }, &[y]) => (y, None, nq),
            (Attend::Backward { nq }, &[y, g]) => (y, Some(g), nq),
            _ => bail!("samRead's fused attention {} takes other operands, not {}", self.entry(), operands.len()),
        };
        let &[batch, n, width] = y.dims() else {
            bail!("samRead's fused attention takes [B, n, 3nq], not {:?}", y.dims())
        };
        if nq == 0 || width != 3 * nq {
            bail!("samRead's fused attention: a projection {:?} for {nq} queries", y.dims());
        }
        let out = Shape::from((batch, nq, n, n));
        let Some(g) = g else { return Ok((out, Examples { batch, n, nq })) };
        if g.dims() != out.dims() {
            bail!("samRead's fused attention backward: a gradient {:?} for a projection {:?}", g.dims(), y.dims());
        }
        Ok((y.shape().clone(), Examples { batch, n, nq }))
    }

    /// Examples in parallel (rayon, the calling pool), each with its own scratch.
    fn cpu<T: Real>(&self, Examples { batch, n, nq }: Examples, operands: &[&[T]]) -> Vec<T> {
        let (len, out_len, att_len) = (n * 3 * nq, nq * n * n, nq * nq * n);
        let y = operands[0];
        if let Attend::Backward { .. } = self {
            let g = operands[1];
            let mut gy = vec![T::zero(); batch * len];
            gy.par_chunks_mut(len).zip(y.par_chunks(len)).zip(g.par_chunks(out_len)).for_each_init(
                || (vec![T::zero(); att_len], vec![T::zero(); att_len]),
                |(a, ga), ((gy, y), g)| {
                    attention_weights(n, nq, y, a);
                    backward_example(n, nq, y, a, g, ga, gy);
                },
            );
            gy
        } else {
            let mut out = vec![T::zero(); batch * out_len];
            out.par_chunks_mut(out_len).zip(y.par_chunks(len)).for_each_init(
                || vec![T::zero(); att_len],
                |a, (out, y)| {
                    attention_weights(n, nq, y, a);
                    forward_example(n, nq, y, a, out);
                },
            );
            out
        }
    }

    /// The forward a block per (example, query), the backward a block per 8 rows of an example
    /// and one per 32 of its columns; blocks of 256 threads, with [`shared_bytes`]. `batch`,
    /// `n` and `nq` as the kernel's ints. CUDA runs it for the shapes [`fits_a_block`] takes
    /// (the primitive's check).
    fn launch(&self, Examples { batch, n, nq }: Examples) -> Result<Launch> {
        let backward = matches!(self, Attend::Backward { .. });
        let len = if backward { batch * n * 3 * nq } else { batch * nq * n * n };
        let (Ok(_), Ok(b), Ok(rows), Ok(queries)) =
            (i32::try_from(len), u32::try_from(batch), u32::try_from(n), u32::try_from(nq))
        else {
            bail!("{}: {len} elements are more than the kernel indexes", self.entry())
        };
        let blocks = if backward { b * (rows.div_ceil(8) + rows.div_ceil(32)) } else { b * queries };
        let shared_bytes = shared_bytes(backward, n, nq) as u32;
        let shape = LaunchShape { blocks: blocks.max(1), threads: 256, shared_bytes };
        Launch::with_ints(self.entry(), shape, &[batch, n, nq])
    }

    fn backward(&self, operands: &[&Tensor], _out: &Tensor, grad: &Tensor) -> Result<Vec<Option<Tensor>>> {
        let (Attend::Forward { nq }, &[y]) = (*self, operands) else {
            bail!("samRead's fused attention backward has no gradient of its own")
        };
        Ok(vec![Some(Fused(Attend::Backward { nq }).apply_no_bwd(&[y, &grad.contiguous()?])?)])
    }
}

/// One example's output `R` (`[nq·n, n]`, overwritten) from its projection `y` and its
/// attention weights `a` (key-major, as [`attention_weights`] writes them).
pub fn forward_example<T: Real>(n: usize, nq: usize, y: &[T], a: &[T], out: &mut [T]) {
    // out[(s, e), f] = Σ_j A[j, (s, e)] v[j, f], v[j, f] = y[f, 2nq + j].
    let v = Mat::strided(&y[2 * nq..], nq, n, 1, 3 * nq);
    matmul(MatMut::new(&mut out[..nq * n * n], nq * n, n), Mat::new(a, nq, nq * n).t(), v, false, Par::Seq);
}

/// One example's `gy = d loss / d y` (`[n, 3nq]`, overwritten) from `y`, its attention weights
/// `a` and `g = d loss / d R`; `ga` (`nq·nq·n`) is scratch for `d loss / d A`.
pub fn backward_example<T: Real>(n: usize, nq: usize, y: &[T], a: &[T], g: &[T], ga: &mut [T], gy: &mut [T]) {
    let w3 = 3 * nq;
    gy[..n * w3].fill(T::zero());
    // gA = G · vᵀ; gv = Aᵀ · G (written into v's columns of gy).
    let vt = Mat::strided(&y[2 * nq..], n, nq, w3, 1);
    matmul(MatMut::strided(ga, nq * n, nq, 1, nq * n), Mat::new(g, nq * n, n), vt, false, Par::Seq);
    let gv = MatMut::strided(&mut gy[2 * nq..], nq, n, 1, w3);
    matmul(gv, Mat::new(a, nq, nq * n), Mat::new(g, nq * n, n), false, Par::Seq);
    attention_backward(n, nq, y, a, ga, gy);
}

/// The queries' and keys' columns of one example's `y` (`[n, 3nq]`), each laid out
/// contiguously (`[nq, n]`), so that the loops over `e` vectorise (read at stride `3nq` they
/// ran one element at a time).
fn queries_and_keys<T: Real>(n: usize, nq: usize, y: &[T]) -> (Vec<T>, Vec<T>) {
    let (mut qt, mut kt) = (vec![T::zero(); nq * n], vec![T::zero(); nq * n]);
    for (e, row) in y.chunks_exact(3 * nq).take(n).enumerate() {
        for s in 0..nq {
            qt[s * n + e] = row[s];
            kt[s * n + e] = row[nq + s];
        }
    }
    (qt, kt)
}

multiversion! {
    /// One example's attention weights `a[j, s, e] = tanh(q[s, e] k[j, e])` (key-major,
    /// `nq·nq·n`) from its projection `y`.
    pub fn attention_weights[T: Real][T](n: usize, nq: usize, y: &[T], a: &mut [T]) {
        let (qt, kt) = queries_and_keys(n, nq, y);
        let a = &mut a[..nq * nq * n];
        for (j, aj) in a.chunks_exact_mut(nq * n).enumerate() {
            let kj = &kt[j * n..][..n];
            for (aw, qs) in aj.chunks_exact_mut(n).zip(qt.chunks_exact(n)) {
                for ((o, &q), &k) in aw.iter_mut().zip(qs).zip(kj) {
                    *o = (q * k).tanh();
                }
            }
        }
    }
}

multiversion! {
    /// One example: adds the gradients of `q` and `k` (in the `[n, 3nq]` layout of `y`)
    /// through `a = tanh(q ⊙ k)` given `ga = d loss / d a` (both key-major).
    pub fn attention_backward[T: Real][T](n: usize, nq: usize, y: &[T], a: &[T], ga: &[T], gy: &mut [T]) {
        let w3 = 3 * nq;
        let (a, ga) = (&a[..nq * nq * n], &ga[..nq * nq * n]);
        // On contiguous columns of q and k, as the forward; their gradients are added back
        // into `gy`'s layout at the end.
        let (qt, kt) = queries_and_keys(n, nq, y);
        let (mut gqt, mut gkt) = (vec![T::zero(); nq * n], vec![T::zero(); nq * n]);
        for j in 0..nq {
            let (kj, gkj) = (&kt[j * n..][..n], &mut gkt[j * n..][..n]);
            for s in 0..nq {
                let at = (j * nq + s) * n;
                let (aw, gaw) = (&a[at..][..n], &ga[at..][..n]);
                let (qs, gqs) = (&qt[s * n..][..n], &mut gqt[s * n..][..n]);
                for e in 0..n {
                    let gp = gaw[e] * (T::one() - aw[e] * aw[e]);
                    gqs[e] += gp * kj[e];
                    gkj[e] += gp * qs[e];
                }
            }
        }
        for (e, row) in gy.chunks_exact_mut(w3).take(n).enumerate() {
            for s in 0..nq {
                row[s] += gqt[s * n + e];
                row[nq + s] += gkt[s * n + e];
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use candle_core::{DType, Device};

    use super::*;
    use crate::kernels::blocks::opa::outer_product_attention;
    use crate::kernels::cuda::fused::testing::{assert_fused_matches, var};

    /// The attention as the candle ops `samRead` otherwise runs on the projection.
    fn reference(y: &Tensor, nq: usize) -> Result<Tensor> {
        let qkv = y.transpose(1, 2)?;
        outer_product_attention(&qkv.narrow(1, 0, nq)?, &qkv.narrow(1, nq, nq)?, &qkv.narrow(1, 2 * nq, nq)?)
    }

    #[test]
    fn the_fused_attention_and_its_gradient_equal_candle_ops_and_autograd() -> Result<()> {
        // Two examples, a memory of 5 rows, 3 queries (n ≠ nq, so no axis can stand in for another).
        let y = var(&[2, 5, 9], 1.2)?;
        assert_fused_matches(&[&y], &[attend(&y, 3)?], &[reference(&y, 3)?], 1e-12)
    }

    #[test]
    fn the_cuda_kernels_take_stm_shapes_and_refuse_what_a_block_cannot_hold() {
        // STM's configs A (n = 32, nq = 4) and B (96, 8), and larger.
        for (n, nq) in [(32, 4), (96, 8), (128, 16)] {
            assert!(fits_a_block(n, nq), "n = {n}, nq = {nq}");
        }
        // Past the backward's registers, and past the forward's 47 KiB of staging.
        assert!(!fits_a_block(32, MAX_QUERIES + 1));
        assert!(!fits_a_block(0, 0));
        assert!(fits_a_block(752, 8) && !fits_a_block(753, 8));
    }

    #[test]
    fn a_projection_of_another_width_is_an_error() -> Result<()> {
        let y = Tensor::zeros((2, 5, 8), DType::F32, &Device::Cpu)?;
        assert!(attend(&y, 3).is_err_and(|e| e.to_string().contains("for 3 queries")));
        Ok(())
    }
}
