//! The weights a run reads: one trial's, or each trial's of a pack. A pack runs over
//! `[T, P·B, …]`, trial `p`'s sequences at `p·B..(p+1)·B` of every `P·B` rows. This is how
//! candle's autograd (a GPU's gradients, where the tape does not run) trains a pack: a node
//! that reads no parameter runs once over every trial's rows; a node that reads parameters runs
//! once for the whole pack, its packed form
//! ([`PackedForward`](crate::prims::contract::op::PackedForward): batched products over the
//! trial axis, each parameter stacked over the trials), which every op that takes weights has.
//! Where an input does not hold every trial's rows (a value of batch 1 a trial shares), the
//! node runs once per trial on its rows with that trial's weights, and its outputs join
//! again. A value a trial shares across its batch (a learned scalar, a learned initial state)
//! is spread over its rows. The run's other arrangements (the input's nodes over all time
//! steps, the output head over all scored steps, a weight's aliases per time step) apply to a
//! pack as to one trial, so each trial computes what it computes alone; its loss is its rows'
//! alone, and one backward of the losses' sum gives each trial its own gradients.

use std::sync::{Arc, OnceLock};

use candle_core::{Result, Tensor};

use super::stacked_params::StackedParams;
use super::{Cell, StepWeights};
use crate::graph::StateInit;
use crate::prims::contract::Pack;

/// The parameters of a run.
#[derive(Clone)]
pub enum Weights {
    /// One trial's, in its cell's order.
    One(Vec<Tensor>),
    /// A pack's: each trial's, over `batch` sequences each.
    Pack { members: Vec<Vec<Tensor>>, batch: usize, stacks: Stacks },
}

/// Each parameter of a run's weights stacked over the pack's trials (`[P, ...]`): the pack's
/// own stacks where its trials hold their parameters stacked ([`StackedParams`]), else made
/// when a packed op first reads a parameter, once per run. Where each step reads its own
/// aliases of the weights (`STEP_GRADS`), each step reads its own aliases of the held stacks
/// too, and [`packed_gradients`] sums their gradients into the stack's; made stacks the steps
/// share, since a stack of aliases would cost a copy per trial and step. A made stack's
/// gradient reaches the run's own weights through the stack, a held one's is the stack's own
/// (`StepWeights` adds either to the aliases').
#[derive(Clone)]
pub struct Stacks {
    members: Arc<Vec<Vec<Tensor>>>,
    stacked: Arc<[OnceLock<Tensor>]>,
    held: Option<Arc<StackedParams>>,
    /// A time step's aliases of the held stacks (`Tensor::share_as_var`, no copy), read in
    /// their place, so that the backward keeps each step's gradient of a stack apart and
    /// [`packed_gradients`] sums them in one pass, as a trial alone does its weights'.
    step: Option<Arc<[Tensor]>>,
}

impl Stacks {
    fn new(members: &[Vec<Tensor>], held: Option<Arc<StackedParams>>) -> Stacks {
        let params = members.first().map_or(0, Vec::len);
        let stacked = (0..params).map(|_| OnceLock::new()).collect();
        Stacks { members: Arc::new(members.to_vec()), stacked, held, step: None }
    }

    /// The stacks for one time step: each held stack's alias, else these.
    fn aliased(&self) -> Stacks {
        let Some(held) = &self.held else { return self.clone() };
        let aliases = (0..held.params()).filter_map(|k| held.stack(k)).map(Tensor::share_as_var).collect();
        Stacks { step: Some(aliases), ..self.clone() }
    }

    /// Parameter `k` of every trial, stacked `[P, ...]`.
    fn get(&self, k: usize) -> Result<Tensor> {
        if let Some(step) = &self.step {
            return step
                .get(k)
                .cloned()
                .ok_or_else(|| candle_core::Error::Msg(format!("internal: parameter {k} of {} aliased", step.len())));
        }
        if let Some(held) = &self.held {
            return held.stack(k).cloned().ok_or_else(|| {
                candle_core::Error::Msg(format!("internal: parameter {k} of {} stacked", held.params()))
            });
        }
        let Some(slot) = self.stacked.get(k) else {
            candle_core::bail!("internal: parameter {k} of {}", self.stacked.len())
        };
        if let Some(t) = slot.get() {
            return Ok(t.clone());
        }
        let t = Tensor::stack(&self.members.iter().map(|w| &w[k]).collect::<Vec<_>>(), 0)?;
        Ok(slot.get_or_init(|| t).clone())
    }
}

impl Weights {
    /// One trial's weights, where the run is not a pack.
    pub fn one(&self) -> Option<&[Tensor]> {
        match self {
            Weights::One(w) => Some(w),
            Weights::Pack { .. } => None,
        }
    }

    /// The first trial's weights.
    pub fn first(&self) -> &[Tensor] {
        self.of_trial(0)
    }

    /// Trial `p`'s weights (the only trial's for one).
    pub fn of_trial(&self, p: usize) -> &[Tensor] {
        match self {
            Weights::One(w) => w,
            Weights::Pack { members, .. } => members.get(p).map_or(&[], Vec::as_slice),
        }
    }

    pub fn trials(&self) -> usize {
        match self {
            Weights::One(_) => 1,
            Weights::Pack { members, .. } => members.len(),
        }
    }

    /// A time step's aliases of every weight (`Tensor::share_as_var`, no copy), and of the
    /// stacks a pack holds its parameters in.
    pub fn aliased(&self) -> Weights {
        let alias = |w: &Vec<Tensor>| w.iter().map(Tensor::share_as_var).collect();
        match self {
            Weights::One(w) => Weights::One(alias(w)),
            Weights::Pack { members, batch, stacks } => {
                Weights::Pack { members: members.iter().map(alias).collect(), batch: *batch, stacks: stacks.aliased() }
            }
        }
    }

    /// A time step's aliases of the held stacks ([`Weights::aliased`]).
    pub(super) fn stack_aliases(&self) -> Option<&Arc<[Tensor]>> {
        match self {
            Weights::Pack { stacks, .. } => stacks.step.as_ref(),
            Weights::One(_) => None,
        }
    }

    /// A pack's weights: `members`, each trial's in its cell's order, over `batch` sequences
    /// each; `held`, the stacks the trials' parameters are views of, where they are.
    fn pack(members: Vec<Vec<Tensor>>, batch: usize, held: Option<Arc<StackedParams>>) -> Weights {
        let stacks = Stacks::new(&members, held);
        Weights::Pack { members, batch, stacks }
    }

    /// The stacks the trials' parameters are views of, where they are.
    pub(super) fn held_stacks(&self) -> Option<&Arc<StackedParams>> {
        match self {
            Weights::Pack { stacks, .. } => stacks.held.as_ref(),
            Weights::One(_) => None,
        }
    }

    /// Parameter `k` of every trial of the run, stacked `[P, ...]` (for one trial, `[1, ...]`).
    fn stacked(&self, k: usize) -> Result<Tensor> {
        match self {
            Weights::One(w) => w[k].unsqueeze(0),
            Weights::Pack { stacks, .. } => stacks.get(k),
        }
    }
}

impl Cell {
    /// The outputs of a pack at the `scored` steps of `inputs` (`[T, P·B, …]`), stacked
    /// `[S, P·B, out]`, on the trials' tracked weights (`members`, each in this cell's order;
    /// `held`, the stacks they are views of, where they are: [`Cell::shared_stacks`]), and the
    /// weights each trial's steps read, for [`packed_gradients`].
    pub fn run_packed_for_gradients(
        &self,
        members: Vec<Vec<Tensor>>,
        held: Option<Arc<StackedParams>>,
        inputs: &Tensor,
        scored: &[usize],
    ) -> Result<(Tensor, Vec<StepWeights>)> {
        let (trials, rows) = (members.len(), inputs.dim(1)?);
        if trials == 0 || rows % trials != 0 || held.as_ref().is_some_and(|h| h.trials() != trials) {
            candle_core::bail!("internal: a pack of {trials} trials over {rows} sequences");
        }
        self.run_aliasing(Weights::pack(members, rows / trials, held), inputs, scored)
    }

    /// Every state's value at the start of a sequence, `[rows, …]`: each trial's over its
    /// batch, joined for a pack.
    pub(super) fn initial_states_of(&self, weights: &Weights, rows: usize) -> Result<Vec<Tensor>> {
        match weights {
            Weights::One(w) => self.initial_states(w, rows),
            Weights::Pack { members, batch, stacks: Stacks { held: Some(held), .. } } => {
                self.initial_states_from_stacks(held, members.first().map_or(&[], Vec::as_slice), *batch)
            }
            Weights::Pack { members, batch, .. } => {
                let per_trial: Vec<Vec<Tensor>> =
                    members.iter().map(|w| self.initial_states(w, *batch)).collect::<Result<_>>()?;
                (0..self.graph.states.len())
                    .map(|j| Tensor::cat(&per_trial.iter().map(|s| s[j].clone()).collect::<Vec<_>>(), 0))
                    .collect()
            }
        }
    }

    /// [`Cell::initial_states_of`] a pack that holds its parameters stacked (`first`: the first
    /// trial's weights): a learned state from its stack, each trial's row over its `batch` rows,
    /// so that its gradient reaches the stack as the packed ops' do.
    fn initial_states_from_stacks(&self, held: &StackedParams, first: &[Tensor], batch: usize) -> Result<Vec<Tensor>> {
        let trials = held.trials();
        // The states that are no parameter's, as the first trial's over every row.
        let shared = self.initial_states(first, trials * batch)?;
        self.graph
            .states
            .iter()
            .zip(shared)
            .map(|(state, value)| match state.init {
                StateInit::Learned(p) => {
                    let Some(stack) = held.stack(p) else {
                        candle_core::bail!("internal: a learned state of parameter {p} of {}", held.params())
                    };
                    let mut spread = vec![trials, batch];
                    spread.extend(&state.shape);
                    let mut rows = vec![trials * batch];
                    rows.extend(&state.shape);
                    stack.unsqueeze(1)?.broadcast_as(spread)?.reshape(rows)
                }
                _ => Ok(value),
            })
            .collect()
    }

    /// Node `i` on `inputs`, whose full rows are `outer` blocks of every trial's rows (`outer`
    /// time steps stacked, for the input's nodes or the output head): with one trial's weights;
    /// for a pack, once over all rows where it reads no parameter, else by its packed form
    /// where every input holds all the rows, else once per trial on its rows of each block,
    /// the outputs joined in the same order.
    pub(super) fn run_node(
        &self,
        i: usize,
        inputs: &[&Tensor],
        weights: &Weights,
        outer: usize,
    ) -> Result<Vec<Tensor>> {
        let node = &self.graph.nodes[i];
        let (members, batch) = match weights {
            Weights::Pack { members, batch, .. } if !node.params.is_empty() && members.len() > 1 => (members, *batch),
            _ => {
                let w = weights.first();
                let params: Vec<&Tensor> = node.params.iter().map(|&p| &w[p]).collect();
                return self.ops[i].forward(inputs, &params);
            }
        };
        let trials = members.len();
        let rows = outer * trials * batch;
        if let Some(packed) = self.ops[i].packed().filter(|_| inputs.iter().all(|t| t.dim(0).ok() == Some(rows))) {
            // One product over the trial axis, on the trials' rows one trial after another.
            let params: Vec<Tensor> = node.params.iter().map(|&k| weights.stacked(k)).collect::<Result<_>>()?;
            let own: Vec<Tensor> = inputs.iter().map(|t| regroup(t, outer, trials)).collect::<Result<_>>()?;
            let pack = Pack { trials, rows: outer * batch };
            let outs =
                packed.forward_packed(&own.iter().collect::<Vec<_>>(), &params.iter().collect::<Vec<_>>(), pack)?;
            return outs.iter().map(|o| regroup(o, trials, outer)).collect();
        }
        let mut parts: Vec<Vec<Tensor>> = vec![];
        for (p, w) in members.iter().enumerate() {
            let own: Vec<Tensor> = inputs
                .iter()
                .map(|t| if t.dim(0)? == rows { rows_of(t, outer, trials, p) } else { Ok((*t).clone()) })
                .collect::<Result<_>>()?;
            let params: Vec<&Tensor> = node.params.iter().map(|&k| &w[k]).collect();
            for (k, out) in self.ops[i].forward(&own.iter().collect::<Vec<_>>(), &params)?.into_iter().enumerate() {
                if parts.len() <= k {
                    parts.push(vec![]);
                }
                parts[k].push(spread(out, outer * batch)?);
            }
        }
        parts.iter().map(|outs| join(outs, outer)).collect()
    }
}

/// Trial `p`'s rows of `t` (`outer` blocks of `trials` equal parts), `[outer · B, …]`.
fn rows_of(t: &Tensor, outer: usize, trials: usize, p: usize) -> Result<Tensor> {
    let batch = t.dim(0)? / (outer * trials);
    if outer == 1 {
        return t.narrow(0, p * batch, batch);
    }
    let mut blocks = vec![outer, trials * batch];
    blocks.extend(&t.dims()[1..]);
    let mut own = vec![outer * batch];
    own.extend(&t.dims()[1..]);
    t.reshape(blocks)?.narrow(1, p * batch, batch)?.contiguous()?.reshape(own)
}

/// `t`'s rows, `[a · b · R, …]` as `a` blocks of `b` parts, regrouped as `b` blocks of `a`
/// parts: from a pack's block by block order (`outer` time steps of every trial's rows) to
/// trial by trial (`regroup(t, outer, trials)`), and back (`regroup(t, trials, outer)`).
fn regroup(t: &Tensor, a: usize, b: usize) -> Result<Tensor> {
    if a == 1 || b == 1 {
        return Ok(t.clone());
    }
    let mut blocks = vec![a, b, t.dim(0)? / (a * b)];
    blocks.extend(&t.dims()[1..]);
    t.reshape(blocks)?.transpose(0, 1)?.contiguous()?.reshape(t.dims())
}

/// A trial's output with one row (a value of its weights alone) spread over its `rows`.
fn spread(out: Tensor, rows: usize) -> Result<Tensor> {
    match out.dim(0)? {
        1 if rows != 1 => {
            let mut dims = out.dims().to_vec();
            dims[0] = rows;
            out.broadcast_as(dims)
        }
        _ => Ok(out),
    }
}

/// The trials' outputs (`[outer · B, …]` each) joined block by block, `[outer · P · B, …]`.
fn join(outs: &[Tensor], outer: usize) -> Result<Tensor> {
    if outer == 1 {
        return Tensor::cat(outs, 0);
    }
    let blocks: Vec<Tensor> = outs
        .iter()
        .map(|o| {
            let mut dims = vec![outer, o.dim(0)? / outer];
            dims.extend(&o.dims()[1..]);
            o.reshape(dims)
        })
        .collect::<Result<_>>()?;
    let joined = Tensor::cat(&blocks, 1)?;
    let mut dims = vec![joined.dim(0)? * joined.dim(1)?];
    dims.extend(&joined.dims()[2..]);
    joined.reshape(dims)
}

/// A pack's gradients from one backward of the sum of its losses.
pub struct PackGradients {
    /// Each trial's (`None` where a parameter does not reach its trial's loss).
    pub trials: Vec<Vec<Option<Tensor>>>,
    /// Each parameter's over the whole pack, `[P, …]`, where every trial's gradient is its
    /// row of it: the trials hold their parameters stacked and only packed ops read them.
    pub stacked: Option<Vec<Option<Tensor>>>,
}

/// The gradients of `total`, the sum of the pack's losses, from one backward.
pub fn packed_gradients(weights: &[StepWeights], total: &Tensor) -> Result<PackGradients> {
    let mut store = match weights.iter().all(|w| w.steps.is_empty()) {
        true => total.backward()?,
        false => total.backward_keeping_variable_layouts()?,
    };
    let held = weights.first().and_then(|w| w.stacked.as_ref()).map(|row| Arc::clone(&row.params));
    // A held stack's gradient: its own and its time steps' aliases', summed in one pass, and
    // contiguous (also where a weight read transposed left it laid out otherwise), so that each
    // trial's row of it is a view.
    if let (Some(held), Some(first)) = (&held, weights.first()) {
        for (k, s) in (0..held.params()).filter_map(|k| Some((k, held.stack(k)?))) {
            let uses = std::iter::once(s).chain(first.stack_steps.iter().filter_map(|step| step.get(k)));
            let parts: Vec<&Tensor> = uses.filter_map(|t| store.get(t)).collect();
            // Already in place only where the stack's own gradient, contiguous, is the one part.
            let in_place = parts.len() == 1 && store.get(s).is_some_and(Tensor::is_contiguous);
            if !parts.is_empty() && !in_place {
                let g = crate::kernels::cuda::layers::sum_parts::sum(&parts)?;
                store.insert(s, g);
            }
        }
    }
    let only_rows = weights.iter().all(|w| !w.reads_own_weights(&store));
    let stacked = match held {
        Some(held) if only_rows => {
            Some((0..held.params()).map(|k| held.stack(k).and_then(|s| store.get(s).cloned())).collect())
        }
        _ => None,
    };
    let trials = weights.iter().map(|w| w.gradients(&store)).collect::<Result<_>>()?;
    Ok(PackGradients { trials, stacked })
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use candle_core::{DType, Device, Tensor};

    use super::{join, packed_gradients, regroup, rows_of};
    use crate::compile::Cell;

    /// A recurrent cell, its weights read at every time step (one of them transposed).
    fn recurrent_cell(seed: u64) -> Cell {
        let program = crate::check::checked_text(
            "model m(d = 3) {
               state h = zeros(d)
               step x { h = tanh(linear(h, d) + linear(x, d))  out linear(h, output_size) }
             }
             experiment e { task randomSequence(input = 2, output = 2, length = 4) model m }",
        );
        let graph = Arc::clone(&program.experiments[0].trials[0].graph);
        Cell::new(graph, seed, &Device::Cpu, DType::F64).unwrap()
    }

    /// Each time step reads its own alias of the stacks, whose gradients the pack sums in one
    /// pass per parameter (as a trial alone sums its weights'): each trial's row of the sum is
    /// its gradient alone.
    #[test]
    fn a_pack_s_steps_read_their_own_aliases_of_the_stacks_and_the_gradient_sums_them() -> candle_core::Result<()> {
        // Every step scored; only the last (a weight read at one step's alias, or at none but
        // the stack itself); a run of one step (one alias).
        for (steps, scored) in [(4, vec![0, 1, 2, 3]), (4, vec![3]), (1, vec![0])] {
            let (mut a, mut b) = (recurrent_cell(1), recurrent_cell(2));
            let held = Cell::stack_parameters(&mut [&mut a, &mut b])?;
            let batch = 3;
            let inputs = Tensor::randn(0f64, 1.0, (steps, 2 * batch, 2), &Device::Cpu)?;
            let members = vec![a.weights(true), b.weights(true)];
            let (out, weights) = a.run_packed_for_gradients(members, Some(Arc::clone(&held)), &inputs, &scored)?;
            assert!(weights.iter().all(|w| w.stack_steps.len() == steps), "a stack alias per step");
            let grads = packed_gradients(&weights, &out.sqr()?.sum_all()?)?;
            let stacked = grads.stacked.expect("the pack's gradients come stacked");
            for (p, cell) in [&a, &b].into_iter().enumerate() {
                let own = inputs.narrow(1, p * batch, batch)?;
                let (out, alone) = cell.run_for_gradients(&own, &scored)?;
                let alone = alone.gradients_of(&out.sqr()?.sum_all()?)?;
                for (k, (g, s)) in alone.iter().zip(&stacked).enumerate() {
                    let what = format!("{steps} steps, scored {scored:?}, trial {p}, parameter {k}");
                    let (g, s) = match (g, s) {
                        (Some(g), Some(s)) => (g, s),
                        (None, None) => continue,
                        _ => panic!("{what}: a gradient alone {} and packed {}", g.is_some(), s.is_some()),
                    };
                    let diff = (g - s.get(p)?)?.abs()?.flatten_all()?.max(0)?.to_scalar::<f64>()?;
                    assert!(diff < 1e-12, "{what}: {diff}");
                }
            }
        }
        Ok(())
    }

    /// `[outer · P · B, 2]` rows numbered in order.
    fn rows(outer: usize, trials: usize, batch: usize) -> Tensor {
        let n = (outer * trials * batch * 2) as f32;
        Tensor::arange(0f32, n, &Device::Cpu).unwrap().reshape((outer * trials * batch, 2)).unwrap()
    }

    #[test]
    fn regrouping_puts_each_trial_s_rows_together_and_back() {
        let (outer, trials, batch) = (3, 2, 2);
        let t = rows(outer, trials, batch);
        let by_trial = regroup(&t, outer, trials).unwrap();
        for p in 0..trials {
            let own = by_trial.narrow(0, p * outer * batch, outer * batch).unwrap();
            let expected = rows_of(&t, outer, trials, p).unwrap();
            assert_eq!(own.to_vec2::<f32>().unwrap(), expected.to_vec2::<f32>().unwrap(), "trial {p}");
        }
        let parts: Vec<Tensor> =
            (0..trials).map(|p| by_trial.narrow(0, p * outer * batch, outer * batch).unwrap()).collect();
        assert_eq!(join(&parts, outer).unwrap().to_vec2::<f32>().unwrap(), t.to_vec2::<f32>().unwrap());
        let back = regroup(&by_trial, trials, outer).unwrap();
        assert_eq!(back.to_vec2::<f32>().unwrap(), t.to_vec2::<f32>().unwrap());
    }
}
