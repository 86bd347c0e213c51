//! Outer product attention as batched matrix products (SAM Eq. 2).
//!
//! `out[s] = Σ_j tanh(q_s ⊙ k_j) ⊗ v_j` is computed as `A_sᵀ V` where the rows of `A_s` are
//! `tanh(q_s ⊙ k_j)`: one `[dqk × n_kv] @ [n_kv × dv]` GEMM per query, batched over
//! batch × queries. The 5-D tensor of all outer products is never materialised.

use candle_core::{Result, Tensor};

/// `q`: `[B, nq, dqk]`, `k`: `[B, nkv, dqk]`, `v`: `[B, nkv, dv]` → `[B, nq, dqk, dv]`.
pub fn outer_product_attention(q: &Tensor, k: &Tensor, v: &Tensor) -> Result<Tensor> {
    let (b, nq, dqk) = q.dims3()?;
    let (_, nkv, dv) = v.dims3()?;
    // A[b, s, j, :] = tanh(q[b, s] ⊙ k[b, j])
    let a = q.unsqueeze(2)?.broadcast_mul(&k.unsqueeze(1)?)?;
    let a = crate::kernels::cuda::layers::tanh::tanh(&a)?;
    let a_t = a.transpose(2, 3)?.reshape((b * nq, dqk, nkv))?;
    let v = v.unsqueeze(1)?.broadcast_as((b, nq, nkv, dv))?.reshape((b * nq, nkv, dv))?;
    a_t.matmul(&v)?.reshape((b, nq, dqk, dv))
}
