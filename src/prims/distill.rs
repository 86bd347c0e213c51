//! `distill(Mr, nr, size = 64)`: the output read-out of STM (SAM paper Eq. 14).
//!
//! `o = G3(Vl(G2(Vl(Mr))))`: each relational slot is flattened (`Vl`), `G2: d·d2 → nr`, the
//! slots are flattened, `G3: nq·nr → size`. Shapes: `Mr: [nq, d, d2]` → `[size]`.
//! The authors' code follows this with a 2-layer ReLU MLP head (64 → 128 → 128) and a final
//! linear layer (reference.md §1.2, DIFF 10); the STM spec writes those as `mlp` and `linear`.

use candle_core::Tensor;

use super::backward::with_real;
use super::*;
use crate::kernels::dense::{Transposed, backward_slices, dense, forward_slices};
use crate::kernels::{real::Real, view};

pub struct Distill;

static SIGNATURE: [ArgSpec; 3] = [
    ArgSpec::tensor("Mr"),
    ArgSpec::value("nr", Kind::Int, Default::Required),
    ArgSpec::value("size", Kind::Int, Default::Int(64)),
];

impl Primitive for Distill {
    fn name(&self) -> &'static str {
        "distill"
    }
    fn summary(&self) -> &'static str {
        "STM read-out G3(Vl(G2(Vl(Mr)))) (SAM Eq. 14)"
    }
    fn signature(&self) -> &'static [ArgSpec] {
        &SIGNATURE
    }
    fn instantiate(&self, args: &Args) -> Result<Instance, PrimError> {
        let mr = args.shape_of_rank("Mr", 3, "a relational memory [nq, d, d]")?;
        let (nq, slot) = (mr[0], mr[1] * mr[2]);
        let nr = args.size("nr")?;
        let size = args.size("size")?;
        let mut params = ParamDecl::dense("g2", slot, nr).to_vec();
        params.extend(ParamDecl::dense("g3", nq * nr, size));
        let flops = (2 * nq * slot * nr + 2 * nq * nr * size) as u64;
        let op = DistillOp { nq, slot, nr, w2t: Transposed::default(), w3t: Transposed::default() };
        Ok(Instance::new(op, vec![Ty::Tensor(vec![size])], params, flops))
    }
}

struct DistillOp {
    nq: usize,
    slot: usize,
    nr: usize,
    w2t: Transposed,
    w3t: Transposed,
}

impl Op for DistillOp {
    fn forward(&self, inputs: &[&Tensor], params: &[&Tensor]) -> candle_core::Result<Vec<Tensor>> {
        let mr = inputs[0];
        let batch = mr.dim(0)?;
        let g2 = dense(&mr.reshape((batch, self.nq, self.slot))?, params[0], Some(params[1]))?;
        Ok(vec![dense(&g2.reshape((batch, self.nq * self.nr))?, params[2], Some(params[3]))?])
    }

    fn has_backward(&self) -> bool {
        true
    }

    /// Two GEMMs; saves `G2`'s output.
    fn forward_train(&self, inputs: &[&Tensor], params: &[&Tensor]) -> candle_core::Result<(Vec<Tensor>, Saved)> {
        with_real!(inputs[0].dtype(), T => self.train_forward::<T>(inputs[0], params))
    }

    fn backward(&self, b: &Backward<'_>, param_grads: &mut [ParamGrad]) -> candle_core::Result<Vec<Option<Tensor>>> {
        with_real!(b.inputs[0].dtype(), T => self.train_backward::<T>(b, param_grads))
    }
}

impl DistillOp {
    fn train_forward<T: Real>(&self, mr: &Tensor, params: &[&Tensor]) -> candle_core::Result<(Vec<Tensor>, Saved)> {
        let batch = mr.dim(0)?;
        let size = params[2].dim(0)?;
        let (w2t, w3t) = (self.w2t.of(params[0])?, self.w3t.of(params[2])?);
        let (mrr, w2, b2, w3, b3) = (
            view::Read::new(mr)?,
            view::Read::new(&w2t)?,
            view::Read::new(params[1])?,
            view::Read::new(&w3t)?,
            view::Read::new(params[3])?,
        );
        let g2 = forward_slices(mrr.slice::<T>()?, batch * self.nq, w2.slice()?, Some(b2.slice()?), self.slot, self.nr);
        let out = forward_slices(&g2, batch, w3.slice()?, Some(b3.slice()?), self.nq * self.nr, size);
        Ok((vec![view::tensor(out, (batch, size))?], vec![view::tensor(g2, (batch, self.nq * self.nr))?]))
    }

    fn train_backward<T: Real>(
        &self,
        b: &Backward<'_>,
        param_grads: &mut [ParamGrad],
    ) -> candle_core::Result<Vec<Option<Tensor>>> {
        let mr = &b.inputs[0];
        let batch = mr.dim(0)?;
        let size = b.params[2].dim(0)?;
        let gy = b.grad_or_zeros(0)?;
        let (gyr, g2r, mrr) = (view::Read::new(&gy)?, view::Read::new(&b.saved[0])?, view::Read::new(mr)?);
        let (w2, w3) = (view::Read::new(&b.params[0])?, view::Read::new(&b.params[2])?);
        let (g2p, g3p) = param_grads.split_at_mut(2);
        let (gw2, gb2) = g2p.split_at_mut(1);
        let (gw3, gb3) = g3p.split_at_mut(1);
        let (nqnr, rows2) = (self.nq * self.nr, batch * self.nq);
        let gg2 = backward_slices(
            gyr.slice::<T>()?,
            g2r.slice::<T>()?,
            batch,
            w3.slice::<T>()?,
            nqnr,
            size,
            Some(gw3[0].slice_mut::<T>(size * nqnr)?),
            Some(gb3[0].slice_mut::<T>(size)?),
            true,
        )
        .unwrap_or_default();
        let gmr = backward_slices(
            &gg2,
            mrr.slice::<T>()?,
            rows2,
            w2.slice::<T>()?,
            self.slot,
            self.nr,
            Some(gw2[0].slice_mut::<T>(self.nr * self.slot)?),
            Some(gb2[0].slice_mut::<T>(self.nr)?),
            b.needs[0],
        );
        Ok(vec![gmr.map(|g| view::tensor(g, mr.dims())).transpose()?])
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;

    #[test]
    fn shapes() {
        assert_eq!(out_shapes("distill", &[("Mr", t(&[2, 3, 3])), ("nr", int(4))]), vec![vec![64]]);
        assert_eq!(
            param_count("distill", &[("Mr", t(&[2, 3, 3])), ("nr", int(4)), ("size", int(5))]),
            9 * 4 + 4 + 8 * 5 + 5
        );
    }

    #[test]
    fn gradients_match_finite_differences() {
        grad_check("distill", &[("Mr", t(&[2, 3, 3])), ("nr", int(4)), ("size", int(3))]);
    }

    #[test]
    fn manual_backward_matches_autograd() {
        manual_backward_check("distill", &[("Mr", t(&[2, 3, 4])), ("nr", int(4)), ("size", int(3))]);
    }
}
