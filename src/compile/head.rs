//! The output head: the nodes that feed the output but no state, run once over every scored
//! step after the time loop instead of at each scored step.
//!
//! A model's output head (STM's `mlp` and output `linear`, an LSTM's output `linear`) does not
//! feed the recurrence, so nothing stops it from running on all the scored steps together: the
//! loop keeps the values the head reads (its *frontier*) at each scored step, and the head then
//! runs on them stacked as one batch of `steps × batch` examples. Every op is per example (the
//! batch axis is implicit in the graph), so the results are the same; each of the head's
//! products is one larger GEMM instead of one per step, and on a GPU, where a training step is
//! bound by its number of kernels, the head's kernels forward and backward are launched once
//! instead of once a step.
//!
//! The frontier is stacked (a copy per scored step, as the outputs were before), so where the
//! head starts matters when the frontier is large: then head nodes that shrink it stay in the
//! loop (STM's `distill` reduces the relational memory, `nq × d × d` values an example, to
//! 64, so the loop keeps `distill` and the frontier is its output). A small frontier is left
//! as it is, even where the loop could shrink it further: the head's kernels are what batching
//! saves, and a few hundred values an example cost little to stack. A run whose stacked
//! frontier would pass [`STACK_LIMIT`] (a long evaluation of a large batch) runs the head at
//! each step instead.

use crate::graph::{Source, StepGraph, Ty};

/// A frontier of more values an example than this is worth shrinking by running more of the
/// head in the loop: about what a GPU copies in the time of the few kernel launches a head
/// node saves a step (an STM of d = 96 has 73 728 values in its relational memory).
const LARGE_FRONTIER: usize = 4096;

/// The most bytes a run stacks its frontier into.
pub const STACK_LIMIT: usize = 256 << 20;

/// Where a graph's output head starts, fixed once per model.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OutputHead {
    /// The head's nodes, in evaluation order.
    pub nodes: Vec<usize>,
    /// Nodes the loop runs at a scored step: those the next state needs, and those that feed
    /// the head or the output from the loop's side.
    pub in_loop_when_scored: Vec<bool>,
    /// The values the head reads from the loop (or the output itself, where the head is
    /// empty), distinct, in a fixed order.
    pub frontier: Vec<Source>,
    /// The frontier's values per example.
    pub frontier_elements: usize,
}

impl OutputHead {
    /// The head of `graph`, given which nodes its next state needs (`needed_for_state`).
    pub fn plan(graph: &StepGraph, needed_for_state: &[bool]) -> OutputHead {
        let feeds_output = super::dependencies(graph, &[graph.output]);
        let mut in_head: Vec<bool> = (0..graph.nodes.len()).map(|n| feeds_output[n] && !needed_for_state[n]).collect();
        // While the frontier is large, move a head node into the loop, with the head nodes it
        // reads: the fewest nodes that make it small, or else the move that shrinks it most.
        loop {
            let before = frontier_elements(graph, &in_head);
            if before <= LARGE_FRONTIER {
                break;
            }
            let best = (0..graph.nodes.len())
                .filter(|&n| in_head[n])
                .map(|n| {
                    let mut moved = in_head.clone();
                    let count = move_with_head_inputs(graph, &mut moved, n);
                    (frontier_elements(graph, &moved), count, moved)
                })
                .filter(|(after, ..)| *after < before)
                .min_by_key(|(after, count, _)| match *after <= LARGE_FRONTIER {
                    true => (0, *count, *after),
                    false => (1, *after, *count),
                });
            match best {
                Some((.., moved)) => in_head = moved,
                None => break,
            }
        }
        let nodes = (0..graph.nodes.len()).filter(|&n| in_head[n]).collect();
        let in_loop_when_scored =
            (0..graph.nodes.len()).map(|n| needed_for_state[n] || (feeds_output[n] && !in_head[n])).collect();
        OutputHead {
            nodes,
            in_loop_when_scored,
            frontier: frontier(graph, &in_head),
            frontier_elements: frontier_elements(graph, &in_head),
        }
    }
}

/// Moves head node `n` and the head nodes it reads, transitively, out of `in_head`; returns
/// how many moved.
fn move_with_head_inputs(graph: &StepGraph, in_head: &mut [bool], n: usize) -> usize {
    let mut stack = vec![n];
    let mut count = 0;
    while let Some(m) = stack.pop() {
        if !in_head[m] {
            continue;
        }
        in_head[m] = false;
        count += 1;
        stack.extend(graph.nodes[m].inputs.iter().filter_map(|s| match s {
            Source::Node(k, _) => Some(*k),
            _ => None,
        }));
    }
    count
}

/// The values the head nodes (`in_head`) read from outside the head, and the output where it
/// is not a head node's: distinct, in the order first read.
fn frontier(graph: &StepGraph, in_head: &[bool]) -> Vec<Source> {
    let read_by_head = (0..graph.nodes.len()).filter(|&n| in_head[n]).flat_map(|n| graph.nodes[n].inputs.iter());
    let mut out: Vec<Source> = vec![];
    for &s in read_by_head.chain(std::iter::once(&graph.output)) {
        let from_loop = !matches!(s, Source::Node(m, _) if in_head[m]);
        if from_loop && !out.contains(&s) {
            out.push(s);
        }
    }
    out
}

/// The frontier's size, elements per example.
fn frontier_elements(graph: &StepGraph, in_head: &[bool]) -> usize {
    frontier(graph, in_head).iter().map(|&s| elements(graph, s)).sum()
}

/// Elements per example of the value at `s`.
fn elements(graph: &StepGraph, s: Source) -> usize {
    let of = |ty: &Ty| ty.shape().map_or(1, |shape| shape.iter().product());
    match s {
        Source::Input => of(&graph.input),
        Source::State(i) => graph.states[i].shape.iter().product(),
        Source::Node(n, k) => graph.nodes[n].outputs.get(k).map_or(1, of),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The step graph of the model `m` that `model` defines, on a task of 2 inputs and outputs.
    fn graph(model: &str) -> StepGraph {
        let spec =
            format!("{model}\nexperiment e {{ task randomSequence(input = 2, output = 2, length = 3) model m }}");
        (*crate::check::checked_text(&spec).experiments[0].trials[0].graph).clone()
    }

    /// A tanh recurrence on a state `h` of `width` whose output is `out`.
    fn recurrent(width: usize, out: &str) -> StepGraph {
        graph(&format!(
            "model m() {{ state h = zeros({width})  step x {{ h = tanh(linear(x, {width}) + h)  out {out} }} }}"
        ))
    }

    fn plan(g: &StepGraph) -> OutputHead {
        OutputHead::plan(g, &super::super::dependencies(g, &g.next_states))
    }

    #[test]
    fn an_output_layer_on_the_state_is_the_head_and_the_state_its_frontier() {
        let g = recurrent(4, "linear(relu(h), output_size)");
        let head = plan(&g);
        assert_eq!(head_prims(&g, &head), ["relu", "linear"]);
        assert_eq!(head.frontier, g.next_states, "the head reads the new state");
        assert!(head.nodes.iter().all(|&n| !head.in_loop_when_scored[n]));
    }

    /// A memory of `side × side` values, read through `linear(flatten(M), 3)` by the output.
    fn memory_read_by_a_product(side: usize) -> StepGraph {
        graph(&format!(
            r#"
            model m() {{
              state M = zeros({side}, {side})
              step x {{
                M = itemWrite(M, linear(x, {side}))
                z = linear(flatten(M), 3)
                out linear(relu(z), output_size)
              }}
            }}
            "#
        ))
    }

    fn head_prims(g: &StepGraph, head: &OutputHead) -> Vec<&'static str> {
        head.nodes.iter().map(|&n| g.nodes[n].prim).collect()
    }

    #[test]
    fn head_nodes_that_shrink_a_large_frontier_stay_in_the_loop() {
        // `linear(flatten(M), 3)` reads 4 900 values an example and gives 3: the loop keeps it
        // (and the flatten before it), and the head (relu, the output layer) reads its 3.
        let g = memory_read_by_a_product(70);
        let head = plan(&g);
        assert_eq!(head_prims(&g, &head), ["relu", "linear"]);
        let [Source::Node(n, 0)] = head.frontier[..] else { panic!("one node's output: {:?}", head.frontier) };
        assert_eq!(g.nodes[n].prim, "linear");
        assert!(head.in_loop_when_scored[n]);
        assert_eq!(head.frontier_elements, 3);
    }

    #[test]
    fn a_small_frontier_is_left_as_it_is() {
        // 8 × 8 values in M: stacking 64 values costs less than running the head's flatten and
        // product at every step.
        let g = memory_read_by_a_product(8);
        let head = plan(&g);
        assert_eq!(head_prims(&g, &head), ["flatten", "linear", "relu", "linear"]);
        assert_eq!(head.frontier, g.next_states);
    }

    #[test]
    fn an_output_read_straight_from_the_loop_is_the_whole_frontier() {
        let g = recurrent(2, "h");
        let head = plan(&g);
        assert!(head.nodes.is_empty());
        assert_eq!(head.frontier, vec![g.output]);
    }
}
