//! Lowering a checked [`StepGraph`] to candle: parameters become `Var`s (seeded per name), and
//! a [`Cell`] runs the graph's nodes in order at every time step of a batch of sequences.
//! Training differentiates a run either with candle's autograd ([`Cell::run`] on tracked
//! weights, then `backward`) or with memctl's own reverse mode ([`Cell::train_grads`], the
//! fast path on the CPU; see [`tape`]).

mod head;
mod hoist;
mod lerp;
pub mod packed_run;
pub mod passes;
pub mod stacked_params;
pub mod tape;

use std::sync::Arc;

use candle_core::backprop::GradStore;
use candle_core::{DType, Device, Result, Tensor, Var};

use self::hoist::HoistedValues;
use self::lerp::GatedWrite;
pub use self::packed_run::Weights;
use crate::graph::{Node, Source, StateInit, StepGraph};
use crate::prims::contract::{Op, init};

/// A model ready to run: its graph, each node's op, and its parameters on one device.
pub struct Cell {
    graph: Arc<StepGraph>,
    /// The op of each node, lowered from its checked call.
    ops: Vec<Arc<dyn Op>>,
    vars: Vec<Var>,
    /// `identity(…)`-style fixed initial states, already on the device.
    fixed_states: Vec<Option<Tensor>>,
    /// What the rewrite passes planned for the model ([`passes`]).
    plans: passes::Plans,
    /// Where the parameters are views of a pack's stacked ones ([`stacked_params`]).
    stacked: Option<stacked_params::StackedRow>,
}

impl Cell {
    /// Creates the parameters, deterministically from `seed` (see [`init`]).
    pub fn new(graph: Arc<StepGraph>, seed: u64, device: &Device, dtype: DType) -> Result<Cell> {
        let ops = graph.nodes.iter().map(lower).collect::<Result<Vec<_>>>()?;
        let mut vars = vec![];
        for p in &graph.params {
            let values = init::values(&p.init, p.numel(), &mut init::param_rng(seed, &p.name));
            let t = Tensor::from_vec(values, p.shape.clone(), &Device::Cpu)?.to_dtype(dtype)?.to_device(device)?;
            vars.push(Var::from_tensor(&t)?);
        }
        let fixed_states = graph
            .states
            .iter()
            .map(|s| match &s.init {
                StateInit::Fixed(v) => Tensor::from_vec(v.clone(), s.shape.clone(), &Device::Cpu)
                    .and_then(|t| t.to_dtype(dtype))
                    .and_then(|t| t.to_device(device))
                    .map(Some),
                _ => Ok(None),
            })
            .collect::<Result<Vec<_>>>()?;
        let plans = passes::Plans::of(&graph);
        Ok(Cell { graph, ops, vars, fixed_states, plans, stacked: None })
    }

    pub fn graph(&self) -> &StepGraph {
        &self.graph
    }

    pub fn vars(&self) -> &[Var] {
        &self.vars
    }

    /// The parameters' dtype.
    pub fn dtype(&self) -> DType {
        self.vars.first().map_or(DType::F32, |v| v.dtype())
    }

    /// The parameters as tensors: tracked for training, detached (no autograd graph) for evaluation.
    pub fn weights(&self, track: bool) -> Vec<Tensor> {
        self.vars.iter().map(|v| if track { v.as_tensor().clone() } else { v.as_tensor().detach() }).collect()
    }

    /// Every state's value at the start of a sequence, `[batch, ...shape]`.
    pub fn initial_states(&self, weights: &[Tensor], batch: usize) -> Result<Vec<Tensor>> {
        let dtype = self.vars.first().map_or(DType::F32, |v| v.dtype());
        let device = self.vars.first().map_or(Device::Cpu, |v| v.device().clone());
        self.graph
            .states
            .iter()
            .zip(&self.fixed_states)
            .map(|(s, fixed)| {
                let mut dims = vec![batch];
                dims.extend(&s.shape);
                match (&s.init, fixed) {
                    (StateInit::Learned(p), _) => weights[*p].unsqueeze(0)?.broadcast_as(dims),
                    (_, Some(t)) => t.unsqueeze(0)?.broadcast_as(dims),
                    _ => Tensor::zeros(dims, dtype, &device),
                }
            })
            .collect()
    }

    /// Time step `t`: the next states, and the output if `want_output`. The input's nodes in
    /// `hoisted` ran already.
    fn step(
        &self,
        weights: &Weights,
        x: &Tensor,
        states: &[Tensor],
        want_output: bool,
        hoisted: &HoistedValues,
        t: usize,
    ) -> Result<(Vec<Tensor>, Option<Tensor>)> {
        let g = &self.graph;
        let runs = |i: usize| want_output || self.plans.needed_for_state[i];
        let values = self.node_values(weights, x, states, runs, hoisted, t)?;
        let next = g.next_states.iter().map(|s| fetch(*s, x, states, &values).clone()).collect();
        let out = if want_output { Some(fetch(g.output, x, states, &values).clone()) } else { None };
        Ok((next, out))
    }

    /// The outputs of the nodes that `runs` at time step `t` (none for the others): those in
    /// `hoisted` read from it, the others run.
    fn node_values(
        &self,
        weights: &Weights,
        x: &Tensor,
        states: &[Tensor],
        runs: impl Fn(usize) -> bool,
        hoisted: &HoistedValues,
        t: usize,
    ) -> Result<Vec<Vec<Tensor>>> {
        let mut values: Vec<Vec<Tensor>> = Vec::with_capacity(self.graph.nodes.len());
        let tape_kernels = weights.one().is_some_and(|w| runs_tape_kernels(x, w));
        // Gated writes as one op on candle's path (`lerp`), where its switch has it.
        let gated = !tape_kernels
            && self.plans.gated_writes.any()
            && crate::kernels::cuda::switches::used_for(x, crate::kernels::cuda::layers::lerp::LERP);
        for (i, node) in self.graph.nodes.iter().enumerate() {
            if !runs(i) || (gated && self.plans.gated_writes.deferred(i)) {
                values.push(vec![]);
                continue;
            }
            if let Some(rows) = hoisted.at(i, t)? {
                values.push(rows);
                continue;
            }
            if let Some(write) = self.plans.gated_writes.at_add(i).filter(|_| gated) {
                let out = self.gated_write(write, i, weights, |s| fetch(s, x, states, &values))?;
                values.push(vec![out]);
                continue;
            }
            let inputs: Vec<&Tensor> = node.inputs.iter().map(|s| fetch(*s, x, states, &values)).collect();
            let outputs = match self.ops[i].manual().filter(|_| tape_kernels).zip(weights.one()) {
                // As the tape runs it: contiguous operands, contiguous outputs, nothing kept.
                Some((manual, weights)) => {
                    let params: Vec<&Tensor> = node.params.iter().map(|&p| &weights[p]).collect();
                    let inputs: Vec<Tensor> = inputs.iter().map(|t| t.contiguous()).collect::<Result<_>>()?;
                    let (outputs, _saved) = manual.forward_train(&inputs.iter().collect::<Vec<_>>(), &params)?;
                    outputs.iter().map(|o| o.contiguous()).collect::<Result<_>>()?
                }
                None => self.run_node(i, &inputs, weights, 1)?,
            };
            values.push(outputs);
        }
        Ok(values)
    }

    /// Runs a batch of sequences (`inputs`: `[T, B, ...]`) and returns the outputs at the
    /// scored steps, stacked: `[S, B, out]`.
    pub fn run(&self, weights: &[Tensor], inputs: &Tensor, scored: &[usize]) -> Result<Tensor> {
        let weights = Weights::One(weights.to_vec());
        self.run_with(&weights, inputs, scored, |_| Ok(weights.clone()))
    }

    /// [`Cell::run`] on the tracked weights for candle's autograd, where every time step reads
    /// its own alias of the weights (`Tensor::share_as_var`, no copy): the backward then keeps
    /// each step's gradient of a weight apart instead of adding it to the others' (on a GPU a
    /// kernel per weight per step), and [`StepWeights::gradients`] sums them in one pass.
    /// On CUDA as `kernels::cuda::layers::sum_parts::STEP_GRADS` has it; otherwise the steps share
    /// the weights.
    pub fn run_for_gradients(&self, inputs: &Tensor, scored: &[usize]) -> Result<(Tensor, StepWeights)> {
        let (out, mut weights) = self.run_aliasing(Weights::One(self.weights(true)), inputs, scored)?;
        Ok((out, weights.swap_remove(0)))
    }

    /// The run on `weights` (tracked), each time step on its own aliases of them where
    /// `STEP_GRADS` has it ([`Cell::run_for_gradients`]); the weights each trial's steps read.
    fn run_aliasing(&self, weights: Weights, inputs: &Tensor, scored: &[usize]) -> Result<(Tensor, Vec<StepWeights>)> {
        let aliased = weights.first().first().is_some_and(|w| {
            crate::kernels::cuda::switches::used_for(w, crate::kernels::cuda::layers::sum_parts::STEP_GRADS)
        });
        let mut steps: Vec<Weights> = vec![];
        let out = self.run_with(&weights, inputs, scored, |_| {
            if !aliased {
                return Ok(weights.clone());
            }
            let step = weights.aliased();
            steps.push(step.clone());
            Ok(step)
        })?;
        let trials = weights.trials();
        let held = weights.held_stacks();
        let stack_steps: Vec<Arc<[Tensor]>> = steps.iter().filter_map(|w| w.stack_aliases().cloned()).collect();
        let of_trial = |p: usize| StepWeights {
            base: weights.of_trial(p).to_vec(),
            steps: steps.iter().map(|w| w.of_trial(p).to_vec()).collect(),
            stacked: held.map(|params| stacked_params::StackedRow { params: Arc::clone(params), row: p }),
            stack_steps: stack_steps.clone(),
        };
        Ok((out, (0..trials).map(of_trial).collect()))
    }

    /// The run, with the weights of time step `t` from `step_weights(t)` (the initial states
    /// and the batched output head read `weights`).
    fn run_with(
        &self,
        weights: &Weights,
        inputs: &Tensor,
        scored: &[usize],
        step_weights: impl FnMut(usize) -> Result<Weights>,
    ) -> Result<Tensor> {
        let stacked_bytes =
            self.plans.head.frontier_elements * scored.len() * inputs.dim(1)? * self.dtype().size_in_bytes();
        let batched = stacked_bytes <= head::STACK_LIMIT
            && crate::kernels::cuda::switches::used_on(
                inputs.device(),
                self.dtype(),
                crate::device::tuning::BATCHED_HEAD,
            );
        let hoisted = self.hoisted_values(weights, inputs, scored)?;
        let run = Run { weights, inputs, scored, hoisted: &hoisted };
        match batched {
            true => self.run_batching_head(&run, step_weights),
            false => self.run_step_by_step(&run, step_weights),
        }
    }

    /// The input's nodes run once over the time steps up to the last scored one, where
    /// `device::tuning::HOISTED_INPUTS` has it (`hoist`).
    fn hoisted_values(&self, weights: &Weights, inputs: &Tensor, scored: &[usize]) -> Result<HoistedValues> {
        let on = crate::kernels::cuda::switches::used_on(
            inputs.device(),
            self.dtype(),
            crate::device::tuning::HOISTED_INPUTS,
        );
        let Some(&last) = scored.iter().max() else { return Ok(HoistedValues::none()) };
        let bytes = self.plans.input_nodes.elements * (last + 1) * inputs.dim(1)? * self.dtype().size_in_bytes();
        if !on || !self.plans.input_nodes.any() || bytes > hoist::HOIST_LIMIT {
            return Ok(HoistedValues::none());
        }
        HoistedValues::run(&self.graph, &self.plans.input_nodes, inputs, last + 1, |n, read| {
            self.run_node(n, read, weights, last + 1)
        })
    }

    /// The run with the whole step at every scored step, the outputs stacked.
    fn run_step_by_step(&self, run: &Run, mut step_weights: impl FnMut(usize) -> Result<Weights>) -> Result<Tensor> {
        let Run { inputs, scored, hoisted, .. } = *run;
        let mut outs = Vec::with_capacity(scored.len());
        self.for_each_step(run, |t, states, want| {
            let (next, out) = self.step(&step_weights(t)?, &inputs.get(t)?, states, want, hoisted, t)?;
            outs.extend(out);
            Ok(next)
        })?;
        Tensor::stack(&outs, 0)
    }

    /// The run with the output head once over all the scored steps (`head`): the loop keeps
    /// the head's frontier at each scored step, and the head runs on it stacked, `[S·B, ...]`.
    fn run_batching_head(&self, run: &Run, mut step_weights: impl FnMut(usize) -> Result<Weights>) -> Result<Tensor> {
        let Run { weights, inputs, scored, hoisted } = *run;
        let (g, head) = (&self.graph, &self.plans.head);
        let batch = inputs.dim(1)?;
        let mut kept: Vec<Vec<Tensor>> = vec![Vec::with_capacity(scored.len()); head.frontier.len()];
        self.for_each_step(run, |t, states, want| {
            let x = inputs.get(t)?;
            let runs = |i: usize| if want { head.in_loop_when_scored[i] } else { self.plans.needed_for_state[i] };
            let values = self.node_values(&step_weights(t)?, &x, states, runs, hoisted, t)?;
            if want {
                for (k, s) in head.frontier.iter().enumerate() {
                    kept[k].push(fetch(*s, &x, states, &values).clone());
                }
            }
            Ok(g.next_states.iter().map(|s| fetch(*s, &x, states, &values).clone()).collect())
        })?;
        // Each frontier value over the scored steps as one batch, step-major. A value with a
        // batch axis of 1 in a larger batch reads only weights (a learned scalar), the same at
        // every step: it stays as it is and broadcasts.
        let stacked: Vec<Tensor> = kept
            .iter()
            .map(|steps| match steps.first() {
                Some(first) if first.dim(0)? == 1 && batch != 1 => Ok(first.clone()),
                _ => Tensor::cat(steps, 0),
            })
            .collect::<Result<_>>()?;
        let mut values: Vec<Vec<Tensor>> = vec![vec![]; g.nodes.len()];
        let read = |s: Source, values: &[Vec<Tensor>]| -> Tensor {
            match s {
                Source::Node(n, k) if !values[n].is_empty() => values[n][k].clone(),
                _ => stacked[head.frontier.iter().position(|f| *f == s).expect("the head reads its frontier")].clone(),
            }
        };
        for &i in &head.nodes {
            let node = &g.nodes[i];
            let inputs: Vec<Tensor> = node.inputs.iter().map(|s| read(*s, &values)).collect();
            let inputs: Vec<&Tensor> = inputs.iter().collect();
            values[i] = self.run_node(i, &inputs, weights, scored.len())?;
        }
        let out = read(g.output, &values);
        let rows = scored.len() * batch;
        let out = if out.dim(0)? == 1 && rows != 1 {
            let mut dims = out.dims().to_vec();
            dims[0] = rows;
            out.broadcast_as(dims)?
        } else {
            out
        };
        let mut dims = vec![scored.len(), batch];
        dims.extend(&out.dims()[1..]);
        out.reshape(dims)
    }

    /// Runs `step(t, states, scored)` for each time step up to the last scored one, from the
    /// initial states, each step's returned states the next one's.
    fn for_each_step(
        &self,
        run: &Run,
        mut step: impl FnMut(usize, &[Tensor], bool) -> Result<Vec<Tensor>>,
    ) -> Result<()> {
        let Run { weights, inputs, scored, .. } = *run;
        let steps = inputs.dim(0)?;
        let mut states = self.initial_states_of(weights, inputs.dim(1)?)?;
        let mut next_scored = scored.iter().peekable();
        for t in 0..steps {
            if next_scored.peek().is_none() {
                break; // nothing after the last scored step matters
            }
            let want = next_scored.peek() == Some(&&t);
            if want {
                next_scored.next();
            }
            states = step(t, &states, want)?;
        }
        Ok(())
    }
}

/// What one run reads: the weights (the initial states and the batched output head read them),
/// the batch's inputs `[T, B, ...]`, the scored steps and the input's nodes' hoisted values.
#[derive(Clone, Copy)]
struct Run<'a> {
    weights: &'a Weights,
    inputs: &'a Tensor,
    scored: &'a [usize],
    hoisted: &'a HoistedValues,
}

/// Whether a forward runs each node's training forward (the tape's kernels, what it saves for
/// the backward dropped) in place of its candle ops: on the CPU where no gradient is taken
/// (evaluation), since the tape's kernels are the ones made fast there (vectorised exp and
/// tanh, fused passes; training on the CPU runs nothing else) and its candle ops are the
/// reference. Elsewhere, and for candle's autograd (tracked weights), the candle ops.
fn runs_tape_kernels(x: &Tensor, weights: &[Tensor]) -> bool {
    x.device().is_cpu() && !weights.iter().any(Tensor::track_op)
}

/// The weights one training run read: the parameters themselves (the initial states read
/// them, but in a pack that holds its parameters stacked), where [`Cell::run_for_gradients`]
/// aliased them each time step's aliases, and in such a pack the trial's row of the stacks.
pub struct StepWeights {
    base: Vec<Tensor>,
    steps: Vec<Vec<Tensor>>,
    stacked: Option<stacked_params::StackedRow>,
    /// Each time step's aliases of the pack's stacks, where it holds its parameters stacked.
    stack_steps: Vec<Arc<[Tensor]>>,
}

impl StepWeights {
    /// Each parameter's gradient of `loss` (`None` where no use of it reached the loss), by
    /// candle's backward, with the aliased weights' gradients kept as laid out
    /// (`Tensor::backward_keeping_variable_layouts`: no copy of a transposed one), then summed.
    pub fn gradients_of(&self, loss: &Tensor) -> Result<Vec<Option<Tensor>>> {
        // Unaliased (CUDA without `step_grads`), the step runs candle's backward as checked.
        match self.steps.is_empty() {
            true => self.gradients(&loss.backward()?),
            false => self.gradients(&loss.backward_keeping_variable_layouts()?),
        }
    }

    /// Whether a gradient in `store` reached the weights themselves or their aliases (not only
    /// a pack's stacks).
    fn reads_own_weights(&self, store: &GradStore) -> bool {
        self.base.iter().chain(self.steps.iter().flatten()).any(|w| store.get(w).is_some())
    }

    /// Each parameter's gradient in `store` (`None` where no use of it reached the loss): the
    /// sum of its uses' gradients, in one pass (`kernels::cuda::layers::sum_parts`), contiguous.
    fn gradients(&self, store: &GradStore) -> Result<Vec<Option<Tensor>>> {
        (0..self.base.len())
            .map(|p| {
                let uses = std::iter::once(&self.base[p]).chain(self.steps.iter().map(|step| &step[p]));
                let mut parts: Vec<Tensor> = uses.filter_map(|w| store.get(w).cloned()).collect();
                if let Some(held) = &self.stacked
                    && let Some(g) = held.params.stack(p).and_then(|s| store.get(s))
                {
                    // The trial's row of the stack's gradient: a view, no copy.
                    parts.push(g.get(held.row)?);
                }
                if parts.is_empty() {
                    return Ok(None);
                }
                crate::kernels::cuda::layers::sum_parts::sum(&parts.iter().collect::<Vec<_>>()).map(Some)
            })
            .collect()
    }
}

/// The op of a checked call. The checker accepted these arguments, so a refusal here (or a
/// different number of parameters than the graph holds for the call) is a bug in memctl.
fn lower(node: &Node) -> Result<Arc<dyn Op>> {
    let internal = |what: String| candle_core::Error::Msg(format!("internal error in memctl: {what}"));
    let prim = crate::prims::get(node.prim).ok_or_else(|| internal(format!("no primitive `{}`", node.prim)))?;
    let declared = prim.infer(&node.args).map_err(|e| internal(format!("`{}` at {}: {e}", node.prim, node.path)))?;
    if declared.params.len() != node.params.len() {
        return Err(internal(format!(
            "`{}` at {} declares {} parameters, the graph holds {}",
            node.prim,
            node.path,
            declared.params.len(),
            node.params.len()
        )));
    }
    prim.lower(&node.args).map_err(|e| internal(format!("`{}` at {}: {e}", node.prim, node.path)))
}

impl Cell {
    /// The gated write whose addition is node `add`: one fused op where its operands fit, else
    /// its three primitives in turn (the subtraction and the product were deferred to here).
    fn gated_write<'v>(
        &self,
        write: &GatedWrite,
        add: usize,
        weights: &Weights,
        fetch: impl Fn(Source) -> &'v Tensor,
    ) -> Result<Tensor> {
        let (a, b, w) = (fetch(write.a), fetch(write.b), fetch(write.w));
        if crate::kernels::cuda::layers::lerp::fits(a, b, w) {
            return crate::kernels::cuda::layers::lerp::lerp(a, b, w);
        }
        let run = |n: usize, inputs: [&Tensor; 2]| -> Result<Tensor> {
            let mut outputs = self.run_node(n, &inputs, weights, 1)?;
            Ok(outputs.swap_remove(0))
        };
        let difference = run(write.sub, [b, a])?;
        let product = run(write.mul, if write.mul_w_first { [w, &difference] } else { [&difference, w] })?;
        run(add, if write.add_a_first { [a, &product] } else { [&product, a] })
    }
}

fn fetch<'a>(s: Source, x: &'a Tensor, states: &'a [Tensor], values: &'a [Vec<Tensor>]) -> &'a Tensor {
    match s {
        Source::Input => x,
        Source::State(i) => &states[i],
        Source::Node(n, k) => &values[n][k],
    }
}

/// Which nodes `roots` depend on.
fn dependencies(graph: &StepGraph, roots: &[Source]) -> Vec<bool> {
    let mut needed = vec![false; graph.nodes.len()];
    let mut stack: Vec<usize> =
        roots.iter().filter_map(|s| if let Source::Node(n, _) = s { Some(*n) } else { None }).collect();
    while let Some(n) = stack.pop() {
        if needed[n] {
            continue;
        }
        needed[n] = true;
        stack.extend(graph.nodes[n].inputs.iter().filter_map(
            |s| {
                if let Source::Node(m, _) = s { Some(*m) } else { None }
            },
        ));
    }
    needed
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cell(spec: &str) -> Cell {
        cell_of(spec, DType::F32)
    }

    fn cell_of(spec: &str, dtype: DType) -> Cell {
        let program = crate::check::checked_text(spec);
        let trial = &program.experiments[0].trials[0];
        Cell::new(trial.graph.clone(), 0, &Device::Cpu, dtype).unwrap()
    }

    /// Per-step aliases of the weights give the gradients of weights shared by every step,
    /// summed: a learned initial state's use and every time step's count.
    #[test]
    fn gradients_through_per_step_aliases_equal_those_of_shared_weights() -> Result<()> {
        let c = cell_of(
            r#"
            model m() {
              state M = learned(3, 3)
              step x {
                M = itemWrite(M, linear(x, 3))
                out linear(flatten(M), output_size)
              }
            }
            experiment e { task randomSequence(input = 2, output = 2, length = 4) model m }
            "#,
            DType::F64,
        );
        let inputs = Tensor::randn(0f64, 1.0, (4, 2, 2), &Device::Cpu)?;
        let scored = [1, 3];
        let shared = c.run(&c.weights(true), &inputs, &scored)?.sqr()?.sum_all()?.backward()?;
        let (out, weights) = c.run_for_gradients(&inputs, &scored)?;
        assert_eq!(weights.steps.len(), 4, "every time step has its aliases");
        let aliased = weights.gradients_of(&out.sqr()?.sum_all()?)?;
        for (v, g) in c.vars().iter().zip(&aliased) {
            let expected = shared.get(v.as_tensor()).expect("every weight reaches the output");
            let g = g.as_ref().expect("a gradient for every weight");
            assert!(g.is_contiguous());
            let difference = g.sub(expected)?.abs()?.max_all()?.to_scalar::<f64>()?;
            assert!(difference < 1e-12, "{difference}");
        }
        Ok(())
    }

    /// Runs `check` on a cell of each model family of `doctor --check` (f64) with a batch of 4
    /// of its task: the family's name, the cell, the inputs (floats as f64) and the scored steps.
    fn for_each_family(mut check: impl FnMut(&str, &Cell, &Tensor, &[usize]) -> Result<()>) -> Result<()> {
        for trial in crate::bench::device_check::trials().unwrap() {
            let c = Cell::new(trial.graph.clone(), 3, &Device::Cpu, DType::F64)?;
            let mut data = trial.task.data(crate::train::data_seed(1), &Device::Cpu)?;
            let batch = data.train_batch(4)?;
            let inputs = match batch.inputs.dtype().is_float() {
                true => batch.inputs.to_dtype(DType::F64)?,
                false => batch.inputs.clone(),
            };
            check(&trial.config.experiment, &c, &inputs, &batch.scored)?;
        }
        Ok(())
    }

    /// Every model family of `doctor --check`, in f64 on a batch of its task: the output head
    /// batched over the scored steps, the input's nodes run once over the time steps, and
    /// both, give the outputs and the gradients of running every node at each step.
    #[test]
    fn batching_the_head_and_hoisting_the_input_s_nodes_change_no_output_and_no_gradient() -> Result<()> {
        for_each_family(|name, c, inputs, scored| {
            assert!(!c.plans.head.nodes.is_empty(), "{name}: every family has an output head");
            assert!(c.plans.input_nodes.any(), "{name}: every family reads its input through a layer");
            let w = Weights::One(c.weights(true));
            let hoisted = c.hoisted_values(&w, inputs, scored)?;
            let none = HoistedValues::none();
            let same = |_| Ok(w.clone());
            let (plain, hoisting) = (
                Run { weights: &w, inputs, scored, hoisted: &none },
                Run { weights: &w, inputs, scored, hoisted: &hoisted },
            );
            let reference = c.run_step_by_step(&plain, same)?;
            let variants = [
                ("the head batched", c.run_batching_head(&plain, same)?),
                ("the input's nodes hoisted", c.run_step_by_step(&hoisting, same)?),
                ("both", c.run_batching_head(&hoisting, same)?),
            ];
            let gradients = |out: &Tensor| -> Result<Vec<Tensor>> {
                let grads = out.sqr()?.sum_all()?.backward()?;
                Ok(c.vars().iter().filter_map(|v| grads.get(v.as_tensor()).cloned()).collect())
            };
            let largest = |a: &Tensor, b: &Tensor| -> Result<f64> {
                let scale = a.abs()?.max_all()?.to_scalar::<f64>()?.max(1e-30);
                Ok(a.sub(b)?.abs()?.max_all()?.to_scalar::<f64>()? / scale)
            };
            let expected = gradients(&reference)?;
            for (variant, out) in &variants {
                assert_eq!(reference.dims(), out.dims(), "{name}, {variant}");
                assert!(largest(&reference, out)? < 1e-12, "{name}, {variant}: outputs");
                let got = gradients(out)?;
                assert_eq!(expected.len(), got.len(), "{name}, {variant}: the same parameters reach the output");
                for (a, b) in expected.iter().zip(&got) {
                    assert!(largest(a, b)? < 1e-10, "{name}, {variant}: gradients");
                }
            }
            Ok(())
        })
    }

    /// Evaluation on the CPU (detached weights) runs the tape's training forwards; with tracked
    /// weights the candle ops run. Both give the same outputs for every model family of
    /// `doctor --check` (f64), and the detached run does use the tape's kernels.
    #[test]
    fn evaluation_with_the_tape_s_kernels_gives_the_candle_ops_outputs() -> Result<()> {
        for_each_family(|name, c, inputs, scored| {
            let (detached, tracked) = (c.weights(false), c.weights(true));
            assert!(runs_tape_kernels(inputs, &detached) && !runs_tape_kernels(inputs, &tracked), "{name}");
            let candle_ops = c.run(&tracked, inputs, scored)?;
            let tape_kernels = c.run(&detached, inputs, scored)?;
            assert_eq!(candle_ops.dims(), tape_kernels.dims(), "{name}");
            let scale = candle_ops.abs()?.max_all()?.to_scalar::<f64>()?.max(1e-30);
            let difference = candle_ops.sub(&tape_kernels)?.abs()?.max_all()?.to_scalar::<f64>()? / scale;
            assert!(difference < 1e-10, "{name}: outputs differ by {difference:e}");
            Ok(())
        })
    }

    #[test]
    fn a_run_whose_hoisted_outputs_would_pass_the_limit_runs_the_input_s_nodes_at_each_step() -> Result<()> {
        // 4 096 f32 values an example a step: 64 steps of 128 sequences hold 128 MiB, 256
        // steps 512 MiB.
        let c = cell(
            r#"
            model m() {
              state h = zeros(2)
              step x { h = tanh(linear(linear(x, 4096), 2) + h)  out h }
            }
            experiment e { task randomSequence(input = 2, output = 2, length = 3) model m }
            "#,
        );
        let w = c.weights(false);
        let hoisted = |steps: usize| -> Result<bool> {
            let inputs = Tensor::zeros((steps, 128, 2), DType::F32, &Device::Cpu)?;
            Ok(!c.hoisted_values(&Weights::One(w.clone()), &inputs, &[steps - 1])?.is_none())
        };
        assert!(hoisted(64)?);
        assert!(!hoisted(256)?);
        Ok(())
    }

    #[test]
    fn initial_states_follow_their_initialisers() {
        let c = cell(
            r#"
            model m() {
              state S = identity(2, 2, 3)
              state H = onehot(2, 3)
              state Z = zeros(2)
              step x { out linear(x, output_size) }
            }
            experiment e { task randomSequence(input = 2, output = 2, length = 1) model m }
            "#,
        );
        let s = c.initial_states(&c.weights(false), 2).unwrap();
        // Two examples, each with two stacked 2×3 identities.
        assert_eq!(s[0].dims(), &[2, 2, 2, 3]);
        let block = [1.0f32, 0.0, 0.0, 0.0, 1.0, 0.0];
        assert_eq!(s[0].flatten_all().unwrap().to_vec1::<f32>().unwrap(), block.repeat(4));
        assert_eq!(s[1].flatten_all().unwrap().to_vec1::<f32>().unwrap(), [1.0f32, 0.0, 0.0].repeat(4));
        assert_eq!(s[2].flatten_all().unwrap().to_vec1::<f32>().unwrap(), vec![0.0f32; 4]);
    }

    #[test]
    fn outputs_of_unscored_steps_are_not_computed() {
        // The output head feeds no state, so it runs only at scored steps; the result of a run
        // is the same either way.
        let c = cell(
            r#"
            model m() {
              state h = zeros(4)
              step x { h = tanh(linear(x, 4) + h)  out linear(h, output_size) }
            }
            experiment e { task randomSequence(input = 2, output = 2, length = 3) model m }
            "#,
        );
        assert_eq!(c.plans.needed_for_state, vec![true, true, true, false]);
        let x = Tensor::ones((3, 1, 2), DType::F32, &Device::Cpu).unwrap();
        let w = c.weights(false);
        let last = c.run(&w, &x, &[2]).unwrap();
        let all = c.run(&w, &x, &[0, 1, 2]).unwrap();
        assert_eq!(last.get(0).unwrap().to_vec2::<f32>().unwrap(), all.get(2).unwrap().to_vec2::<f32>().unwrap());
    }
}
