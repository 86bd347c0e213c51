//! The outer product `a ⊗ b` of two batches of vectors (`outer`, and `itemWrite`'s written
//! item `a ⊗ b`) as one candle op with its own backward, for the device-generic path (candle's
//! autograd: the GPU, and evaluation on the CPU).
//!
//! As candle ops it is a broadcast product forward and, backward, a broadcast product and a sum
//! for each operand: `d a = g b`, `d b = gᵀ a` per example, each through a full-size
//! temporary. Here the backward is one kernel that writes both from `g`
//! (`src/kernels/cuda/layers/outer.cu`: a block per example, a warp per row for `d a`, a thread per
//! column for `d b`). Where it runs is its switch's rule (`kernels::cuda::switches`)
//! ([`OUTER`](OUTER)).

use candle_core::{D, Layout, Result, Shape, Tensor, bail};

use crate::kernels::cpu::real::Real;
use crate::kernels::cuda::kernel::{Fused, FusedKernel, Launch, entries, two_passes};
use crate::kernels::cuda::launch_shape::LaunchShape;
use crate::kernels::cuda::switches::Switch;

/// STM A 10.98 → 10.78 ms a step, B 19.59 → 19.07 (H100, 2026-11-26).
pub const OUTER: Switch = Switch::on("outer");
inventory::submit! { OUTER }

/// How errors name the op.
const WHAT: &str = "the fused outer product";

/// `a ⊗ b`: `a` `[.., n]`, `b` `[.., m]` → `[.., n, m]`, the leading axes broadcast against
/// each other. One fused op where its switch runs it, else candle's broadcast product.
pub fn outer(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    if !crate::kernels::cuda::switches::used_for(a, OUTER) {
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
    each(a)?.apply_op2(&each(b)?, Fused(Outer::Forward))
}

/// [`outer`] in candle's ops: `a[.., :, None] * b[.., None, :]`.
pub fn outer_with_candle_ops(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    a.unsqueeze(D::Minus1)?.broadcast_mul(&b.unsqueeze(b.rank() - 1)?)
}

two_passes! {
    /// The two passes: `(a, b) → a ⊗ b` and, for its backward, `(a, b, g) → [d a | d b]` (flat).
    pub enum Outer
}

/// `rows` outer products of `n` and `m` elements.
#[derive(Clone, Copy, Debug)]
pub struct Rows {
    rows: usize,
    n: usize,
    m: usize,
}

impl FusedKernel for Outer {
    type Sizes = Rows;

    entries! { OUTER: Outer::Forward => "outer_fwd", Outer::Backward => "outer_bwd" }

    /// `a` `[.., n]` and `b` `[.., m]` with the same leading axes (and, backward, `g` laid out
    /// as the output `[.., n, m]`).
    fn sizes(&self, operands: &[&Layout]) -> Result<(Shape, Rows)> {
        let (Some(a), Some(b)) = (operands.first(), operands.get(1)) else { bail!("{WHAT} takes two vectors") };
        let (Some((&n, lead_a)), Some((&m, lead_b))) = (a.dims().split_last(), b.dims().split_last()) else {
            bail!("{WHAT} takes vectors, got {:?} and {:?}", a.dims(), b.dims())
        };
        if lead_a != lead_b {
            bail!("{WHAT}: operands {:?} and {:?} of different batches", a.dims(), b.dims());
        }
        let rows = lead_a.iter().product();
        let output = Shape::from(a.dims().iter().copied().chain([m]).collect::<Vec<_>>());
        match (self, operands.get(2)) {
            (Outer::Forward, None) => Ok((output, Rows { rows, n, m })),
            (Outer::Backward, Some(g)) if g.shape() == &output => {
                Ok((Shape::from(rows * (n + m)), Rows { rows, n, m }))
            }
            (Outer::Backward, Some(g)) => bail!("{WHAT}: a gradient {:?} for an output {:?}", g.dims(), output.dims()),
            _ => bail!("{WHAT}: {} operands for {}", operands.len(), self.entry()),
        }
    }

    fn cpu<T: Real>(&self, Rows { rows, n, m }: Rows, o: &[&[T]]) -> Vec<T> {
        let (a, b) = (o[0], o[1]);
        if let Outer::Forward = self {
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

    /// The forward a thread per output element, the backward a block of 256 threads per row.
    fn launch(&self, Rows { rows, n, m }: Rows) -> Result<Launch> {
        let Ok(cells) = u32::try_from(rows * n * m) else { bail!("{}: {rows} × {n} × {m} elements", self.entry()) };
        let shape = match self {
            Outer::Forward => LaunchShape::per_element(cells.max(1)),
            Outer::Backward => LaunchShape::blocks_of_256(rows.max(1) as u32),
        };
        Launch::with_ints(self.entry(), shape, &[rows, n, m])
    }

    fn backward(&self, operands: &[&Tensor], _out: &Tensor, grad: &Tensor) -> Result<Vec<Option<Tensor>>> {
        let (Outer::Forward, &[a, b]) = (self, operands) else { bail!("{WHAT}'s backward has no gradient of its own") };
        let both = a.apply_op3_no_bwd(b, &grad.contiguous()?, &Fused(Outer::Backward))?;
        let (na, nb) = (a.elem_count(), b.elem_count());
        Ok(vec![Some(both.narrow(0, 0, na)?.reshape(a.shape())?), Some(both.narrow(0, na, nb)?.reshape(b.shape())?)])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::cuda::fused::testing::{assert_fused_matches, var};

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
