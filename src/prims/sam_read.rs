//! `samRead(M, nq)`: the Self-attentive Associative Memory operator (SAM paper Eq. 4–8).
//!
//! Shapes: `M: [n, d]` → `[nq, n, n]` (in STM, `n = d`).
//! Follows the authors' code (reference.md §1.1), not the paper's three projections:
//! - one dense layer `d → 3·nq` with bias on every **row** of `M` (the paper's `W_q M` mixes
//!   rows; the code mixes columns, i.e. acts on `Mᵀ` — they differ because `M` is not symmetric);
//! - one LayerNorm over the whole `[n, 3·nq]` projection jointly (the paper has three);
//! - transposed and split into `q, k, v: [nq, n]`, then outer product attention
//!   `SAM(M)[s] = Σ_j tanh(q_s ⊙ k_j) ⊗ v_j` with `n_kv = n_q` as in the code.

use candle_core::Tensor;

use super::*;
use crate::kernels::{dense::dense, layer_norm::layer_norm, opa::outer_product_attention};

pub struct SamRead;

static SIGNATURE: [ArgSpec; 2] = [ArgSpec::tensor("M"), ArgSpec::value("nq", Kind::Int, Default::Int(1))];

impl Primitive for SamRead {
    fn name(&self) -> &'static str {
        "samRead"
    }
    fn summary(&self) -> &'static str {
        "SAM: nq queries of outer product attention over LN(W M) (SAM Eq. 4-8, authors' form)"
    }
    fn signature(&self) -> &'static [ArgSpec] {
        &SIGNATURE
    }
    fn instantiate(&self, args: &Args) -> Result<Instance, PrimError> {
        let m = args.shape_of_rank("M", 2, "an item memory [n, d]")?;
        let (n, d) = (m[0], m[1]);
        let nq = args.size("nq")?;
        let mut params = ParamDecl::dense("qkv", d, 3 * nq).to_vec();
        params.push(ParamDecl::new("ln.weight", vec![n * 3 * nq], Init::Constant(1.0)));
        params.push(ParamDecl::new("ln.bias", vec![n * 3 * nq], Init::Constant(0.0)));
        let flops = (2 * n * d * 3 * nq + 8 * n * 3 * nq + 3 * nq * nq * n + 2 * nq * n * nq * n) as u64;
        Ok(Instance::new(SamReadOp { n, nq }, vec![Ty::Tensor(vec![nq, n, n])], params, flops))
    }
}

struct SamReadOp {
    n: usize,
    nq: usize,
}

impl Op for SamReadOp {
    fn forward(&self, inputs: &[&Tensor], params: &[&Tensor]) -> candle_core::Result<Vec<Tensor>> {
        let m = inputs[0];
        let (batch, n, nq) = (m.dim(0)?, self.n, self.nq);
        let proj = dense(m, params[0], Some(params[1]))?; // [B, n, 3nq]
        let normed = layer_norm(&proj.reshape((batch, n * 3 * nq))?, params[2], params[3])?;
        let qkv = normed.reshape((batch, n, 3 * nq))?.transpose(1, 2)?; // [B, 3nq, n]
        let q = qkv.narrow(1, 0, nq)?;
        let k = qkv.narrow(1, nq, nq)?;
        let v = qkv.narrow(1, 2 * nq, nq)?;
        Ok(vec![outer_product_attention(&q, &k, &v)?])
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;

    #[test]
    fn shapes_and_parameters() {
        assert_eq!(out_shapes("samRead", &[("M", t(&[4, 4])), ("nq", int(2))]), vec![vec![2, 4, 4]]);
        // qkv: 4·6 + 6; joint LayerNorm over [4, 6]: 2 · 24.
        assert_eq!(param_count("samRead", &[("M", t(&[4, 4])), ("nq", int(2))]), 30 + 48);
        assert!(error("samRead", &[("M", t(&[2, 4, 4])), ("nq", int(2))]).contains("2 dimensions"));
        assert!(error("samRead", &[("M", t(&[4, 4])), ("nq", int(0))]).contains("`nq` must be a size"));
    }

    #[test]
    fn gradients_match_finite_differences() {
        grad_check("samRead", &[("M", t(&[3, 3])), ("nq", int(2))]);
    }
}
