//! `relRead(Mr, c, b)`: read of the relational memory (SAM paper Eq. 11, contracted over the
//! axis the authors' code uses).
//!
//! `v_r[f] = Σ_n Σ_e p[n] b[e] Mr[n, e, f]` with `p = softmax(c)`: the slots are averaged by
//! `p`, then `b` is contracted with the **second** axis of `Mr` (the first axis of each `d × d`
//! block, the one the SAM output's `tanh(q ⊙ k)` factor fills) and the read runs along the
//! last (value) axis. Shapes: `Mr: [nq, d, d2]`, `c: [nq]` (the logits `f3(x)`), `b: [d]`
//! (`f2(x)`) → `[d2]`.
//!
//! Which form, and why. Eq. 11 as printed, `softmax(f3(x)ᵀ) M^r f2(x)`, multiplies the
//! slot-averaged `d × d` matrix by `f2(x)` on the right, which contracts the **last** axis:
//! `v_r[e] = Σ_n Σ_f p[n] Mr[n, e, f] b[f]` (App. C, Prop. 7 reads it the same way). The
//! authors' code (thaihungle/SAM, `baselines/sam/stm_basic.py`, the STM step's `M^r` read)
//! contracts `f2(x)` with the second axis instead, i.e. it reads the transposed blocks.
//! memctl follows the code, because the code is what produced the paper's numbers
//! (docs/models.md, STM, step 4, gives the code's contraction). The two agree
//! only when every block of `Mr` is symmetric, which SAM's output is not.
//!
//! The paper folds `f2`/`f3` into the read; memctl takes their outputs as inputs so the
//! spec can reuse `f2(x)` for the association `v_r ⊗ f2(x)` as the authors' code does.
//! Computed as one batched `[1 × nq·d] @ [nq·d × d2]` product: `(p ⊗ b)` flattened times `Mr`.

use candle_core::Tensor;

use crate::kernels::cpu::gemm::filled;
use crate::kernels::cpu::par::{for_each_batch, multiversion};
use crate::kernels::cpu::{real::Real, view};
use crate::prims::prelude::*;

primitive! {
    RelRead = "relRead",
    "relational memory read v[f] = Σ p[n] b[e] Mr[n,e,f], p = softmax(c) (SAM Eq. 11 on the authors' code's axis)",
    args: [tensor("Mr"), tensor("c"), tensor("b")],
    examples: [
        [("Mr", t(&[2, 3, 4])), ("c", t(&[2])), ("b", t(&[3]))],
        [("Mr", t(&[3, 2, 5])), ("c", t(&[3])), ("b", t(&[2]))],
    ],
}

fn configure(args: &Args) -> Result<(impl Op + 'static, Inferred), PrimError> {
    let mr = args.shape_of_rank("Mr", 3, "a relational memory [nq, d, d]")?;
    let (nq, d, d2) = (mr[0], mr[1], mr[2]);
    let c = args.shape("c")?;
    if c != &vec![nq] {
        return Err(PrimError::shape("c", &[nq], c, "(one logit per relational slot)"));
    }
    let b = args.shape("b")?;
    if b != &vec![d] {
        return Err(PrimError::shape("b", &[d], b, "to contract with the memory's second axis"));
    }
    let flops = (2 * nq * d * d2 + nq * d + 5 * nq) as u64;
    Ok((RelReadOp { nq, d, d2 }, Inferred::new(vec![Ty::Tensor(vec![d2])], vec![], flops)))
}

struct RelReadOp {
    nq: usize,
    d: usize,
    d2: usize,
}

impl Op for RelReadOp {
    fn forward(&self, inputs: &[&Tensor], _params: &[&Tensor]) -> candle_core::Result<Vec<Tensor>> {
        let [mr, c, b] = op::inputs("relRead", inputs)?;
        let batch = mr.dim(0)?;
        let p = crate::kernels::cuda::layers::softmax::softmax_last(c)?;
        let pb = p.unsqueeze(2)?.broadcast_mul(&b.unsqueeze(1)?)?.reshape((batch, 1, self.nq * self.d))?;
        let v = pb.matmul(&mr.reshape((batch, self.nq * self.d, self.d2))?)?;
        Ok(vec![v.reshape((batch, self.d2))?])
    }

    fn manual(&self) -> Option<&dyn TrainOp> {
        Some(self)
    }
}

/// What the read's training forward keeps: `p = softmax(c)` `[B, nq]` and `u = p ⊗ b`
/// `[B, nq·d]`.
struct ReadWeights {
    p: Tensor,
    u: Tensor,
}

multiversion! {
    /// `out[r, f] = u[r] g[f]` (row-major, written without being read).
    fn outer_rows[T: Real][T](u: &[T], g: &[T], out: &mut [std::mem::MaybeUninit<T>]) {
        let n = g.len();
        for (r, &ur) in u.iter().enumerate() {
            let row = &mut out[r * n..(r + 1) * n];
            for f in 0..n {
                row[f].write(ur * g[f]);
            }
        }
    }
}

impl SlicedBackward for RelReadOp {
    type Saved = ReadWeights;

    fn forward_typed<T: Real>(&self, inputs: &[&Tensor], _params: &[&Tensor]) -> Forward<Self::Saved> {
        let [mr, c, b] = op::inputs("relRead", inputs)?;
        let (nq, d, d2) = (self.nq, self.d, self.d2);
        let batch = mr.dim(0)?;
        let (mr, c, b) = (view::Read::new(mr)?, view::Read::new(c)?, view::Read::new(b)?);
        let (mr, c, b) = (mr.slice::<T>()?, c.slice::<T>()?, b.slice::<T>()?);
        let mut p = Vec::with_capacity(batch * nq);
        for cs in c.chunks_exact(nq) {
            let max = cs.iter().fold(cs[0], |m, &v| m.max(v));
            let start = p.len();
            let mut sum = T::zero();
            for &v in cs {
                let e = (v - max).exp();
                sum += e;
                p.push(e);
            }
            for q in &mut p[start..] {
                *q /= sum;
            }
        }
        let mut u = Vec::with_capacity(batch * nq * d);
        for (ps, bs) in p.chunks_exact(nq).zip(b.chunks_exact(d)) {
            for &pn in ps {
                u.extend(bs.iter().map(|&be| pn * be));
            }
        }
        let mut v = vec![T::zero(); batch * d2];
        for_each_batch(&mut v, d2, batch * nq * d * d2, |first, chunk| {
            for (i, vs) in chunk.chunks_exact_mut(d2).enumerate() {
                let ex = first + i;
                let (us, m) = (&u[ex * nq * d..][..nq * d], &mr[ex * nq * d * d2..][..nq * d * d2]);
                for (&ur, row) in us.iter().zip(m.chunks_exact(d2)) {
                    for (o, &mv) in vs.iter_mut().zip(row) {
                        *o += ur * mv;
                    }
                }
            }
        });
        let saved = ReadWeights { p: view::tensor(p, (batch, nq))?, u: view::tensor(u, (batch, nq * d))? };
        Ok((vec![view::tensor(v, (batch, d2))?], saved))
    }

    /// `gu = Mr gv`, `gMr = u ⊗ gv`, `gp_n = Σ_e gu_ne b_e`, `gb_e = Σ_n gu_ne p_n`,
    /// `gc = p ⊙ (gp − ⟨p, gp⟩)`.
    fn backward_typed<T: Real>(&self, bw: &Backward<'_, Self::Saved>, _param_grads: &mut [ParamGrad]) -> InputGrads {
        let (nq, d, d2) = (self.nq, self.d, self.d2);
        let [mr_t, c_t, b_t] = bw.inputs_of()?;
        let batch = mr_t.dim(0)?;
        let gv = bw.grad_or_zeros(0)?;
        let (mr, b) = (view::Read::new(mr_t)?, view::Read::new(b_t)?);
        let (p, u, gv) = (view::Read::new(&bw.saved.p)?, view::Read::new(&bw.saved.u)?, view::Read::new(&gv)?);
        let (mr, b, p, u, gv) = (mr.slice::<T>()?, b.slice::<T>()?, p.slice::<T>()?, u.slice::<T>()?, gv.slice::<T>()?);
        let gmr = bw.needs[0].then(|| {
            let fill = |gmr: &mut [std::mem::MaybeUninit<T>]| {
                for_each_batch(gmr, nq * d * d2, batch * nq * d * d2, |first, chunk| {
                    for (i, gm) in chunk.chunks_exact_mut(nq * d * d2).enumerate() {
                        let ex = first + i;
                        outer_rows(&u[ex * nq * d..][..nq * d], &gv[ex * d2..][..d2], gm);
                    }
                });
            };
            // SAFETY: `outer_rows` writes every element of every example.
            unsafe { filled(batch * nq * d * d2, fill) }
        });
        let mut gc = vec![T::zero(); batch * nq];
        let mut gb = vec![T::zero(); batch * d];
        for ex in 0..batch {
            let m = &mr[ex * nq * d * d2..][..nq * d * d2];
            let gs = &gv[ex * d2..][..d2];
            let (ps, bs) = (&p[ex * nq..][..nq], &b[ex * d..][..d]);
            let mut gp = vec![T::zero(); nq];
            for (n, gpn) in gp.iter_mut().enumerate() {
                for (e, gbe) in gb[ex * d..][..d].iter_mut().enumerate() {
                    let row = &m[(n * d + e) * d2..][..d2];
                    let mut gu = T::zero();
                    for (&mv, &g) in row.iter().zip(gs) {
                        gu += mv * g;
                    }
                    *gpn += gu * bs[e];
                    *gbe += gu * ps[n];
                }
            }
            let dot = ps.iter().zip(&gp).fold(T::zero(), |acc, (&pn, &g)| acc + pn * g);
            for n in 0..nq {
                gc[ex * nq + n] = ps[n] * (gp[n] - dot);
            }
        }
        Ok(vec![
            gmr.map(|g| view::tensor(g, mr_t.dims())).transpose()?,
            if bw.needs[1] { Some(view::tensor(gc, c_t.dims())?) } else { None },
            if bw.needs[2] { Some(view::tensor(gb, b_t.dims())?) } else { None },
        ])
    }
}

#[cfg(test)]
mod tests {
    use crate::prims::contract::testing::*;

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
}
