//! What every registered task generator must do, checked once over [`TASKS`] rather than
//! repeated in each task's file: configure from its defaults, draw the same data from the same
//! seed, and give batches of the types it declares. Each failure names its task. The readers
//! of files have no default data; their own files test them.

use candle_core::DType;

use super::prelude::*;
use super::*;

/// Every option at its default, as the checker fills them in.
fn defaults(kind: &dyn TaskKind) -> Vec<Value> {
    kind.signature()
        .iter()
        .map(|s| s.default.value().unwrap_or_else(|| panic!("{}: `{}` has no default", kind.name(), s.name)))
        .collect()
}

/// The generators (not the readers of files), each configured by its defaults.
fn generators() -> impl Iterator<Item = (&'static str, Box<dyn Task>)> {
    TASKS.iter().filter(|k| k.reads().is_none()).map(|kind| {
        let task = kind.instantiate(&defaults(*kind)).unwrap_or_else(|e| panic!("{}: {e}", kind.name()));
        (kind.name(), task)
    })
}

/// A tensor as its dims and its values (token ids widened to floats, exactly).
fn numbers(t: &Tensor) -> (Vec<usize>, Vec<f32>) {
    (t.dims().to_vec(), t.to_dtype(DType::F32).unwrap().flatten_all().unwrap().to_vec1().unwrap())
}

/// One part of a trial's data (a training batch, or a held-out split's batches) as numbers.
type Part = Vec<((Vec<usize>, Vec<f32>), Vec<usize>, (Vec<usize>, Vec<f32>))>;

fn part(batches: &[Batch]) -> Part {
    batches.iter().map(|b| (numbers(&b.inputs), b.scored.clone(), numbers(&b.targets))).collect()
}

/// A trial's data from `seed`: a training batch of 16, then every held-out split whole, by name.
fn draw(task: &dyn Task, seed: u64) -> Vec<(String, Part)> {
    let mut data = task.data(seed, &Device::Cpu).unwrap();
    let mut parts = vec![("training batch".to_string(), part(&[data.train_batch(16).unwrap()]))];
    parts.push(("validation set".to_string(), part(&data.eval_batches(Split::Validation, 1000).unwrap())));
    for (i, split) in task.test_splits().iter().enumerate() {
        parts.push((format!("test set `{split}`"), part(&data.eval_batches(Split::Test(i), 1000).unwrap())));
    }
    parts
}

#[test]
fn every_task_instantiates_from_its_defaults() {
    for kind in TASKS.iter().filter(|k| k.reads().is_none()) {
        if let Err(e) = kind.instantiate(&defaults(*kind)) {
            panic!("{}: {e}", kind.name());
        }
    }
}

/// Recorded runs and `tests/integration` rely on a seed fixing a trial's data; another seed
/// must draw other data in every part, or trials of different seeds would repeat each other.
#[test]
fn every_generator_draws_the_same_data_from_a_seed_and_other_data_from_another() {
    for (name, task) in generators() {
        let three = draw(&*task, 3);
        assert!(three == draw(&*task, 3), "{name}: seed 3 drew other data the second time");
        for ((part, a), (_, b)) in three.iter().zip(draw(&*task, 4)) {
            assert!(*a != b, "{name}: seeds 3 and 4 drew the same {part}");
        }
    }
}

/// The model is built from the declared input and target, the data comes from the batches:
/// they must agree. Inputs `[T, B]` token ids below the vocabulary, or `[T, B, shape…]` floats;
/// targets `[S, B]` class ids below the classes, or `[S, B, n]` bits, at `S` scored steps.
#[test]
fn every_generators_batches_have_the_types_it_declares() {
    for (name, task) in generators() {
        let mut data = task.data(1, &Device::Cpu).unwrap();
        let mut batches = vec![data.train_batch(4).unwrap()];
        batches.extend(data.eval_batches(Split::Validation, 4).unwrap());
        for b in batches {
            let (t, n) = (b.steps().unwrap(), b.batch_size().unwrap());
            let s = b.scored.len();
            assert!(b.scored.windows(2).all(|w| w[0] < w[1]), "{name}: scored steps out of order");
            assert!(b.scored.iter().all(|&i| i < t), "{name}: a scored step past the last of {t}");
            match task.input() {
                Ty::Tokens(v) => {
                    assert_eq!((b.inputs.dtype(), b.inputs.dims()), (DType::U32, &[t, n][..]), "{name}: inputs");
                    assert!(numbers(&b.inputs).1.iter().all(|&i| (i as usize) < v), "{name}: a token id ≥ {v}");
                }
                Ty::Tensor(shape) => {
                    let dims: Vec<usize> = [t, n].into_iter().chain(shape).collect();
                    assert_eq!((b.inputs.dtype(), b.inputs.dims()), (DType::F32, &dims[..]), "{name}: inputs");
                }
            }
            match task.target() {
                Target::Classes(c) => {
                    assert_eq!((b.targets.dtype(), b.targets.dims()), (DType::U32, &[s, n][..]), "{name}: targets");
                    assert!(numbers(&b.targets).1.iter().all(|&i| (i as usize) < c), "{name}: a class ≥ {c}");
                }
                Target::Bits(w) => {
                    assert_eq!((b.targets.dtype(), b.targets.dims()), (DType::F32, &[s, n, w][..]), "{name}: targets");
                    assert!(numbers(&b.targets).1.iter().all(|&x| x == 0.0 || x == 1.0), "{name}: a bit not 0 or 1");
                }
            }
        }
    }
}

/// `kind` with its defaults, and `changes` (option, value) in their place.
fn configured(kind: &dyn TaskKind, changes: &[(&str, i64)]) -> Box<dyn Task> {
    let mut options = defaults(kind);
    for (name, value) in changes {
        let at = kind.signature().iter().position(|s| s.name == *name);
        options[at.unwrap_or_else(|| panic!("{}: no option `{name}`", kind.name()))] = Value::Int(*value);
    }
    kind.instantiate(&options).unwrap_or_else(|e| panic!("{}: {e}", kind.name()))
}

/// The memory estimate bounds a trial's data by [`Task::max_steps`] before generating any:
/// no example may be longer. Every generator states it, except learnToExecute, whose program
/// text its options do not bound in a closed form. Each is checked at its defaults and at
/// other sizes, over many training examples and every held-out set.
#[test]
fn no_generated_example_is_longer_than_its_tasks_max_steps() {
    let other_sizes: &[(&str, &[(&str, i64)])] = &[
        ("copy", &[("min_len", 3), ("max_len", 7)]),
        ("prioritySort", &[("inputs", 9), ("outputs", 4)]),
        ("rar", &[("max_items", 6), ("max_len", 4)]),
        ("nthFarthest", &[("vectors", 3)]),
        ("addition", &[("digits", 3), ("min_digits", 2)]),
        ("palindrome", &[("digits", 4)]),
        ("reduce", &[("digits", 2)]),
        ("patternCompletion", &[("patterns", 5), ("queries", 3)]),
        ("randomSequence", &[("length", 11)]),
        ("convexHull", &[("points", 14), ("min_points", 12)]),
        ("tsp", &[("points", 6), ("min_points", 6)]),
        ("shortestPath", &[("nodes", 6), ("min_nodes", 6), ("edges", 15), ("min_edges", 15)]),
        ("spanningTree", &[("nodes", 4), ("min_nodes", 3), ("edges", 5), ("min_edges", 3)]),
        ("listOps", &[("max_length", 30), ("min_length", 5)]),
        ("rgbBinding", &[("triplets", 3), ("queries", 2)]),
        ("assocRetrieval", &[("pairs", 5)]),
    ];
    let mut configurations: Vec<(String, Box<dyn Task>)> =
        generators().map(|(name, task)| (format!("{name} (defaults)"), task)).collect();
    for (name, changes) in other_sizes {
        let kind = get(name).unwrap_or_else(|| panic!("no task {name}"));
        configurations.push((format!("{name} {changes:?}"), configured(kind, changes)));
    }
    for (name, task) in configurations {
        let Some(most) = task.max_steps() else {
            assert!(name.starts_with("learnToExecute"), "{name}: no max_steps");
            continue;
        };
        let mut data = task.data(5, &Device::Cpu).unwrap();
        let mut batches: Vec<Batch> = (0..200).map(|_| data.train_batch(1).unwrap()).collect();
        batches.extend(data.eval_batches(Split::Validation, 64).unwrap());
        for i in 0..task.test_splits().len() {
            batches.extend(data.eval_batches(Split::Test(i), 64).unwrap());
        }
        let longest = batches.iter().map(|b| b.steps().unwrap()).max().unwrap();
        assert!(longest <= most, "{name}: an example of {longest} steps, past max_steps {most}");
    }
}
