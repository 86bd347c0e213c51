//! Minimum spanning tree — SAM Table 3 (§3.3, App. H): the graphs of
//! [`super::shortest_path`], triplets only; answer with the tree's edges in Kruskal's order,
//! each as the features of its two nodes (2(N − 1) answer steps).
//!
//! ```text
//!   step      1 … E                                    answer steps
//!   input     [onehot(a) | onehot(b) | w/W | 0]        [0 … 0 | 1]
//!   target    —                                        f(a₁) f(b₁) f(a₂) f(b₂) …
//! ```
//!
//! Edges are taken by (weight, smaller feature, larger feature), and each is answered smaller
//! feature first ([`super::graphs`]), so the answer is unique. Options and ranges as
//! `shortestPath`. Metric: `accuracy` over the answer steps.

use super::contract::TrivialLevel;
use super::define::task_kind;
use super::shortest_path::{GRAPH_OPTIONS, GraphTask, Question};

task_kind! {
    SpanningTreeKind = "spanningTree",
    "minimum spanning tree: a weighted graph as triplets; answer the tree's edges as node features, in Kruskal's order (SAM Table 3)",
    options: &GRAPH_OPTIONS,
    held_out: (512, 2048),
    builds: |o| GraphTask::read(o, Question::Tree)?,
}

/// Chance: every answer step a node of the graph at random. A graph of N nodes has 2(N − 1)
/// answer steps, each right 1 time in N, and accuracy pools the steps of the whole test set, so
/// the level is E[2(N − 1)/N] / E[2(N − 1)] over N uniform in `min_nodes..=nodes`.
pub(super) fn trivial_levels(task: &GraphTask) -> Vec<TrivialLevel> {
    let (right, steps) = (task.min_nodes..=task.nodes).fold((0.0, 0.0), |(right, steps), n| {
        let n = n as f64;
        (right + 2.0 * (n - 1.0) / n, steps + 2.0 * (n - 1.0))
    });
    vec![TrivialLevel::new("chance (a node of the graph)", "accuracy", right / steps)]
}

#[cfg(test)]
mod tests {
    use super::super::answers::testing;
    use super::super::prelude::*;
    use super::super::shortest_path::tests::read_back;
    use super::*;

    #[test]
    fn chance_pools_the_answer_steps_of_graphs_of_every_size() {
        // N = 2 or 3: 2 steps right 1/2 each and 4 steps right 1/3 each, of 6.
        let levels = SpanningTreeKind.trivial_levels(&[Value::Int(3), Value::Int(2)]);
        assert_eq!(levels.len(), 1);
        assert!((levels[0].value - (1.0 + 4.0 / 3.0) / 6.0).abs() < 1e-12, "{levels:?}");
    }

    #[test]
    fn answers_are_the_spanning_trees_edges_in_kruskals_order() {
        let data = SpanningTreeKind.instantiate(&[]).unwrap().data(5, &Device::Cpu).unwrap();
        for (rows, answer) in testing::examples(data.as_ref(), Split::Test(0)) {
            assert_eq!(rows[0].len(), 82);
            let (graph, label, _) = read_back(&rows, 40, false);
            assert_eq!(answer.len(), 2 * (graph.nodes - 1));
            let want: Vec<u32> = graph
                .spanning_tree(&label)
                .into_iter()
                .flat_map(|i| {
                    let (a, b) = (label[graph.edges[i].a], label[graph.edges[i].b]);
                    [a.min(b), a.max(b)]
                })
                .collect();
            assert_eq!(answer, want);
        }
    }
}
