//! Fusions for training: pairs of primitives that the tape (`compile::tape`) runs as
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
//! **`lstmCell(c, h, embed(token, w))`**: the embedding folded into the LSTM's input weights
//! (`layers::embed_lstm`).
//!
//! **`kanervaRead(R, z, η)` beside `kanervaUpdate(R, V, z, η)`**: one addressing for both
//! (`kanerva::kanerva_read_update`).
//!
//! Three ways to join ([`Joint`]). A *chained* pair (the consumer's only input is the producer's
//! output) runs where the producer stands and puts out both nodes' outputs. An *absorbed*
//! producer (one input, its output read by the consumer alone) runs inside the consumer, where
//! the consumer stands: the fused op takes the consumer's inputs with the producer's input in
//! place of the producer's output, and puts out the consumer's outputs. A *shared* pair (the
//! consumer takes the producer's inputs and one more, not its outputs) runs where the producer
//! stands, on the consumer's inputs, and puts out both nodes' outputs. In every case its
//! parameters are the producer's, then the consumer's.

use std::sync::Arc;

use candle_core::Tensor;
use rayon::prelude::*;

use super::kanerva::kanerva_read_update;
use super::layers::embed_lstm;
use super::prelude::*;
use super::sam::sam_read::{self, SamReadOp, SamValues};
use super::sam::transfer::{self, TransferOp};
use crate::graph::{Node, Source, StepGraph};
use crate::kernels::cpu::dense::{Transposed, column_sums_into};
use crate::kernels::cpu::gemm::{Mat, MatMut, Par, matmul, matmul_new};
use crate::kernels::cpu::par::group_size;
use crate::kernels::cpu::{real::Real, view};

/// Two nodes run as one op.
pub struct Fusion {
    pub producer: usize,
    pub consumer: usize,
    pub joint: Joint,
    pub op: Arc<dyn FusedOp>,
}

/// How the consumer takes the producer's (first) output.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Joint {
    /// As its only input: the fused op runs in the producer's place, on the producer's
    /// inputs, and puts out the producer's outputs, then the consumer's.
    Chain,
    /// As its input `slot`: the fused op runs in the consumer's place, on the consumer's
    /// inputs with the producer's (only) input in that slot, and puts out the consumer's
    /// outputs. Nothing else reads the producer's output.
    Absorb { slot: usize },
    /// As a sibling: the consumer reads none of the producer's outputs, and its inputs are the
    /// producer's with one more at `extra`, all computed before the producer. The fused op
    /// runs where the producer stands, on the consumer's inputs, and puts out the producer's
    /// outputs, then the consumer's (work the two would both do is done once).
    Share { extra: usize },
}

impl Fusion {
    /// Where the inputs of an absorbing fusion's op come from (`None` for a chain).
    pub fn absorbed_sources(&self, graph: &StepGraph) -> Option<Vec<Source>> {
        let Joint::Absorb { slot } = self.joint else { return None };
        let mut sources = graph.nodes[self.consumer].inputs.clone();
        sources[slot] = graph.nodes[self.producer].inputs[0];
        Some(sources)
    }

    /// Where a sharing fusion's op takes its inputs: the consumer's (`None` for the other joints).
    pub fn shared_sources<'g>(&self, graph: &'g StepGraph) -> Option<&'g [Source]> {
        matches!(self.joint, Joint::Share { .. }).then(|| &graph.nodes[self.consumer].inputs[..])
    }
}

/// What a fusion rule builds from the producer's and the consumer's arguments: the fused op,
/// or `None` where the shapes do not suit it.
type Build = fn(&Args, &Args) -> Result<Option<Arc<dyn FusedOp>>, PrimError>;

/// A fusion: a producer primitive whose first output a consumer primitive takes as `joint`
/// says, and how to build the fused op from the two calls' arguments (`None` where the shapes
/// do not suit it).
struct Rule {
    producer: &'static str,
    consumer: &'static str,
    joint: Joint,
    build: Build,
}

/// Every fusion, tried in order.
static RULES: &[Rule] = &[
    Rule { producer: "samRead", consumer: "transfer", joint: Joint::Chain, build: sam_transfer },
    Rule { producer: "embed", consumer: "lstmCell", joint: Joint::Absorb { slot: 2 }, build: embed_lstm::build },
    Rule { producer: "embedding", consumer: "lstmCell", joint: Joint::Absorb { slot: 2 }, build: embed_lstm::build },
    Rule {
        producer: "kanervaRead",
        consumer: "kanervaUpdate",
        joint: Joint::Share { extra: 1 },
        build: kanerva_read_update::build,
    },
];

/// The fusions that apply to `graph` (each node in at most one).
pub fn find(graph: &StepGraph) -> Vec<Fusion> {
    let mut found: Vec<Fusion> = vec![];
    for (c, node) in graph.nodes.iter().enumerate() {
        for rule in RULES.iter().filter(|r| r.consumer == node.prim) {
            let taken = |n: usize| found.iter().any(|f| f.producer == n || f.consumer == n);
            let slot = match rule.joint {
                Joint::Chain if node.inputs.len() == 1 => 0,
                Joint::Chain => continue,
                Joint::Absorb { slot } => slot,
                Joint::Share { extra } => {
                    let sibling = (0..c).find(|&p| {
                        let producer = &graph.nodes[p];
                        producer.prim == rule.producer && !taken(p) && shares_inputs(graph, p, c, extra)
                    });
                    let Some(p) = sibling.filter(|_| !taken(c)) else { continue };
                    if let Ok(Some(op)) = (rule.build)(&graph.nodes[p].args, &node.args) {
                        found.push(Fusion { producer: p, consumer: c, joint: rule.joint, op });
                        break;
                    }
                    continue;
                }
            };
            let Some(&Source::Node(p, 0)) = node.inputs.get(slot) else { continue };
            let producer: &Node = &graph.nodes[p];
            if producer.prim != rule.producer || taken(p) || taken(c) {
                continue;
            }
            if matches!(rule.joint, Joint::Absorb { .. }) && !(producer.inputs.len() == 1 && read_only_by(graph, p, c))
            {
                continue;
            }
            // The checker accepted both calls, so a refusal here only means "does not apply".
            if let Ok(Some(op)) = (rule.build)(&producer.args, &node.args) {
                found.push(Fusion { producer: p, consumer: c, joint: rule.joint, op });
                break;
            }
        }
    }
    found
}

/// Whether node `p`'s outputs are read by node `c` alone, and by it once.
fn read_only_by(graph: &StepGraph, p: usize, c: usize) -> bool {
    let reads = |s: &Source| matches!(s, Source::Node(n, _) if *n == p);
    let by_nodes: usize = graph.nodes.iter().map(|n| n.inputs.iter().filter(|s| reads(s)).count()).sum();
    let by_c = graph.nodes[c].inputs.iter().filter(|s| reads(s)).count();
    by_nodes == 1 && by_c == 1 && !graph.next_states.iter().any(reads) && !reads(&graph.output)
}

/// Whether node `c`'s inputs are node `p`'s with one more at `extra`, none of them computed
/// at or after `p` (so all are at hand where `p` runs).
fn shares_inputs(graph: &StepGraph, p: usize, c: usize, extra: usize) -> bool {
    let (producer, consumer) = (&graph.nodes[p], &graph.nodes[c]);
    let mut theirs = consumer.inputs.clone();
    if extra >= theirs.len() {
        return false;
    }
    theirs.remove(extra);
    let ready = |s: &Source| !matches!(s, Source::Node(n, _) if *n >= p);
    theirs == producer.inputs && consumer.inputs.iter().all(ready)
}

fn sam_transfer(sam: &Args, transfer: &Args) -> Result<Option<Arc<dyn FusedOp>>, PrimError> {
    let (sam_config, sam_inferred) = sam_read::configure(sam)?;
    let (transfer_config, _) = transfer::configure(transfer)?;
    let sam = SamReadOp::new(sam_config);
    let transfer = TransferOp::new(transfer_config);
    let (n, nq) = sam.sizes();
    // `transfer` must read SAM's whole output as `[nq, n, n]`.
    let Some(crate::ty::Ty::Tensor(r)) = sam_inferred.outputs.first() else { return Ok(None) };
    if r != &vec![nq, n, n] {
        return Ok(None);
    }
    let sam_params = sam_inferred.params.len();
    Ok(Some(Arc::new(SamTransfer { sam, sam_params, transfer, wt: Transposed::default() })))
}

/// `samRead` followed by `transfer` of its output: outputs `[R, T]`; parameters samRead's,
/// then transfer's.
struct SamTransfer {
    sam: SamReadOp,
    /// How many of the parameters are samRead's.
    sam_params: usize,
    transfer: TransferOp,
    /// transfer's weight, transposed.
    wt: Transposed,
}

/// What the fused training forward keeps: samRead's values and `P = A Wᵀ`.
struct SamTransferValues {
    sam: SamValues,
    p: Tensor,
}

impl SamTransfer {
    /// The parameters split into samRead's and transfer's.
    fn split<'a, T>(&self, params: &'a [T]) -> (&'a [T], &'a [T]) {
        params.split_at(self.sam_params.min(params.len()))
    }
}

impl Op for SamTransfer {
    fn forward(&self, inputs: &[&Tensor], params: &[&Tensor]) -> candle_core::Result<Vec<Tensor>> {
        let (sam_params, transfer_params) = self.split(params);
        let r = self.sam.forward(inputs, sam_params)?.remove(0);
        let t = self.transfer.forward(&[&r], transfer_params)?.remove(0);
        Ok(vec![r, t])
    }

    fn manual(&self) -> Option<&dyn TrainOp> {
        Some(self)
    }
}

impl ManualBackward for SamTransfer {
    type Saved = SamTransferValues;

    /// samRead's training forward, then `P = A Wᵀ` and `T = Vᵀ P + b`.
    fn forward_train(&self, inputs: &[&Tensor], params: &[&Tensor]) -> Forward<Self::Saved> {
        let [m] = op::inputs("samRead+transfer", inputs)?;
        with_real!(m.dtype(), T => self.train_forward::<T>(m, params))
    }

    fn backward(&self, b: &Backward<'_, Self::Saved>, param_grads: &mut [ParamGrad]) -> InputGrads {
        let [m] = b.inputs_of()?;
        with_real!(m.dtype(), T => self.train_backward::<T>(b, param_grads))
    }
}

impl SamTransfer {
    fn train_forward<T: Real>(&self, m: &Tensor, params: &[&Tensor]) -> Forward<SamTransferValues> {
        let (n, nq) = self.sam.sizes();
        let (sam_params, transfer_params) = self.split(params);
        let layer = self.transfer.layer();
        let (mut outs, sam) = self.sam.train_forward::<T>(m, sam_params)?;
        let batch = m.dim(0)?;
        let w = layer.weight.of(transfer_params);
        let size = w.dim(0)?;
        let (w3, k) = (3 * nq, nq * n);
        let (yr, ar) = (view::Read::new(&sam.normed)?, view::Read::new(&sam.att)?);
        let wt = self.wt.of(w)?;
        let (wr, br) = (view::Read::new(&wt)?, view::Read::new(layer.bias.of(transfer_params))?);
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
        Ok((outs, SamTransferValues { sam, p: view::tensor(p, (batch, nq, size))? }))
    }

    fn train_backward<T: Real>(
        &self,
        bw: &Backward<'_, SamTransferValues>,
        param_grads: &mut [ParamGrad],
    ) -> InputGrads {
        let (n, nq) = self.sam.sizes();
        let [m] = bw.inputs_of()?;
        let batch = m.dim(0)?;
        let (sam_params, transfer_params) = self.split(bw.params);
        let layer = self.transfer.layer();
        let w = layer.weight.of(transfer_params);
        let size = w.dim(0)?;
        let (w3, k) = (3 * nq, nq * n);
        // samRead's part of the backward: its own output (R, the first) and parameters.
        let (r_out, r_grad) = (&bw.outputs[..1], &bw.grads[..1]);
        let sam_bw = Backward {
            inputs: bw.inputs,
            params: sam_params,
            outputs: r_out,
            saved: &bw.saved.sam,
            grads: r_grad,
            needs: bw.needs,
        };
        let (sam_grads, tr_grads) = param_grads.split_at_mut(self.sam_params);
        let Some(g) = bw.grads.get(1).and_then(Option::as_ref) else {
            return self.sam.backward_with::<T>(&sam_bw, sam_grads, None);
        };
        let g = view::contiguous(g)?;
        let (gr, yr, ar, pr) = (
            view::Read::new(&g)?,
            view::Read::new(&bw.saved.sam.normed)?,
            view::Read::new(&bw.saved.sam.att)?,
            view::Read::new(&bw.saved.p)?,
        );
        let wr = view::Read::new(w)?;
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
        let (gw, gb) = Slot::pair_mut(layer.weight, layer.bias, tr_grads);
        let gw = gw.slice_mut::<T>(size * k)?;
        matmul(
            MatMut::new(gw, size, k),
            Mat::new(&h, batch * nq, size).t(),
            Mat::new(a, batch * nq, k),
            true,
            Par::Pool,
        );
        column_sums_into(g, size, gb.slice_mut::<T>(size)?);
        let ga = matmul_new(Mat::new(&h, batch * nq, size), Mat::new(w, size, k), Par::Pool);
        self.sam.backward_with::<T>(&sam_bw, sam_grads, Some((&ga, &gv)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prims::contract::testing::*;

    /// The fused op against the two primitives composed under candle's autograd.
    #[test]
    fn sam_transfer_matches_the_composition() {
        for (n, nq, size) in [(3, 2, 3), (5, 2, 4)] {
            let sam_args = bind(&sam_read::SamRead, &[("M", t(&[n, n])), ("nq", int(nq as i64))]);
            let transfer_args = bind(&transfer::Transfer, &[("R", t(&[nq, n, n])), ("size", int(size as i64))]);
            let fused = sam_transfer(&sam_args, &transfer_args).unwrap().expect("the rule applies");
            manual_backward_check_op(
                "samRead+transfer",
                &*fused,
                &[vec![n, n]],
                &[vec![3 * nq, n], vec![3 * nq], vec![n * 3 * nq], vec![n * 3 * nq], vec![size, nq * n], vec![size]],
            );
        }
    }

    fn graph_of(spec: &str) -> crate::graph::StepGraph {
        (*crate::check::checked_text(spec).experiments[0].trials[0].graph).clone()
    }

    #[test]
    fn an_lstm_absorbs_the_embedding_of_its_tokens_unless_another_node_reads_it() {
        let spec = |out: &str| {
            format!(
                "model m(hidden = 3) {{\n state c = zeros(hidden)\n state h = zeros(hidden)\n step token {{\n \
                 x = embed(token, 2)\n c, h = lstmCell(c, h, x)\n out linear({out}, output_size)\n }}\n}}\n\
                 experiment e {{ task assocRetrieval(pairs = 2) model m }}"
            )
        };
        let graph = graph_of(&spec("h"));
        let f = find(&graph);
        assert_eq!(f.len(), 1);
        assert_eq!((graph.nodes[f[0].producer].prim, graph.nodes[f[0].consumer].prim), ("embed", "lstmCell"));
        assert_eq!(f[0].joint, Joint::Absorb { slot: 2 });
        let sources = f[0].absorbed_sources(&graph).unwrap();
        assert_eq!(sources[2], Source::Input);
        // The read-out also reads the embedding: it must stay a node of its own.
        assert!(find(&graph_of(&spec("concat(h, x)"))).is_empty());
    }

    #[test]
    fn a_kanerva_read_and_update_of_the_same_code_share_their_addressing() {
        let spec = |update_z: &str| {
            format!(
                "model m(c = 3, n = 2) {{\n state R = learned(1, c, n)\n state V = identity(1, n, n)\n step x {{\n \
                 z = linear(x, c)\n y = linear(x, c)\n mu = kanervaRead(R, z)\n R, V = kanervaUpdate(R, V, {update_z})\n \
                 out linear(mu, output_size)\n }}\n}}\n\
                 experiment e {{ task randomSequence(input = 2, output = 2, length = 2) model m }}"
            )
        };
        let graph = graph_of(&spec("z"));
        let f = find(&graph);
        assert_eq!(f.len(), 1);
        assert_eq!(
            (graph.nodes[f[0].producer].prim, graph.nodes[f[0].consumer].prim),
            ("kanervaRead", "kanervaUpdate")
        );
        assert_eq!(f[0].joint, Joint::Share { extra: 1 });
        assert_eq!(f[0].shared_sources(&graph).unwrap(), &graph.nodes[f[0].consumer].inputs[..]);
        // Writing another code than the one read: nothing to share.
        assert!(find(&graph_of(&spec("y"))).is_empty());
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
        let program = crate::check::checked_text(spec);
        let graph = &program.experiments[0].trials[0].graph;
        let f = find(graph);
        assert_eq!(f.len(), 1);
        assert_eq!((graph.nodes[f[0].producer].prim, graph.nodes[f[0].consumer].prim), ("samRead", "transfer"));
    }
}
