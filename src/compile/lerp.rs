//! Gated writes `a + w * (b - a)` in a model's step (PKM's `R` and `V`, written only on write
//! steps): three primitives that the candle path runs as one fused op
//! (`kernels::cuda::layers::lerp`) where `kernels::cuda::layers::lerp::LERP` has it. The
//! subtraction and the product are deferred to the addition, which computes all three there: fused
//! where the operands fit, else the three primitives in turn, so that a shape the fused op does not
//! take still runs as written.

use crate::graph::{Source, StepGraph};

/// One gated write: node `sub` computes `b - a`, node `mul` multiplies it by `w`, and the
/// addition (where it is kept) adds `a`. `mul_w_first`, `add_a_first`: the operand order of the
/// product and the addition as written, for running the three primitives where the op does not fit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GatedWrite {
    pub sub: usize,
    pub mul: usize,
    pub a: Source,
    pub b: Source,
    pub w: Source,
    pub mul_w_first: bool,
    pub add_a_first: bool,
}

/// The gated writes of a model's step, by the node of their addition.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GatedWrites {
    at_add: Vec<Option<GatedWrite>>,
    deferred: Vec<bool>,
}

impl GatedWrites {
    /// Finds `add(a, mul(w, sub(b, a)))` (either operand order of the addition and the product)
    /// whose subtraction and product are read by nothing else, none of the three among the
    /// nodes `hoisted` (those run once over all time steps before the loop).
    pub fn plan(graph: &StepGraph, hoisted: &[bool]) -> GatedWrites {
        let n = graph.nodes.len();
        let mut readers = vec![0usize; n];
        let sources = graph.nodes.iter().flat_map(|node| node.inputs.iter());
        for s in sources.chain(&graph.next_states).chain([&graph.output]) {
            if let Source::Node(m, _) = s {
                readers[*m] += 1;
            }
        }
        let only = |s: Source, prim: &str| match s {
            Source::Node(m, 0) if graph.nodes[m].prim == prim && readers[m] == 1 && !hoisted[m] => Some(m),
            _ => None,
        };
        let mut writes = GatedWrites { at_add: vec![None; n], deferred: vec![false; n] };
        for (add, node) in graph.nodes.iter().enumerate() {
            let [first, second] = node.inputs[..] else { continue };
            if node.prim != "add" || hoisted[add] {
                continue;
            }
            let found =
                [(first, second, true), (second, first, false)].into_iter().find_map(|(a, product, a_first)| {
                    let mul = only(product, "mul")?;
                    let [p, q] = graph.nodes[mul].inputs[..] else { return None };
                    let (sub, w, w_first) = match (only(p, "sub"), only(q, "sub")) {
                        (_, Some(sub)) => (sub, p, true),
                        (Some(sub), None) => (sub, q, false),
                        (None, None) => return None,
                    };
                    let [b, a_again] = graph.nodes[sub].inputs[..] else { return None };
                    (a_again == a).then_some(GatedWrite {
                        sub,
                        mul,
                        a,
                        b,
                        w,
                        mul_w_first: w_first,
                        add_a_first: a_first,
                    })
                });
            if let Some(write) = found {
                writes.deferred[write.sub] = true;
                writes.deferred[write.mul] = true;
                writes.at_add[add] = Some(write);
            }
        }
        writes
    }

    /// Node `n` is a gated write's subtraction or product, which its addition computes.
    pub fn deferred(&self, n: usize) -> bool {
        self.deferred.get(n).copied().unwrap_or(false)
    }

    /// The gated write whose addition is node `n`.
    pub fn at_add(&self, n: usize) -> Option<&GatedWrite> {
        self.at_add.get(n).and_then(Option::as_ref)
    }

    pub fn any(&self) -> bool {
        self.at_add.iter().any(Option::is_some)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The step graph of a small model with a state `M`, a candidate `N` and a gate `w`, whose
    /// step ends with `lines` (which update `M`) and outputs `out`.
    fn graph(lines: &str, out: &str) -> StepGraph {
        let spec = format!(
            "model m {{\n state M = zeros(4)\n step x {{\n w = sigmoid(linear(x, 1))\n N = tanh(linear(x, 4))\n \
             {lines}\n out linear({out}, output_size)\n }}\n}}\n\
             experiment e {{ task randomSequence(input = 3, output = 2, length = 4) model m }}"
        );
        (*crate::check::checked_text(&spec).experiments[0].trials[0].graph).clone()
    }

    fn plan(graph: &StepGraph) -> GatedWrites {
        GatedWrites::plan(graph, &vec![false; graph.nodes.len()])
    }

    fn found(graph: &StepGraph) -> Vec<GatedWrite> {
        let writes = plan(graph);
        (0..graph.nodes.len()).filter_map(|n| writes.at_add(n).copied()).collect()
    }

    #[test]
    fn a_gated_write_is_found_in_either_order_of_its_operands() {
        for update in ["M + w * (N - M)", "w * (N - M) + M", "M + (N - M) * w"] {
            let g = graph(&format!("M = {update}"), "M");
            let writes = found(&g);
            assert_eq!(writes.len(), 1, "{update}");
            let write = writes[0];
            assert_eq!((g.nodes[write.sub].prim, g.nodes[write.mul].prim), ("sub", "mul"), "{update}");
            assert_eq!(write.a, Source::State(0), "{update}");
            let writes = plan(&g);
            assert!(writes.deferred(write.sub) && writes.deferred(write.mul), "{update}");
        }
    }

    #[test]
    fn no_gated_write_where_a_part_is_read_elsewhere_or_the_operands_differ() {
        assert_eq!(found(&graph("M = M + w * (N - M)", "M")).len(), 1);
        // The difference, or the product, read by the output too.
        assert!(found(&graph("D = N - M\n M = M + w * D", "M + D")).is_empty());
        assert!(found(&graph("P = w * (N - M)\n M = M + P", "M + P")).is_empty());
        // Another tensor added than the one subtracted.
        assert!(found(&graph("M = N + w * (N - M)", "M")).is_empty());
        assert!(found(&graph("M = M + w * (M - N)", "M")).is_empty());
        // Hoisted nodes (reading only the input) stay as they are.
        let g = graph("M = M + w * (N - M)", "M");
        let mut hoisted = vec![false; g.nodes.len()];
        hoisted[found(&g)[0].sub] = true;
        assert!(!GatedWrites::plan(&g, &hoisted).any());
    }
}
