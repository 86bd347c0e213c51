//! `distill(Mr, nr, size = 64)`: the output read-out of STM (SAM paper Eq. 14).
//!
//! `o = G3(Vl(G2(Vl(Mr))))`: each relational slot is flattened (`Vl`), `G2: d·d2 → nr`, the
//! slots are flattened, `G3: nq·nr → size`. Shapes: `Mr: [nq, d, d2]` → `[size]`.
//! The authors' code follows this with a 2-layer ReLU MLP head (64 → 128 → 128) and a final
//! linear layer (reference.md §1.2, DIFF 10); the STM spec writes those as `mlp` and `linear`.

use candle_core::Tensor;

use super::*;
use crate::kernels::dense::dense;

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
        Ok(Instance::new(DistillOp { nq, slot, nr }, vec![Ty::Tensor(vec![size])], params, flops))
    }
}

struct DistillOp {
    nq: usize,
    slot: usize,
    nr: usize,
}

impl Op for DistillOp {
    fn forward(&self, inputs: &[&Tensor], params: &[&Tensor]) -> candle_core::Result<Vec<Tensor>> {
        let mr = inputs[0];
        let batch = mr.dim(0)?;
        let g2 = dense(&mr.reshape((batch, self.nq, self.slot))?, params[0], Some(params[1]))?;
        Ok(vec![dense(&g2.reshape((batch, self.nq * self.nr))?, params[2], Some(params[3]))?])
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
}
