//! The input's nodes: those that read only the step's input (and parameters), run once over
//! every time step before the loop instead of at each step.
//!
//! STM projects its input three times a step (`f1`, `f2`, `f3`), an embedding reads each
//! token: none of that depends on the recurrence, and every op is per example, so it can run on
//! the whole sequence at once as one batch of `steps × batch` examples, and each step reads its
//! rows. A product per step becomes one product for the sequence, and its backward (the
//! weight's gradient, the bias's sum) runs once; each step's rows are a view, and their
//! gradients come back as one concatenation (the vendored candle's slice backward,
//! vendor/README.md). On a GPU, where a step is bound by its number of kernels, that is four
//! kernels a projection a step saved for one copy.

use candle_core::{Result, Tensor};

use crate::graph::{Source, StepGraph};

/// The most bytes a run holds its hoisted nodes' outputs in. Running them at each step holds one
/// step's at a time (in evaluation, where nothing keeps them for a backward), so a long
/// sequence of a large batch runs them there instead.
pub const HOIST_LIMIT: usize = 256 << 20;

/// Which nodes read only the input, fixed once per model.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct InputNodes {
    /// Node `n` reads only the step's input and nodes that do (and parameters).
    pub hoisted: Vec<bool>,
    /// The hoisted nodes' outputs' values per example and time step.
    pub elements: usize,
}

impl InputNodes {
    pub fn plan(graph: &StepGraph) -> InputNodes {
        let mut hoisted = vec![false; graph.nodes.len()];
        for (n, node) in graph.nodes.iter().enumerate() {
            // A node that reads nothing (a learned scalar) stays: it has no rows to share.
            hoisted[n] = !node.inputs.is_empty()
                && node.inputs.iter().all(|s| match s {
                    Source::Input => true,
                    Source::Node(m, _) => hoisted[*m],
                    Source::State(_) => false,
                });
        }
        let elements = (0..graph.nodes.len())
            .filter(|&n| hoisted[n])
            .flat_map(|n| graph.nodes[n].outputs.iter())
            .map(|ty| ty.shape().map_or(1, |shape| shape.iter().product::<usize>()))
            .sum();
        InputNodes { hoisted, elements }
    }

    pub fn any(&self) -> bool {
        self.hoisted.iter().any(|&h| h)
    }
}

/// The input's nodes' outputs over the first `steps` time steps, `[steps · batch, ...]`.
pub struct HoistedValues {
    outputs: Vec<Vec<Tensor>>,
    steps: usize,
    batch: usize,
}

impl HoistedValues {
    /// No node hoisted: every node runs at its step.
    pub fn none() -> HoistedValues {
        HoistedValues { outputs: vec![], steps: 0, batch: 0 }
    }

    /// Whether no node was hoisted (for tests: a run does not need to ask).
    #[cfg(test)]
    pub fn is_none(&self) -> bool {
        self.outputs.iter().all(Vec::is_empty)
    }

    /// Runs the hoisted nodes once over the first `steps` steps of `inputs` (`[T, B, ...]`);
    /// `forward(n, inputs)` runs node `n`.
    pub fn run(
        graph: &StepGraph,
        plan: &InputNodes,
        inputs: &Tensor,
        steps: usize,
        mut forward: impl FnMut(usize, &[&Tensor]) -> Result<Vec<Tensor>>,
    ) -> Result<HoistedValues> {
        let batch = inputs.dim(1)?;
        let mut dims = vec![steps * batch];
        dims.extend(&inputs.dims()[2..]);
        let x = inputs.narrow(0, 0, steps)?.reshape(dims)?;
        let mut outputs: Vec<Vec<Tensor>> = vec![vec![]; graph.nodes.len()];
        for (n, node) in graph.nodes.iter().enumerate() {
            if !plan.hoisted[n] {
                continue;
            }
            let read: Vec<Tensor> = node
                .inputs
                .iter()
                .map(|s| match s {
                    Source::Node(m, k) => outputs[*m][*k].clone(),
                    _ => x.clone(),
                })
                .collect();
            let read: Vec<&Tensor> = read.iter().collect();
            outputs[n] = forward(n, &read)?;
        }
        Ok(HoistedValues { outputs, steps, batch })
    }

    /// Node `n`'s outputs at step `t`, if it was hoisted: its rows of that step (a view). An
    /// output with a batch axis of 1 is the same at every step and is given whole.
    pub fn at(&self, n: usize, t: usize) -> Result<Option<Vec<Tensor>>> {
        match self.outputs.get(n) {
            Some(outputs) if !outputs.is_empty() => {
                let rows = self.steps * self.batch;
                let of_step = |o: &Tensor| match o.dim(0)? == rows && rows != 1 {
                    true => o.narrow(0, t * self.batch, self.batch),
                    false => Ok(o.clone()),
                };
                outputs.iter().map(of_step).collect::<Result<_>>().map(Some)
            }
            _ => Ok(None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nodes_that_read_only_the_input_are_hoisted_and_no_others() {
        let spec = crate::lang::parse_str(
            "t.mem",
            r#"
            model m() {
              state h = zeros(4)
              step x {
                e = tanh(linear(x, 4))
                h = tanh(linear(e, 4) + h)
                out linear(h, output_size)
              }
            }
            experiment e { task randomSequence(input = 2, output = 2, length = 3) model m }
            "#,
        )
        .unwrap();
        let program = crate::check::check(&spec, &crate::prims::Primitives)
            .unwrap_or_else(|d| panic!("{}", d.render(&spec.sources, false)));
        let g = &program.experiments[0].trials[0].graph;
        let plan = InputNodes::plan(g);
        let hoisted: Vec<(&str, bool)> = g.nodes.iter().zip(&plan.hoisted).map(|(n, &h)| (n.prim, h)).collect();
        assert_eq!(
            hoisted,
            [("linear", true), ("tanh", true), ("linear", true), ("add", false), ("tanh", false), ("linear", false)]
        );
        assert_eq!(plan.elements, 12, "three outputs of 4 values");
    }
}
