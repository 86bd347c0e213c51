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
use smallvec::{SmallVec, smallvec};

use super::Cell;
use crate::graph::{Source, StateInit, StepGraph};
use crate::kernels::cpu::elementwise::map2;
use crate::kernels::cpu::real::Real;
use crate::kernels::cpu::view::{self, Read};
use crate::prims::contract::backward::with_real;
use crate::prims::contract::{Backward, ParamGrad, SavedAny, TrainOp};
use crate::prims::fusion::{Fusion, Joint};

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

/// A node's runs at one time step: one per trial of a pack, or one over all of them. Inline
/// for one, so that a trial trained alone allocates nothing for it.
type Runs<T> = SmallVec<[T; 1]>;

/// A node's operands, parameters or input flags: a few, kept inline (the tape handles
/// thousands of nodes per training step).
type Few<T> = SmallVec<[T; 4]>;

/// How a node (or the fused op it runs) was recorded at one time step.
enum Rec {
    /// Not run (feeds neither the state nor, at this step, the output), or no gradient
    /// can flow through it.
    Skipped,
    Manual {
        saved: Runs<SavedAny>,
    },
    /// Run with a later node as one fused op (`Cell::fusions[fusion]`).
    FusedProducer {
        saved: Runs<SavedAny>,
        fusion: usize,
    },
    /// Computed by a fused op run at another node (the producer of a chain, or the consumer
    /// that absorbs it); its gradient is handled there.
    FusedConsumer,
    /// Run as one fused op with the producer it absorbs (`Cell::fusions[fusion]`, a
    /// [`Joint::Absorb`]); its inputs are the fusion's `absorbed_sources`.
    Absorbing {
        saved: Runs<SavedAny>,
        fusion: usize,
    },
    /// Candle's autograd: the input `Var`s and the outputs with their local graph.
    Fallback {
        runs: Runs<FallbackRun>,
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
        let trials = members.len().max(1);
        let rows = inputs.dim(1)?;
        if rows % trials != 0 {
            candle_core::bail!("internal: a pack of {trials} trials over {rows} sequences");
        }
        let tape = Tape { cell: self, members, lay: Layout { trials, batch: rows / trials } };
        let (recs, totals) = tape.record(inputs, scored, loss)?;
        let param_grads = tape.backward(recs)?;
        tape.gradients(totals, param_grads)
    }
}

/// One training pass of a cell over a pack: the forward recorded time step by time step
/// ([`Tape::record`]), then the backward over the records in reverse ([`Tape::backward`]).
struct Tape<'a> {
    cell: &'a Cell,
    members: &'a [Member<'a>],
    lay: Layout,
}

/// What a node runs at a time step, on which inputs, with which parameters.
struct UnitPlan<'g> {
    unit: Unit,
    /// Where the op's inputs come from (a shared pair's: the consumer's).
    sources: Cow<'g, [Source]>,
    /// Whether a gradient can flow into each of the node's own (or absorbed) inputs.
    needs: Few<bool>,
    /// The parameters the op reads (a fused pair's: the producer's, then the consumer's).
    param_ids: Cow<'g, [usize]>,
}

impl Tape<'_> {
    fn graph(&self) -> &StepGraph {
        &self.cell.graph
    }

    /// The forward over the time steps up to the last scored one, recorded; each trial's
    /// summed loss.
    fn record(&self, inputs: &Tensor, scored: &[usize], loss: &mut PackLoss<'_>) -> Result<(Vec<StepRec>, Vec<f64>)> {
        let g = self.graph();
        let mut states = self.initial_states()?;
        let mut state_req: Vec<bool> = g.states.iter().map(|s| matches!(s.init, StateInit::Learned(_))).collect();
        let mut totals = vec![0.0; self.lay.trials];
        let mut recs: Vec<StepRec> = Vec::with_capacity(inputs.dim(0)?);
        let mut next_scored = scored.iter().enumerate().peekable();
        for t in 0..inputs.dim(0)? {
            let scored_here = next_scored.next_if(|&(_, &st)| st == t).map(|(s, _)| s);
            let mut step = StepRec {
                x: Val::Joint(inputs.get(t)?.contiguous()?),
                states,
                values: vec![vec![]; g.nodes.len()],
                nodes: (0..g.nodes.len()).map(|_| Rec::Skipped).collect(),
                per_trial: vec![false; g.nodes.len()],
                state_req,
                node_req: vec![false; g.nodes.len()],
                out_grad: None,
            };
            for i in 0..g.nodes.len() {
                self.record_node(i, scored_here.is_some(), &mut step)?;
            }
            if let Some(s) = scored_here {
                step.out_grad = Some(self.score(s, &step, loss, &mut totals)?);
            }
            let next: Vec<Val> =
                g.next_states.iter().map(|s| fetch(*s, &step.x, &step.states, &step.values).clone()).collect();
            if next.iter().any(Val::is_split) {
                candle_core::bail!("a state takes a value shared by the whole batch; such a model trains unpacked");
            }
            state_req = g.next_states.iter().map(|s| step.req(*s)).collect();
            states = next;
            recs.push(step);
            if next_scored.peek().is_none() {
                break; // nothing after the last scored step matters
            }
        }
        Ok((recs, totals))
    }

    /// Every state's value at the start of a sequence, each trial's over its batch.
    fn initial_states(&self) -> Result<Vec<Val>> {
        let per_trial: Vec<Vec<Tensor>> = self
            .members
            .iter()
            .map(|m| self.cell.initial_states(m.weights, self.lay.batch)?.iter().map(|s| s.contiguous()).collect())
            .collect::<Result<_>>()?;
        (0..self.graph().states.len())
            .map(|j| self.lay.join(per_trial.iter().map(|states| states[j].clone()).collect()))
            .collect()
    }

    /// Each trial's loss at scored step `s` (added to `totals`) and `d loss / d output`.
    fn score(&self, s: usize, step: &StepRec, loss: &mut PackLoss<'_>, totals: &mut [f64]) -> Result<Val> {
        let out = fetch(self.graph().output, &step.x, &step.states, &step.values);
        let mut grads = Vec::with_capacity(self.lay.trials);
        for (p, total) in totals.iter_mut().enumerate() {
            let (value, grad) = loss(p, s, &self.lay.part(out, p)?)?;
            *total += value;
            grads.push(grad);
        }
        self.lay.join(grads)
    }

    /// Runs node `i` at one time step, if it runs there (`scored`: the step's output is
    /// scored), and records what its backward needs.
    fn record_node(&self, i: usize, scored: bool, step: &mut StepRec) -> Result<()> {
        let cell = self.cell;
        let run = |n: usize| scored || cell.plans.needed_for_state[n];
        if !run(i) || matches!(step.nodes[i], Rec::FusedConsumer) {
            return Ok(());
        }
        let absorbed_here = |f: &Fusion| matches!(f.joint, Joint::Absorb { .. }) && run(f.consumer);
        if cell.plans.fusions.iter().any(|f| f.producer == i && absorbed_here(f)) {
            step.nodes[i] = Rec::FusedConsumer; // its consumer runs it
            return Ok(());
        }
        let plan = self.plan_unit(i, &run, step);
        let ins: Few<&Val> = plan.sources.iter().map(|s| fetch(*s, &step.x, &step.states, &step.values)).collect();
        step.per_trial[i] = self.lay.trials > 1 && (!plan.param_ids.is_empty() || ins.iter().any(|v| v.is_split()));
        let (outs, runs) = if step.per_trial[i] {
            let mut outs: Vec<Vec<Tensor>> = vec![];
            let mut runs = Runs::with_capacity(self.lay.trials);
            for (p, m) in self.members.iter().enumerate() {
                let ins: Few<Tensor> = ins.iter().map(|v| self.lay.part(v, p)).collect::<Result<_>>()?;
                let (o, r) = self.forward_unit(i, &plan, &ins.iter().collect::<Few<_>>(), m)?;
                outs.resize_with(o.len(), Vec::new);
                for (k, o) in o.into_iter().enumerate() {
                    outs[k].push(o);
                }
                runs.push(r);
            }
            (outs.into_iter().map(|parts| self.lay.join(parts)).collect::<Result<Vec<_>>>()?, runs)
        } else {
            let ins: Few<&Tensor> = ins.iter().map(|v| v.joint()).collect::<Result<_>>()?;
            let (o, r) = self.forward_unit(i, &plan, &ins, &self.members[0])?;
            (o.into_iter().map(Val::Joint).collect(), smallvec![r])
        };
        drop(ins); // it borrows `step.values`, written below
        let mut outs = outs;
        step.nodes[i] = match plan.unit {
            Unit::Chain(f) => {
                let c = cell.plans.fusions[f].consumer;
                step.values[c] = outs.split_off(self.graph().nodes[i].outputs.len());
                step.nodes[c] = Rec::FusedConsumer;
                step.node_req[c] = true;
                Rec::FusedProducer { saved: saved_of(runs)?, fusion: f }
            }
            Unit::Absorb(f) => Rec::Absorbing { saved: saved_of(runs)?, fusion: f },
            Unit::Manual => Rec::Manual { saved: saved_of(runs)? },
            Unit::Fallback => Rec::Fallback { runs: fallback_runs(runs)? },
            Unit::Plain => Rec::Skipped,
        };
        step.values[i] = outs;
        Ok(())
    }

    /// What node `i` runs (its own op, a fused op, or the plain forward when no gradient
    /// flows through it); marks whether a gradient can flow into it.
    fn plan_unit(&self, i: usize, run: &dyn Fn(usize) -> bool, step: &mut StepRec) -> UnitPlan<'_> {
        let (cell, g) = (self.cell, self.graph());
        let node = &g.nodes[i];
        let absorbing = cell
            .plans
            .fusions
            .iter()
            .position(|f| f.consumer == i && matches!(f.joint, Joint::Absorb { .. }) && run(f.consumer));
        let absorbed = absorbing.and_then(|f| cell.plans.fusions[f].absorbed_sources(g));
        let sources: Cow<[Source]> = absorbed.map_or(Cow::Borrowed(&node.inputs[..]), Cow::Owned);
        let needs: Few<bool> = sources.iter().map(|s| step.req(*s)).collect();
        step.node_req[i] = !node.params.is_empty() || needs.iter().any(|&b| b);
        let at_producer = |f: &Fusion| matches!(f.joint, Joint::Chain | Joint::Share { .. });
        let fusion = cell.plans.fusions.iter().position(|f| f.producer == i && at_producer(f) && run(f.consumer));
        let (unit, param_ids, sources) = if let Some(f) = absorbing {
            let producer = &g.nodes[cell.plans.fusions[f].producer];
            (Unit::Absorb(f), producer.params.iter().chain(&node.params).copied().collect(), sources)
        } else if !step.node_req[i] {
            (Unit::Plain, Cow::Borrowed(&node.params[..]), sources)
        } else if let Some(f) = fusion {
            let consumer = &g.nodes[cell.plans.fusions[f].consumer];
            // A shared pair runs on the consumer's inputs (the producer's among them).
            let sources = cell.plans.fusions[f].shared_sources(g).map_or(sources, Cow::Borrowed);
            (Unit::Chain(f), node.params.iter().chain(&consumer.params).copied().collect(), sources)
        } else if cell.ops[i].manual().is_some() {
            (Unit::Manual, Cow::Borrowed(&node.params[..]), sources)
        } else {
            (Unit::Fallback, Cow::Borrowed(&node.params[..]), sources)
        };
        UnitPlan { unit, sources, needs, param_ids }
    }

    /// Runs a node's unit once, on `ins` with `member`'s parameters: the outputs (contiguous;
    /// a chain's: the producer's, then the consumer's) and what its backward needs.
    fn forward_unit(
        &self,
        i: usize,
        plan: &UnitPlan,
        ins: &[&Tensor],
        member: &Member<'_>,
    ) -> Result<(Vec<Tensor>, RunRec)> {
        let cell = self.cell;
        let contiguous = |outs: Vec<Tensor>| outs.into_iter().map(|o| o.contiguous()).collect::<Result<Vec<_>>>();
        let params: Few<&Tensor> = plan.param_ids.iter().map(|&q| &member.weights[q]).collect();
        Ok(match plan.unit {
            Unit::Absorb(f) | Unit::Chain(f) => {
                let (outs, saved) = cell.plans.fusions[f].op.forward_train(ins, &params)?;
                (contiguous(outs)?, RunRec::Saved(saved))
            }
            Unit::Plain => (contiguous(cell.ops[i].forward(ins, &params)?)?, RunRec::Nothing),
            Unit::Manual => {
                let Some(manual) = cell.ops[i].manual() else {
                    candle_core::bail!("internal: node {i} has no manual forward")
                };
                let (outs, saved) = manual.forward_train(ins, &params)?;
                (contiguous(outs)?, RunRec::Saved(saved))
            }
            Unit::Fallback => {
                let vars: Vec<Option<Var>> = ins
                    .iter()
                    .zip(&plan.needs)
                    .map(|(t, &n)| if n && t.dtype().is_float() { Var::from_tensor(t).map(Some) } else { Ok(None) })
                    .collect::<Result<_>>()?;
                let local: Vec<&Tensor> =
                    ins.iter().zip(&vars).map(|(t, v)| v.as_ref().map_or(*t, |v| v.as_tensor())).collect();
                let params: Few<&Tensor> = plan.param_ids.iter().map(|&q| &member.tracked[q]).collect();
                let outputs = cell.ops[i].forward(&local, &params)?;
                let values = outputs.iter().map(|o| o.detach().contiguous()).collect::<Result<_>>()?;
                (values, RunRec::Fallback(FallbackRun { vars, outputs }))
            }
        })
    }

    /// The backward over the recorded time steps, last first: every trial's parameter
    /// gradients.
    fn backward(&self, mut recs: Vec<StepRec>) -> Result<Vec<Vec<ParamGrad>>> {
        let g = self.graph();
        let mut param_grads: Vec<Vec<ParamGrad>> =
            (0..self.lay.trials).map(|_| g.params.iter().map(|_| ParamGrad::default()).collect()).collect();
        // d loss / d (state value at the start of the step after the current one).
        let mut carry: Vec<Option<Val>> = vec![None; g.states.len()];
        while let Some(rec) = recs.pop() {
            let mut grads = Grads {
                nodes: g.nodes.iter().map(|n| vec![None; n.outputs.len()]).collect(),
                states: vec![None; g.states.len()],
            };
            for (i, s) in g.next_states.iter().enumerate() {
                if let Some(grad) = carry[i].take() {
                    grads.add(*s, grad)?;
                }
            }
            if let Some(grad) = rec.out_grad.clone() {
                grads.add(g.output, grad)?;
            }
            for i in (0..g.nodes.len()).rev() {
                self.backward_node(i, &rec, &mut grads, &mut param_grads)?;
            }
            carry = grads.states;
        }
        // The learned initial states were broadcast over each trial's batch.
        for (s, grad) in g.states.iter().zip(carry) {
            if let (StateInit::Learned(q), Some(grad)) = (&s.init, grad) {
                for (p, grads) in param_grads.iter_mut().enumerate() {
                    grads[*q].add_batch_sum(&self.lay.part(&grad, p)?)?;
                }
            }
        }
        Ok(param_grads)
    }

    /// The backward of node `i` at the time step `rec`: takes its outputs' gradients from
    /// `grads`, adds its inputs' there and its parameters' to `param_grads`.
    fn backward_node(
        &self,
        i: usize,
        rec: &StepRec,
        grads: &mut Grads,
        param_grads: &mut [Vec<ParamGrad>],
    ) -> Result<()> {
        let (cell, g) = (self.cell, self.graph());
        let node = &g.nodes[i];
        let (fusion, consumer) = match &rec.nodes[i] {
            Rec::FusedProducer { fusion, .. } => {
                (Some(&cell.plans.fusions[*fusion]), Some(cell.plans.fusions[*fusion].consumer))
            }
            Rec::Absorbing { fusion, .. } => (Some(&cell.plans.fusions[*fusion]), None),
            Rec::Skipped | Rec::FusedConsumer => return Ok(()), // a fused consumer's producer takes its gradient
            _ => (None, None),
        };
        let consumer_has_grad = consumer.is_some_and(|c| grads.nodes[c].iter().any(Option::is_some));
        if !rec.node_req[i] || (grads.nodes[i].iter().all(Option::is_none) && !consumer_has_grad) {
            return Ok(());
        }
        let mut out_grads = std::mem::take(&mut grads.nodes[i]);
        let sources: Cow<[Source]> = match (&rec.nodes[i], fusion) {
            (Rec::Absorbing { .. }, Some(f)) => f.absorbed_sources(g).map(Cow::Owned),
            (Rec::FusedProducer { .. }, Some(f)) => f.shared_sources(g).map(Cow::Borrowed),
            _ => None,
        }
        .unwrap_or(Cow::Borrowed(&node.inputs[..]));
        let needs: Few<bool> = sources.iter().map(|s| rec.req(*s)).collect();
        // The parameters (a fused pair's: the producer's, then the consumer's).
        let param_ids: Cow<[usize]> = match (&rec.nodes[i], fusion, consumer) {
            (Rec::Absorbing { .. }, Some(f), _) => {
                Cow::Owned(g.nodes[f.producer].params.iter().chain(&node.params).copied().collect())
            }
            (_, _, Some(c)) => Cow::Owned(node.params.iter().chain(&g.nodes[c].params).copied().collect()),
            _ => Cow::Borrowed(&node.params[..]),
        };
        // The outputs the op put out (a chain's: the producer's, then the consumer's).
        let outputs: Cow<[Val]> = match consumer {
            Some(c) => {
                out_grads.extend(std::mem::take(&mut grads.nodes[c]));
                Cow::Owned(rec.values[i].iter().chain(&rec.values[c]).cloned().collect())
            }
            None => Cow::Borrowed(&rec.values[i][..]),
        };
        let inputs: Few<&Val> = sources.iter().map(|s| fetch(*s, &rec.x, &rec.states, &rec.values)).collect();
        let runs = if rec.per_trial[i] { self.lay.trials } else { 1 };
        // Each run's gradient of each input.
        let mut input_grads: Few<Runs<Option<Tensor>>> = sources.iter().map(|_| Runs::with_capacity(runs)).collect();
        for r in 0..runs {
            let part = |v: &Val| if rec.per_trial[i] { self.lay.part(v, r) } else { v.joint().cloned() };
            let p = if rec.per_trial[i] { r } else { 0 };
            let ins: Few<Tensor> = inputs.iter().map(|v| part(v)).collect::<Result<_>>()?;
            let outs: Few<Tensor> = outputs.iter().map(part).collect::<Result<_>>()?;
            let gs: Few<Option<Tensor>> =
                out_grads.iter().map(|g| g.as_ref().map(part).transpose()).collect::<Result<_>>()?;
            let mut local: Few<ParamGrad> = param_ids.iter().map(|&q| std::mem::take(&mut param_grads[p][q])).collect();
            let b = UnitBackward { i, ins: &ins, outs: &outs, grads: &gs, needs: &needs, member: &self.members[p] };
            let got = self.backward_unit(&rec.nodes[i], r, &b, &param_ids, &mut local)?;
            for (k, &q) in param_ids.iter().enumerate() {
                param_grads[p][q] = std::mem::take(&mut local[k]);
            }
            for (k, grad) in got.into_iter().enumerate().take(sources.len()) {
                input_grads[k].push(grad);
            }
        }
        for (((s, parts), &need), input) in sources.iter().zip(input_grads).zip(&needs).zip(&inputs) {
            if need && parts.iter().any(Option::is_some) {
                grads.add(*s, self.gather(parts, input, rec.per_trial[i])?)?;
            }
        }
        Ok(())
    }

    /// An input's gradient from its runs' parts (one per trial, or one for a joint run); a
    /// trial whose run gave none contributes zeros.
    fn gather(&self, parts: Runs<Option<Tensor>>, input: &Val, per_trial: bool) -> Result<Val> {
        if !per_trial {
            return match parts.into_iter().next().flatten() {
                Some(g) => Ok(Val::Joint(g)),
                None => candle_core::bail!("internal: a joint run gave no gradient"),
            };
        }
        let filled = parts
            .into_iter()
            .enumerate()
            .map(|(p, g)| match g {
                Some(g) => Ok(g),
                None => self.lay.part(input, p)?.zeros_like(),
            })
            .collect::<Result<Vec<_>>>()?;
        self.lay.join(filled)
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
        let UnitBackward { i, ins, outs, grads, needs, member } = *b;
        let cell = self.cell;
        // A manual backward (of the node's op, or of the fused op it runs) and what it saved.
        let manual: Option<(&dyn TrainOp, &SavedAny)> = match rec {
            Rec::Manual { saved } => {
                let Some(op) = cell.ops[i].manual() else {
                    candle_core::bail!("internal: node {i} ran its manual forward but has no manual backward")
                };
                Some((op, &saved[r]))
            }
            Rec::FusedProducer { saved, fusion } | Rec::Absorbing { saved, fusion } => {
                Some((&*cell.plans.fusions[*fusion].op as &dyn TrainOp, &saved[r]))
            }
            _ => None,
        };
        if let Some((op, saved)) = manual {
            let params: Few<&Tensor> = param_ids.iter().map(|&q| &member.weights[q]).collect();
            let b = Backward { inputs: ins, params: &params, outputs: outs, saved, grads, needs };
            return op.backward(&b, local);
        }
        let Rec::Fallback { runs } = rec else {
            return Ok(vec![None; ins.len()]);
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
        let Some(dot) = dot else { return Ok(vec![None; ins.len()]) };
        let store = dot.backward()?;
        for (k, &q) in param_ids.iter().enumerate() {
            if let Some(pg) = store.get(member.tracked[q].as_ref()) {
                local[k].add(pg)?;
            }
        }
        // candle's gradients carry a graph back into this node's forward (`grad · rhs`):
        // detach them, or the next node's backward would flow into this one again.
        Ok(vars.iter().map(|v| v.as_ref().and_then(|v| store.get(v.as_tensor())).map(Tensor::detach)).collect())
    }

    /// Each trial's loss and gradients as tensors of its parameters' shapes.
    fn gradients(&self, totals: Vec<f64>, param_grads: Vec<Vec<ParamGrad>>) -> Result<Vec<TrialGrads>> {
        let params = &self.graph().params;
        totals
            .into_iter()
            .zip(param_grads)
            .map(|(total, grads)| {
                let grads = grads
                    .into_iter()
                    .zip(params)
                    .map(|(pg, spec)| pg.into_tensor(spec.shape.clone()))
                    .collect::<Result<_>>()?;
                Ok((total, grads))
            })
            .collect()
    }
}

impl StepRec {
    /// Whether a gradient can flow into the value `s` at this step.
    fn req(&self, s: Source) -> bool {
        match s {
            Source::Input => false,
            Source::State(j) => self.state_req[j],
            Source::Node(n, _) => self.node_req[n],
        }
    }
}

/// The gradients of one time step's values, summed as the backward reaches them.
struct Grads {
    nodes: Vec<Vec<Option<Val>>>,
    /// Of the states at the start of the step.
    states: Vec<Option<Val>>,
}

impl Grads {
    fn add(&mut self, s: Source, grad: Val) -> Result<()> {
        match s {
            Source::Input => Ok(()),
            Source::State(j) => accumulate(&mut self.states[j], grad),
            Source::Node(n, k) => accumulate(&mut self.nodes[n][k], grad),
        }
    }
}

/// One run's operands for [`Tape::backward_unit`].
#[derive(Clone, Copy)]
struct UnitBackward<'a> {
    i: usize,
    ins: &'a [Tensor],
    outs: &'a [Tensor],
    grads: &'a [Option<Tensor>],
    needs: &'a [bool],
    member: &'a Member<'a>,
}

/// The autograd runs of a node's runs.
fn fallback_runs(runs: Runs<RunRec>) -> Result<Runs<FallbackRun>> {
    each_run(runs, "an autograd run recorded no graph", |r| if let RunRec::Fallback(f) = r { Some(f) } else { None })
}

/// The saved values of a node's runs (one per trial, or one for a joint run).
fn saved_of(runs: Runs<RunRec>) -> Result<Runs<SavedAny>> {
    each_run(runs, "a manual run saved nothing", |r| if let RunRec::Saved(s) = r { Some(s) } else { None })
}

/// What `pick` takes from each of a node's runs, all of one kind; `missing` names a run of
/// another kind (a bug).
fn each_run<T>(runs: Runs<RunRec>, missing: &str, pick: impl Fn(RunRec) -> Option<T>) -> Result<Runs<T>> {
    runs.into_iter().map(|r| pick(r).ok_or_else(|| candle_core::Error::Msg(format!("internal: {missing}")))).collect()
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
