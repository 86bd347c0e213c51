//! `namAttend(Q, K, V, heads = 1)`: normalised outer-product attention, NAM-Transformer's
//! self-attention (NAM paper §3.5).
//!
//! The paper writes `SelfAttn_NAM(Q, K, V) = (Vᵀ μ(K)) μ(Q)` with `μ` applied to every row:
//! `Vᵀ μ(K) = Σ_s v_s μ(k_s)ᵀ` is the memory of `S` writes with `pw = 1, pe = 0`, and each query
//! row is read from it, `out_i = (Vᵀ μ(K)) μ(q_i)`. As rows, `out = μ(Q) μ(K)ᵀ V`; memctl
//! computes it as `μ(Q) (μ(K)ᵀ V)` — first the `dk × dv` memory, then the reads — so the cost
//! is linear in the sequence length and no `S × S` score matrix exists.
//!
//! Shapes: `Q: [Sq, dk]`, `K: [Sk, dk]`, `V: [Sk, dv]` → `[Sq, dv]`. With `heads = H` the
//! feature axes split into `H` contiguous chunks (`dk/H`, `dv/H`), `μ` per head, and the heads'
//! outputs are concatenated along the last axis. No causal mask (the paper's bidirectional form).
//!
//! Backward (per head, `q̂ = μ(Q)`, `k̂ = μ(K)`, `M = k̂ᵀ V`, `G = ∂L/∂out`):
//! `∂q̂ = G Mᵀ`, `∂M = q̂ᵀ G`, `∂k̂ = V ∂Mᵀ`, `∂V = k̂ ∂M`, and through each row's `μ(x) = x/‖x‖`:
//! `∂x = (∂x̂ − x̂ ⟨x̂, ∂x̂⟩) / ‖x‖` (below the norm floor `ε`, where μ divides by `ε`, just
//! `∂x̂ / ε`). Four matmuls of the forward's size: the backward stays linear in the length too.

use candle_core::{D, Tensor};

use crate::kernels::blocks::nam::{EPS, batch_of, expand_batch};
use crate::prims::prelude::*;

primitive! {
    NamAttend = "namAttend",
    "NAM attention (Vᵀ μ(K)) μ(Q), linear in sequence length, per head (NAM §3.5)",
    args: [tensor("Q"), tensor("K"), tensor("V"), int_or("heads", 1)],
}

fn examples() -> Vec<Example> {
    use crate::signature::example_args::*;
    vec![
        Example::new([("Q", t(&[2, 4])), ("K", t(&[3, 4])), ("V", t(&[3, 2])), ("heads", int(2))]),
        Example::new([("Q", t(&[5, 3])), ("K", t(&[4, 3])), ("V", t(&[4, 2]))]),
        // Learned keys and values shared by every example (batch 1).
        Example::new([("Q", t(&[2, 4])), ("K", shared(&[3, 4])), ("V", shared(&[3, 2])), ("heads", int(2))]),
    ]
}

fn configure(args: &Args) -> Result<(impl Op + 'static, Inferred), PrimError> {
    let heads = args.size("heads")?;
    let q = args.shape_of_rank("Q", 2, "a sequence of queries [S, dk]")?;
    let k = args.shape_of_rank("K", 2, "a sequence of keys [S, dk]")?;
    let v = args.shape_of_rank("V", 2, "a sequence of values [S, dv]")?;
    let (sq, dk, sk, dv) = (q[0], q[1], k[0], v[1]);
    if k[1] != dk {
        return Err(PrimError::shape("K", &[sk, dk], k, "(keys have the queries' width)"));
    }
    if v[0] != sk {
        return Err(PrimError::shape("V", &[sk, dv], v, "(one value per key)"));
    }
    for (name, width) in [("Q", dk), ("V", dv)] {
        if width % heads != 0 {
            let kind = PrimErrorKind::HeadSplit { what: "features", len: width, heads };
            return Err(PrimError::new(kind).on(name).hint(Hint::MultipleOfHeads { heads }));
        }
    }
    let flops = (2 * sk * dk * dv / heads + 2 * sq * dk * dv / heads + 3 * (sq + sk) * dk) as u64;
    Ok((NamAttendOp { heads }, Inferred::new(vec![Ty::Tensor(vec![sq, dv])], vec![], flops)))
}

struct NamAttendOp {
    heads: usize,
}

/// `[B, S, H·d]` → `[B, H, S, d]`.
fn split(x: &Tensor, heads: usize) -> candle_core::Result<Tensor> {
    let (b, s, n) = x.dims3()?;
    x.reshape((b, s, heads, n / heads))?.transpose(1, 2)?.contiguous()
}

/// `[B, H, S, d]` → `[B, S, H·d]`.
fn merge(x: &Tensor) -> candle_core::Result<Tensor> {
    let (b, _, s, _) = x.dims4()?;
    x.transpose(1, 2)?.contiguous()?.reshape((b, s, ()))
}

/// Each row's norm, floored at `ε` as [`l2_normalize`] floors it: `[…, S, 1]`.
fn row_norms(x: &Tensor) -> candle_core::Result<Tensor> {
    x.sqr()?.sum_keepdim(D::Minus1)?.maximum(EPS * EPS)?.sqrt()
}

/// `∂x` from `∂x̂` through `x̂ = x / max(‖x‖, ε)`, given `x̂` and the floored norms.
fn normalize_backward(unit: &Tensor, norms: &Tensor, grad: &Tensor) -> candle_core::Result<Tensor> {
    // Rows at the floor were scaled, not projected: their x̂ has norm < 1, and the projection
    // term is dropped for them by weighting it with [‖x‖ > ε].
    let above = norms.gt(EPS)?.to_dtype(unit.dtype())?;
    let along = (unit * grad)?.sum_keepdim(D::Minus1)?.broadcast_mul(&above)?;
    (grad - unit.broadcast_mul(&along)?)?.broadcast_div(norms)
}

/// What the backward needs: the normalised queries and keys with their norms, the values
/// and the memory, all `[B, H, …]`.
struct Saved {
    q: Tensor,
    q_norms: Tensor,
    k: Tensor,
    k_norms: Tensor,
    v: Tensor,
    memory: Tensor,
}

impl NamAttendOp {
    fn run(&self, inputs: &[&Tensor]) -> candle_core::Result<(Tensor, Saved)> {
        let batch = batch_of(inputs)?;
        let h = self.heads;
        let [q, k, v] = op::inputs("namAttend", inputs)?;
        let (q, k) = (expand_batch(&split(q, h)?, batch)?, expand_batch(&split(k, h)?, batch)?);
        let (q_norms, k_norms) = (row_norms(&q)?, row_norms(&k)?);
        let (q, k) = (q.broadcast_div(&q_norms)?, k.broadcast_div(&k_norms)?);
        let v = expand_batch(&split(v, h)?, batch)?;
        let memory = k.transpose(D::Minus1, D::Minus2)?.contiguous()?.matmul(&v)?; // [B, H, dk/H, dv/H]
        let out = merge(&q.matmul(&memory)?)?; // [B, Sq, dv]
        Ok((out, Saved { q, q_norms, k, k_norms, v, memory }))
    }
}

impl Op for NamAttendOp {
    fn forward(&self, inputs: &[&Tensor], _params: &[&Tensor]) -> candle_core::Result<Vec<Tensor>> {
        Ok(vec![self.run(inputs)?.0])
    }

    fn manual(&self) -> Option<&dyn TrainOp> {
        Some(self)
    }
}

impl ManualBackward for NamAttendOp {
    type Saved = Saved;

    fn forward_train(&self, inputs: &[&Tensor], _params: &[&Tensor]) -> Forward<Saved> {
        let (out, saved) = self.run(inputs)?;
        Ok((vec![out], saved))
    }

    fn backward(&self, bw: &Backward<'_, Saved>, _param_grads: &mut [ParamGrad]) -> InputGrads {
        let Saved { q, q_norms, k, k_norms, v, memory } = bw.saved;
        let g = split(&bw.grad_or_zeros(0)?, self.heads)?; // [B, H, Sq, dv/H]
        let t = |x: &Tensor| x.transpose(D::Minus1, D::Minus2)?.contiguous();
        let d_memory = t(q)?.matmul(&g)?;
        // A batch-shared input (batch 1) gets the sum of its examples' gradients.
        let fold = |grad: Tensor, input: &Tensor| -> candle_core::Result<Tensor> {
            let grad = merge(&grad)?;
            if input.dim(0)? == 1 && grad.dim(0)? != 1 { grad.sum_keepdim(0) } else { Ok(grad) }
        };
        let [qi, ki, vi] = bw.inputs_of()?;
        let dq =
            if bw.needs[0] { Some(fold(normalize_backward(q, q_norms, &g.matmul(&t(memory)?)?)?, qi)?) } else { None };
        let dk = if bw.needs[1] {
            Some(fold(normalize_backward(k, k_norms, &v.matmul(&t(&d_memory)?)?)?, ki)?)
        } else {
            None
        };
        let dv = if bw.needs[2] { Some(fold(k.matmul(&d_memory)?, vi)?) } else { None };
        Ok(vec![dq, dk, dv])
    }
}

#[cfg(test)]
mod tests {
    use crate::prims::contract::testing::*;

    #[test]
    fn shapes_and_errors() {
        let args = [("Q", t(&[5, 4])), ("K", t(&[3, 4])), ("V", t(&[3, 6])), ("heads", int(2))];
        assert_eq!(out_shapes("namAttend", &args), vec![vec![5, 6]]);
        assert_eq!(param_count("namAttend", &args), 0);
        assert!(
            error("namAttend", &[("Q", t(&[5, 4])), ("K", t(&[3, 4])), ("V", t(&[2, 6]))])
                .contains("`V` must have shape [3, 6]")
        );
        assert!(
            error("namAttend", &[("Q", t(&[5, 4])), ("K", t(&[3, 4])), ("V", t(&[3, 5])), ("heads", int(2))])
                .contains("do not split into 2 heads")
        );
    }

    #[test]
    fn equals_the_quadratic_form_and_recalls_orthonormal_keys() {
        // out = μ(Q) μ(K)ᵀ V computed directly (S × S scores), and with keys e_1..e_3 a query
        // equal to a key returns that key's value (Theorem 3.3).
        let k: Vec<f64> = vec![2.0, 0.0, 0.0, 0.0, 0.5, 0.0, 0.0, 0.0, 3.0];
        let v: Vec<f64> = vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
        let q: Vec<f64> = vec![0.0, 7.0, 0.0, 1.0, 1.0, 0.0];
        let args = [("Q", t(&[2, 3])), ("K", t(&[3, 3])), ("V", t(&[3, 2]))];
        let out = run("namAttend", &args, &[q, k, v]);
        let s = 0.5f64.sqrt();
        let expected = [3.0, 4.0, s * (1.0 + 3.0), s * (2.0 + 4.0)];
        for (o, e) in out.iter().zip(expected) {
            assert!((o - e).abs() < 1e-12, "{out:?}");
        }
    }

    #[test]
    fn heads_are_independent_attentions_on_feature_chunks() {
        let (sq, sk) = (2, 3);
        let q: Vec<f64> = (0..sq * 4).map(|i| ((i * 7 % 5) as f64) - 1.5).collect();
        let k: Vec<f64> = (0..sk * 4).map(|i| ((i * 3 % 7) as f64) - 2.5).collect();
        let v: Vec<f64> = (0..sk * 6).map(|i| (i as f64) * 0.3 - 1.0).collect();
        let both = run(
            "namAttend",
            &[("Q", t(&[sq, 4])), ("K", t(&[sk, 4])), ("V", t(&[sk, 6])), ("heads", int(2))],
            &[q.clone(), k.clone(), v.clone()],
        );
        let chunk = |x: &[f64], rows: usize, width: usize, h: usize| -> Vec<f64> {
            (0..rows).flat_map(|r| x[r * 2 * width + h * width..r * 2 * width + (h + 1) * width].to_vec()).collect()
        };
        for h in 0..2 {
            let one = run(
                "namAttend",
                &[("Q", t(&[sq, 2])), ("K", t(&[sk, 2])), ("V", t(&[sk, 3]))],
                &[chunk(&q, sq, 2, h), chunk(&k, sk, 2, h), chunk(&v, sk, 3, h)],
            );
            let mine = chunk(&both, sq, 3, h);
            for (a, b) in one.iter().zip(&mine) {
                assert!((a - b).abs() < 1e-12, "head {h}: {one:?} vs {mine:?}");
            }
        }
    }
}
