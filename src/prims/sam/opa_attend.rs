//! `opaAttend(q, K, V)`: outer product attention (SAM paper Eq. 2).
//!
//! `A⊗(q, K, V) = Σ_i tanh(q ⊙ k_i) ⊗ v_i` for every query row of `q`.
//! Shapes: `q: [nq, dqk]`, `K: [n, dqk]`, `V: [n, dv]` → `[nq, dqk, dv]`.
//! Computed as batched GEMMs (see `kernels::blocks::opa`), never as a 5-D tensor of outer products.

use candle_core::Tensor;

use crate::kernels::blocks::opa::outer_product_attention;
use crate::prims::prelude::*;

primitive! {
    OpaAttend = "opaAttend",
    "outer product attention Σ_i tanh(q ⊙ k_i) ⊗ v_i per query (SAM Eq. 2)",
    args: [tensor("q"), tensor("K"), tensor("V")],
    examples: [[("q", t(&[2, 3])), ("K", t(&[4, 3])), ("V", t(&[4, 2]))]],
}

fn configure(args: &Args) -> Result<(impl Op + 'static, Inferred), PrimError> {
    let q = args.shape_of_rank("q", 2, "a matrix of query rows [nq, dqk]")?;
    let k = args.shape_of_rank("K", 2, "a matrix of key rows [n, dqk]")?;
    let v = args.shape_of_rank("V", 2, "a matrix of value rows [n, dv]")?;
    if k[1] != q[1] {
        return Err(PrimError::shape("K", &[k[0], q[1]], k, "(keys and queries have the same width)"));
    }
    if v[0] != k[0] {
        return Err(PrimError::shape("V", &[k[0], v[1]], v, "(one value row per key row)"));
    }
    let (nq, dqk, n, dv) = (q[0], q[1], k[0], v[1]);
    let flops = (nq * n * dqk * 3 + 2 * nq * dqk * n * dv) as u64;
    Ok((OpaOp, Inferred::new(vec![Ty::Tensor(vec![nq, dqk, dv])], vec![], flops)))
}

struct OpaOp;

impl Op for OpaOp {
    fn forward(&self, inputs: &[&Tensor], _params: &[&Tensor]) -> candle_core::Result<Vec<Tensor>> {
        // Inputs may have batch 1 (shared) or B; bring them to a common batch first.
        let batch =
            inputs.iter().map(|t| t.dim(0)).collect::<candle_core::Result<Vec<_>>>()?.into_iter().max().unwrap_or(1);
        let full = |t: &Tensor| -> candle_core::Result<Tensor> {
            let (_, r, c) = t.dims3()?;
            t.broadcast_as((batch, r, c))
        };
        let [q, k, v] = op::inputs("opaAttend", inputs)?;
        Ok(vec![outer_product_attention(&full(q)?, &full(k)?, &full(v)?)?])
    }
}

#[cfg(test)]
mod tests {
    use crate::prims::contract::testing::*;

    #[test]
    fn one_key_gives_one_outer_product() {
        // q = [1, 1], k = [atanh(.5), 0], v = [2]: tanh(q ⊙ k) = [.5, 0] → [[1], [0]].
        let k0 = 0.5f64.atanh();
        let out = run(
            "opaAttend",
            &[("q", t(&[1, 2])), ("K", t(&[1, 2])), ("V", t(&[1, 1]))],
            &[vec![1.0, 1.0], vec![k0, 0.0], vec![2.0]],
        );
        assert!((out[0] - 1.0).abs() < 1e-12 && out[1].abs() < 1e-12, "{out:?}");
    }

    #[test]
    fn shapes() {
        assert_eq!(
            out_shapes("opaAttend", &[("q", t(&[2, 3])), ("K", t(&[4, 3])), ("V", t(&[4, 5]))]),
            vec![vec![2, 3, 5]]
        );
        assert!(error("opaAttend", &[("q", t(&[2, 3])), ("K", t(&[4, 2])), ("V", t(&[4, 5]))]).contains("`K`"));
        assert!(error("opaAttend", &[("q", t(&[2, 3])), ("K", t(&[4, 3])), ("V", t(&[3, 5]))]).contains("`V`"));
    }
}
