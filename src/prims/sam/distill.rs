//! `distill(Mr, nr, size = 64)`: the output read-out of STM (SAM paper Eq. 14).
//!
//! `o = G3(Vl(G2(Vl(Mr))))`: each relational slot is flattened (`Vl`), `G2: d·d2 → nr`, the
//! slots are flattened, `G3: nq·nr → size`. Shapes: `Mr: [nq, d, d2]` → `[size]`.
//! The authors' code follows this with a 2-layer ReLU MLP head (64 → 128 → 128) and a final
//! linear layer (docs/models.md, STM); the STM spec writes those as `mlp` and `linear`.

use candle_core::Tensor;

use crate::kernels::cpu::dense::{Transposed, forward_slices};
use crate::kernels::cpu::{real::Real, view};
use crate::prims::prelude::*;

primitive! {
    Distill = "distill",
    "STM read-out G3(Vl(G2(Vl(Mr)))) (SAM Eq. 14)",
    args: [tensor("Mr"), int("nr"), int_or("size", 64)],
    examples: [
        [("Mr", t(&[2, 3, 3])), ("nr", int(4)), ("size", int(3))],
        [("Mr", t(&[2, 3, 4])), ("nr", int(4)), ("size", int(3))],
    ],
    op: |config| DistillOp { config, w2t: Transposed::default(), w3t: Transposed::default() },
}

struct Config {
    /// Relational slots, the elements of one slot, and `G2`'s output size.
    nq: usize,
    slot: usize,
    nr: usize,
    /// `G2: d·d2 → nr` on each slot, then `G3: nq·nr → size`.
    g2: Dense,
    g3: Dense,
}

fn configure(args: &Args) -> Result<(Config, Inferred), PrimError> {
    let mr = args.shape_of_rank("Mr", 3, "a relational memory [nq, d, d]")?;
    let (nq, slot) = (mr[0], mr[1] * mr[2]);
    let nr = args.size("nr")?;
    let size = args.size("size")?;
    let mut params = ParamList::new();
    let (g2, g3) = (params.dense("g2", slot, nr), params.dense("g3", nq * nr, size));
    let flops = (2 * nq * slot * nr + 2 * nq * nr * size) as u64;
    Ok((Config { nq, slot, nr, g2, g3 }, Inferred::new(vec![Ty::Tensor(vec![size])], params.into_decls(), flops)))
}

struct DistillOp {
    config: Config,
    w2t: Transposed,
    w3t: Transposed,
}

impl WithProducts for DistillOp {
    /// `G3(G2(M^r))`.
    fn with_products(&self, inputs: &[&Tensor], params: &[&Tensor], products: &dyn Products) -> Outputs {
        let Config { nq, slot, nr, g2, g3 } = &self.config;
        let [mr] = op::inputs("distill", inputs)?;
        let batch = mr.dim(0)?;
        let h = products.dense(&mr.reshape((batch, *nq, *slot))?, g2.weight.of(params), Some(g2.bias.of(params)))?;
        Ok(vec![products.dense(&h.reshape((batch, nq * nr))?, g3.weight.of(params), Some(g3.bias.of(params)))?])
    }
}

impl SlicedBackward for DistillOp {
    /// `G2`'s output, `[B, nq·nr]`.
    type Saved = Tensor;

    /// Two GEMMs.
    fn forward_typed<T: Real>(&self, inputs: &[&Tensor], params: &[&Tensor]) -> Forward<Tensor> {
        let [mr] = op::inputs("distill", inputs)?;
        let Config { nq, slot, nr, g2, g3 } = &self.config;
        let batch = mr.dim(0)?;
        let size = g3.weight.of(params).dim(0)?;
        let (w2t, w3t) = (self.w2t.of(g2.weight.of(params))?, self.w3t.of(g3.weight.of(params))?);
        let (mrr, w2, b2, w3, b3) = (
            view::Read::new(mr)?,
            view::Read::new(&w2t)?,
            view::Read::new(g2.bias.of(params))?,
            view::Read::new(&w3t)?,
            view::Read::new(g3.bias.of(params))?,
        );
        let h = forward_slices(mrr.slice::<T>()?, batch * nq, w2.slice()?, Some(b2.slice()?), *slot, *nr);
        let out = forward_slices(&h, batch, w3.slice()?, Some(b3.slice()?), nq * nr, size);
        Ok((vec![view::tensor(out, (batch, size))?], view::tensor(h, (batch, nq * nr))?))
    }

    fn backward_typed<T: Real>(&self, b: &Backward<'_, Tensor>, param_grads: &mut [ParamGrad]) -> InputGrads {
        let [mr] = b.inputs_of()?;
        let Config { g2, g3, .. } = &self.config;
        let gy = b.grad_or_zeros(0)?;
        let (gyr, hr, mrr) = (view::Read::new(&gy)?, view::Read::new(b.saved)?, view::Read::new(mr)?);
        let gh = b.dense_backward(*g3, gyr.slice::<T>()?, hr.slice::<T>()?, true, param_grads)?.unwrap_or_default();
        let gmr = b.dense_backward(*g2, &gh, mrr.slice::<T>()?, b.needs[0], param_grads)?;
        b.input_grads([gmr])
    }
}

#[cfg(test)]
mod tests {
    use crate::prims::contract::testing::*;

    #[test]
    fn shapes() {
        assert_eq!(out_shapes("distill", &[("Mr", t(&[2, 3, 3])), ("nr", int(4))]), vec![vec![64]]);
        assert_eq!(
            param_count("distill", &[("Mr", t(&[2, 3, 3])), ("nr", int(4)), ("size", int(5))]),
            9 * 4 + 4 + 8 * 5 + 5
        );
    }
}
