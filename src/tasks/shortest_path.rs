//! Shortest path — SAM Table 3 (§3.3, App. H): a random connected graph given as a sequence
//! of (node, node, weight) triplets, then the source and the destination; answer with the
//! features of the nodes on the shortest path, source and destination included.
//!
//! ```text
//!   step      1 … E                              E+1             E+2             answer steps
//!   input     [onehot(a) | onehot(b) | w/W |     [onehot(s) |    [onehot(t) |    [0 … 0 | 1]
//!              0 | 0 | 0]                         0 | 0 | 1 | 0 | 0]  0 | 0 | 0 | 1 | 0]
//!   target    —                                                                  path features
//! ```
//!
//! A node is known by its feature, a random one-hot of F = `features` (the paper's 40),
//! distinct within a graph. Graphs ([`super::graphs`]): N nodes uniform in
//! `min_nodes..=nodes` (5..20), E edges uniform in `min_edges..=edges` (6..30) within what N
//! allows, weights uniform in 1..=`max_weight` (10), presented as w / `max_weight`. Source and
//! destination are distinct random nodes. The answer comes from Dijkstra, ties broken by
//! fewest edges, then by the smallest features ([`super::graphs`]). Metric: `accuracy` over
//! the answer steps.

use rand::Rng;
use rand_chacha::ChaCha8Rng;

use super::answers::{AnswerData, Example, Generator, features};
use super::define::task_kind;
use super::graphs::Graph;
use super::held_out::HeldOut;
use super::options::{Options, TaskOption};
use super::prelude::*;

/// The options of a graph task (shortest path, spanning tree; then `held_out: (512, 2048)`).
pub(super) static GRAPH_OPTIONS: [TaskOption; 6] = [
    TaskOption::int("nodes", 20, 2, 1000).at_least("min_nodes"),
    TaskOption::int("min_nodes", 5, 2, 1000),
    TaskOption::int("edges", 30, 1, 100_000).at_least("min_edges"),
    TaskOption::int("min_edges", 6, 1, 100_000),
    TaskOption::int("max_weight", 10, 1, 1_000_000),
    TaskOption::int("features", 40, 1, 4096),
];

task_kind! {
    ShortestPathKind = "shortestPath",
    "shortest path: a weighted graph as triplets, then source and destination; answer the path's node features (SAM Table 3)",
    options: &GRAPH_OPTIONS,
    held_out: (512, 2048),
    builds: |o| GraphTask::read(o, Question::Path)?,
}

/// What is asked of the graph: a shortest path, or the spanning tree ([`super::spanning_tree`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) enum Question {
    #[default]
    Path,
    Tree,
}

#[derive(Clone, Copy, Debug, serde::Deserialize)]
pub(super) struct GraphTask {
    pub nodes: usize,
    pub min_nodes: usize,
    pub edges: usize,
    pub min_edges: usize,
    pub max_weight: u32,
    pub features: usize,
    #[serde(flatten)]
    pub held_out: HeldOut,
    /// Not an option: the task's own ([`GraphTask::read`]).
    #[serde(skip)]
    pub question: Question,
}

impl GraphTask {
    pub(super) fn read(o: &Options, question: Question) -> Result<GraphTask, PrimError> {
        let task = GraphTask { question, ..o.parse()? };
        let GraphTask { nodes, edges, features, .. } = task;
        if edges < nodes - 1 {
            let why =
                format!("`edges` ({edges}) must be at least `nodes` − 1 ({}) for the graph to be connected", nodes - 1);
            return Err(PrimError::task(why).on("edges"));
        }
        if features < nodes {
            let why = format!("`features` must be at least `nodes` ({nodes}), one per node (found {features})");
            return Err(PrimError::task(why).on("features"));
        }
        Ok(task)
    }

    /// Channels after the two node one-hots: weight, (source, destination,) answer flag.
    fn flags(&self) -> usize {
        match self.question {
            Question::Path => 4,
            Question::Tree => 2,
        }
    }
}

impl Task for GraphTask {
    fn max_steps(&self) -> Option<usize> {
        // The edges and the source and destination, then a path through every node or a
        // spanning tree's 2 (N − 1) features, and an end token.
        Some(self.edges + 2 + 2 * self.nodes + 1)
    }
    fn input(&self) -> Ty {
        Ty::Tensor(vec![self.width()])
    }
    fn target(&self) -> Target {
        Target::Classes(self.features)
    }
    fn trivial_levels(&self) -> Vec<TrivialLevel> {
        match self.question {
            Question::Path => vec![],
            Question::Tree => super::spanning_tree::trivial_levels(self),
        }
    }
    fn data(&self, seed: u64, device: &Device) -> candle_core::Result<Box<dyn TaskData>> {
        Ok(Box::new(AnswerData::new(*self, seed, self.held_out, 1, device)?))
    }
}

impl Generator for GraphTask {
    /// Nodes and edges.
    type Size = (usize, usize);

    fn width(&self) -> usize {
        2 * self.features + self.flags()
    }

    fn size(&self, rng: &mut ChaCha8Rng, _: Option<Split>) -> (usize, usize) {
        let n = rng.random_range(self.min_nodes..=self.nodes);
        let (lo, hi) = (self.min_edges.max(n - 1), self.edges.min(n * (n - 1) / 2));
        (n, rng.random_range(lo..=hi.max(lo)))
    }

    fn example(&self, rng: &mut ChaCha8Rng, (n, e): (usize, usize)) -> Example {
        let graph = Graph::random(rng, n, e, self.max_weight);
        let label = features(rng, n, self.features);
        let (f, width) = (self.features, self.width());
        let mut question = vec![];
        for edge in &graph.edges {
            let mut row = vec![0f32; width];
            row[label[edge.a] as usize] = 1.0;
            row[f + label[edge.b] as usize] = 1.0;
            row[2 * f] = edge.weight as f32 / self.max_weight as f32;
            question.extend(row);
        }
        let answer = match self.question {
            Question::Path => {
                let from = rng.random_range(0..n);
                let to = (from + rng.random_range(1..n)) % n;
                for (node, flag) in [(from, 2 * f + 1), (to, 2 * f + 2)] {
                    let mut row = vec![0f32; width];
                    row[label[node] as usize] = 1.0;
                    row[flag] = 1.0;
                    question.extend(row);
                }
                let path = graph.shortest_path(from, to, &label).expect("the graph is connected");
                path.into_iter().map(|v| label[v]).collect()
            }
            Question::Tree => graph
                .spanning_tree(&label)
                .into_iter()
                .flat_map(|i| {
                    let (a, b) = (label[graph.edges[i].a], label[graph.edges[i].b]);
                    [a.min(b), a.max(b)]
                })
                .collect(),
        };
        Example { question, answer }
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::super::answers::testing;
    use super::super::graphs::Edge;
    use super::*;

    /// The graph, and the source and destination rows if any, read back from the inputs.
    pub fn read_back(rows: &[Vec<f32>], f: usize, path: bool) -> (Graph, Vec<u32>, Option<(usize, usize)>) {
        let (triplets, ends) = rows.split_at(rows.len() - if path { 2 } else { 0 });
        let one_hot = |r: &[f32]| r.iter().position(|v| *v == 1.0).unwrap() as u32;
        let mut label = vec![];
        let node = |l: u32, label: &mut Vec<u32>| {
            label.iter().position(|x| *x == l).unwrap_or_else(|| {
                label.push(l);
                label.len() - 1
            })
        };
        let mut edges = vec![];
        for r in triplets {
            let (a, b) = (node(one_hot(&r[..f]), &mut label), node(one_hot(&r[f..2 * f]), &mut label));
            edges.push(Edge { a, b, weight: (r[2 * f] * 10.0).round() as u32 });
        }
        let ends = path.then(|| (node(one_hot(&ends[0][..f]), &mut label), node(one_hot(&ends[1][..f]), &mut label)));
        (Graph { nodes: label.len(), edges }, label, ends)
    }

    #[test]
    fn answers_are_the_shortest_paths_features() {
        let data = ShortestPathKind.instantiate(&[]).unwrap().data(5, &Device::Cpu).unwrap();
        for (rows, answer) in testing::examples(data.as_ref(), Split::Test(0)) {
            let (graph, label, ends) = read_back(&rows, 40, true);
            let (from, to) = ends.unwrap();
            assert_ne!(from, to);
            assert_eq!(rows[rows.len() - 2][81], 1.0, "source flag");
            assert_eq!(rows[rows.len() - 1][82], 1.0, "destination flag");
            assert!((5..=20).contains(&graph.nodes) && (6..=30).contains(&graph.edges.len()), "{graph:?}");
            let want: Vec<u32> = graph.shortest_path(from, to, &label).unwrap().into_iter().map(|v| label[v]).collect();
            assert_eq!(answer, want);
        }
    }

    #[test]
    fn a_graph_that_cannot_be_connected_is_refused_at_edges() {
        let e = ShortestPathKind.instantiate(&[Value::Int(20), Value::Int(5), Value::Int(10)]).err().unwrap();
        assert!(e.to_string().contains("`edges` (10) must be at least `nodes` − 1 (19)"), "{e}");
    }
}
