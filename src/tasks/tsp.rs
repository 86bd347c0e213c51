//! Travelling salesman — SAM Table 3 (§3.3, App. H): the points of [`super::convex_hull`];
//! answer with the features of the optimal closed tour's points, the start repeated at the
//! end (N + 1 answer steps; with `labels = "code"`, the end token in its place).
//!
//! The tour is exact (Held–Karp, [`super::geometry::optimal_tour`]) and canonical: it starts at
//! the point with the smallest x (then y) and goes first to the smaller of that point's two
//! neighbours. Training: N uniform in `min_points..=points` (the paper's 5..10); test sets N = 5
//! (`accuracy`) and N = 10 (`n10_accuracy`). The paper also reports the average length of
//! the predicted path (`tour_length`, [`super::convex_hull`]'s tour metrics); it gives the
//! optimum as 2.05 (N = 5) and 2.88 (N = 10) on average, where the true means are 2.126 and
//! 2.871.

use super::convex_hull::{Geometry, Problem, geometry_options};
use super::define::task_kind;
use super::options::TaskOption;

// Exact tours are Held–Karp, exponential in N: keep them small.
static OPTIONS: [TaskOption; 4] = geometry_options(10, 12);

task_kind! {
    TspKind = "tsp",
    "travelling salesman: N points with one-hot features; answer the optimal closed tour's features (SAM Table 3)",
    options: &OPTIONS,
    held_out: (512, 2048),
    builds: |o| Geometry::read(o, Problem::Tour)?,
}

#[cfg(test)]
mod tests {
    use super::super::convex_hull::tests::{check_answers, check_code_labels};
    use super::super::geometry;
    use super::super::prelude::*;
    use super::*;

    #[test]
    fn answers_are_the_optimal_closed_tour() {
        check_answers(&TspKind, geometry::optimal_tour, true);
    }

    #[test]
    fn code_labels_end_the_tour_with_the_end_token() {
        check_code_labels(&TspKind, geometry::optimal_tour, 10);
    }

    #[test]
    fn tours_are_limited_to_what_an_exact_solver_can_do() {
        let e = TspKind.instantiate(&[Value::Int(30)]).err().unwrap();
        assert!(e.to_string().contains("`points` must be between 3 and 12"), "{e}");
    }
}
