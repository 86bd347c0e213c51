//! `tapeWrite(T, pos, v, pw, pe)`: NAM-TM's tape write at a soft head position (NAM paper
//! §3.3, `T' = WR(T, H_w, v, p_w, p_w)`; the key tape `K' = WR(K, H_w, μ(W_k x), p_w, p_w)` is
//! the same primitive with the unit key as the value).
//!
//! With the paper's matrix tape `T = Σ_i v_i e_iᵀ` and the write head `H_w` as the NAM key,
//! `WR = T + p_w v H_wᵀ − p_e T H_w H_wᵀ`. memctl's tape is row-wise (`[H, L, dh]`, see
//! `tapeRead`), so this is `T_h' = T_h + pos_h ⊗ (pw_h v_h − pe_h T_hᵀ pos_h)`: read the old
//! value under the head, then add the position-weighted correction — exactly the authors'
//! update (@972108f: `tape += w_pos ⊗ p_w (v − old)`, erase probability = `p_w`; pass `pw`
//! twice for that, or a separate erase probability as their 2023 code).
//!
//! The position is used as it is (not normalised) and the value is not normalised either: for
//! the key tape pass `normalize(..)` of the key, split into heads.
//!
//! Shapes: `T: [H, L, dh]`, `pos: [H, L]`, `v: [H·dh]` or `[H, dh]`, `pw`, `pe`: `[H]` or `[]`
//! → `[H, L, dh]`. One batched `[1 × L] @ [L × dh]` product and one broadcast outer product.

use candle_core::Tensor;

use super::heads::{check_per_head, check_position, per_head, tape_dims, to_heads};
use super::nam_wr::Blocks;
use super::nam_wr::check_split;
use crate::kernels::blocks::nam::{batch_of, expand_batch, tape_write};
use crate::kernels::cpu::nam_manual::{tape_write_backward, tape_write_forward};
use crate::kernels::cpu::{real::Real, view};
use crate::prims::prelude::*;

primitive! {
    TapeWrite = "tapeWrite",
    "NAM-TM tape write T + pos ⊗ (pw·v − pe·Tᵀpos) at a soft head position, per head (NAM §3.3)",
    args: [tensor("T"), tensor("pos"), tensor("v"), tensor("pw"), tensor("pe")],
    examples: [[("T", t(&[2, 4, 3])), ("pos", t(&[2, 4])), ("v", t(&[6])), ("pw", t(&[2])), ("pe", t(&[]))]],
}

fn configure(args: &Args) -> Result<(impl Op + 'static, Inferred), PrimError> {
    let (heads, len, dh) = tape_dims(args, "T")?;
    check_position(args, "pos", heads, len)?;
    check_split(args, "v", heads, dh, "value")?;
    check_per_head(args, "pw", heads)?;
    check_per_head(args, "pe", heads)?;
    let flops = (heads * (4 * len * dh + 3 * dh)) as u64;
    Ok((TapeWriteOp { heads }, Inferred::new(vec![Ty::Tensor(vec![heads, len, dh])], vec![], flops)))
}

struct TapeWriteOp {
    heads: usize,
}

impl Op for TapeWriteOp {
    fn forward(&self, inputs: &[&Tensor], _params: &[&Tensor]) -> candle_core::Result<Vec<Tensor>> {
        let batch = batch_of(&inputs[..3])?;
        let [t, pos, v, pw, pe] = op::inputs("tapeWrite", inputs)?;
        let (t, pos) = (expand_batch(t, batch)?, expand_batch(pos, batch)?);
        let v = to_heads(v, self.heads)?;
        Ok(vec![tape_write(&t, &pos, &v, &per_head(pw)?, &per_head(pe)?)?])
    }

    fn manual(&self) -> Option<&dyn TrainOp> {
        Some(self)
    }
}

impl SlicedBackward for TapeWriteOp {
    type Saved = Tensor;

    fn forward_typed<T: Real>(&self, inputs: &[&Tensor], _params: &[&Tensor]) -> Forward<Self::Saved> {
        let [t, pos, v, pw, pe] = op::inputs("tapeWrite", inputs)?;
        let l = Blocks::of(t, self.heads)?;
        let (len, d) = (l.dv, l.dk);
        let (tr, pr, vr, pwr, per) = (
            view::Read::new(t)?,
            view::Read::new(pos)?,
            view::Read::new(v)?,
            view::Read::new(pw)?,
            view::Read::new(pe)?,
        );
        let (ts, ps, vs, pws, pes) =
            (tr.slice::<T>()?, pr.slice::<T>()?, vr.slice::<T>()?, pwr.slice::<T>()?, per.slice::<T>()?);
        let mut old = vec![T::zero(); l.batch * l.heads * d];
        // SAFETY: the blocks (b, h) tile the tape, and the kernel writes each block whole.
        let out = unsafe {
            view::written(ts.len(), |out| {
                let mut scratch = vec![T::zero(); d];
                for b in 0..l.batch {
                    for h in 0..l.heads {
                        let i = b * l.heads + h;
                        let (tb, ob) = (&ts[i * len * d..][..len * d], &mut out[i * len * d..][..len * d]);
                        let (pw, pe) = (pws[l.prob(pws.len(), b, h)], pes[l.prob(pes.len(), b, h)]);
                        let (p, vv) = (&ps[i * len..][..len], &vs[i * d..][..d]);
                        tape_write_forward(tb, p, vv, pw, pe, &mut old[i * d..][..d], ob, &mut scratch);
                    }
                }
            })
        };
        Ok((vec![view::tensor(out, t.dims())?], view::tensor(old, l.batch * l.heads * d)?))
    }

    fn backward_typed<T: Real>(&self, bw: &Backward<'_, Self::Saved>, _param_grads: &mut [ParamGrad]) -> InputGrads {
        let [t, pos, v, pw, pe] = bw.inputs_of()?;
        let l = Blocks::of(t, self.heads)?;
        let (len, d) = (l.dv, l.dk);
        let g = bw.grad_or_zeros(0)?;
        let (gr, tr, pr, vr) = (view::Read::new(&g)?, view::Read::new(t)?, view::Read::new(pos)?, view::Read::new(v)?);
        let (pwr, per, or) = (view::Read::new(pw)?, view::Read::new(pe)?, view::Read::new(bw.saved)?);
        let (gs, ts, ps, vs) = (gr.slice::<T>()?, tr.slice::<T>()?, pr.slice::<T>()?, vr.slice::<T>()?);
        let (pws, pes, olds) = (pwr.slice::<T>()?, per.slice::<T>()?, or.slice::<T>()?);
        let (mut gp, mut gv) = (vec![T::zero(); ps.len()], vec![T::zero(); vs.len()]);
        let (mut gpw, mut gpe) = (vec![T::zero(); pws.len()], vec![T::zero(); pes.len()]);
        // SAFETY: the blocks (b, h) tile the tape, and the kernel writes each block of `gt` whole.
        let gt = unsafe {
            view::written(ts.len(), |gt| {
                let mut scratch = vec![T::zero(); 3 * d];
                for b in 0..l.batch {
                    for h in 0..l.heads {
                        let i = b * l.heads + h;
                        let (tt, n) = (i * len * d, len * d);
                        let (jw, je) = (l.prob(pws.len(), b, h), l.prob(pes.len(), b, h));
                        let (dpw, dpe) = tape_write_backward(
                            &ts[tt..][..n],
                            &ps[i * len..][..len],
                            &vs[i * d..][..d],
                            &olds[i * d..][..d],
                            pws[jw],
                            pes[je],
                            &gs[tt..][..n],
                            &mut gt[tt..][..n],
                            &mut gp[i * len..][..len],
                            &mut gv[i * d..][..d],
                            &mut scratch,
                        );
                        gpw[jw] += dpw;
                        gpe[je] += dpe;
                    }
                }
            })
        };
        bw.input_grads([Some(gt), Some(gp), Some(gv), Some(gpw), Some(gpe)])
    }
}

#[cfg(test)]
mod tests {
    use crate::prims::contract::testing::*;

    #[test]
    fn overwrites_the_row_under_the_head() {
        // One head, 3 positions × 2 features; head one-hot at position 2, pw = pe = 1:
        // row 2 becomes v, the other rows stay (Theorem 3.1 on the tape).
        let args = [("T", t(&[1, 3, 2])), ("pos", t(&[1, 3])), ("v", t(&[2])), ("pw", t(&[])), ("pe", t(&[]))];
        let tape = vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
        let out = run("tapeWrite", &args, &[tape.clone(), vec![0.0, 0.0, 1.0], vec![9.0, 8.0], vec![1.0], vec![1.0]]);
        assert_eq!(out, vec![1.0, 2.0, 3.0, 4.0, 9.0, 8.0]);
        // pw = pe = 0.5: row 2 moves halfway to v.
        let out = run("tapeWrite", &args, &[tape, vec![0.0, 0.0, 1.0], vec![9.0, 8.0], vec![0.5], vec![0.5]]);
        assert_eq!(out, vec![1.0, 2.0, 3.0, 4.0, 7.0, 7.0]);
        assert_eq!(param_count("tapeWrite", &args), 0);
        let two = [("T", t(&[2, 5, 3])), ("pos", t(&[2, 5])), ("v", t(&[2, 3])), ("pw", t(&[2])), ("pe", t(&[2]))];
        assert_eq!(out_shapes("tapeWrite", &two), vec![vec![2, 5, 3]]);
        let mut bad = two.clone();
        bad[2] = ("v", t(&[8]));
        assert!(error("tapeWrite", &bad).contains("`v` (value) has 4 elements per head"));
    }
}
