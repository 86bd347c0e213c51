//! The rewrites of a model's step, planned once per model as a list of passes run in order.
//! Each pass reads the step graph and the plans of the passes before it and says how a run (or
//! the tape) departs from running every node at every time step; each is a pure function of
//! what it reads, tested in its own module.
//!
//! | pass | module | what it plans |
//! |---|---|---|
//! | `state` | here | the nodes the next state depends on (the rest only feed the output) |
//! | `fusion` | `prims::fusion` | pairs of nodes the tape runs as one op |
//! | `head` | [`super::head`] | the output head, run once over all the scored steps (after `state`) |
//! | `hoist` | [`super::hoist`] | the nodes that read only the input, run once over all the time steps |
//! | `lerp` | [`super::lerp`] | gated writes `a + w·(b − a)` candle's path may run as one op (after `hoist`: a hoisted write is left as it is) |
//!
//! Whether a run applies a plan is the device's choice (`device::tuning`, the kernels'
//! switches), made when it runs.

use super::head::OutputHead;
use super::hoist::InputNodes;
use super::lerp::GatedWrites;
use crate::graph::StepGraph;
use crate::prims::fusion::Fusion;

/// What the passes planned for one model.
#[derive(Default)]
pub struct Plans {
    /// Nodes the next state depends on.
    pub needed_for_state: Vec<bool>,
    /// Pairs of nodes training runs as one op.
    pub fusions: Vec<Fusion>,
    /// The nodes that feed only the output, which a run batches over its scored steps.
    pub head: OutputHead,
    /// The nodes that read only the input, which a run batches over its time steps.
    pub input_nodes: InputNodes,
    /// Gated writes, which candle's path may run as one op.
    pub gated_writes: GatedWrites,
}

/// A pass: its name, and what it adds to the plans so far.
pub struct Pass {
    pub name: &'static str,
    pub run: fn(&StepGraph, &mut Plans),
}

/// The passes, in the order they run.
pub const PASSES: [Pass; 5] = [
    Pass { name: "state", run: |g, p| p.needed_for_state = super::dependencies(g, &g.next_states) },
    Pass { name: "fusion", run: |g, p| p.fusions = crate::prims::fusion::find(g) },
    Pass { name: "head", run: |g, p| p.head = OutputHead::plan(g, &p.needed_for_state) },
    Pass { name: "hoist", run: |g, p| p.input_nodes = InputNodes::plan(g) },
    Pass { name: "lerp", run: |g, p| p.gated_writes = GatedWrites::plan(g, &p.input_nodes.hoisted) },
];

impl Plans {
    /// Every pass over `graph`, in order.
    pub fn of(graph: &StepGraph) -> Plans {
        let mut plans = Plans::default();
        for pass in &PASSES {
            (pass.run)(graph, &mut plans);
        }
        plans
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The passes run in their order, each from the plans before it: the same plans as each
    /// module's own, given what it reads.
    #[test]
    fn each_pass_plans_what_its_module_plans_from_the_passes_before_it() {
        let program = crate::check::checked_text(
            r#"
            model m() {
              state h = zeros(4)
              state M = zeros(4)
              step x {
                e = tanh(linear(x, 4))
                h = tanh(linear(e, 4) + h)
                w = sigmoid(linear(h, 4))
                M = M + w * (h - M)
                out linear(M, output_size)
              }
            }
            experiment e { task randomSequence(input = 2, output = 2, length = 3) model m }
            "#,
        );
        let g = &program.experiments[0].trials[0].graph;
        let names: Vec<&str> = PASSES.iter().map(|p| p.name).collect();
        assert_eq!(names, ["state", "fusion", "head", "hoist", "lerp"]);
        let plans = Plans::of(g);
        let needed = crate::compile::dependencies(g, &g.next_states);
        assert_eq!(plans.needed_for_state, needed);
        assert_eq!(plans.head, OutputHead::plan(g, &needed));
        let inputs = InputNodes::plan(g);
        assert!(inputs.any(), "the input's layer is hoisted");
        assert_eq!(plans.gated_writes, GatedWrites::plan(g, &inputs.hoisted));
        assert!(plans.gated_writes.any(), "the gated write is found");
        assert_eq!(plans.input_nodes, inputs);
    }
}
