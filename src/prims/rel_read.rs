//! `relRead(Mr, c, b)`: read of the relational memory (SAM paper Eq. 11).
//!
//! `v_r = softmax(c)ᵀ · Mr · b`, i.e. `v_r[f] = Σ_n Σ_e p[n] b[e] Mr[n, e, f]` with `p = softmax(c)`.
//! Shapes: `Mr: [nq, d, d2]`, `c: [nq]` (the logits `f3(x)`), `b: [d]` (`f2(x)`) → `[d2]`.
//! The paper folds `f2`/`f3` into the read; memctl takes their outputs as inputs so the
//! spec can reuse `f2(x)` for the association `v_r ⊗ f2(x)` as the authors' code does.
//! Computed as one batched `[1 × nq·d] @ [nq·d × d2]` product: `(p ⊗ b)` flattened times `Mr`.

use candle_core::{D, Tensor};

use super::*;

pub struct RelRead;

static SIGNATURE: [ArgSpec; 3] = [ArgSpec::tensor("Mr"), ArgSpec::tensor("c"), ArgSpec::tensor("b")];

impl Primitive for RelRead {
    fn name(&self) -> &'static str {
        "relRead"
    }
    fn summary(&self) -> &'static str {
        "relational memory read v = softmax(c)ᵀ Mr b (SAM Eq. 11)"
    }
    fn signature(&self) -> &'static [ArgSpec] {
        &SIGNATURE
    }
    fn instantiate(&self, args: &Args) -> Result<Instance, PrimError> {
        let mr = args.shape_of_rank("Mr", 3, "a relational memory [nq, d, d]")?;
        let (nq, d, d2) = (mr[0], mr[1], mr[2]);
        let c = args.shape("c")?;
        if c != &vec![nq] {
            return Err(PrimError::shape_mismatch("c", &[nq], c, "(one logit per relational slot)"));
        }
        let b = args.shape("b")?;
        if b != &vec![d] {
            return Err(PrimError::shape_mismatch("b", &[d], b, "to contract with the memory's second axis"));
        }
        let flops = (2 * nq * d * d2 + nq * d + 5 * nq) as u64;
        Ok(Instance::new(RelReadOp { nq, d, d2 }, vec![Ty::Tensor(vec![d2])], vec![], flops))
    }
}

struct RelReadOp {
    nq: usize,
    d: usize,
    d2: usize,
}

impl Op for RelReadOp {
    fn forward(&self, inputs: &[&Tensor], _params: &[&Tensor]) -> candle_core::Result<Vec<Tensor>> {
        let (mr, c, b) = (inputs[0], inputs[1], inputs[2]);
        let batch = mr.dim(0)?;
        let p = candle_nn::ops::softmax(c, D::Minus1)?;
        let pb = p.unsqueeze(2)?.broadcast_mul(&b.unsqueeze(1)?)?.reshape((batch, 1, self.nq * self.d))?;
        let v = pb.matmul(&mr.reshape((batch, self.nq * self.d, self.d2))?)?;
        Ok(vec![v.reshape((batch, self.d2))?])
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;

    #[test]
    fn shapes() {
        assert_eq!(out_shapes("relRead", &[("Mr", t(&[2, 3, 4])), ("c", t(&[2])), ("b", t(&[3]))]), vec![vec![4]]);
        assert!(
            error("relRead", &[("Mr", t(&[2, 3, 4])), ("c", t(&[3])), ("b", t(&[3]))])
                .contains("`c` must have shape [2]")
        );
        assert!(error("relRead", &[("Mr", t(&[3, 4])), ("c", t(&[2])), ("b", t(&[3]))]).contains("3 dimensions"));
    }

    #[test]
    fn equal_logits_average_the_slots() {
        // Two slots, d = 1, d2 = 2: softmax([0, 0]) = [½, ½]; b = [2] → v = ½·2·(Mr0 + Mr1).
        let out = run(
            "relRead",
            &[("Mr", t(&[2, 1, 2])), ("c", t(&[2])), ("b", t(&[1]))],
            &[vec![1.0, 2.0, 3.0, 4.0], vec![0.0, 0.0], vec![2.0]],
        );
        assert_eq!(out, vec![4.0, 6.0]);
    }

    #[test]
    fn gradients_match_finite_differences() {
        grad_check("relRead", &[("Mr", t(&[2, 3, 4])), ("c", t(&[2])), ("b", t(&[3]))]);
    }
}
