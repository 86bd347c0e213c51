//! `keyJump(K, q)`: NAM-TM's JUMP target, a read of the key tape's transpose (NAM paper §3.3,
//! `H_JUMP = RD(K'ᵀ, q_jump, 1)`).
//!
//! The key tape holds a unit key per position, `Kᵀ = Σ_i e_i k_iᵀ` is a jump table: reading it
//! with a unit query returns the position whose key matches, `e_j` if the keys are
//! orthonormal. In memctl's row-wise layout (`K: [H, L, dh]`, as `tapeWrite`) this is
//! `jump_h = K_h μ(q_h)`: one batched `[L × dh] @ [dh × 1]` product per head.
//!
//! The query is normalised per head (the paper's "unit jump query", the authors'
//! `μ(W_q hidden)`); the result is **not** normalised or softmaxed (authors' code @972108f,
//! docs/models.md, NAM-TM). Pass the key tape *after* this step's write, as the paper's `K'`.
//!
//! Shapes: `K: [H, L, dh]`, `q: [H·dh]` or `[H, dh]` → `[H, L]`, a head position for `headMove`.

use candle_core::{D, Tensor};

use super::heads::{tape_dims, to_heads};
use super::nam_wr::Blocks;
use super::nam_wr::check_split;
use crate::kernels::blocks::nam::{batch_of, expand_batch, l2_normalize};
use crate::kernels::cpu::nam_manual::{normalize, normalize_backward, read_backward, read_forward};
use crate::kernels::cpu::{real::Real, view};
use crate::prims::prelude::*;

primitive! {
    KeyJump = "keyJump",
    "NAM-TM jump position K μ(q): the key tape's transpose read with a unit query (NAM §3.3)",
    args: [tensor("K"), tensor("q")],
    examples: [[("K", t(&[2, 4, 3])), ("q", t(&[2, 3]))]],
}

fn configure(args: &Args) -> Result<(impl Op + 'static, Inferred), PrimError> {
    let (heads, len, dh) = tape_dims(args, "K")?;
    check_split(args, "q", heads, dh, "key")?;
    let flops = (heads * (2 * len * dh + 3 * dh)) as u64;
    Ok((KeyJumpOp { heads }, Inferred::new(vec![Ty::Tensor(vec![heads, len])], vec![], flops)))
}

struct KeyJumpOp {
    heads: usize,
}

impl Op for KeyJumpOp {
    fn forward(&self, inputs: &[&Tensor], _params: &[&Tensor]) -> candle_core::Result<Vec<Tensor>> {
        let batch = batch_of(inputs)?;
        let [k, q] = op::inputs("keyJump", inputs)?;
        let k = expand_batch(k, batch)?;
        let q = expand_batch(&l2_normalize(&to_heads(q, self.heads)?)?, batch)?;
        Ok(vec![k.matmul(&q.unsqueeze(D::Minus1)?)?.squeeze(D::Minus1)?])
    }

    fn manual(&self) -> Option<&dyn TrainOp> {
        Some(self)
    }
}

/// What the training forward keeps: the unit queries and their norms.
struct UnitQueries {
    unit: Tensor,
    norms: Tensor,
}

impl SlicedBackward for KeyJumpOp {
    type Saved = UnitQueries;

    fn forward_typed<T: Real>(&self, inputs: &[&Tensor], _params: &[&Tensor]) -> Forward<Self::Saved> {
        let [k, q] = op::inputs("keyJump", inputs)?;
        // The key tapes as memories of `L` rows of `dh`.
        let l = Blocks::of(k, self.heads)?;
        let (kr, qr) = (view::Read::new(k)?, view::Read::new(q)?);
        let (ks, qs) = (kr.slice::<T>()?, qr.slice::<T>()?);
        let blocks = l.batch * l.heads;
        let (mut unit, mut norms) = (vec![T::zero(); blocks * l.dk], vec![T::zero(); blocks]);
        let (mut scratch, mut out) = (vec![T::zero(); l.dv], vec![T::zero(); blocks * l.dv]);
        for i in 0..blocks {
            let u = &mut unit[i * l.dk..][..l.dk];
            norms[i] = normalize(&qs[i * l.dk..][..l.dk], u);
            let kb = &ks[i * l.dv * l.dk..][..l.dv * l.dk];
            read_forward(kb, u, T::one(), &mut scratch, &mut out[i * l.dv..][..l.dv]);
        }
        let saved = UnitQueries { unit: view::tensor(unit, blocks * l.dk)?, norms: view::tensor(norms, blocks)? };
        Ok((vec![view::tensor(out, (l.batch, l.heads, l.dv))?], saved))
    }

    fn backward_typed<T: Real>(&self, bw: &Backward<'_, Self::Saved>, _param_grads: &mut [ParamGrad]) -> InputGrads {
        let [k, _] = bw.inputs_of()?;
        let l = Blocks::of(k, self.heads)?;
        let g = bw.grad_or_zeros(0)?;
        let (gr, kr, ur, nr) = (
            view::Read::new(&g)?,
            view::Read::new(k)?,
            view::Read::new(&bw.saved.unit)?,
            view::Read::new(&bw.saved.norms)?,
        );
        let (gs, ks, unit, norms) = (gr.slice::<T>()?, kr.slice::<T>()?, ur.slice::<T>()?, nr.slice::<T>()?);
        let blocks = l.batch * l.heads;
        let mut gk = bw.needs[0].then(|| vec![T::zero(); ks.len()]);
        let mut gq = vec![T::zero(); unit.len()];
        let mut g_unit = vec![T::zero(); l.dk];
        // `K q` (for `read_backward`'s unused gradient of `pr = 1`) is the output itself.
        let outr = view::Read::new(&bw.outputs[0])?;
        let kq = outr.slice::<T>()?;
        for i in 0..blocks {
            let (n, u) = (l.dv * l.dk, &unit[i * l.dk..][..l.dk]);
            let (kb, rows) = (&ks[i * n..][..n], i * l.dv..(i + 1) * l.dv);
            let gkb = gk.as_mut().map(|gk| &mut gk[i * n..][..n]);
            read_backward(kb, u, &kq[rows.clone()], T::one(), &gs[rows], gkb, &mut g_unit);
            normalize_backward(u, norms[i], &g_unit, &mut gq[i * l.dk..][..l.dk]);
        }
        bw.input_grads([gk, Some(gq)])
    }
}

#[cfg(test)]
mod tests {
    use crate::prims::contract::testing::*;

    #[test]
    fn a_query_matching_row_j_jumps_to_j() {
        // Key tape with orthonormal unit keys e_2, e_0, e_1 at positions 0, 1, 2 and a zero row
        // at position 3; a query along e_0 (any length) lands on position 1.
        let args = [("K", t(&[1, 4, 3])), ("q", t(&[3]))];
        let keys = vec![0.0, 0.0, 1.0, 1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0];
        assert_eq!(run("keyJump", &args, &[keys.clone(), vec![5.0, 0.0, 0.0]]), vec![0.0, 1.0, 0.0, 0.0]);
        assert_eq!(run("keyJump", &args, &[keys, vec![0.0, 0.0, 0.5]]), vec![1.0, 0.0, 0.0, 0.0]);
        assert_eq!(out_shapes("keyJump", &[("K", t(&[2, 5, 3])), ("q", t(&[6]))]), vec![vec![2, 5]]);
        assert!(error("keyJump", &[("K", t(&[2, 5, 3])), ("q", t(&[4]))]).contains("2 elements per head"));
    }
}
