//! SAM's graph tasks (SAM §3.3, App. H): the random graphs and their reference solvers,
//! Dijkstra for the shortest path and Kruskal for the minimum spanning tree.
//!
//! A graph (App. H): N nodes; a path through every node in a random order (so the graph is
//! connected), then further random edges up to E in all; integer weights uniform in 1..=10.
//!
//! Weights are integers, so ties are common; every tie is broken by what the model sees, the
//! nodes' features (`label`), so that the target is unique and learnable:
//! - **Shortest path:** the path of least weight; among those, the one with fewest edges;
//!   among those, the one whose sequence of node labels is lexicographically smallest.
//! - **Spanning tree:** Kruskal's order, edges sorted by (weight, smaller label, larger label);
//!   the answer lists the tree's edges in the order they are added, each as its two labels,
//!   the smaller first.

use std::collections::BinaryHeap;

use rand::Rng;
use rand::seq::SliceRandom;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Edge {
    pub a: usize,
    pub b: usize,
    pub weight: u32,
}

#[derive(Clone, Debug)]
pub struct Graph {
    pub nodes: usize,
    /// In the order the task presents them.
    pub edges: Vec<Edge>,
}

impl Graph {
    /// A connected random graph with `nodes` nodes and `edges` edges (at least `nodes − 1`, at
    /// most every pair), weights uniform in `1..=max_weight`, edges in random order and
    /// orientation.
    pub fn random(rng: &mut impl Rng, nodes: usize, edges: usize, max_weight: u32) -> Graph {
        let pairs = nodes * nodes.saturating_sub(1) / 2;
        let edges = edges.clamp(nodes.saturating_sub(1), pairs);
        let mut order: Vec<usize> = (0..nodes).collect();
        order.shuffle(rng);
        let mut present = vec![false; nodes * nodes];
        let mut list = vec![];
        let mut add = |a: usize, b: usize, list: &mut Vec<(usize, usize)>| {
            if a != b && !present[a * nodes + b] {
                present[a * nodes + b] = true;
                present[b * nodes + a] = true;
                list.push((a, b));
            }
        };
        for w in order.windows(2) {
            add(w[0], w[1], &mut list);
        }
        while list.len() < edges {
            add(rng.random_range(0..nodes), rng.random_range(0..nodes), &mut list);
        }
        list.shuffle(rng);
        let edges = list
            .into_iter()
            .map(|(a, b)| {
                let (a, b) = if rng.random::<bool>() { (a, b) } else { (b, a) };
                Edge { a, b, weight: rng.random_range(1..=max_weight) }
            })
            .collect();
        Graph { nodes, edges }
    }

    fn neighbours(&self) -> Vec<Vec<(usize, u32)>> {
        let mut adjacent = vec![vec![]; self.nodes];
        for e in &self.edges {
            adjacent[e.a].push((e.b, e.weight));
            adjacent[e.b].push((e.a, e.weight));
        }
        adjacent
    }

    /// The shortest path from `from` to `to` (both included), ties broken as the module says
    /// by `label`. `None` when `to` cannot be reached.
    pub fn shortest_path(&self, from: usize, to: usize, label: &[u32]) -> Option<Vec<usize>> {
        let adjacent = self.neighbours();
        // (weight, edges) of the best path from each node to `to`, by Dijkstra from `to`.
        let mut best = vec![(u64::MAX, usize::MAX); self.nodes];
        best[to] = (0, 0);
        let mut queue = BinaryHeap::from([std::cmp::Reverse(((0u64, 0usize), to))]);
        while let Some(std::cmp::Reverse((cost, u))) = queue.pop() {
            if cost > best[u] {
                continue;
            }
            for &(v, w) in &adjacent[u] {
                let through = (cost.0 + w as u64, cost.1 + 1);
                if through < best[v] {
                    best[v] = through;
                    queue.push(std::cmp::Reverse((through, v)));
                }
            }
        }
        if best[from].0 == u64::MAX {
            return None;
        }
        // Walk from `from`, always to the smallest-labelled neighbour that stays on a best path.
        let mut path = vec![from];
        let mut u = from;
        while u != to {
            let (cost, hops) = best[u];
            u = adjacent[u]
                .iter()
                .filter(|&&(v, w)| best[v].0 != u64::MAX && (best[v].0 + w as u64, best[v].1 + 1) == (cost, hops))
                .map(|&(v, _)| v)
                .min_by_key(|&v| label[v])?;
            path.push(u);
        }
        Some(path)
    }

    /// The minimum spanning tree's edges (indices into `edges`) in Kruskal's order, ties
    /// broken as the module says by `label`.
    pub fn spanning_tree(&self, label: &[u32]) -> Vec<usize> {
        let key = |e: &Edge| {
            let (lo, hi) = (label[e.a].min(label[e.b]), label[e.a].max(label[e.b]));
            (e.weight, lo, hi)
        };
        let mut order: Vec<usize> = (0..self.edges.len()).collect();
        order.sort_by_key(|&i| key(&self.edges[i]));
        let mut parent: Vec<usize> = (0..self.nodes).collect();
        fn root(parent: &mut [usize], mut x: usize) -> usize {
            while parent[x] != x {
                parent[x] = parent[parent[x]];
                x = parent[x];
            }
            x
        }
        let mut tree = vec![];
        for i in order {
            let (ra, rb) = (root(&mut parent, self.edges[i].a), root(&mut parent, self.edges[i].b));
            if ra != rb {
                parent[ra] = rb;
                tree.push(i);
            }
        }
        tree
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    fn graph(nodes: usize, edges: &[(usize, usize, u32)]) -> Graph {
        Graph { nodes, edges: edges.iter().map(|&(a, b, weight)| Edge { a, b, weight }).collect() }
    }

    #[test]
    fn random_graphs_are_connected_simple_and_of_the_asked_size() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(1);
        for _ in 0..200 {
            let n = rng.random_range(5..=20);
            let e = rng.random_range(6..=30);
            let g = Graph::random(&mut rng, n, e, 10);
            assert_eq!(g.edges.len(), e.clamp(n - 1, n * (n - 1) / 2));
            let mut pairs: Vec<(usize, usize)> = g.edges.iter().map(|e| (e.a.min(e.b), e.a.max(e.b))).collect();
            pairs.sort();
            pairs.dedup();
            assert_eq!(pairs.len(), g.edges.len(), "no repeated edge");
            assert!(g.edges.iter().all(|e| e.a != e.b && (1..=10).contains(&e.weight)));
            assert_eq!(g.spanning_tree(&(0..n as u32).collect::<Vec<_>>()).len(), n - 1, "connected");
        }
    }

    #[test]
    fn shortest_path_of_a_hand_worked_case_with_ties() {
        // 0 –1– 1 –1– 3 and 0 –1– 2 –1– 3 tie on weight and edges; 0 –2– 3 directly ties on
        // weight with fewer edges, so it wins.
        let g = graph(4, &[(0, 1, 1), (1, 3, 1), (0, 2, 1), (2, 3, 1), (0, 3, 2)]);
        assert_eq!(g.shortest_path(0, 3, &[0, 1, 2, 3]), Some(vec![0, 3]));
        // Without the direct edge the two two-edge paths tie: the smaller label goes first.
        let g = graph(4, &[(0, 1, 1), (1, 3, 1), (0, 2, 1), (2, 3, 1)]);
        assert_eq!(g.shortest_path(0, 3, &[0, 9, 5, 3]), Some(vec![0, 2, 3]));
        assert_eq!(g.shortest_path(0, 3, &[0, 4, 5, 3]), Some(vec![0, 1, 3]));
        assert_eq!(graph(3, &[(0, 1, 1)]).shortest_path(0, 2, &[0, 1, 2]), None);
    }

    /// Every simple path, by depth-first search: the best by (weight, edges, labels).
    fn brute_force_path(g: &Graph, from: usize, to: usize, label: &[u32]) -> Vec<usize> {
        fn walk(g: &Graph, path: &mut Vec<usize>, to: usize, out: &mut Vec<Vec<usize>>) {
            let u = *path.last().unwrap();
            if u == to {
                out.push(path.clone());
                return;
            }
            for e in &g.edges {
                for (x, y) in [(e.a, e.b), (e.b, e.a)] {
                    if x == u && !path.contains(&y) {
                        path.push(y);
                        walk(g, path, to, out);
                        path.pop();
                    }
                }
            }
        }
        let mut all = vec![];
        walk(g, &mut vec![from], to, &mut all);
        let weight = |p: &Vec<usize>| -> u32 {
            p.windows(2)
                .map(|w| {
                    g.edges.iter().find(|e| (e.a, e.b) == (w[0], w[1]) || (e.b, e.a) == (w[0], w[1])).unwrap().weight
                })
                .sum()
        };
        all.into_iter().min_by_key(|p| (weight(p), p.len(), p.iter().map(|&v| label[v]).collect::<Vec<_>>())).unwrap()
    }

    /// A graph small enough for brute force: 3..=`most_nodes` nodes, any edge count from
    /// connected to complete, weights up to `max_weight` (small, for ties).
    fn small_random_graph(rng: &mut impl Rng, most_nodes: usize, max_weight: u32) -> Graph {
        let n = rng.random_range(3..=most_nodes);
        let e = rng.random_range(n - 1..=n * (n - 1) / 2);
        Graph::random(rng, n, e, max_weight)
    }

    #[test]
    fn shortest_paths_match_brute_force_on_random_graphs() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(2);
        for _ in 0..300 {
            let g = small_random_graph(&mut rng, 7, 3);
            let n = g.nodes;
            let mut label: Vec<u32> = (0..n as u32).collect();
            label.shuffle(&mut rng);
            let (from, to) = (rng.random_range(0..n), rng.random_range(0..n));
            assert_eq!(g.shortest_path(from, to, &label).unwrap(), brute_force_path(&g, from, to, &label));
        }
    }

    #[test]
    fn spanning_tree_of_a_hand_worked_case() {
        // A triangle of equal weights and a pendant edge: the tie goes by labels.
        let g = graph(4, &[(0, 1, 2), (1, 2, 2), (0, 2, 2), (2, 3, 1)]);
        assert_eq!(g.spanning_tree(&[0, 1, 2, 3]), vec![3, 0, 2], "(2,3) w1, then (0,1) and (0,2)");
        assert_eq!(g.spanning_tree(&[5, 1, 2, 3]), vec![3, 1, 0], "(2,3) w1, then (1,2) and (0,1)");
    }

    /// The least total weight over every subset of N − 1 edges that spans the graph.
    #[test]
    fn spanning_trees_match_brute_force_on_random_graphs() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(3);
        for _ in 0..200 {
            let g = small_random_graph(&mut rng, 6, 5);
            let n = g.nodes;
            let labels: Vec<u32> = (0..n as u32).collect();
            let tree = g.spanning_tree(&labels);
            let total = |edges: &[usize]| edges.iter().map(|&i| g.edges[i].weight).sum::<u32>();
            let m = g.edges.len();
            let mut best = u32::MAX;
            for mask in 0u32..(1 << m) {
                if mask.count_ones() as usize != n - 1 {
                    continue;
                }
                let chosen: Vec<usize> = (0..m).filter(|i| mask & (1 << i) != 0).collect();
                let sub = Graph { nodes: n, edges: chosen.iter().map(|&i| g.edges[i]).collect() };
                if sub.spanning_tree(&labels).len() == n - 1 {
                    best = best.min(total(&chosen));
                }
            }
            assert_eq!(tree.len(), n - 1);
            assert_eq!(total(&tree), best);
        }
    }
}
