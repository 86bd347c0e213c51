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
//!
//! The tape runs a *pack*: several trials of the same graph, each with its own parameters
//! ([`Member`]), over one batch that holds every trial's sequences one trial after another
//! (`[T, P·B, ...]`). Work that reads no parameter runs once over all `P·B` sequences; a node
//! that reads parameters runs once per trial on its trial's rows with its trial's weights, so
//! each trial computes exactly what it computes alone. A value a trial shares across its
//! batch (a learned scalar, `[1, ...]`) stays one tensor per trial ([`Val::Split`]), and
//! whatever reads it runs per trial too. A pack of one is a trial trained alone.

use std::borrow::Cow;

use candle_core::{Result, Tensor, Var};

use super::Cell;
use crate::graph::{Node, Source, StateInit};
use crate::kernels::elementwise::map2;
use crate::kernels::real::Real;
use crate::kernels::view::{self, Read};
use crate::prims::backward::with_real;
use crate::prims::fusion::{Fusion, Joint};
use crate::prims::{Backward, ParamGrad, SavedAny, TrainOp};

/// The loss of scored step `s` (its index among the scored steps) from its logits: the value
/// (the tape sums them) and `d loss / d logits`.
pub type StepLoss<'a> = dyn FnMut(usize, &Tensor) -> Result<(f64, Tensor)> + 'a;

/// [`StepLoss`] for trial `p` of a pack: `(p, s, logits of trial p)`.
pub type PackLoss<'a> = dyn FnMut(usize, usize, &Tensor) -> Result<(f64, Tensor)> + 'a;

/// One trial of a pack: its parameters detached (`Cell::weights(false)`), and tracked (the
/// `Var`s candle's autograd differentiates for nodes without a manual backward).
#[derive(Clone, Copy)]
pub struct Member<'a> {
    pub weights: &'a [Tensor],
    pub tracked: &'a [Tensor],
}

/// What the tape returns for each trial of a pack: the summed loss and every parameter's
/// gradient (`None` for a parameter that does not reach the loss).
pub type TrialGrads = (f64, Vec<Option<Tensor>>);

/// A value of the packed run: every trial's rows in one tensor (`[P·B, ...]`, trial `p` at
/// rows `p·B..(p+1)·B`), or one tensor per trial for a value each trial shares across its
/// batch (`[1, ...]`).
#[derive(Clone)]
enum Val {
    Joint(Tensor),
    Split(Vec<Tensor>),
}

/// The pack's layout: `trials` trials of `batch` sequences each.
#[derive(Clone, Copy)]
struct Layout {
    trials: usize,
    batch: usize,
}

impl Layout {
    /// Trial `p`'s part of `v`.
    fn part(self, v: &Val, p: usize) -> Result<Tensor> {
        match v {
            Val::Joint(t) if self.trials == 1 => Ok(t.clone()),
            Val::Joint(t) => t.narrow(0, p * self.batch, self.batch),
            Val::Split(parts) => Ok(parts[p].clone()),
        }
    }

    /// The value whose trial parts are `parts`: joined when each holds a batch of rows.
    fn join(self, mut parts: Vec<Tensor>) -> Result<Val> {
        if self.trials == 1 {
            return Ok(Val::Joint(parts.swap_remove(0)));
        }
        if parts.iter().all(|t| t.dims().first() == Some(&self.batch)) {
            return Ok(Val::Joint(Tensor::cat(&parts, 0)?));
        }
        Ok(Val::Split(parts))
    }
}

impl Val {
    /// The tensor of a value every trial holds in one (a joint run's operand).
    fn joint(&self) -> Result<&Tensor> {
        match self {
            Val::Joint(t) => Ok(t),
            Val::Split(_) => candle_core::bail!("internal: a per-trial value read by a joint run"),
        }
    }

    fn is_split(&self) -> bool {
        matches!(self, Val::Split(_))
    }
}

/// How a node (or the fused op it runs) was recorded at one time step.
enum Rec {
    /// Not run (feeds neither the state nor, at this step, the output), or no gradient
    /// can flow through it.
    Skipped,
    Manual {
        saved: Vec<SavedAny>,
    },
    /// Run with a later node as one fused op (`Cell::fusions[fusion]`).
    FusedProducer {
        saved: Vec<SavedAny>,
        fusion: usize,
    },
    /// Computed by a fused op run at another node (the producer of a chain, or the consumer
    /// that absorbs it); its gradient is handled there.
    FusedConsumer,
    /// Run as one fused op with the producer it absorbs (`Cell::fusions[fusion]`, a
    /// [`Joint::Absorb`]); its inputs are the fusion's `absorbed_sources`.
    Absorbing {
        saved: Vec<SavedAny>,
        fusion: usize,
    },
    /// Candle's autograd: the input `Var`s and the outputs with their local graph.
    Fallback {
        runs: Vec<FallbackRun>,
    },
}

/// One run of a node under candle's autograd.
struct FallbackRun {
    vars: Vec<Option<Var>>,
    outputs: Vec<Tensor>,
}

/// What one run of a node records, before the runs of a pack are gathered into a [`Rec`].
enum RunRec {
    Nothing,
    Saved(SavedAny),
    Fallback(FallbackRun),
}

/// What a node runs at a time step.
#[derive(Clone, Copy)]
enum Unit {
    /// The fused op of an absorbing fusion, in the consumer's place.
    Absorb(usize),
    /// The plain forward: nothing to differentiate.
    Plain,
    /// The fused op of a chain or a shared pair, in the producer's place.
    Chain(usize),
    /// The node's own manual forward.
    Manual,
    /// The node's forward under candle's autograd.
    Fallback,
}

/// One time step of the forward.
struct StepRec {
    x: Val,
    /// Every state's value at the start of the step.
    states: Vec<Val>,
    /// Every node's outputs (detached, contiguous; empty if not run).
    values: Vec<Vec<Val>>,
    nodes: Vec<Rec>,
    /// Whether each node ran once per trial (it reads parameters, or a per-trial value).
    per_trial: Vec<bool>,
    /// Whether a gradient can flow into each state / node (depends on a parameter).
    state_req: Vec<bool>,
    node_req: Vec<bool>,
    /// `d loss / d output` at a scored step.
    out_grad: Option<Val>,
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
    ) -> Result<TrialGrads> {
        let tracked = self.weights(true);
        let member = Member { weights, tracked: &tracked };
        let mut grads = self.train_grads_packed(&[member], inputs, scored, &mut |_, s, logits| loss(s, logits))?;
        Ok(grads.swap_remove(0))
    }

    /// [`Cell::train_grads`] for a pack of trials of this cell's graph (`members`, each with
    /// its own parameters) over `inputs` `[T, P·B, ...]`, trial `p`'s sequences at
    /// `p·B..(p+1)·B`: each trial's loss and gradients, as it would get them alone.
    pub fn train_grads_packed(
        &self,
        members: &[Member<'_>],
        inputs: &Tensor,
        scored: &[usize],
        loss: &mut PackLoss<'_>,
    ) -> Result<Vec<TrialGrads>> {
        let g = &self.graph;
        let trials = members.len().max(1);
        let (steps, rows) = (inputs.dim(0)?, inputs.dim(1)?);
        if rows % trials != 0 {
            candle_core::bail!("internal: a pack of {trials} trials over {rows} sequences");
        }
        let lay = Layout { trials, batch: rows / trials };
        let mut states: Vec<Val> = self.packed_initial_states(members, lay)?;
        let mut state_req: Vec<bool> = g.states.iter().map(|s| matches!(s.init, StateInit::Learned(_))).collect();
        let mut totals = vec![0.0; trials];
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
            let x = Val::Joint(inputs.get(t)?.contiguous()?);
            let mut values: Vec<Vec<Val>> = vec![vec![]; g.nodes.len()];
            let mut nodes: Vec<Rec> = (0..g.nodes.len()).map(|_| Rec::Skipped).collect();
            let mut node_req = vec![false; g.nodes.len()];
            let mut per_trial = vec![false; g.nodes.len()];
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
                let at_producer = |f: &Fusion| matches!(f.joint, Joint::Chain | Joint::Share { .. });
                let fusion = self.fusions.iter().position(|f| f.producer == i && at_producer(f) && run(f.consumer));
                let (unit, param_ids, shared) = if let Some(f) = absorbing {
                    let producer = &g.nodes[self.fusions[f].producer];
                    (Unit::Absorb(f), producer.params.iter().chain(&node.params).copied().collect(), None)
                } else if !node_req[i] {
                    (Unit::Plain, node.params.clone(), None)
                } else if let Some(f) = fusion {
                    let consumer = &g.nodes[self.fusions[f].consumer];
                    // A shared pair runs on the consumer's inputs (the producer's among them).
                    let shared = self.fusions[f].shared_sources(g);
                    (Unit::Chain(f), node.params.iter().chain(&consumer.params).copied().collect(), shared)
                } else if self.ops[i].manual().is_some() {
                    (Unit::Manual, node.params.clone(), None)
                } else {
                    (Unit::Fallback, node.params.clone(), None)
                };
                let run_sources: &[Source] = shared.unwrap_or(sources);
                let ins: Vec<&Val> = run_sources.iter().map(|s| fetch(*s, &x, &states, &values)).collect();
                per_trial[i] = trials > 1 && (!param_ids.is_empty() || ins.iter().any(|v| v.is_split()));
                let (outs, runs) = if per_trial[i] {
                    let mut outs: Vec<Vec<Tensor>> = vec![];
                    let mut runs = Vec::with_capacity(trials);
                    for (p, m) in members.iter().enumerate() {
                        let ins: Vec<Tensor> = ins.iter().map(|v| lay.part(v, p)).collect::<Result<_>>()?;
                        let (o, r) =
                            self.forward_unit(unit, i, &ins.iter().collect::<Vec<_>>(), &needs, &param_ids, m)?;
                        outs.resize_with(o.len(), Vec::new);
                        for (k, o) in o.into_iter().enumerate() {
                            outs[k].push(o);
                        }
                        runs.push(r);
                    }
                    (outs.into_iter().map(|parts| lay.join(parts)).collect::<Result<Vec<_>>>()?, runs)
                } else {
                    let ins: Vec<&Tensor> = ins.iter().map(|v| v.joint()).collect::<Result<_>>()?;
                    let (o, r) = self.forward_unit(unit, i, &ins, &needs, &param_ids, &members[0])?;
                    (o.into_iter().map(Val::Joint).collect(), vec![r])
                };
                match unit {
                    Unit::Chain(f) => {
                        let c = self.fusions[f].consumer;
                        let mut outs = outs;
                        values[c] = outs.split_off(node.outputs.len());
                        values[i] = outs;
                        nodes[i] = Rec::FusedProducer { saved: saved_of(runs)?, fusion: f };
                        nodes[c] = Rec::FusedConsumer;
                        node_req[c] = true;
                    }
                    Unit::Absorb(f) => {
                        values[i] = outs;
                        nodes[i] = Rec::Absorbing { saved: saved_of(runs)?, fusion: f };
                    }
                    Unit::Manual => {
                        values[i] = outs;
                        nodes[i] = Rec::Manual { saved: saved_of(runs)? };
                    }
                    Unit::Fallback => {
                        values[i] = outs;
                        let runs = runs
                            .into_iter()
                            .map(|r| match r {
                                RunRec::Fallback(f) => Ok(f),
                                _ => candle_core::bail!("internal: an autograd run recorded no graph"),
                            })
                            .collect::<Result<_>>()?;
                        nodes[i] = Rec::Fallback { runs };
                    }
                    Unit::Plain => values[i] = outs,
                }
            }
            let out_grad = match scored_here {
                Some(s) => {
                    let out = fetch(g.output, &x, &states, &values);
                    let mut grads = Vec::with_capacity(trials);
                    for (p, total) in totals.iter_mut().enumerate() {
                        let (value, grad) = loss(p, s, &lay.part(out, p)?)?;
                        *total += value;
                        grads.push(grad);
                    }
                    Some(lay.join(grads)?)
                }
                None => None,
            };
            let next: Vec<Val> = g.next_states.iter().map(|s| fetch(*s, &x, &states, &values).clone()).collect();
            if next.iter().any(Val::is_split) {
                candle_core::bail!("a state takes a value shared by the whole batch; such a model trains unpacked");
            }
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
                per_trial,
                state_req: std::mem::replace(&mut state_req, next_req),
                node_req,
                out_grad,
            });
            if next_scored.peek().is_none() {
                break; // nothing after the last scored step matters
            }
        }
        drop(states);

        let mut param_grads: Vec<Vec<ParamGrad>> =
            (0..trials).map(|_| g.params.iter().map(|_| ParamGrad::default()).collect()).collect();
        // d loss / d (state value at the start of the step after the current one).
        let mut carry: Vec<Option<Val>> = vec![None; g.states.len()];
        while let Some(rec) = recs.pop() {
            let mut g_nodes: Vec<Vec<Option<Val>>> = g.nodes.iter().map(|n| vec![None; n.outputs.len()]).collect();
            let mut g_states: Vec<Option<Val>> = vec![None; g.states.len()];
            let mut add = |s: Source, grad: Val, g_nodes: &mut Vec<Vec<Option<Val>>>| -> Result<()> {
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
                if matches!(rec.nodes[i], Rec::Skipped) {
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
                // The outputs the op put out (a chain's: the producer's, then the consumer's).
                let outputs: Cow<[Val]> = match consumer {
                    Some(c) => {
                        grads.extend(std::mem::take(&mut g_nodes[c]));
                        Cow::Owned(rec.values[i].iter().chain(&rec.values[c]).cloned().collect())
                    }
                    None => Cow::Borrowed(&rec.values[i][..]),
                };
                let inputs: Vec<&Val> = sources.iter().map(|s| fetch(*s, &rec.x, &rec.states, &rec.values)).collect();
                let runs = if rec.per_trial[i] { trials } else { 1 };
                // Each run's gradient of each input.
                let mut input_grads: Vec<Vec<Option<Tensor>>> = vec![Vec::with_capacity(runs); sources.len()];
                for r in 0..runs {
                    let part = |v: &Val| if rec.per_trial[i] { lay.part(v, r) } else { v.joint().cloned() };
                    let p = if rec.per_trial[i] { r } else { 0 };
                    let ins: Vec<Tensor> = inputs.iter().map(|v| part(v)).collect::<Result<_>>()?;
                    let outs: Vec<Tensor> = outputs.iter().map(part).collect::<Result<_>>()?;
                    let gs: Vec<Option<Tensor>> =
                        grads.iter().map(|g| g.as_ref().map(part).transpose()).collect::<Result<_>>()?;
                    let mut local: Vec<ParamGrad> =
                        param_ids.iter().map(|&q| std::mem::take(&mut param_grads[p][q])).collect();
                    let b = UnitBackward {
                        i,
                        node,
                        ins: &ins,
                        outs: &outs,
                        grads: &gs,
                        needs: &needs,
                        member: &members[p],
                    };
                    let got = self.backward_unit(&rec.nodes[i], r, &b, &param_ids, &mut local)?;
                    for (k, &q) in param_ids.iter().enumerate() {
                        param_grads[p][q] = std::mem::take(&mut local[k]);
                    }
                    for (k, grad) in got.into_iter().enumerate().take(sources.len()) {
                        input_grads[k].push(grad);
                    }
                }
                for (((s, parts), &need), input) in sources.iter().zip(input_grads).zip(&needs).zip(&inputs) {
                    if !need || parts.iter().all(Option::is_none) {
                        continue;
                    }
                    let grad = match rec.per_trial[i] {
                        false => parts.into_iter().next().flatten().map(Val::Joint),
                        true => {
                            let filled = parts
                                .into_iter()
                                .enumerate()
                                .map(|(p, g)| match g {
                                    Some(g) => Ok(g),
                                    None => lay.part(input, p)?.zeros_like(),
                                })
                                .collect::<Result<Vec<_>>>()?;
                            Some(lay.join(filled)?)
                        }
                    };
                    if let Some(grad) = grad {
                        add(*s, grad, &mut g_nodes)?;
                    }
                }
            }
            carry = g_states;
        }
        // The learned initial states were broadcast over each trial's batch.
        for (s, grad) in g.states.iter().zip(carry) {
            if let (StateInit::Learned(q), Some(grad)) = (&s.init, grad) {
                for (p, grads) in param_grads.iter_mut().enumerate() {
                    grads[*q].add_batch_sum(&lay.part(&grad, p)?)?;
                }
            }
        }
        totals
            .into_iter()
            .zip(param_grads)
            .map(|(total, grads)| {
                let grads = grads
                    .into_iter()
                    .zip(&g.params)
                    .map(|(pg, spec)| pg.into_tensor(spec.shape.clone()))
                    .collect::<Result<_>>()?;
                Ok((total, grads))
            })
            .collect()
    }

    /// Every state's value at the start of a sequence, each trial's over its batch.
    fn packed_initial_states(&self, members: &[Member<'_>], lay: Layout) -> Result<Vec<Val>> {
        let per_trial: Vec<Vec<Tensor>> = members
            .iter()
            .map(|m| self.initial_states(m.weights, lay.batch)?.iter().map(|s| s.contiguous()).collect())
            .collect::<Result<_>>()?;
        (0..self.graph.states.len())
            .map(|j| lay.join(per_trial.iter().map(|states| states[j].clone()).collect()))
            .collect()
    }

    /// Runs `unit` at node `i` once, on `ins` with `member`'s parameters `param_ids`: the
    /// outputs (contiguous; a chain's: the producer's, then the consumer's) and what its
    /// backward needs.
    fn forward_unit(
        &self,
        unit: Unit,
        i: usize,
        ins: &[&Tensor],
        needs: &[bool],
        param_ids: &[usize],
        member: &Member<'_>,
    ) -> Result<(Vec<Tensor>, RunRec)> {
        let contiguous = |outs: Vec<Tensor>| outs.iter().map(|o| o.contiguous()).collect::<Result<Vec<_>>>();
        let params: Vec<&Tensor> = param_ids.iter().map(|&q| &member.weights[q]).collect();
        Ok(match unit {
            Unit::Absorb(f) | Unit::Chain(f) => {
                let (outs, saved) = self.fusions[f].op.forward_train(ins, &params)?;
                (contiguous(outs)?, RunRec::Saved(saved))
            }
            Unit::Plain => (contiguous(self.ops[i].forward(ins, &params)?)?, RunRec::Nothing),
            Unit::Manual => {
                let Some(manual) = self.ops[i].manual() else {
                    candle_core::bail!("internal: node {i} has no manual forward")
                };
                let (outs, saved) = manual.forward_train(ins, &params)?;
                (contiguous(outs)?, RunRec::Saved(saved))
            }
            Unit::Fallback => {
                let vars: Vec<Option<Var>> = ins
                    .iter()
                    .zip(needs)
                    .map(|(t, &n)| if n && t.dtype().is_float() { Var::from_tensor(t).map(Some) } else { Ok(None) })
                    .collect::<Result<_>>()?;
                let local: Vec<&Tensor> =
                    ins.iter().zip(&vars).map(|(t, v)| v.as_ref().map_or(*t, |v| v.as_tensor())).collect();
                let params: Vec<&Tensor> = param_ids.iter().map(|&q| &member.tracked[q]).collect();
                let outputs = self.ops[i].forward(&local, &params)?;
                let values = outputs.iter().map(|o| o.detach().contiguous()).collect::<Result<_>>()?;
                (values, RunRec::Fallback(FallbackRun { vars, outputs }))
            }
        })
    }

    /// The backward of run `r` of a recorded node: the gradient of each of its inputs (the
    /// parameters' go into `local`, in `param_ids`' order).
    fn backward_unit(
        &self,
        rec: &Rec,
        r: usize,
        b: &UnitBackward<'_>,
        param_ids: &[usize],
        local: &mut [ParamGrad],
    ) -> Result<Vec<Option<Tensor>>> {
        let UnitBackward { i, node, ins, outs, grads, needs, member } = *b;
        // A manual backward (of the node's op, or of the fused op it runs) and what it saved.
        let manual: Option<(&dyn TrainOp, &SavedAny)> = match rec {
            Rec::Manual { saved } => {
                let Some(op) = self.ops[i].manual() else {
                    candle_core::bail!("internal: node {i} ran its manual forward but has no manual backward")
                };
                Some((op, &saved[r]))
            }
            Rec::FusedProducer { saved, fusion } | Rec::Absorbing { saved, fusion } => {
                Some((&*self.fusions[*fusion].op as &dyn TrainOp, &saved[r]))
            }
            _ => None,
        };
        if let Some((op, saved)) = manual {
            let params: Vec<&Tensor> = param_ids.iter().map(|&q| &member.weights[q]).collect();
            let b = Backward { inputs: ins, params: &params, outputs: outs, saved, grads, needs };
            return op.backward(&b, local);
        }
        let Rec::Fallback { runs } = rec else {
            return Ok(vec![None; node.inputs.len()]);
        };
        let FallbackRun { vars, outputs } = &runs[r];
        let mut dot: Option<Tensor> = None;
        for (o, grad) in outputs.iter().zip(grads) {
            if let Some(grad) = grad {
                let term = (o * grad)?.sum_all()?;
                dot = Some(match dot {
                    Some(d) => (d + term)?,
                    None => term,
                });
            }
        }
        let Some(dot) = dot else { return Ok(vec![None; node.inputs.len()]) };
        let store = dot.backward()?;
        for (k, &q) in node.params.iter().enumerate() {
            if let Some(pg) = store.get(member.tracked[q].as_ref()) {
                local[k].add(pg)?;
            }
        }
        // candle's gradients carry a graph back into this node's forward (`grad · rhs`):
        // detach them, or the next node's backward would flow into this one again.
        Ok(vars.iter().map(|v| v.as_ref().and_then(|v| store.get(v.as_tensor())).map(Tensor::detach)).collect())
    }
}

/// One run's operands for [`Cell::backward_unit`].
#[derive(Clone, Copy)]
struct UnitBackward<'a> {
    i: usize,
    node: &'a Node,
    ins: &'a [Tensor],
    outs: &'a [Tensor],
    grads: &'a [Option<Tensor>],
    needs: &'a [bool],
    member: &'a Member<'a>,
}

/// The saved values of a node's runs (one per trial, or one for a joint run).
fn saved_of(runs: Vec<RunRec>) -> Result<Vec<SavedAny>> {
    runs.into_iter()
        .map(|r| match r {
            RunRec::Saved(s) => Ok(s),
            _ => candle_core::bail!("internal: a manual run saved nothing"),
        })
        .collect()
}

fn fetch<'a>(s: Source, x: &'a Val, states: &'a [Val], values: &'a [Vec<Val>]) -> &'a Val {
    match s {
        Source::Input => x,
        Source::State(i) => &states[i],
        Source::Node(n, k) => &values[n][k],
    }
}

/// `slot += grad`.
fn accumulate(slot: &mut Option<Val>, grad: Val) -> Result<()> {
    *slot = Some(match (slot.take(), grad) {
        (None, grad) => grad,
        (Some(Val::Joint(old)), Val::Joint(grad)) => Val::Joint(add_tensors(old, grad)?),
        (Some(Val::Split(old)), Val::Split(grad)) if old.len() == grad.len() => {
            Val::Split(old.into_iter().zip(grad).map(|(a, b)| add_tensors(a, b)).collect::<Result<_>>()?)
        }
        _ => candle_core::bail!("internal: gradients of one value in two layouts"),
    });
    Ok(())
}

fn add_tensors(old: Tensor, grad: Tensor) -> Result<Tensor> {
    if old.dims() == grad.dims() && old.device().is_cpu() {
        with_real!(old.dtype(), T => add::<T>(&old, &grad))
    } else {
        old + grad
    }
}

/// `a + b` for two CPU tensors of the same shape, in one vectorised pass.
fn add<T: Real>(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    let (a, b) = (a.contiguous()?, b.contiguous()?);
    let (ar, br) = (Read::new(&a)?, Read::new(&b)?);
    view::tensor(map2(ar.slice::<T>()?, br.slice::<T>()?, |x, y| x + y), a.dims())
}
