//! The outer product `a ⊗ b` of two batches of vectors (`outer`, and `itemWrite`'s written
//! item `a ⊗ b`) as one candle op with its own backward, for the device-generic path (candle's
//! autograd: the GPU, and evaluation on the CPU).
//!
//! As candle ops it is a broadcast product forward and, backward, a broadcast product and a sum
//! for each operand: `d a = g b`, `d b = gᵀ a` per example, each through a full-size
//! temporary. Here the backward is one kernel that writes both from `g`
//! (`src/kernels/cuda/outer.cu`: a block per example, a warp per row for `d a`, a thread per
//! column for `d b`). Where it runs is its switch's rule (`kernels::switches`)
//! ([`OUTER`](OUTER)).

use candle_core::{CpuStorage, CustomOp2, CustomOp3, D, Layout, Result, Shape, Tensor, bail};

use super::fused::{RealKernel, run_cpu};
use super::launch_shape::LaunchShape;
use super::real::Real;
use super::switches::Switch;
#[cfg(feature = "cuda")]
use candle_core::CudaStorage;

/// STM A 10.98 → 10.78 ms a step, B 19.59 → 19.07 (H100, 2026-11-26).
pub const OUTER: Switch = Switch::on("outer");
inventory::submit! { OUTER }

/// How errors name the op.
const WHAT: &str = "the fused outer product";

/// `a ⊗ b`: `a` `[.., n]`, `b` `[.., m]` → `[.., n, m]`, the leading axes broadcast against
/// each other. One fused op where its switch runs it, else candle's broadcast product.
pub fn outer(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    if !super::switches::used_for(a, OUTER) {
        return outer_with_candle_ops(a, b);
    }
    let lead_a = Shape::from(&a.dims()[..a.rank().saturating_sub(1)]);
    let lead_b = Shape::from(&b.dims()[..b.rank().saturating_sub(1)]);
    let lead = lead_a.broadcast_shape_binary_op(&lead_b, "outer")?;
    // The CUDA forward runs a thread per output element, counted in 32 bits.
    let size = lead.elem_count() * a.dim(D::Minus1)? * b.dim(D::Minus1)?;
    if !a.device().is_cpu() && u32::try_from(size).is_err() {
        return outer_with_candle_ops(a, b);
    }
    let each = |t: &Tensor| -> Result<Tensor> {
        let dims: Vec<usize> = lead.dims().iter().copied().chain([t.dim(D::Minus1)?]).collect();
        t.broadcast_as(dims)?.contiguous()
    };
    each(a)?.apply_op2(&each(b)?, Forward)
}

/// [`outer`] in candle's ops: `a[.., :, None] * b[.., None, :]`.
pub fn outer_with_candle_ops(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    a.unsqueeze(D::Minus1)?.broadcast_mul(&b.unsqueeze(b.rank() - 1)?)
}

/// `(a, b) → a ⊗ b`.
struct Forward;

/// `(a, b, g) → [d a | d b]`, flat.
struct Backward;

/// `(rows, n, m)` of contiguous operands `a` `[.., n]` and `b` `[.., m]` with the same leading
/// axes.
fn geometry(a: &Layout, b: &Layout) -> Result<(usize, usize, usize)> {
    let (Some((&n, lead_a)), Some((&m, lead_b))) = (a.dims().split_last(), b.dims().split_last()) else {
        bail!("{WHAT} takes vectors, got {:?} and {:?}", a.dims(), b.dims())
    };
    if lead_a != lead_b {
        bail!("{WHAT}: operands {:?} and {:?} of different batches", a.dims(), b.dims());
    }
    if !a.is_contiguous() || !b.is_contiguous() {
        bail!("{WHAT} takes contiguous operands");
    }
    Ok((lead_a.iter().product(), n, m))
}

/// The CPU computation of either pass.
struct OuterKernel {
    backward: bool,
    n: usize,
    m: usize,
}

impl RealKernel for OuterKernel {
    /// Forward: `(a, b)`; backward: `(a, b, g)`.
    fn run<T: Real>(&self, o: &[&[T]]) -> Vec<T> {
        let (n, m) = (self.n, self.m);
        let (a, b) = (o[0], o[1]);
        let rows = a.len().checked_div(n).unwrap_or_else(|| b.len() / m.max(1));
        if !self.backward {
            let mut out = Vec::with_capacity(rows * n * m);
            for r in 0..rows {
                for &x in &a[r * n..][..n] {
                    out.extend(b[r * m..][..m].iter().map(|&y| x * y));
                }
            }
            return out;
        }
        let g = o[2];
        let (mut da, mut db) = (vec![T::zero(); rows * n], vec![T::zero(); rows * m]);
        for r in 0..rows {
            let (ar, br, gr) = (&a[r * n..][..n], &b[r * m..][..m], &g[r * n * m..][..n * m]);
            let (dar, dbr) = (&mut da[r * n..][..n], &mut db[r * m..][..m]);
            for (i, grow) in gr.chunks_exact(m.max(1)).take(n).enumerate() {
                dar[i] = grow.iter().zip(br).fold(T::zero(), |s, (&g, &y)| s + g * y);
                for (d, &g) in dbr.iter_mut().zip(grow) {
                    *d += g * ar[i];
                }
            }
        }
        da.extend(db);
        da
    }
}

impl CustomOp2 for Forward {
    fn name(&self) -> &'static str {
        "outer_fwd"
    }

    fn cpu_fwd(&self, s1: &CpuStorage, l1: &Layout, s2: &CpuStorage, l2: &Layout) -> Result<(CpuStorage, Shape)> {
        let (_, n, m) = geometry(l1, l2)?;
        let kernel = OuterKernel { backward: false, n, m };
        Ok((run_cpu(&kernel, &[(s1, l1), (s2, l2)], WHAT)?, output_shape(l1, m)))
    }

    #[cfg(feature = "cuda")]
    fn cuda_fwd(&self, s1: &CudaStorage, l1: &Layout, s2: &CudaStorage, l2: &Layout) -> Result<(CudaStorage, Shape)> {
        let (rows, n, m) = geometry(l1, l2)?;
        let out = cuda::outer("outer_fwd", &[(s1, l1), (s2, l2)], rows, n, m, rows * n * m)?;
        super::fused::record_launch("outer_fwd");
        Ok((out, output_shape(l1, m)))
    }

    fn bwd(&self, a: &Tensor, b: &Tensor, _out: &Tensor, grad: &Tensor) -> Result<(Option<Tensor>, Option<Tensor>)> {
        let both = a.apply_op3_no_bwd(b, &grad.contiguous()?, &Backward)?;
        let (na, nb) = (a.elem_count(), b.elem_count());
        Ok((Some(both.narrow(0, 0, na)?.reshape(a.shape())?), Some(both.narrow(0, na, nb)?.reshape(b.shape())?)))
    }
}

impl CustomOp3 for Backward {
    fn name(&self) -> &'static str {
        "outer_bwd"
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
        let (rows, n, m) = geometry(l1, l2)?;
        check_gradient(l3, l1, m)?;
        let kernel = OuterKernel { backward: true, n, m };
        Ok((run_cpu(&kernel, &[(s1, l1), (s2, l2), (s3, l3)], WHAT)?, Shape::from(rows * (n + m))))
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
        let (rows, n, m) = geometry(l1, l2)?;
        check_gradient(l3, l1, m)?;
        let operands = [(s1, l1), (s2, l2), (s3, l3)];
        let out = cuda::outer("outer_bwd", &operands, rows, n, m, rows * (n + m))?;
        super::fused::record_launch("outer_bwd");
        Ok((out, Shape::from(rows * (n + m))))
    }
}

/// `a`'s shape with `m` appended: `[.., n, m]`.
fn output_shape(a: &Layout, m: usize) -> Shape {
    Shape::from(a.dims().iter().copied().chain([m]).collect::<Vec<_>>())
}

/// The output's gradient must be laid out as the output.
fn check_gradient(g: &Layout, a: &Layout, m: usize) -> Result<()> {
    if g.shape() != &output_shape(a, m) || !g.is_contiguous() {
        bail!("{WHAT}: a gradient {:?} for an output {:?}", g.dims(), output_shape(a, m).dims());
    }
    Ok(())
}

/// `outer.cu`: the forward a thread per output element, the backward a block per row.
pub fn launch_shape(backward: bool, rows: u32, n: u32, m: u32) -> LaunchShape {
    if backward { LaunchShape::blocks_of_256(rows.max(1)) } else { LaunchShape::per_element((rows * n * m).max(1)) }
}

/// The launch of its CUDA kernels, with the `cuda` feature.
#[cfg(feature = "cuda")]
mod cuda {
    use crate::kernels::cuda_kernels::{OUTER, launch_config, run};
    use candle_core::{CudaStorage, Layout, Result};

    /// Runs `kernel` of `outer.cu` on its f32 operands (contiguous, as laid out) for `rows` outer
    /// products of `n` and `m` elements, into a new buffer of `len` elements: the forward with a
    /// thread per output element, the backward with a block of 256 threads per row.
    pub(super) fn outer(
        kernel: &str,
        operands: &[(&CudaStorage, &Layout)],
        rows: usize,
        n: usize,
        m: usize,
        len: usize,
    ) -> Result<CudaStorage> {
        let (Ok(r), Ok(n), Ok(m), Ok(_)) =
            (i32::try_from(rows), i32::try_from(n), i32::try_from(m), u32::try_from(rows * n * m))
        else {
            candle_core::bail!("{kernel}: {rows} outer products of {n} × {m} are more than the kernel indexes")
        };
        let config = launch_config(super::launch_shape(kernel == "outer_bwd", r as u32, n as u32, m as u32));
        // SAFETY: outer.cu's kernels take their operands, the output, rows, n and m, in this order;
        // the forward guards the threads past rows · n · m and writes each output element once; the
        // backward runs a block (whole warps) per row, returns for a block past the last, and
        // writes its row's n + m gradients (len = rows · (n + m)).
        unsafe { run(&OUTER, kernel, operands, len, config, &[r, n, m], &[]) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::fused::testing::{assert_fused_matches, var};

    #[test]
    fn the_fused_outer_product_and_its_gradients_equal_candle_ops_and_autograd() -> Result<()> {
        // Not square, so that a mix-up of the axes fails.
        let (a, b) = (var(&[3, 4], 1.0)?, var(&[3, 5], 1.0)?);
        assert_fused_matches(&[&a, &b], &[outer(&a, &b)?], &[outer_with_candle_ops(&a, &b)?], 1e-12)?;
        // One operand twice (`itemWrite` without `b` writes a ⊗ a), and heads as a second axis.
        let h = var(&[2, 3, 4], 1.0)?;
        assert_fused_matches(&[&h], &[outer(&h, &h)?], &[outer_with_candle_ops(&h, &h)?], 1e-12)
    }

    #[test]
    fn an_operand_shared_by_the_batch_broadcasts_as_with_candle_ops() -> Result<()> {
        let (a, b) = (var(&[3, 4], 1.0)?, var(&[1, 5], 1.0)?);
        assert_fused_matches(&[&a, &b], &[outer(&a, &b)?], &[outer_with_candle_ops(&a, &b)?], 1e-12)?;
        let v = var(&[5], 1.0)?;
        assert_eq!(outer(&a, &v)?.dims(), &[3, 4, 5]);
        let (x, y) = (var(&[2, 4], 1.0)?, var(&[3, 5], 1.0)?);
        assert!(outer(&x, &y).is_err());
        Ok(())
    }
}
