//! `transfer(R, size = d)`: relational → item memory transfer (SAM paper Eq. 13, `G1 ∘ Vf`).
//!
//! Shapes: `R: [nq, d, d2]` → `[d2, size]`, with
//! `out[f, j] = Σ_{n,e} W[j, (n, e)] R[n, e, f] + b[j]`: `R` is flattened to `(nq·d) × d2`,
//! transposed, and a dense layer `nq·d → size` is applied, as in the authors' code.
//! The code transfers from the fresh SAM output, not the accumulated `M^r` (reference.md
//! §1.2, DIFF 5); the STM spec wires it that way. "STM w/o transfer" removes this call.

use candle_core::Tensor;

use super::*;
use crate::kernels::dense::dense;

pub struct Transfer;

static SIGNATURE: [ArgSpec; 2] = [ArgSpec::tensor("R"), ArgSpec::value("size", Kind::Int, Default::Int(0))];

impl Primitive for Transfer {
    fn name(&self) -> &'static str {
        "transfer"
    }
    fn summary(&self) -> &'static str {
        "relational to item memory: G1(Vf(R))ᵀ, dense over the flattened slots (SAM Eq. 13)"
    }
    fn signature(&self) -> &'static [ArgSpec] {
        &SIGNATURE
    }
    fn instantiate(&self, args: &Args) -> Result<Instance, PrimError> {
        let r = args.shape_of_rank("R", 3, "a relational memory [nq, d, d]")?;
        let (nq, d, d2) = (r[0], r[1], r[2]);
        // size = 0 means "the memory width d", the item memory's shape in STM.
        let size = match args.value("size")?.as_int() {
            Some(0) => d,
            _ => args.size("size")?,
        };
        let params = ParamDecl::dense("", nq * d, size).to_vec();
        let flops = (2 * nq * d * size * d2) as u64;
        Ok(Instance::new(TransferOp { nq, d, d2 }, vec![Ty::Tensor(vec![d2, size])], params, flops))
    }
}

struct TransferOp {
    nq: usize,
    d: usize,
    d2: usize,
}

impl Op for TransferOp {
    fn forward(&self, inputs: &[&Tensor], params: &[&Tensor]) -> candle_core::Result<Vec<Tensor>> {
        let r = inputs[0];
        let batch = r.dim(0)?;
        let flat = r.reshape((batch, self.nq * self.d, self.d2))?.transpose(1, 2)?; // [B, d2, nq·d]
        Ok(vec![dense(&flat, params[0], Some(params[1]))?])
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;

    #[test]
    fn shapes() {
        assert_eq!(out_shapes("transfer", &[("R", t(&[2, 3, 3]))]), vec![vec![3, 3]]);
        assert_eq!(out_shapes("transfer", &[("R", t(&[2, 3, 4])), ("size", int(5))]), vec![vec![4, 5]]);
        assert_eq!(param_count("transfer", &[("R", t(&[2, 3, 3]))]), 6 * 3 + 3);
    }

    #[test]
    fn gradients_match_finite_differences() {
        grad_check("transfer", &[("R", t(&[2, 3, 3]))]);
    }
}
