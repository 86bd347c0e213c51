//! `namRD(M, q, pr, heads = 1)`: the NAM read primitive (NAM paper §3.1).
//!
//! `RD(M, q, pr) = pr · M q` with a unit query: memctl applies `q ← μ(q)` itself (L2
//! normalisation per head, eps 1e-12 as `F.normalize`), as LSAM's `RD(M_t, μ(q_t), pr)` (§3.2).
//!
//! Shapes, as `namWR`: `M: [dv, dk]` (heads = 1) or `[H, dv/H, dk/H]`; `q: [dk]` (or `[H, dk/H]`);
//! `pr: [H]` or `[]` → `[dv]`, the heads' reads concatenated (head `h` fills
//! `h·dv/H .. (h+1)·dv/H`), as the authors' LSAM hidden state. One batched matmul.

use candle_core::Tensor;

use super::heads::{check_per_head, per_head, to_heads};
use super::nam_wr::Blocks;
use super::nam_wr::{check_split, memory_dims};
use crate::kernels::blocks::nam::{batch_of, expand_batch, l2_normalize, read};
use crate::kernels::cpu::nam_manual::{normalize, normalize_backward, read_backward, read_forward};
use crate::kernels::cpu::{real::Real, view};
use crate::prims::prelude::*;

primitive! {
    NamRd = "namRD",
    "NAM read pr · M μ(q), per head, heads concatenated (NAM §3.1)",
    args: [tensor("M"), tensor("q"), tensor("pr"), int_or("heads", 1)],
    examples: [
        [("M", t(&[3, 4])), ("q", t(&[4])), ("pr", t(&[]))],
        [("M", t(&[2, 2, 3])), ("q", t(&[2, 3])), ("pr", t(&[2])), ("heads", int(2))],
    ],
}

fn configure(args: &Args) -> Result<(impl Op + 'static, Inferred), PrimError> {
    let heads = args.size("heads")?;
    let (dv, dk) = memory_dims(args, heads)?;
    check_split(args, "q", heads, dk, "key")?;
    check_per_head(args, "pr", heads)?;
    let flops = (heads * (2 * dv * dk + dv + 3 * dk)) as u64;
    Ok((NamRdOp { heads }, Inferred::new(vec![Ty::Tensor(vec![heads * dv])], vec![], flops)))
}

struct NamRdOp {
    heads: usize,
}

impl Op for NamRdOp {
    fn forward(&self, inputs: &[&Tensor], _params: &[&Tensor]) -> candle_core::Result<Vec<Tensor>> {
        let [m, q, pr] = op::inputs("namRD", inputs)?;
        let batch = batch_of(&[m, q])?;
        let m4 = if m.rank() == 3 { m.unsqueeze(1)? } else { m.clone() };
        let m4 = expand_batch(&m4, batch)?;
        let q = expand_batch(&l2_normalize(&to_heads(q, self.heads)?)?, batch)?;
        let r = read(&m4, &q, &per_head(pr)?)?; // [B, H, dv/H]
        Ok(vec![r.flatten_from(1)?])
    }

    fn manual(&self) -> Option<&dyn TrainOp> {
        Some(self)
    }
}

/// What the read's training forward keeps: the unit queries, their norms and `M q`.
struct ReadSaved {
    unit: Tensor,
    norms: Tensor,
    mq: Tensor,
}

impl SlicedBackward for NamRdOp {
    type Saved = ReadSaved;

    fn forward_typed<T: Real>(&self, inputs: &[&Tensor], _params: &[&Tensor]) -> Forward<Self::Saved> {
        let [m, q, pr] = op::inputs("namRD", inputs)?;
        let l = Blocks::of(m, self.heads)?;
        let (mr, qr, prr) = (view::Read::new(m)?, view::Read::new(q)?, view::Read::new(pr)?);
        let (ms, qs, prs) = (mr.slice::<T>()?, qr.slice::<T>()?, prr.slice::<T>()?);
        let blocks = l.batch * l.heads;
        let (mut unit, mut norms) = (vec![T::zero(); blocks * l.dk], vec![T::zero(); blocks]);
        let (mut mq, mut out) = (vec![T::zero(); blocks * l.dv], vec![T::zero(); blocks * l.dv]);
        for b in 0..l.batch {
            for h in 0..l.heads {
                let i = b * l.heads + h;
                let u = &mut unit[i * l.dk..][..l.dk];
                norms[i] = normalize(&qs[i * l.dk..][..l.dk], u);
                let (mb, rows) = (&ms[i * l.dv * l.dk..][..l.dv * l.dk], i * l.dv..(i + 1) * l.dv);
                read_forward(mb, u, prs[l.prob(prs.len(), b, h)], &mut mq[rows.clone()], &mut out[rows]);
            }
        }
        let saved = ReadSaved {
            unit: view::tensor(unit, blocks * l.dk)?,
            norms: view::tensor(norms, blocks)?,
            mq: view::tensor(mq, blocks * l.dv)?,
        };
        Ok((vec![view::tensor(out, (l.batch, l.heads * l.dv))?], saved))
    }

    fn backward_typed<T: Real>(&self, bw: &Backward<'_, Self::Saved>, _param_grads: &mut [ParamGrad]) -> InputGrads {
        let [m, _, pr] = bw.inputs_of()?;
        let l = Blocks::of(m, self.heads)?;
        let g = bw.grad_or_zeros(0)?;
        let (gr, mr, prr) = (view::Read::new(&g)?, view::Read::new(m)?, view::Read::new(pr)?);
        let (ur, nr, mqr) =
            (view::Read::new(&bw.saved.unit)?, view::Read::new(&bw.saved.norms)?, view::Read::new(&bw.saved.mq)?);
        let (gs, ms, prs) = (gr.slice::<T>()?, mr.slice::<T>()?, prr.slice::<T>()?);
        let (unit, norms, mqs) = (ur.slice::<T>()?, nr.slice::<T>()?, mqr.slice::<T>()?);
        let mut gm = bw.needs[0].then(|| vec![T::zero(); ms.len()]);
        let (mut gq, mut gpr) = (vec![T::zero(); unit.len()], vec![T::zero(); prs.len()]);
        let mut g_unit = vec![T::zero(); l.dk];
        for b in 0..l.batch {
            for h in 0..l.heads {
                let i = b * l.heads + h;
                let (mm, n, rows) = (i * l.dv * l.dk, l.dv * l.dk, i * l.dv..(i + 1) * l.dv);
                let u = &unit[i * l.dk..][..l.dk];
                let j = l.prob(prs.len(), b, h);
                let gmb = gm.as_mut().map(|gm| &mut gm[mm..][..n]);
                gpr[j] += read_backward(&ms[mm..][..n], u, &mqs[rows.clone()], prs[j], &gs[rows], gmb, &mut g_unit);
                normalize_backward(u, norms[i], &g_unit, &mut gq[i * l.dk..][..l.dk]);
            }
        }
        bw.input_grads([gm, Some(gq), Some(gpr)])
    }
}

#[cfg(test)]
mod tests {
    use crate::prims::contract::testing::*;

    #[test]
    fn values_shapes_and_errors() {
        // M = [[1, 2], [3, 4]], q = (3, 4) → μ(q) = (0.6, 0.8); M μ(q) = (2.2, 5.0); pr = 0.5.
        let args = [("M", t(&[2, 2])), ("q", t(&[2])), ("pr", t(&[]))];
        let out = run("namRD", &args, &[vec![1.0, 2.0, 3.0, 4.0], vec![3.0, 4.0], vec![0.5]]);
        assert!((out[0] - 1.1).abs() < 1e-12 && (out[1] - 2.5).abs() < 1e-12, "{out:?}");
        assert_eq!(param_count("namRD", &args), 0);
        let two = [("M", t(&[2, 3, 4])), ("q", t(&[8])), ("pr", t(&[2])), ("heads", int(2))];
        assert_eq!(out_shapes("namRD", &two), vec![vec![6]]);
        assert!(
            error("namRD", &[("M", t(&[2, 3, 4])), ("q", t(&[4])), ("pr", t(&[2])), ("heads", int(2))])
                .contains("`q` (key) has 2 elements per head")
        );
        assert!(error("namRD", &[("M", t(&[2, 3, 4])), ("q", t(&[8])), ("pr", t(&[2]))]).contains("[dv, dk]"));
    }
}
