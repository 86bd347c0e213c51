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
//!
//! Two label encodings (`labels`):
//! - `"random"` (the default): every point's feature is drawn from F, distinct within an
//!   example, in every split; the answer has no end token.
//! - `"code"`: the authors' code (SAM's `datasets/convexhull.py` and `tsp.py`). The labels are
//!   1..N, shuffled in training and validation and each point's input position at test
//!   (`random_mode=False`), one-hot over N_max + 2 classes (N_max the most points of any split;
//!   `features` is not used); channel 2 marks the last point; the answer ends with the end
//!   token N_max + 1, which the model must produce (for the TSP, in place of the closing return
//!   to the start). The SAM paper's Table 3 numbers come from this encoding.

use rand::Rng;
use rand::seq::SliceRandom;
use rand_chacha::ChaCha8Rng;

use super::answers::{AnswerData, Example, Generator, features};
use super::define::task_kind;
use super::geometry::{self, Point};
use super::held_out::HeldOut;
use super::options::{Options, TaskOption};
use super::prelude::*;

/// The options of a geometry task (then `held_out: (512, 2048)`): `points` defaults to
/// `default_points`, and point counts go from 3 up to `most`.
pub(super) const fn geometry_options(default_points: i64, most: i64) -> [TaskOption; 4] {
    [
        TaskOption::int("points", default_points, 3, most).at_least("min_points"),
        TaskOption::int("min_points", 5, 3, most),
        TaskOption::int("features", 20, 1, 4096),
        TaskOption::choice("labels", "random", &["random", "code"]).left_out_of_identity_at_default(),
    ]
}

static OPTIONS: [TaskOption; 4] = geometry_options(20, 100);

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

/// How points are labelled (the module comment).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub(super) enum Labels {
    /// Distinct features drawn from `features`, no end token.
    Random,
    /// The authors' code: 1..N shuffled (input positions at test), then an end token.
    Code,
}

/// The configured geometry task, shared with [`super::tsp`].
#[derive(Clone, Copy, Debug, serde::Deserialize)]
pub(super) struct Geometry {
    pub points: usize,
    pub min_points: usize,
    pub features: usize,
    pub labels: Labels,
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
        if task.labels == Labels::Random && task.features < needed {
            let why = format!("`features` must be at least {needed}, one per point (found {})", task.features);
            return Err(PrimError::task(why).on("features"));
        }
        Ok(task)
    }
}

impl Geometry {
    /// The classes an answer step chooses from: the features, or with the code's labels the
    /// labels 1..=N_max, the end token and the unused 0.
    fn classes(&self) -> usize {
        match self.labels {
            Labels::Random => self.features,
            Labels::Code => self.points.max(TEST_POINTS[1]) + 2,
        }
    }

    /// The end token that closes every answer, with the code's labels.
    fn end_token(&self) -> Option<u32> {
        (self.labels == Labels::Code).then(|| self.classes() as u32 - 1)
    }

    /// The labels of `n` points: distinct features, or the code's 1..=n (shuffled, or in
    /// input order for `positions`).
    fn draw_labels(&self, rng: &mut ChaCha8Rng, n: usize, positions: bool) -> Vec<u32> {
        match self.labels {
            Labels::Random => features(rng, n, self.features),
            Labels::Code => {
                let mut labels: Vec<u32> = (1..=n as u32).collect();
                if !positions {
                    labels.shuffle(rng);
                }
                labels
            }
        }
    }
}

impl Task for Geometry {
    fn max_steps(&self) -> Option<usize> {
        // The points (the test splits' up to 10 whatever the options), then at most every point
        // and the way back or the end token.
        let points = self.points.max(TEST_POINTS.into_iter().max().unwrap_or(0));
        Some(2 * points + 2)
    }
    fn input(&self) -> Ty {
        Ty::Tensor(vec![self.classes() + 3])
    }
    fn target(&self) -> Target {
        Target::Classes(self.classes())
    }
    fn test_splits(&self) -> &'static [&'static str] {
        TEST_SPLITS
    }
    /// Chance: every answer step one of the example's points at random, 1 in N for the test
    /// sets' N = 5 (`accuracy`) and N = 10 (`n10_accuracy`), for the hull and the tour alike.
    fn trivial_levels(&self) -> Vec<TrivialLevel> {
        let chance = |metric, n: usize| TrivialLevel::new("chance (a point of the example)", metric, 1.0 / n as f64);
        vec![chance("accuracy", TEST_POINTS[0]), chance("n10_accuracy", TEST_POINTS[1])]
    }
    fn data(&self, seed: u64, device: &Device) -> candle_core::Result<Box<dyn TaskData>> {
        Ok(Box::new(AnswerData::new(*self, seed, self.held_out, TEST_POINTS.len(), device)?))
    }
    fn task_metric_names(&self) -> &'static [&'static str] {
        match self.problem {
            Problem::Tour => &["tour_length", "valid_tour_length", "valid_tours", "optimal_tour_length"],
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
        Ok(tour_metrics(&inputs, &predicted, &targets, self.end_token()))
    }
}

/// The TSP's tour metrics over a batch (time-major `inputs`, `predicted` and `targets`):
/// - `tour_length`, the paper's: the mean length of the path through every predicted answer,
///   valid tour or not, as the authors' `get_path_len_naive` measures it ([`predicted_path_length`]);
/// - `valid_tour_length`, the mean length of the predicted tours that are tours (every point
///   once, then back to the start, or the `end` token where answers end with one), over those;
/// - `valid_tours`, the fraction that are;
/// - `optimal_tour_length`, the mean length of the target tours.
fn tour_metrics(
    inputs: &[Vec<Vec<f32>>],
    predicted: &[Vec<u32>],
    targets: &[Vec<u32>],
    end: Option<u32>,
) -> Vec<(&'static str, f64, f64)> {
    let (steps, answers) = (inputs.len(), predicted.len());
    let n = steps - answers;
    let batch = inputs.first().map_or(0, Vec::len);
    let (mut path, mut length, mut valid, mut optimal) = (0.0, 0.0, 0.0, 0.0);
    for b in 0..batch {
        let points: Vec<Point> = (0..n).map(|t| (inputs[t][b][0] as f64, inputs[t][b][1] as f64)).collect();
        // The label is the last set channel before the answer flag (with the code's labels,
        // channel 2 also marks the last point).
        let label: Vec<usize> = (0..n)
            .map(|t| {
                let row = &inputs[t][b];
                row[2..row.len() - 1].iter().rposition(|v| *v == 1.0).unwrap_or(usize::MAX)
            })
            .collect();
        let point_of = |l: u32| label.iter().position(|&x| x == l as usize);
        let tour = |column: &[Vec<u32>]| -> Option<Vec<usize>> { column.iter().map(|row| point_of(row[b])).collect() };
        if let Some(t) = tour(&targets[..n]) {
            optimal += geometry::tour_length(&points, &t);
        }
        let answered: Vec<Option<usize>> = predicted.iter().map(|row| point_of(row[b])).collect();
        path += predicted_path_length(&points, &answered);
        let closes = |t: &[usize]| match end {
            Some(end) => predicted[n][b] == end,
            None => answered[n] == Some(t[0]),
        };
        if let Some(t) = answered[..n].iter().copied().collect::<Option<Vec<usize>>>() {
            let mut seen = t.clone();
            seen.sort_unstable();
            seen.dedup();
            if seen.len() == n && closes(&t) {
                length += geometry::tour_length(&points, &t);
                valid += 1.0;
            }
        }
    }
    vec![
        ("tour_length", path, batch as f64),
        ("valid_tour_length", length, valid),
        ("valid_tours", valid, batch as f64),
        ("optimal_tour_length", optimal, batch as f64),
    ]
}

/// The length of the path through the predicted points in order (`answered[t]`: the point the
/// answer step `t` names, `None` when its feature is no point's), one edge per answer step but
/// the last, as SAM's `get_path_len_naive` measures every prediction: repeated points count
/// again, and an answer that names no point counts as the first input point when it is an
/// edge's end and as the last input point when it is an edge's start (the code's clamping of
/// out-of-range indices).
fn predicted_path_length(points: &[Point], answered: &[Option<usize>]) -> f64 {
    let last = points.len() - 1;
    answered.windows(2).map(|w| geometry::distance(points[w[0].unwrap_or(last)], points[w[1].unwrap_or(0)])).sum()
}

/// The size of one example: its points, and whether the code's labels are input positions
/// (its test sets) rather than shuffled.
#[derive(Clone, Copy, Debug)]
pub(super) struct Draw {
    points: usize,
    positions: bool,
}

impl Generator for Geometry {
    type Size = Draw;

    fn width(&self) -> usize {
        self.classes() + 3
    }

    fn size(&self, rng: &mut ChaCha8Rng, split: Option<Split>) -> Draw {
        match split {
            Some(Split::Test(i)) => Draw { points: TEST_POINTS[i.min(TEST_POINTS.len() - 1)], positions: true },
            _ => Draw { points: rng.random_range(self.min_points..=self.points), positions: false },
        }
    }

    fn example(&self, rng: &mut ChaCha8Rng, draw: Draw) -> Example {
        let n = draw.points;
        let points: Vec<Point> = (0..n).map(|_| (rng.random::<f64>(), rng.random::<f64>())).collect();
        let labels = self.draw_labels(rng, n, draw.positions);
        let width = self.width();
        let mut question = vec![0f32; n * width];
        for (i, row) in question.chunks_exact_mut(width).enumerate() {
            row[0] = points[i].0 as f32;
            row[1] = points[i].1 as f32;
            row[2 + labels[i] as usize] = 1.0;
        }
        if self.labels == Labels::Code {
            question[(n - 1) * width + 2] = 1.0;
        }
        let mut answer: Vec<u32> = match self.problem {
            Problem::Hull => geometry::convex_hull(&points).into_iter().map(|i| labels[i]).collect(),
            Problem::Tour => {
                let tour = geometry::optimal_tour(&points);
                // A closed tour: back to the start at the end (or the end token, below).
                tour.iter().chain(tour.first()).map(|&i| labels[i]).collect()
            }
        };
        if let Some(end) = self.end_token() {
            if self.problem == Problem::Tour {
                answer.pop();
            }
            answer.push(end);
        }
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
    fn tour_metrics_score_every_prediction_and_the_valid_tours_apart() {
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
        let m = tour_metrics(&inputs, &column(&crossed, &broken), &column(&optimal, &optimal), None);
        let diagonal = (1.25f64).sqrt();
        let crossed_length = 2.0 * diagonal + 2.0;
        // The broken answer's path: (0,0)→(1,0.5)→(1,0.5)→(1,0)→(0,0), its repeat costing nothing.
        let broken_path = diagonal + 0.0 + 0.5 + 1.0;
        assert_eq!((m[0].0, m[0].2), ("tour_length", 2.0), "every prediction counts");
        assert!((m[0].1 - (crossed_length + broken_path)).abs() < 1e-6, "{m:?}");
        assert_eq!((m[1].0, m[1].2), ("valid_tour_length", 1.0), "only the valid tour counts");
        assert!((m[1].1 - crossed_length).abs() < 1e-6, "{m:?}");
        assert_eq!(m[2], ("valid_tours", 1.0, 2.0));
        assert_eq!(m[3], ("optimal_tour_length", 6.0, 2.0));
    }

    #[test]
    fn a_feature_of_no_point_is_clamped_as_the_authors_code_clamps_it() {
        let points = [(0.0, 0.0), (1.0, 0.0), (1.0, 1.0)];
        // An unknown start is the last point, an unknown end the first.
        let path = predicted_path_length(&points, &[Some(1), None, Some(1), Some(0)]);
        assert!((path - (1.0 + 1.0 + 1.0)).abs() < 1e-12, "{path}");
        assert_eq!(predicted_path_length(&points, &[None, None]), 2f64.sqrt(), "(1,1) back to (0,0)");
    }

    #[test]
    fn answers_are_the_hull_corners_features_in_order() {
        check_answers(&ConvexHullKind, geometry::convex_hull, false);
    }

    #[test]
    fn too_few_features_is_refused_at_the_option() {
        let e = ConvexHullKind.instantiate(&[Value::Int(20), Value::Int(5), Value::Int(8)]).err().unwrap();
        assert!(e.to_string().contains("`features` must be at least 20"), "{e}");
    }

    /// The options of a hull or TSP task with the authors' code's labels.
    pub(in super::super) fn code_labels(points: i64) -> Vec<Value> {
        vec![Value::Int(points), Value::Int(5), Value::Int(20), Value::Str("code".into())]
    }

    /// Reads an example back: its points and each point's label (the last set channel).
    fn points_and_labels(rows: &[Vec<f32>]) -> (Vec<Point>, Vec<u32>) {
        let points = rows.iter().map(|r| (r[0] as f64, r[1] as f64)).collect();
        let labels = rows.iter().map(|r| r[2..r.len() - 1].iter().rposition(|v| *v == 1.0).unwrap() as u32).collect();
        (points, labels)
    }

    /// With `labels = "code"`: test labels are the input positions 1..=N, validation labels a
    /// shuffle of 1..=N, channel 2 marks the last point, and every answer is the solution's
    /// labels then the end token (for the TSP in place of the return to the start); the
    /// data is the seed's, as with the default labels.
    pub(in super::super) fn check_code_labels(kind: &dyn TaskKind, solve: fn(&[Point]) -> Vec<usize>, points: i64) {
        let task = kind.instantiate(&code_labels(points)).unwrap();
        let classes = points.max(10) as u32 + 2;
        assert_eq!(task.target(), Target::Classes(classes as usize));
        let data = task.data(3, &Device::Cpu).unwrap();
        let mut shuffled = 0;
        for split in [Split::Test(0), Split::Test(1), Split::Validation] {
            for (rows, answer) in testing::examples(data.as_ref(), split) {
                let n = rows.len();
                let (p, labels) = points_and_labels(&rows);
                let mut sorted = labels.clone();
                sorted.sort();
                assert_eq!(sorted, (1..=n as u32).collect::<Vec<_>>(), "labels are 1..=N");
                if matches!(split, Split::Test(_)) {
                    assert_eq!(labels, sorted, "test labels are the input positions");
                } else if labels != sorted {
                    shuffled += 1;
                }
                let marks: Vec<usize> = (0..n).filter(|&t| rows[t][2] == 1.0).collect();
                assert_eq!(marks, vec![n - 1], "channel 2 marks the last point only");
                let mut want: Vec<u32> = solve(&p).into_iter().map(|i| labels[i]).collect();
                want.push(classes - 1);
                assert_eq!(answer, want, "the solution's labels, then the end token");
            }
        }
        assert!(shuffled > 0, "validation labels are shuffled");
        testing::determinism(kind, &code_labels(points));
    }

    #[test]
    fn code_labels_are_positions_at_test_and_end_with_the_end_token() {
        check_code_labels(&ConvexHullKind, geometry::convex_hull, 20);
    }

    #[test]
    fn code_labels_need_no_features_and_an_unknown_encoding_is_refused() {
        let mut options = code_labels(20);
        options[2] = Value::Int(8);
        assert!(ConvexHullKind.instantiate(&options).is_ok(), "`features` is not used by the code's labels");
        options[3] = Value::Str("sorted".into());
        let e = ConvexHullKind.instantiate(&options).err().unwrap();
        assert_eq!((e.arg, e.to_string().contains("\"random\", \"code\"")), (Some("labels"), true), "{e}");
    }

    #[test]
    fn tours_that_end_with_the_end_token_are_valid_and_measured_back_to_the_first_point() {
        // The rectangle of the test above, labels 1..=4 by position, end token 5.
        let points = [(0.0, 0.0), (1.0, 0.5), (1.0, 0.0), (0.0, 0.5)];
        let row = |i: usize| {
            let mut r = vec![points[i].0 as f32, points[i].1 as f32, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0];
            r[3 + i] = 1.0;
            if i == 3 {
                r[2] = 1.0;
            }
            r
        };
        let inputs: Vec<Vec<Vec<f32>>> = (0..9).map(|t| vec![if t < 4 { row(t) } else { vec![0.0; 9] }]).collect();
        let optimal = [vec![1u32], vec![4], vec![2], vec![3], vec![5]];
        let m = tour_metrics(&inputs, &optimal, &optimal, Some(5));
        assert_eq!(m[0], ("tour_length", 3.0, 1.0), "the end token closes the path at the first point");
        assert_eq!(m[1], ("valid_tour_length", 3.0, 1.0));
        assert_eq!(m[2], ("valid_tours", 1.0, 1.0));
        assert_eq!(m[3], ("optimal_tour_length", 3.0, 1.0));
        let unclosed = [vec![1u32], vec![4], vec![2], vec![3], vec![1]];
        let m = tour_metrics(&inputs, &unclosed, &optimal, Some(5));
        assert_eq!(m[2], ("valid_tours", 0.0, 1.0), "with an end token, a tour must end with it");
    }
}
