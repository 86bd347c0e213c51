//! `transfer(R, size = d)`: relational → item memory transfer (SAM paper Eq. 13, `G1 ∘ Vf`),
//! oriented as the authors' code orients it.
//!
//! Shapes: `R: [nq, d, d2]` → `[d2, size]`, with
//! `out[f, j] = Σ_{n,e} W[j, (n, e)] R[n, e, f] + b[j]`: `R` is flattened to `(nq·d) × d2`,
//! transposed, and a dense layer `nq·d → size` is applied along the last axis.
//!
//! Which orientation, and why. Eq. 13 says only that `G1` maps `(nq·d) × d → d × d`; App. B,
//! Prop. 5 writes it as `G(X) = W Vf(X)`, a matrix product on the left, which gives
//! `out[j, f] = Σ_{n,e} W[j, (n, e)] R[n, e, f]` (no bias): the layer's output indexes the
//! rows. The authors' code (thaihungle/SAM, `baselines/sam/stm_basic.py`) flattens the slots
//! to `(nq·d) × d`, swaps the two axes and applies a linear layer `nq·d → d` to each row, which
//! gives the **transpose** of that, `out[f, j]`, plus a bias. memctl follows the code,
//! because the code is what produced the paper's numbers (docs/models.md, STM,
//! step 6, gives the code's transfer). The item memory is not symmetric, so the two are
//! different models.
//!
//! The code also transfers from the fresh SAM output, not the accumulated `M^r` that Eq. 13
//! names (docs/models.md, STM, DIFF 5); the STM spec wires it that way. "STM w/o transfer"
//! removes this call.

use candle_core::Tensor;

use crate::kernels::cpu::dense::{Transposed, column_sums_into};
use crate::kernels::cpu::gemm::{Mat, MatMut, Par, matmul};
use crate::kernels::cpu::par::for_each_batch;
use crate::kernels::cpu::{real::Real, view};
use crate::prims::prelude::*;

primitive! {
    Transfer = "transfer",
    "relational to item memory: (G1 Vf(R))ᵀ + bias over the flattened slots (SAM Eq. 13, the code's orientation)",
    args: [tensor("R"), int_or("size", 0)],
    examples: [[("R", t(&[2, 3, 3]))], [("R", t(&[2, 3, 4])), ("size", int(5))]],
    op: TransferOp::new,
}

/// One call, configured: `R`'s shape `[nq, d, d2]` and the dense layer `nq·d → size`.
pub(crate) struct Config {
    nq: usize,
    d: usize,
    d2: usize,
    layer: Dense,
}

pub(crate) fn configure(args: &Args) -> Result<(Config, Inferred), PrimError> {
    let r = args.shape_of_rank("R", 3, "a relational memory [nq, d, d]")?;
    let (nq, d, d2) = (r[0], r[1], r[2]);
    // size = 0 means "the memory width d", the item memory's shape in STM.
    let size = match args.value("size")?.as_int() {
        Some(0) => d,
        _ => args.size("size")?,
    };
    let mut params = ParamList::new();
    let layer = params.dense("", nq * d, size);
    let flops = (2 * nq * d * size * d2) as u64;
    Ok((Config { nq, d, d2, layer }, Inferred::new(vec![Ty::Tensor(vec![d2, size])], params.into_decls(), flops)))
}

pub(crate) struct TransferOp {
    config: Config,
    wt: Transposed,
}

impl TransferOp {
    pub(crate) fn new(config: Config) -> TransferOp {
        TransferOp { config, wt: Transposed::default() }
    }

    /// The dense layer's parameters, among the call's own.
    pub(crate) fn layer(&self) -> Dense {
        self.config.layer
    }
}

impl WithProducts for TransferOp {
    fn with_products(&self, inputs: &[&Tensor], params: &[&Tensor], products: &dyn Products) -> Outputs {
        let Config { nq, d, d2, layer } = &self.config;
        let [r] = op::inputs("transfer", inputs)?;
        let batch = r.dim(0)?;
        let flat = r.reshape((batch, nq * d, *d2))?.transpose(1, 2)?; // [B, d2, nq·d]
        Ok(vec![products.dense(&flat, layer.weight.of(params), Some(layer.bias.of(params)))?])
    }
}

impl SlicedBackward for TransferOp {
    type Saved = ();

    /// One `[d2 × nq·d] · [nq·d × size]` GEMM per example, reading `R` transposed in place.
    fn forward_typed<T: Real>(&self, inputs: &[&Tensor], params: &[&Tensor]) -> Forward<()> {
        let [r] = op::inputs("transfer", inputs)?;
        let Config { nq, d, d2, layer } = &self.config;
        let batch = r.dim(0)?;
        let (k, d2) = (nq * d, *d2);
        let w = layer.weight.of(params);
        let size = w.dim(0)?;
        let wt = self.wt.of(w)?;
        let (rr, wr, br) = (view::Read::new(r)?, view::Read::new(&wt)?, view::Read::new(layer.bias.of(params))?);
        let (r, wt, bias) = (rr.slice::<T>()?, wr.slice::<T>()?, br.slice::<T>()?);
        let mut out = Vec::with_capacity(batch * d2 * size);
        for _ in 0..batch * d2 {
            out.extend_from_slice(&bias[..size]);
        }
        for_each_batch(&mut out, d2 * size, batch * d2 * size * k, |first, chunk| {
            for (i, o) in chunk.chunks_exact_mut(d2 * size).enumerate() {
                let rb = &r[(first + i) * k * d2..][..k * d2];
                matmul(MatMut::new(o, d2, size), Mat::new(rb, k, d2).t(), Mat::new(wt, k, size), true, Par::Seq);
            }
        });
        Ok((vec![view::tensor(out, (batch, d2, size))?], ()))
    }

    fn backward_typed<T: Real>(&self, b: &Backward<'_, ()>, param_grads: &mut [ParamGrad]) -> InputGrads {
        let [r] = b.inputs_of()?;
        let Config { nq, d, d2, layer } = &self.config;
        let batch = r.dim(0)?;
        let (k, d2) = (nq * d, *d2);
        let w = layer.weight.of(b.params);
        let size = w.dim(0)?;
        let gy = b.grad_or_zeros(0)?;
        let (gyr, rr, wr) = (view::Read::new(&gy)?, view::Read::new(r)?, view::Read::new(w)?);
        let (g, rs, w) = (gyr.slice::<T>()?, rr.slice::<T>()?, wr.slice::<T>()?);
        let (gw, gb) = Slot::pair_mut(layer.weight, layer.bias, param_grads);
        // d loss / d W += Σ_b g_bᵀ R_bᵀ ([size × d2] · [d2 × nq·d]).
        let gw = gw.slice_mut::<T>(size * k)?;
        for ex in 0..batch {
            let (gb_, rb) = (&g[ex * d2 * size..][..d2 * size], &rs[ex * k * d2..][..k * d2]);
            matmul(MatMut::new(gw, size, k), Mat::new(gb_, d2, size).t(), Mat::new(rb, k, d2).t(), true, Par::Pool);
        }
        column_sums_into(g, size, gb.slice_mut::<T>(size)?);
        if !b.needs[0] {
            return Ok(vec![None]);
        }
        // d loss / d R_b = Wᵀ g_bᵀ ([nq·d × size] · [size × d2]).
        let mut gr = vec![T::zero(); batch * k * d2];
        for_each_batch(&mut gr, k * d2, batch * k * d2 * size, |first, chunk| {
            for (i, o) in chunk.chunks_exact_mut(k * d2).enumerate() {
                let gb_ = &g[(first + i) * d2 * size..][..d2 * size];
                matmul(MatMut::new(o, k, d2), Mat::new(w, size, k).t(), Mat::new(gb_, d2, size).t(), false, Par::Seq);
            }
        });
        Ok(vec![Some(view::tensor(gr, r.dims())?)])
    }
}

#[cfg(test)]
mod tests {
    use crate::prims::contract::testing::*;

    #[test]
    fn shapes() {
        assert_eq!(out_shapes("transfer", &[("R", t(&[2, 3, 3]))]), vec![vec![3, 3]]);
        assert_eq!(out_shapes("transfer", &[("R", t(&[2, 3, 4])), ("size", int(5))]), vec![vec![4, 5]]);
        assert_eq!(param_count("transfer", &[("R", t(&[2, 3, 3]))]), 6 * 3 + 3);
    }
}
