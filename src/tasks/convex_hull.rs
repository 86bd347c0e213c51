//! Convex hull — SAM Table 3 (§3.3, App. H; data as Vinyals et al. 2015's): N points in the
//! unit square, each with a random one-hot feature; answer with the features of the hull's
//! corners, in order.
//!
//! ```text
//!   step      1 … N                                   N+1 … N+H
//!   input     [x, y | onehot(feature) (F) | 0]        [0 … 0 | 1]   (answer flag)
//!   target    —                                       the features of the H corners
//! ```
//!
//! The corners go counter-clockwise from the point with the smallest x (then y)
//! ([`super::geometry`]). Features are distinct within an example, drawn from F = `features`
//! (the paper's 20). Training: N uniform in `min_points..=points` (the paper's 5..20), fresh
//! every batch; validation from the same range; two test sets, N = 5 (`accuracy`) and N = 10
//! (`n10_accuracy`), as the paper's columns. Metric: `accuracy`, the fraction of answer steps
//! right (the paper's "average accuracy of prediction across steps").

use rand::Rng;
use rand_chacha::ChaCha8Rng;

use super::answers::{AnswerData, Example, Generator, features};
use super::define::task_kind;
use super::geometry::{self, Point};
use super::held_out::HeldOut;
use super::options::{Options, TaskOption};
use super::*;

/// The options of a geometry task (then `held_out: (512, 2048)`): `points` defaults to
/// `default_points`, and point counts go from 3 up to `most`.
pub(super) const fn geometry_options(default_points: i64, most: i64) -> [TaskOption; 3] {
    [
        TaskOption::int("points", default_points, 3, most).at_least("min_points"),
        TaskOption::int("min_points", 5, 3, most),
        TaskOption::int("features", 20, 1, 4096),
    ]
}

static OPTIONS: [TaskOption; 3] = geometry_options(20, 100);

/// The test sets' point counts, as the paper's Table 3 columns.
pub(super) const TEST_POINTS: [usize; 2] = [5, 10];
pub(super) const TEST_SPLITS: &[&str] = &["n5", "n10"];

task_kind! {
    ConvexHullKind = "convexHull",
    "convex hull: N points with one-hot features; answer the hull corners' features in order (SAM Table 3)",
    options: &OPTIONS,
    held_out: (512, 2048),
    builds: |o| Geometry::read(o, Problem::Hull)?,
}

/// Which geometry problem: the hull, or the optimal tour (`tsp`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) enum Problem {
    #[default]
    Hull,
    Tour,
}

/// The configured geometry task, shared with [`super::tsp`].
#[derive(Clone, Copy, Debug, serde::Deserialize)]
pub(super) struct Geometry {
    pub points: usize,
    pub min_points: usize,
    pub features: usize,
    #[serde(flatten)]
    pub held_out: HeldOut,
    /// Not an option: the task's own ([`Geometry::read`]).
    #[serde(skip)]
    pub problem: Problem,
}

impl Geometry {
    /// Reads the options (`geometry_options`).
    pub(super) fn read(o: &Options, problem: Problem) -> Result<Geometry, PrimError> {
        let task = Geometry { problem, ..o.parse()? };
        let needed = task.points.max(TEST_POINTS[1]);
        if task.features < needed {
            let why = format!("`features` must be at least {needed}, one per point (found {})", task.features);
            return Err(PrimError::task(why).on("features"));
        }
        Ok(task)
    }
}

impl Task for Geometry {
    fn input(&self) -> Ty {
        Ty::Tensor(vec![self.features + 3])
    }
    fn target(&self) -> Target {
        Target::Classes(self.features)
    }
    fn test_splits(&self) -> &'static [&'static str] {
        TEST_SPLITS
    }
    fn data(&self, seed: u64, device: &Device) -> candle_core::Result<Box<dyn TaskData>> {
        Ok(Box::new(AnswerData::new(*self, seed, self.held_out, TEST_POINTS.len(), device)?))
    }
    fn task_metric_names(&self) -> &'static [&'static str] {
        match self.problem {
            Problem::Tour => &["tour_length", "valid_tours", "optimal_tour_length"],
            Problem::Hull => &[],
        }
    }
    fn task_metrics(&self, batch: &Batch, logits: &Tensor) -> candle_core::Result<Vec<(&'static str, f64, f64)>> {
        if self.problem != Problem::Tour {
            return Ok(vec![]);
        }
        let predicted: Vec<Vec<u32>> = logits.argmax(candle_core::D::Minus1)?.to_vec2()?;
        let targets: Vec<Vec<u32>> = batch.targets.to_vec2()?;
        let inputs: Vec<Vec<Vec<f32>>> = batch.inputs.to_vec3()?;
        Ok(tour_metrics(&inputs, &predicted, &targets))
    }
}

/// The TSP's tour metrics over a batch (time-major `inputs`, `predicted` and `targets`):
/// `tour_length`, the mean length of the predicted tours that are tours (every point once,
/// then back to the start), over those; `valid_tours`, the fraction that are; and
/// `optimal_tour_length`, the mean length of the target tours (the paper's 2.05 and 2.88).
fn tour_metrics(
    inputs: &[Vec<Vec<f32>>],
    predicted: &[Vec<u32>],
    targets: &[Vec<u32>],
) -> Vec<(&'static str, f64, f64)> {
    let (steps, answers) = (inputs.len(), predicted.len());
    let n = steps - answers;
    let batch = inputs.first().map_or(0, Vec::len);
    let (mut length, mut valid, mut optimal) = (0.0, 0.0, 0.0);
    for b in 0..batch {
        let points: Vec<Point> = (0..n).map(|t| (inputs[t][b][0] as f64, inputs[t][b][1] as f64)).collect();
        let label: Vec<usize> =
            (0..n).map(|t| inputs[t][b][2..].iter().position(|v| *v == 1.0).unwrap_or(usize::MAX)).collect();
        let indices = |labels: Vec<u32>| -> Option<Vec<usize>> {
            labels.into_iter().map(|l| label.iter().position(|&x| x == l as usize)).collect()
        };
        let tour = |column: &[Vec<u32>]| indices(column.iter().map(|row| row[b]).collect());
        if let Some(t) = tour(targets) {
            optimal += geometry::tour_length(&points, &t[..n]);
        }
        if let Some(t) = tour(predicted) {
            let mut seen = t[..n].to_vec();
            seen.sort_unstable();
            seen.dedup();
            if seen.len() == n && t[n] == t[0] {
                length += geometry::tour_length(&points, &t[..n]);
                valid += 1.0;
            }
        }
    }
    vec![
        ("tour_length", length, valid),
        ("valid_tours", valid, batch as f64),
        ("optimal_tour_length", optimal, batch as f64),
    ]
}

impl Generator for Geometry {
    type Size = usize;

    fn width(&self) -> usize {
        self.features + 3
    }

    fn size(&self, rng: &mut ChaCha8Rng, split: Option<Split>) -> usize {
        match split {
            Some(Split::Test(i)) => TEST_POINTS[i.min(TEST_POINTS.len() - 1)],
            _ => rng.random_range(self.min_points..=self.points),
        }
    }

    fn example(&self, rng: &mut ChaCha8Rng, n: usize) -> Example {
        let points: Vec<Point> = (0..n).map(|_| (rng.random::<f64>(), rng.random::<f64>())).collect();
        let labels = features(rng, n, self.features);
        let width = self.width();
        let mut question = vec![0f32; n * width];
        for (i, row) in question.chunks_exact_mut(width).enumerate() {
            row[0] = points[i].0 as f32;
            row[1] = points[i].1 as f32;
            row[2 + labels[i] as usize] = 1.0;
        }
        let answer = match self.problem {
            Problem::Hull => geometry::convex_hull(&points).into_iter().map(|i| labels[i]).collect(),
            Problem::Tour => {
                let tour = geometry::optimal_tour(&points);
                // A closed tour: back to the start at the end.
                tour.iter().chain(tour.first()).map(|&i| labels[i]).collect()
            }
        };
        Example { question, answer }
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::super::answers::testing;
    use super::*;

    /// Reads the points and features back from the inputs and re-solves.
    pub(in super::super) fn check_answers(kind: &dyn TaskKind, solve: fn(&[Point]) -> Vec<usize>, closed: bool) {
        let data = kind.instantiate(&[]).unwrap().data(5, &Device::Cpu).unwrap();
        for (split, points) in [(Split::Test(0), Some(5)), (Split::Test(1), Some(10)), (Split::Validation, None)] {
            let examples = testing::examples(data.as_ref(), split);
            assert!(!examples.is_empty());
            for (rows, answer) in examples {
                if let Some(n) = points {
                    assert_eq!(rows.len(), n);
                }
                let p: Vec<Point> = rows.iter().map(|r| (r[0] as f64, r[1] as f64)).collect();
                let label: Vec<u32> =
                    rows.iter().map(|r| r[2..r.len() - 1].iter().position(|v| *v == 1.0).unwrap() as u32).collect();
                let mut sorted = label.clone();
                sorted.sort();
                sorted.dedup();
                assert_eq!(sorted.len(), label.len(), "distinct features");
                let mut want: Vec<u32> = solve(&p).into_iter().map(|i| label[i]).collect();
                if closed {
                    want.push(want[0]);
                }
                assert_eq!(answer, want);
            }
        }
    }

    #[test]
    fn tour_metrics_score_valid_tours_and_count_the_others() {
        // Two examples of the rectangle (0,0) (1,0.5) (1,0) (0,0.5), features 0..4 in order.
        let points = [(0.0, 0.0), (1.0, 0.5), (1.0, 0.0), (0.0, 0.5)];
        let row = |i: usize| {
            let mut r = vec![points[i].0 as f32, points[i].1 as f32, 0.0, 0.0, 0.0, 0.0, 0.0];
            r[2 + i] = 1.0;
            r
        };
        let answer = vec![0.0; 7];
        let inputs: Vec<Vec<Vec<f32>>> =
            (0..9).map(|t| if t < 4 { vec![row(t), row(t)] } else { vec![answer.clone(), answer.clone()] }).collect();
        let optimal = [0u32, 3, 1, 2, 0];
        let crossed = [0u32, 1, 3, 2, 0]; // a valid tour, longer
        let broken = [0u32, 1, 1, 2, 0]; // point 1 twice: not a tour
        let column = |a: &[u32], b: &[u32]| (0..5).map(|s| vec![a[s], b[s]]).collect::<Vec<_>>();
        let m = tour_metrics(&inputs, &column(&crossed, &broken), &column(&optimal, &optimal));
        let crossed_length = 2.0 * (1.25f64).sqrt() + 2.0;
        assert_eq!((m[0].0, m[0].2), ("tour_length", 1.0));
        assert!((m[0].1 - crossed_length).abs() < 1e-6, "{m:?}");
        assert_eq!(m[1], ("valid_tours", 1.0, 2.0));
        assert_eq!(m[2], ("optimal_tour_length", 6.0, 2.0));
    }

    #[test]
    fn answers_are_the_hull_corners_features_in_order() {
        check_answers(&ConvexHullKind, geometry::convex_hull, false);
    }

    #[test]
    fn same_seed_same_data() {
        testing::determinism(&ConvexHullKind, &[]);
    }

    #[test]
    fn too_few_features_is_refused_at_the_option() {
        let e = ConvexHullKind.instantiate(&[Value::Int(20), Value::Int(5), Value::Int(8)]).err().unwrap();
        assert!(e.to_string().contains("`features` must be at least 20"), "{e}");
    }
}
