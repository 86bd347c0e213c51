//! memctl's own reverse mode over a training run: the forward runs the step graph over the
//! time steps recording, per time step and node, the node's outputs and what its backward
//! needs (all tensors detached, no candle graph); the backward walks the time steps and nodes
//! in reverse, summing gradients per value and, for parameters shared across time steps, into
//! one accumulator each ([`ParamGrad`], in place).
//!
//! Nodes whose op has a manual backward (`Op::manual`) run their fused `forward_train`
//! and `backward`. The others fall back to candle's autograd locally: the node's forward runs
//! on fresh `Var` copies of its inputs (and the cell's parameter `Var`s), keeping its small
//! candle graph, and its backward is candle's backward of `Σ_k ⟨out_k, grad_k⟩`, from which
//! the input and parameter gradients are read. So every primitive trains; fast ones skip
//! candle's autograd entirely.

use std::borrow::Cow;

use candle_core::{Result, Tensor, Var};

use super::Cell;
use crate::graph::{Source, StateInit};
use crate::kernels::elementwise::map2;
use crate::kernels::real::Real;
use crate::kernels::view::{self, Read};
use crate::prims::backward::with_real;
use crate::prims::fusion::{Fusion, Joint};
use crate::prims::{Backward, ParamGrad, SavedAny, TrainOp};

/// The loss of scored step `s` (its index among the scored steps) from its logits: the value
/// (the tape sums them) and `d loss / d logits`.
pub type StepLoss<'a> = dyn FnMut(usize, &Tensor) -> Result<(f64, Tensor)> + 'a;

/// One node at one time step.
enum Rec {
    /// Not run (feeds neither the state nor, at this step, the output), or no gradient
    /// can flow through it.
    Skipped,
    Manual {
        saved: SavedAny,
    },
    /// Run with a later node as one fused op (`Cell::fusions[fusion]`).
    FusedProducer {
        saved: SavedAny,
        fusion: usize,
    },
    /// Computed by a fused op run at another node (the producer of a chain, or the consumer
    /// that absorbs it); its gradient is handled there.
    FusedConsumer,
    /// Run as one fused op with the producer it absorbs (`Cell::fusions[fusion]`, a
    /// [`Joint::Absorb`]); its inputs are the fusion's `absorbed_sources`.
    Absorbing {
        saved: SavedAny,
        fusion: usize,
    },
    /// Candle's autograd: the input `Var`s and the outputs with their local graph.
    Fallback {
        vars: Vec<Option<Var>>,
        outputs: Vec<Tensor>,
    },
}

/// One time step of the forward.
struct StepRec {
    x: Tensor,
    /// Every state's value at the start of the step.
    states: Vec<Tensor>,
    /// Every node's outputs (detached, contiguous; empty if not run).
    values: Vec<Vec<Tensor>>,
    nodes: Vec<Rec>,
    /// Whether a gradient can flow into each state / node (depends on a parameter).
    state_req: Vec<bool>,
    node_req: Vec<bool>,
    /// `d loss / d output` at a scored step.
    out_grad: Option<Tensor>,
}

impl Cell {
    /// One training forward and backward over a batch of sequences (`inputs`: `[T, B, ...]`)
    /// with the loss `loss` at the `scored` steps: the summed loss and every parameter's
    /// gradient (`None` for a parameter that does not reach the loss). CPU, f32 or f64.
    /// `weights` are the parameters detached (`Cell::weights(false)`), the same tensors for
    /// every part of a batch split over threads (ops cache per-weight work, e.g. transposes,
    /// by tensor).
    pub fn train_grads(
        &self,
        weights: &[Tensor],
        inputs: &Tensor,
        scored: &[usize],
        loss: &mut StepLoss<'_>,
    ) -> Result<(f64, Vec<Option<Tensor>>)> {
        let g = &self.graph;
        let tracked = self.weights(true);
        let (steps, batch) = (inputs.dim(0)?, inputs.dim(1)?);
        let mut states: Vec<Tensor> =
            self.initial_states(weights, batch)?.iter().map(|s| s.contiguous()).collect::<Result<_>>()?;
        let mut state_req: Vec<bool> = g.states.iter().map(|s| matches!(s.init, StateInit::Learned(_))).collect();
        let mut total = 0.0;
        let mut recs: Vec<StepRec> = Vec::with_capacity(steps);
        let mut next_scored = scored.iter().enumerate().peekable();
        for t in 0..steps {
            let scored_here = match next_scored.peek() {
                Some(&(s, &st)) if st == t => {
                    next_scored.next();
                    Some(s)
                }
                _ => None,
            };
            let x = inputs.get(t)?.contiguous()?;
            let mut values: Vec<Vec<Tensor>> = vec![vec![]; g.nodes.len()];
            let mut nodes: Vec<Rec> = (0..g.nodes.len()).map(|_| Rec::Skipped).collect();
            let mut node_req = vec![false; g.nodes.len()];
            for (i, node) in g.nodes.iter().enumerate() {
                let run = |n: usize| scored_here.is_some() || self.needed_for_state[n];
                if !run(i) || matches!(nodes[i], Rec::FusedConsumer) {
                    continue;
                }
                let absorbed_here = |f: &Fusion| matches!(f.joint, Joint::Absorb { .. }) && run(f.consumer);
                if self.fusions.iter().any(|f| f.producer == i && absorbed_here(f)) {
                    nodes[i] = Rec::FusedConsumer; // its consumer runs it
                    continue;
                }
                let absorbing = self.fusions.iter().position(|f| f.consumer == i && absorbed_here(f));
                let req_of = |s: &Source, node_req: &[bool]| match *s {
                    Source::Input => false,
                    Source::State(j) => state_req[j],
                    Source::Node(n, _) => node_req[n],
                };
                let absorbed = absorbing.and_then(|f| self.fusions[f].absorbed_sources(g));
                let sources: &[Source] = absorbed.as_deref().unwrap_or(&node.inputs);
                let needs: Vec<bool> = sources.iter().map(|s| req_of(s, &node_req)).collect();
                node_req[i] = !node.params.is_empty() || needs.iter().any(|&b| b);
                let ins: Vec<&Tensor> = sources.iter().map(|s| fetch(*s, &x, &states, &values)).collect();
                let at_producer = |f: &Fusion| matches!(f.joint, Joint::Chain | Joint::Share { .. });
                let fusion = self.fusions.iter().position(|f| f.producer == i && at_producer(f) && run(f.consumer));
                if let Some(f) = absorbing {
                    let producer = &g.nodes[self.fusions[f].producer];
                    let params: Vec<&Tensor> =
                        producer.params.iter().chain(&node.params).map(|&p| &weights[p]).collect();
                    let (outs, saved) = self.fusions[f].op.forward_train(&ins, &params)?;
                    values[i] = outs.iter().map(|o| o.contiguous()).collect::<Result<_>>()?;
                    nodes[i] = Rec::Absorbing { saved, fusion: f };
                } else if !node_req[i] {
                    // Nothing to differentiate: the plain forward.
                    let params: Vec<&Tensor> = node.params.iter().map(|&p| &weights[p]).collect();
                    values[i] =
                        self.ops[i].forward(&ins, &params)?.iter().map(|o| o.contiguous()).collect::<Result<_>>()?;
                } else if let Some(f) = fusion {
                    let (producer, consumer) = (node, &g.nodes[self.fusions[f].consumer]);
                    let params: Vec<&Tensor> =
                        producer.params.iter().chain(&consumer.params).map(|&p| &weights[p]).collect();
                    // A shared pair runs on the consumer's inputs (the producer's among them).
                    let shared: Option<Vec<&Tensor>> = self.fusions[f]
                        .shared_sources(g)
                        .map(|sources| sources.iter().map(|s| fetch(*s, &x, &states, &values)).collect());
                    let (mut outs, saved) =
                        self.fusions[f].op.forward_train(shared.as_ref().unwrap_or(&ins), &params)?;
                    let theirs = outs.split_off(producer.outputs.len());
                    let c = self.fusions[f].consumer;
                    values[i] = outs.iter().map(|o| o.contiguous()).collect::<Result<_>>()?;
                    values[c] = theirs.iter().map(|o| o.contiguous()).collect::<Result<_>>()?;
                    nodes[i] = Rec::FusedProducer { saved, fusion: f };
                    nodes[c] = Rec::FusedConsumer;
                    node_req[c] = true;
                } else if let Some(manual) = self.ops[i].manual() {
                    let params: Vec<&Tensor> = node.params.iter().map(|&p| &weights[p]).collect();
                    let (outs, saved) = manual.forward_train(&ins, &params)?;
                    values[i] = outs.iter().map(|o| o.contiguous()).collect::<Result<_>>()?;
                    nodes[i] = Rec::Manual { saved };
                } else {
                    let vars: Vec<Option<Var>> = ins
                        .iter()
                        .zip(&needs)
                        .map(|(t, &n)| if n && t.dtype().is_float() { Var::from_tensor(t).map(Some) } else { Ok(None) })
                        .collect::<Result<_>>()?;
                    let local: Vec<&Tensor> =
                        ins.iter().zip(&vars).map(|(t, v)| v.as_ref().map_or(*t, |v| v.as_tensor())).collect();
                    let params: Vec<&Tensor> = node.params.iter().map(|&p| &tracked[p]).collect();
                    let outputs = self.ops[i].forward(&local, &params)?;
                    values[i] = outputs.iter().map(|o| o.detach().contiguous()).collect::<Result<_>>()?;
                    nodes[i] = Rec::Fallback { vars, outputs };
                }
            }
            let out_grad = match scored_here {
                Some(s) => {
                    let (value, grad) = loss(s, fetch(g.output, &x, &states, &values))?;
                    total += value;
                    Some(grad)
                }
                None => None,
            };
            let next: Vec<Tensor> = g.next_states.iter().map(|s| fetch(*s, &x, &states, &values).clone()).collect();
            let next_req: Vec<bool> = g
                .next_states
                .iter()
                .map(|s| match *s {
                    Source::Input => false,
                    Source::State(j) => state_req[j],
                    Source::Node(n, _) => node_req[n],
                })
                .collect();
            recs.push(StepRec {
                x,
                states: std::mem::replace(&mut states, next),
                values,
                nodes,
                state_req: std::mem::replace(&mut state_req, next_req),
                node_req,
                out_grad,
            });
            if next_scored.peek().is_none() {
                break; // nothing after the last scored step matters
            }
        }
        drop(states);

        let mut param_grads: Vec<ParamGrad> = g.params.iter().map(|_| ParamGrad::default()).collect();
        // d loss / d (state value at the start of the step after the current one).
        let mut carry: Vec<Option<Tensor>> = vec![None; g.states.len()];
        while let Some(rec) = recs.pop() {
            let mut g_nodes: Vec<Vec<Option<Tensor>>> = g.nodes.iter().map(|n| vec![None; n.outputs.len()]).collect();
            let mut g_states: Vec<Option<Tensor>> = vec![None; g.states.len()];
            let mut add = |s: Source, grad: Tensor, g_nodes: &mut Vec<Vec<Option<Tensor>>>| -> Result<()> {
                match s {
                    Source::Input => Ok(()),
                    Source::State(j) => accumulate(&mut g_states[j], grad),
                    Source::Node(n, k) => accumulate(&mut g_nodes[n][k], grad),
                }
            };
            for (i, s) in g.next_states.iter().enumerate() {
                if let Some(grad) = carry[i].take() {
                    add(*s, grad, &mut g_nodes)?;
                }
            }
            if let Some(grad) = rec.out_grad.clone() {
                add(g.output, grad, &mut g_nodes)?;
            }
            for (i, node) in g.nodes.iter().enumerate().rev() {
                if matches!(rec.nodes[i], Rec::FusedConsumer) {
                    continue; // its producer's fused backward takes its gradient
                }
                let consumer_has_grad = match &rec.nodes[i] {
                    Rec::FusedProducer { fusion, .. } => {
                        g_nodes[self.fusions[*fusion].consumer].iter().any(Option::is_some)
                    }
                    _ => false,
                };
                if !rec.node_req[i] || (g_nodes[i].iter().all(Option::is_none) && !consumer_has_grad) {
                    continue;
                }
                let mut grads = std::mem::take(&mut g_nodes[i]);
                let absorbed = match &rec.nodes[i] {
                    Rec::Absorbing { fusion, .. } => self.fusions[*fusion].absorbed_sources(g),
                    _ => None,
                };
                let shared = match &rec.nodes[i] {
                    Rec::FusedProducer { fusion, .. } => self.fusions[*fusion].shared_sources(g),
                    _ => None,
                };
                let sources: &[Source] = shared.or(absorbed.as_deref()).unwrap_or(&node.inputs);
                let needs: Vec<bool> = sources
                    .iter()
                    .map(|s| match *s {
                        Source::Input => false,
                        Source::State(j) => rec.state_req[j],
                        Source::Node(n, _) => rec.node_req[n],
                    })
                    .collect();
                // The parameters (and, for a fused pair, the consumer's after the producer's).
                let consumer = match &rec.nodes[i] {
                    Rec::FusedProducer { fusion, .. } => Some(self.fusions[*fusion].consumer),
                    _ => None,
                };
                let param_ids: Vec<usize> = match &rec.nodes[i] {
                    Rec::Absorbing { fusion, .. } => {
                        g.nodes[self.fusions[*fusion].producer].params.iter().chain(&node.params).copied().collect()
                    }
                    _ => node
                        .params
                        .iter()
                        .chain(consumer.map_or(&[][..], |c| &g.nodes[c].params[..]))
                        .copied()
                        .collect(),
                };
                let mut local: Vec<ParamGrad> =
                    param_ids.iter().map(|&p| std::mem::take(&mut param_grads[p])).collect();
                // A manual backward (of the node's op, or of the fused op it runs): the op, its
                // outputs (a chain's: the producer's, then the consumer's) and what it saved.
                let manual: Option<(&dyn TrainOp, Cow<[Tensor]>, &SavedAny)> = match &rec.nodes[i] {
                    Rec::Manual { saved } => {
                        let Some(op) = self.ops[i].manual() else {
                            candle_core::bail!("internal: node {i} ran its manual forward but has no manual backward")
                        };
                        Some((op, Cow::Borrowed(&rec.values[i][..]), saved))
                    }
                    Rec::FusedProducer { saved, fusion } => {
                        let c = self.fusions[*fusion].consumer;
                        grads.extend(std::mem::take(&mut g_nodes[c]));
                        let outputs = rec.values[i].iter().chain(&rec.values[c]).cloned().collect();
                        Some((&*self.fusions[*fusion].op as &dyn TrainOp, Cow::Owned(outputs), saved))
                    }
                    Rec::Absorbing { saved, fusion } => {
                        Some((&*self.fusions[*fusion].op as &dyn TrainOp, Cow::Borrowed(&rec.values[i][..]), saved))
                    }
                    _ => None,
                };
                let input_grads = match (&rec.nodes[i], manual) {
                    (_, Some((op, outputs, saved))) => {
                        let inputs: Vec<Tensor> =
                            sources.iter().map(|s| fetch(*s, &rec.x, &rec.states, &rec.values).clone()).collect();
                        let params: Vec<&Tensor> = param_ids.iter().map(|&p| &weights[p]).collect();
                        let b = Backward {
                            inputs: &inputs,
                            params: &params,
                            outputs: &outputs,
                            saved,
                            grads: &grads,
                            needs: &needs,
                        };
                        op.backward(&b, &mut local)?
                    }
                    (Rec::Skipped, None) => vec![None; node.inputs.len()],
                    (Rec::Fallback { vars, outputs }, None) => {
                        let mut dot: Option<Tensor> = None;
                        for (o, grad) in outputs.iter().zip(&grads) {
                            if let Some(grad) = grad {
                                let term = (o * grad)?.sum_all()?;
                                dot = Some(match dot {
                                    Some(d) => (d + term)?,
                                    None => term,
                                });
                            }
                        }
                        match dot {
                            Some(dot) => {
                                let store = dot.backward()?;
                                for (k, &p) in node.params.iter().enumerate() {
                                    if let Some(pg) = store.get(tracked[p].as_ref()) {
                                        local[k].add(pg)?;
                                    }
                                }
                                // candle's gradients carry a graph back into this node's forward
                                // (`grad · rhs`): detach them, or the next node's backward would
                                // flow into this one again.
                                vars.iter()
                                    .map(|v| v.as_ref().and_then(|v| store.get(v.as_tensor())).map(Tensor::detach))
                                    .collect()
                            }
                            None => vec![None; node.inputs.len()],
                        }
                    }
                    (_, None) => unreachable!("manual records have an op, and fused consumers are skipped above"),
                };
                for (k, &p) in param_ids.iter().enumerate() {
                    param_grads[p] = std::mem::take(&mut local[k]);
                }
                for ((s, grad), &need) in sources.iter().zip(input_grads).zip(&needs) {
                    if let (Some(grad), true) = (grad, need) {
                        add(*s, grad, &mut g_nodes)?;
                    }
                }
            }
            carry = g_states;
        }
        // The learned initial states were broadcast over the batch.
        for (s, grad) in g.states.iter().zip(carry) {
            if let (StateInit::Learned(p), Some(grad)) = (&s.init, grad) {
                param_grads[*p].add_batch_sum(&grad)?;
            }
        }
        let grads = param_grads
            .into_iter()
            .zip(&g.params)
            .map(|(pg, spec)| pg.into_tensor(spec.shape.clone()))
            .collect::<Result<_>>()?;
        Ok((total, grads))
    }
}

fn fetch<'a>(s: Source, x: &'a Tensor, states: &'a [Tensor], values: &'a [Vec<Tensor>]) -> &'a Tensor {
    match s {
        Source::Input => x,
        Source::State(i) => &states[i],
        Source::Node(n, k) => &values[n][k],
    }
}

/// `slot += grad`.
fn accumulate(slot: &mut Option<Tensor>, grad: Tensor) -> Result<()> {
    *slot = Some(match slot.take() {
        None => grad,
        Some(old) if old.dims() == grad.dims() && old.device().is_cpu() => {
            with_real!(old.dtype(), T => add::<T>(&old, &grad)?)
        }
        Some(old) => (old + grad)?,
    });
    Ok(())
}

/// `a + b` for two CPU tensors of the same shape, in one vectorised pass.
fn add<T: Real>(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    let (a, b) = (a.contiguous()?, b.contiguous()?);
    let (ar, br) = (Read::new(&a)?, Read::new(&b)?);
    view::tensor(map2(ar.slice::<T>()?, br.slice::<T>()?, |x, y| x + y), a.dims())
}
