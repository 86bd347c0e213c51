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
//! Written with candle ops (`kernels::opa` after a transpose and three slices of the
//! projection) this is about five kernels forward, each slice's and the transpose's backward
//! a few more, and some fifteen for the attention's own backward, at every STM time step; here
//! it is one kernel each way (`src/kernels/cuda/sam_attend.cu`). Where it runs is
//! its switch's rule (`kernels::switches`) ([`SAM_ATTEND`](SAM_ATTEND)), on CUDA for the
//! shapes that [`fits_a_block`] takes.

use candle_core::{CpuStorage, CustomOp1, CustomOp2, Layout, Result, Shape, Tensor, bail};
use rayon::prelude::*;

use super::fused::{RealKernel, run_cpu};
use super::gemm::{Mat, MatMut, Par, matmul};
use super::launch_shape::LaunchShape;
use super::par::multiversion;
use super::real::Real;
use super::switches::Switch;
#[cfg(feature = "cuda")]
use candle_core::CudaStorage;

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
/// passes' shared memory within a block's ([`super::fused::BLOCK_SHARED_BYTES`]): up to about
/// 1 500 rows at STM's 4 queries, 750 at 8. Elsewhere `samRead` runs candle's ops.
pub fn fits_a_block(n: usize, nq: usize) -> bool {
    let limit = super::fused::BLOCK_SHARED_BYTES;
    (1..=MAX_QUERIES).contains(&nq) && shared_bytes(false, n, nq) <= limit && shared_bytes(true, n, nq) <= limit
}

/// `R` (`[B, nq, n, n]`) from the normalised projection `y` (`[B, n, 3nq]`).
pub fn attend(y: &Tensor, nq: usize) -> Result<Tensor> {
    y.contiguous()?.apply_op1(Attend { nq })
}

/// The forward pass; its backward is [`AttendBackward`].
struct Attend {
    nq: usize,
}

/// `(y, G) → d loss / d y`.
struct AttendBackward {
    nq: usize,
}

/// `(B, n)` of a projection `[B, n, 3nq]`, checked.
fn geometry(y: &Layout, nq: usize) -> Result<(usize, usize)> {
    let &[batch, n, width] = y.dims() else { bail!("samRead's fused attention takes [B, n, 3nq], not {:?}", y.dims()) };
    if nq == 0 || width != 3 * nq {
        bail!("samRead's fused attention: a projection {:?} for {nq} queries", y.dims());
    }
    if !y.is_contiguous() {
        bail!("samRead's fused attention takes a contiguous projection");
    }
    Ok((batch, n))
}

/// The CPU computation of either pass, one example at a time.
struct AttendKernel {
    backward: bool,
    batch: usize,
    n: usize,
    nq: usize,
}

impl RealKernel for AttendKernel {
    /// Examples in parallel (rayon, the calling pool), each with its own scratch.
    fn run<T: Real>(&self, operands: &[&[T]]) -> Vec<T> {
        let (n, nq) = (self.n, self.nq);
        let (len, out_len, att_len) = (n * 3 * nq, nq * n * n, nq * nq * n);
        let y = operands[0];
        if self.backward {
            let g = operands[1];
            let mut gy = vec![T::zero(); self.batch * len];
            gy.par_chunks_mut(len).zip(y.par_chunks(len)).zip(g.par_chunks(out_len)).for_each_init(
                || (vec![T::zero(); att_len], vec![T::zero(); att_len]),
                |(a, ga), ((gy, y), g)| {
                    attention_weights(n, nq, y, a);
                    backward_example(n, nq, y, a, g, ga, gy);
                },
            );
            gy
        } else {
            let mut out = vec![T::zero(); self.batch * out_len];
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

impl CustomOp1 for Attend {
    fn name(&self) -> &'static str {
        "sam_attend_fwd"
    }

    fn cpu_fwd(&self, s: &CpuStorage, l: &Layout) -> Result<(CpuStorage, Shape)> {
        let (batch, n) = geometry(l, self.nq)?;
        let kernel = AttendKernel { backward: false, batch, n, nq: self.nq };
        Ok((run_cpu(&kernel, &[(s, l)], "samRead's fused attention")?, Shape::from((batch, self.nq, n, n))))
    }

    #[cfg(feature = "cuda")]
    fn cuda_fwd(&self, s: &CudaStorage, l: &Layout) -> Result<(CudaStorage, Shape)> {
        let (batch, n) = geometry(l, self.nq)?;
        let shape = Shape::from((batch, self.nq, n, n));
        let out = cuda::sam_attend("sam_attend_fwd", &[(s, l)], shape.elem_count(), batch, n, self.nq)?;
        super::fused::record_launch("sam_attend_fwd");
        Ok((out, shape))
    }

    fn bwd(&self, y: &Tensor, _out: &Tensor, grad: &Tensor) -> Result<Option<Tensor>> {
        Ok(Some(y.apply_op2_no_bwd(&grad.contiguous()?, &AttendBackward { nq: self.nq })?))
    }
}

impl AttendBackward {
    /// `(B, n)`, with `G` checked against `y`.
    fn geometry(&self, y: &Layout, g: &Layout) -> Result<(usize, usize)> {
        let (batch, n) = geometry(y, self.nq)?;
        if g.dims() != [batch, self.nq, n, n] || !g.is_contiguous() {
            bail!("samRead's fused attention backward: a gradient {:?} for a projection {:?}", g.dims(), y.dims());
        }
        Ok((batch, n))
    }
}

impl CustomOp2 for AttendBackward {
    fn name(&self) -> &'static str {
        "sam_attend_bwd"
    }

    fn cpu_fwd(&self, s1: &CpuStorage, l1: &Layout, s2: &CpuStorage, l2: &Layout) -> Result<(CpuStorage, Shape)> {
        let (batch, n) = self.geometry(l1, l2)?;
        let kernel = AttendKernel { backward: true, batch, n, nq: self.nq };
        Ok((run_cpu(&kernel, &[(s1, l1), (s2, l2)], "samRead's fused attention")?, l1.shape().clone()))
    }

    #[cfg(feature = "cuda")]
    fn cuda_fwd(&self, s1: &CudaStorage, l1: &Layout, s2: &CudaStorage, l2: &Layout) -> Result<(CudaStorage, Shape)> {
        let (batch, n) = self.geometry(l1, l2)?;
        let shape = l1.shape().clone();
        let operands = [(s1, l1), (s2, l2)];
        let out = cuda::sam_attend("sam_attend_bwd", &operands, shape.elem_count(), batch, n, self.nq)?;
        super::fused::record_launch("sam_attend_bwd");
        Ok((out, shape))
    }
}

/// `sam_attend.cu` on `batch` examples of `n` rows and `nq` queries: the forward a block per
/// (example, query), the backward a block per 8 rows of an example and one per 32 of its
/// columns; blocks of 256 threads, with [`shared_bytes`](shared_bytes).
pub fn launch_shape(backward: bool, batch: u32, n: u32, nq: u32) -> LaunchShape {
    let blocks = if backward { batch * (n.div_ceil(8) + n.div_ceil(32)) } else { batch * nq };
    let shared_bytes = shared_bytes(backward, n as usize, nq as usize) as u32;
    LaunchShape { blocks: blocks.max(1), threads: 256, shared_bytes }
}

/// The launch of its CUDA kernels, with the `cuda` feature.
#[cfg(feature = "cuda")]
mod cuda {
    use crate::kernels::cuda_kernels::{SAM_ATTEND, launch_config, run};
    use candle_core::{CudaStorage, Layout, Result};

    /// Runs `kernel` of `sam_attend.cu` on its f32 operands (contiguous, as laid out) for `batch`
    /// examples of `n` rows and `nq` queries, into a new buffer of `len` elements: the forward's
    /// `[B, nq, n, n]`, the backward's `[B, n, 3nq]`. The caller checked
    /// [`super::fits_a_block`].
    pub(super) fn sam_attend(
        kernel: &str,
        operands: &[(&CudaStorage, &Layout)],
        len: usize,
        batch: usize,
        n: usize,
        nq: usize,
    ) -> Result<CudaStorage> {
        let (Ok(_), Ok(b), Ok(n), Ok(nq)) =
            (i32::try_from(len), i32::try_from(batch), i32::try_from(n), i32::try_from(nq))
        else {
            candle_core::bail!("{kernel}: {len} elements are more than the kernel indexes")
        };
        let config = launch_config(super::launch_shape(kernel == "sam_attend_bwd", b as u32, n as u32, nq as u32));
        // SAFETY: sam_attend.cu's kernels take their operands, the output, batch, n and nq, in this
        // order; launch_shape gives them the blocks and the shared memory they index, blocks past
        // the last example return whole, and between them they write every output element.
        unsafe { run(&SAM_ATTEND, kernel, operands, len, config, &[b, n, nq], &[]) }
    }
}

#[cfg(test)]
mod tests {
    use candle_core::{DType, Device};

    use super::*;
    use crate::kernels::fused::testing::{assert_fused_matches, var};
    use crate::kernels::opa::outer_product_attention;

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
