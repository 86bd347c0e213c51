//! `tapeRead(T, pos, pr)`: NAM-TM's tape read at a soft head position (NAM paper §3.3,
//! `R = RD(T, H_r, p_r)`).
//!
//! The paper stores the tape as the NAM matrix `T = Σ_i v_i e_iᵀ ∈ R^{d×L}` and reads it with
//! the head position `H_r ∈ R^L` as the query: `R = p_r · T H_r`. memctl keeps the tape row-wise,
//! `T: [H, L, dh]` (one row per position, per head, as the authors' `L × B × H × dh` tape), so
//! the read is `r_h = p_r,h · T_hᵀ pos_h`: one batched `[1 × L] @ [L × dh]` product.
//!
//! Unlike `namRD`, the position is **not** normalised: head positions are probability-weighted
//! sums of (rolled) one-hot vectors and the jump vector, used as they are (authors' code
//! @972108f, docs/models.md, NAM-TM).
//!
//! Shapes: `T: [H, L, dh]`, `pos: [H, L]`, `pr: [H]` or `[]` → `[H·dh]` (heads concatenated).
//! See `headMove` for how a NAM-TM step is wired from these primitives.

use candle_core::Tensor;

use super::heads::{check_per_head, check_position, per_head, tape_dims};
use super::nam_wr::Blocks;
use crate::kernels::blocks::nam::{batch_of, expand_batch, tape_read};
use crate::kernels::cpu::nam_manual::{tape_read_backward, tape_read_forward};
use crate::kernels::cpu::{real::Real, view};
use crate::prims::prelude::*;

primitive! {
    TapeRead = "tapeRead",
    "NAM-TM tape read pr · Tᵀ pos at a soft head position, per head (NAM §3.3)",
    args: [tensor("T"), tensor("pos"), tensor("pr")],
    examples: [[("T", t(&[2, 4, 3])), ("pos", t(&[2, 4])), ("pr", t(&[2]))]],
}

fn configure(args: &Args) -> Result<(impl Op + 'static, Inferred), PrimError> {
    let (heads, len, dh) = tape_dims(args, "T")?;
    check_position(args, "pos", heads, len)?;
    check_per_head(args, "pr", heads)?;
    let flops = (heads * (2 * len * dh + dh)) as u64;
    Ok((TapeReadOp, Inferred::new(vec![Ty::Tensor(vec![heads * dh])], vec![], flops)))
}

struct TapeReadOp;

impl Op for TapeReadOp {
    fn forward(&self, inputs: &[&Tensor], _params: &[&Tensor]) -> candle_core::Result<Vec<Tensor>> {
        let batch = batch_of(&inputs[..2])?;
        let [t, pos, pr] = op::inputs("tapeRead", inputs)?;
        let (t, pos) = (expand_batch(t, batch)?, expand_batch(pos, batch)?);
        let r = tape_read(&t, &pos, &per_head(pr)?)?; // [B, H, dh]
        Ok(vec![r.flatten_from(1)?])
    }

    fn manual(&self) -> Option<&dyn TrainOp> {
        Some(self)
    }
}

impl SlicedBackward for TapeReadOp {
    type Saved = Tensor;

    fn forward_typed<T: Real>(&self, inputs: &[&Tensor], _params: &[&Tensor]) -> Forward<Self::Saved> {
        let [t, pos, pr] = op::inputs("tapeRead", inputs)?;
        let l = Blocks::of(t, t.dim(1)?)?;
        let (len, d) = (l.dv, l.dk);
        let (tr, pr_, rr) = (view::Read::new(t)?, view::Read::new(pos)?, view::Read::new(pr)?);
        let (ts, ps, prs) = (tr.slice::<T>()?, pr_.slice::<T>()?, rr.slice::<T>()?);
        let (mut old, mut out) = (vec![T::zero(); l.batch * l.heads * d], vec![T::zero(); l.batch * l.heads * d]);
        for b in 0..l.batch {
            for h in 0..l.heads {
                let i = b * l.heads + h;
                let (tb, p) = (&ts[i * len * d..][..len * d], &ps[i * len..][..len]);
                let pr = prs[l.prob(prs.len(), b, h)];
                tape_read_forward(tb, p, pr, &mut old[i * d..][..d], &mut out[i * d..][..d]);
            }
        }
        let old = view::tensor(old, l.batch * l.heads * d)?;
        Ok((vec![view::tensor(out, (l.batch, l.heads * d))?], old))
    }

    fn backward_typed<T: Real>(&self, bw: &Backward<'_, Self::Saved>, _param_grads: &mut [ParamGrad]) -> InputGrads {
        let [t, pos, pr] = bw.inputs_of()?;
        let l = Blocks::of(t, t.dim(1)?)?;
        let (len, d) = (l.dv, l.dk);
        let g = bw.grad_or_zeros(0)?;
        let (gr, tr, pr_, rr, or) = (
            view::Read::new(&g)?,
            view::Read::new(t)?,
            view::Read::new(pos)?,
            view::Read::new(pr)?,
            view::Read::new(bw.saved)?,
        );
        let (gs, ts, ps, prs, olds) =
            (gr.slice::<T>()?, tr.slice::<T>()?, pr_.slice::<T>()?, rr.slice::<T>()?, or.slice::<T>()?);
        let mut gt = bw.needs[0].then(|| vec![T::zero(); ts.len()]);
        let (mut gp, mut gpr) = (vec![T::zero(); ps.len()], vec![T::zero(); prs.len()]);
        for b in 0..l.batch {
            for h in 0..l.heads {
                let i = b * l.heads + h;
                let (tt, n) = (i * len * d, len * d);
                let j = l.prob(prs.len(), b, h);
                let gtb = gt.as_mut().map(|gt| &mut gt[tt..][..n]);
                gpr[j] += tape_read_backward(
                    &ts[tt..][..n],
                    &ps[i * len..][..len],
                    &olds[i * d..][..d],
                    prs[j],
                    &gs[i * d..][..d],
                    gtb,
                    &mut gp[i * len..][..len],
                );
            }
        }
        bw.input_grads([gt, Some(gp), Some(gpr)])
    }
}

#[cfg(test)]
mod tests {
    use crate::prims::contract::testing::*;

    #[test]
    fn reads_the_row_under_the_head() {
        // Tape of 3 positions × 2 features, one head; head one-hot at position 1, pr = 0.5.
        let args = [("T", t(&[1, 3, 2])), ("pos", t(&[1, 3])), ("pr", t(&[]))];
        let tape = vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
        assert_eq!(run("tapeRead", &args, &[tape.clone(), vec![0.0, 1.0, 0.0], vec![0.5]]), vec![1.5, 2.0]);
        // A soft position mixes rows: 0.25·row0 + 0.75·row2.
        assert_eq!(run("tapeRead", &args, &[tape, vec![0.25, 0.0, 0.75], vec![1.0]]), vec![4.0, 5.0]);
        assert_eq!(
            out_shapes("tapeRead", &[("T", t(&[2, 5, 3])), ("pos", t(&[2, 5])), ("pr", t(&[2]))]),
            vec![vec![6]]
        );
        assert!(
            error("tapeRead", &[("T", t(&[2, 5, 3])), ("pos", t(&[2, 4])), ("pr", t(&[2]))])
                .contains("`pos` must have shape [2, 5]")
        );
        assert!(error("tapeRead", &[("T", t(&[5, 3])), ("pos", t(&[5])), ("pr", t(&[]))]).contains("tape [heads, L"));
    }
}
