//! Fusions for training: pairs of adjacent primitives that the tape (`compile::tape`) runs as
//! one op because together they compute the same values with far fewer operations.
//!
//! **`transfer(samRead(M))`** (STM's Eq. 13 on the fresh SAM output). Per query `s`, SAM's
//! output is a product of low rank, `R[s] = A_sᵀ V` with `A[j, (s, e)] = tanh(q[s, e] k[j, e])`
//! and `V` `[nq, n]` (`samRead`'s `n_kv = nq` keys). `transfer` is a dense layer over the
//! flattened `(s, e)` axis of `R`, so
//! `T[f, j'] = Σ_{s,e} W[j', (s, e)] R[(s, e), f] = Σ_j V[j, f] P[j, j']` with
//! `P = A W ᵀ` (`[nq, size]`): `2·nq·(nq·n)·size + 2·n·nq·size` operations per example instead
//! of `2·(nq·n)·size·n`, i.e. about `n / nq` times fewer (12× for STM's d = 96, nq = 8). The
//! backward stays in the factors too: with `G = d loss / d T` and `H = V G` (`[nq, size]`),
//! `d W += Hᵀ A`, `d A += H W`, `d V += P Gᵀ` — `d R` from `transfer` is never formed. `R`
//! itself is still produced (STM adds it to the relational memory) and its own gradient
//! flows into `samRead`'s backward as usual. With `A` stored key-major (`[B·nq, nq·n]`), the
//! products for `P`, `d W` and `d A` are one GEMM each over the whole batch.
//!
//! A fused op's outputs are the producer's then the consumer's; its parameters likewise.

use std::sync::Arc;

use candle_core::Tensor;
use rayon::prelude::*;

use super::backward::with_real;
use super::sam_read::SamReadOp;
use super::transfer::TransferOp;
use super::{Backward, Op, ParamGrad, Saved};
use crate::graph::{Source, StepGraph};
use crate::kernels::dense::{Transposed, column_sums_into};
use crate::kernels::gemm::{Mat, MatMut, Par, matmul, matmul_new};
use crate::kernels::par::group_size;
use crate::kernels::{real::Real, view};

/// Two nodes run as one op: `producer`'s outputs, then `consumer`'s.
pub struct Fusion {
    pub producer: usize,
    pub consumer: usize,
    pub op: Arc<dyn Op>,
}

/// The fusions that apply to `graph` (each node in at most one).
pub fn find(graph: &StepGraph) -> Vec<Fusion> {
    let mut found: Vec<Fusion> = vec![];
    for (c, node) in graph.nodes.iter().enumerate() {
        let [Source::Node(p, 0)] = node.inputs[..] else { continue };
        let producer = &graph.nodes[p];
        if node.prim != "transfer" || producer.prim != "samRead" || found.iter().any(|f| f.producer == p) {
            continue;
        }
        let (Some(r), Some(w)) = (producer.outputs[0].shape(), node.params.first().map(|&i| &graph.params[i].shape))
        else {
            continue;
        };
        let ([nq, n, n2], [_size, k]) = (&r[..], &w[..]) else { continue };
        let (nq, n, n2, k) = (*nq, *n, *n2, *k);
        if n2 != n || k != nq * n || producer.params.len() != 4 || node.params.len() != 2 {
            continue;
        }
        let op = SamTransfer::new(n, nq);
        found.push(Fusion { producer: p, consumer: c, op: Arc::new(op) });
    }
    found
}

/// `samRead` followed by `transfer` of its output: outputs `[R, T]`; parameters samRead's
/// four, then transfer's weight and bias.
struct SamTransfer {
    sam: SamReadOp,
    transfer: TransferOp,
    /// transfer's weight, transposed.
    wt: Transposed,
}

impl SamTransfer {
    fn new(n: usize, nq: usize) -> SamTransfer {
        SamTransfer { sam: SamReadOp::new(n, nq), transfer: TransferOp::new(nq, n, n), wt: Transposed::default() }
    }
}

impl Op for SamTransfer {
    fn forward(&self, inputs: &[&Tensor], params: &[&Tensor]) -> candle_core::Result<Vec<Tensor>> {
        let r = self.sam.forward(inputs, &params[..4])?.remove(0);
        let t = self.transfer.forward(&[&r], &params[4..])?.remove(0);
        Ok(vec![r, t])
    }

    fn has_backward(&self) -> bool {
        true
    }

    /// samRead's training forward, then `P = A Wᵀ` and `T = Vᵀ P + b`; saves samRead's
    /// values and `P`.
    fn forward_train(&self, inputs: &[&Tensor], params: &[&Tensor]) -> candle_core::Result<(Vec<Tensor>, Saved)> {
        with_real!(inputs[0].dtype(), T => self.train_forward::<T>(inputs, params))
    }

    fn backward(&self, b: &Backward<'_>, param_grads: &mut [ParamGrad]) -> candle_core::Result<Vec<Option<Tensor>>> {
        with_real!(b.inputs[0].dtype(), T => self.train_backward::<T>(b, param_grads))
    }
}

impl SamTransfer {
    fn train_forward<T: Real>(
        &self,
        inputs: &[&Tensor],
        params: &[&Tensor],
    ) -> candle_core::Result<(Vec<Tensor>, Saved)> {
        let (n, nq) = (self.sam.n, self.sam.nq);
        let (mut outs, mut saved) = self.sam.train_forward::<T>(inputs[0], &params[..4])?;
        let batch = inputs[0].dim(0)?;
        let size = params[4].dim(0)?;
        let (w3, k) = (3 * nq, nq * n);
        let (normed, att) = (saved[1].clone(), saved[3].clone());
        let (yr, ar) = (view::Read::new(&normed)?, view::Read::new(&att)?);
        let wt = self.wt.of(params[4])?;
        let (wr, br) = (view::Read::new(&wt)?, view::Read::new(params[5])?);
        let (y, a, wt, bias) = (yr.slice::<T>()?, ar.slice::<T>()?, wr.slice::<T>()?, br.slice::<T>()?);
        // P = A Wᵀ for the whole batch: [B·nq, nq·n] · [nq·n, size].
        let p = matmul_new(Mat::new(a, batch * nq, k), Mat::new(wt, k, size), Par::Pool);
        // T_b = V_bᵀ P_b + b: [n, nq] · [nq, size].
        let mut t = Vec::with_capacity(batch * n * size);
        for _ in 0..batch * n {
            t.extend_from_slice(&bias[..size]);
        }
        let group = group_size(batch, batch * n * nq * size * 2);
        t.par_chunks_mut(group * n * size).enumerate().for_each(|(gi, chunk)| {
            for (i, tb) in chunk.chunks_exact_mut(n * size).enumerate() {
                let ex = gi * group + i;
                let vt = Mat::strided(&y[ex * n * w3 + 2 * nq..], n, nq, w3, 1);
                let pb = Mat::new(&p[ex * nq * size..][..nq * size], nq, size);
                matmul(MatMut::new(tb, n, size), vt, pb, true, Par::Seq);
            }
        });
        drop((yr, ar));
        outs.push(view::tensor(t, (batch, n, size))?);
        saved.push(view::tensor(p, (batch, nq, size))?);
        Ok((outs, saved))
    }

    fn train_backward<T: Real>(
        &self,
        bw: &Backward<'_>,
        param_grads: &mut [ParamGrad],
    ) -> candle_core::Result<Vec<Option<Tensor>>> {
        let (n, nq) = (self.sam.n, self.sam.nq);
        let batch = bw.inputs[0].dim(0)?;
        let size = bw.params[4].dim(0)?;
        let (w3, k) = (3 * nq, nq * n);
        let sam_bw = Backward {
            inputs: bw.inputs,
            params: &bw.params[..4],
            outputs: &bw.outputs[..1],
            saved: &bw.saved[..4],
            grads: &bw.grads[..1],
            needs: bw.needs,
        };
        let (sam_grads, tr_grads) = param_grads.split_at_mut(4);
        let Some(g) = &bw.grads[1] else {
            return self.sam.backward_with::<T>(&sam_bw, sam_grads, None);
        };
        let g = view::contiguous(g)?;
        let (gr, yr, ar, pr) = (
            view::Read::new(&g)?,
            view::Read::new(&bw.saved[1])?,
            view::Read::new(&bw.saved[3])?,
            view::Read::new(&bw.saved[4])?,
        );
        let wr = view::Read::new(&bw.params[4])?;
        let (g, y, a, p, w) =
            (gr.slice::<T>()?, yr.slice::<T>()?, ar.slice::<T>()?, pr.slice::<T>()?, wr.slice::<T>()?);
        // Per example: H = V G ([nq, n] · [n, size]) and d V = P Gᵀ ([nq, size] · [size, n]).
        let mut h = vec![T::zero(); batch * nq * size];
        let mut gv = vec![T::zero(); batch * nq * n];
        let group = group_size(batch, batch * n * nq * size * 4);
        h.par_chunks_mut(group * nq * size).zip(gv.par_chunks_mut(group * nq * n)).enumerate().for_each(
            |(gi, (hc, gvc))| {
                for (i, (hb, gvb)) in hc.chunks_exact_mut(nq * size).zip(gvc.chunks_exact_mut(nq * n)).enumerate() {
                    let ex = gi * group + i;
                    let gb = Mat::new(&g[ex * n * size..][..n * size], n, size);
                    let v = Mat::strided(&y[ex * n * w3 + 2 * nq..], nq, n, 1, w3);
                    matmul(MatMut::new(hb, nq, size), v, gb, false, Par::Seq);
                    matmul(
                        MatMut::new(gvb, nq, n),
                        Mat::new(&p[ex * nq * size..][..nq * size], nq, size),
                        gb.t(),
                        false,
                        Par::Seq,
                    );
                }
            },
        );
        // d W += Hᵀ A ([size, B·nq] · [B·nq, nq·n]); d b += column sums of G; d A = H W.
        let (gw, gb) = tr_grads.split_at_mut(1);
        let gw = gw[0].slice_mut::<T>(size * k)?;
        matmul(
            MatMut::new(gw, size, k),
            Mat::new(&h, batch * nq, size).t(),
            Mat::new(a, batch * nq, k),
            true,
            Par::Pool,
        );
        column_sums_into(g, size, gb[0].slice_mut::<T>(size)?);
        let ga = matmul_new(Mat::new(&h, batch * nq, size), Mat::new(w, size, k), Par::Pool);
        self.sam.backward_with::<T>(&sam_bw, sam_grads, Some((&ga, &gv)))
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use super::*;

    /// The fused op against the two primitives composed under candle's autograd.
    #[test]
    fn sam_transfer_matches_the_composition() {
        for (n, nq, size) in [(3, 2, 3), (5, 2, 4)] {
            let sam = SamTransfer::new(n, nq);
            manual_backward_check_op(
                "samRead+transfer",
                &sam,
                &[vec![n, n]],
                &[vec![3 * nq, n], vec![3 * nq], vec![n * 3 * nq], vec![n * 3 * nq], vec![size, nq * n], vec![size]],
            );
        }
    }

    #[test]
    fn finds_transfer_of_sam_only() {
        let spec = r#"
        model m(d = 4) {
          state M = zeros(d, d)
          state S = zeros(2, d, d)
          step x {
            R = samRead(M + outer(linear(x, d), linear(x, d)), nq = 2)
            M = M + transfer(R)
            S = S + R
            out linear(flatten(S), output_size)
          }
        }
        experiment e { task randomSequence(input = 2, output = 2, length = 2) model m }
        "#;
        let spec = crate::lang::parse_str("t.mem", spec).unwrap();
        let program = crate::check::check(&spec).unwrap_or_else(|d| panic!("{}", d.render(&spec.sources, false)));
        let graph = &program.experiments[0].trials[0].graph;
        let f = find(graph);
        assert_eq!(f.len(), 1);
        assert_eq!((graph.nodes[f[0].producer].prim, graph.nodes[f[0].consumer].prim), ("samRead", "transfer"));
    }
}
