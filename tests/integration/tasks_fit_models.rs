//! Every task generator, checked against a tiny model and trained for two steps: the checker
//! accepts the task's input and target types, and the generated batches run through the
//! compiled cell, the loss and every held-out split. The readers of data sets on disk (`babi`,
//! `corpus`, `jsonl`) get small files written here.

use std::sync::atomic::AtomicBool;

use candle_core::Device;
use memctl::train::{Ending, Outcome, Silent, train};
use memctl::{check, lang};

use crate::support::token_lstm;

/// Checks `text`, then trains each experiment's first trial for its two steps: (experiment,
/// outcome) for each, once it ran to the end.
fn trained_for_two_steps(name: &str, text: &str) -> Vec<(String, Outcome)> {
    let spec = lang::parse_str(name, text).expect("parses");
    let program = match check::check(&spec, &memctl::prims::Primitives) {
        Ok(p) => p,
        Err(d) => panic!("check failed:\n{}", d.render(&spec.sources, false)),
    };
    let outcomes: Vec<_> = program
        .experiments
        .iter()
        .map(|plan| (plan.name.clone(), train(&plan.trials[0], &Device::Cpu, &Silent, &AtomicBool::new(false))))
        .collect();
    for (name, out) in &outcomes {
        assert_eq!(out.ending, Ending::Done, "{name}: {}", out.stop_reason);
        assert_eq!(out.steps_run, 2, "{name}");
    }
    outcomes
}

fn spec() -> String {
    format!("{GENERATED_TASKS}{}{GENERATED_EXPERIMENTS}", token_lstm("tok_lstm", 8))
}

const GENERATED_TASKS: &str = r#"
task nfar  = nthFarthest(vectors = 4, dims = 3, validation = 8, test = 8)
task cp    = copy(width = 4, min_len = 1, max_len = 3, validation = 8, test = 8)
task psort = prioritySort(width = 4, inputs = 5, outputs = 3, validation = 8, test = 8)
task rr    = rar(width = 4, min_items = 2, max_items = 3, min_len = 1, max_len = 2, validation = 8, test = 8)
task pc    = patternCompletion(patterns = 3, bits = 8, noise = 0.1, queries = 2, validation = 8, test = 8)
task add   = addition(digits = 3, train = 32, validation = 8, test = 8)
task pal   = palindrome(digits = 3, train = 32, validation = 8, test = 8)
task red   = reduce(digits = 3, train = 32, validation = 8, test = 8)
task lte   = learnToExecute(mode = "program", length = 2, nesting = 2, validation = 8, test = 8)
task dbl   = learnToExecute(mode = "double", length = 3, validation = 8, test = 8)
task son   = learnToExecute(mode = "control", length = 2, nesting = 2, grammar = "sonnet", curriculum = "combine",
                            level_batches = 1, validation = 8, test = 8)
task ar    = assocRetrieval(pairs = 2, train = 32, validation = 8, test = 8)
task rnd   = randomSequence(input = 3, output = 2, length = 3)
task hull  = convexHull(points = 5, min_points = 3, features = 10, validation = 8, test = 8)
task tour  = tsp(points = 5, min_points = 3, features = 10, validation = 8, test = 8)
task path  = shortestPath(nodes = 4, min_nodes = 3, edges = 4, min_edges = 3, features = 6, validation = 8, test = 8)
task tree  = spanningTree(nodes = 4, min_nodes = 3, edges = 4, min_edges = 3, features = 6, validation = 8, test = 8)
task lops  = listOps(max_depth = 2, max_args = 3, min_length = 3, max_length = 12, validation = 8, test = 8)
task rgb   = rgbBinding(triplets = 3, bits = 8, classes = 4, queries = 2, validation = 8, test = 8)

model vec_lstm(hidden = 8) {
  state c = zeros(hidden)
  state h = zeros(hidden)
  step x {
    c, h = lstmCell(c, h, x)
    out linear(h, output_size)
  }
}

"#;

const GENERATED_EXPERIMENTS: &str = r#"
experiment nfar  { task nfar  model vec_lstm train { batch = 4, steps = 2, eval_every = 1 } }
experiment cp    { task cp    model vec_lstm train { batch = 4, steps = 2, eval_every = 1 } }
experiment psort { task psort model vec_lstm train { batch = 4, steps = 2, eval_every = 1 } }
experiment rr    { task rr    model vec_lstm train { batch = 4, steps = 2, eval_every = 1 } }
experiment pc    { task pc    model vec_lstm train { batch = 4, steps = 2, eval_every = 1 } }
experiment add   { task add   model tok_lstm train { batch = 4, steps = 2, eval_every = 1 } }
experiment pal   { task pal   model tok_lstm train { batch = 4, steps = 2, eval_every = 1 } }
experiment red   { task red   model tok_lstm train { batch = 4, steps = 2, eval_every = 1 } }
experiment lte   { task lte   model tok_lstm train { batch = 4, steps = 2, eval_every = 1 } }
experiment dbl   { task dbl   model tok_lstm train { batch = 4, steps = 2, eval_every = 1 } }
experiment son   { task son   model tok_lstm train { batch = 4, steps = 2, eval_every = 1 } }
experiment ar    { task ar    model tok_lstm train { batch = 4, steps = 2, eval_every = 1 } }
experiment rnd   { task rnd   model vec_lstm train { batch = 4, steps = 2, eval_every = 1 } }
experiment hull  { task hull  model vec_lstm train { batch = 4, steps = 2, eval_every = 1 } }
experiment tour  { task tour  model vec_lstm train { batch = 4, steps = 2, eval_every = 1 } }
experiment path  { task path  model vec_lstm train { batch = 4, steps = 2, eval_every = 1 } }
experiment tree  { task tree  model vec_lstm train { batch = 4, steps = 2, eval_every = 1 } }
experiment lops  { task lops  model tok_lstm train { batch = 4, steps = 2, eval_every = 1 } }
experiment rgb   { task rgb   model vec_lstm train { batch = 4, steps = 2, eval_every = 1 } }
"#;

#[test]
fn every_task_checks_and_trains_with_a_tiny_model() {
    let outcomes = trained_for_two_steps("tasks.mem", &spec());
    assert_eq!(outcomes.len(), 19);
    for (name, out) in &outcomes {
        let metric = match name.as_str() {
            "cp" | "psort" | "rr" | "pc" | "rnd" | "rgb" => "bit_error",
            _ => "seq_accuracy",
        };
        assert!(out.final_metrics.contains_key(metric), "{}: {:?}", name, out.final_metrics);
        assert!(out.curves.contains_key(&format!("val_{metric}")), "{}", name);
        if ["add", "pal", "red"].contains(&name.as_str()) {
            for split in ["od_easy", "od_hard"] {
                assert!(
                    out.final_metrics.contains_key(&format!("{split}_seq_accuracy")),
                    "{}: {:?}",
                    name,
                    out.final_metrics.keys()
                );
            }
        }
    }
}

/// The two tests above and below call every registered task: a new task joins them.
#[test]
fn every_registered_task_is_called_by_these_tests() {
    let text = include_str!("tasks_fit_models.rs");
    let missing: Vec<&str> =
        memctl::tasks::TASKS.iter().map(|t| t.name()).filter(|n| !text.contains(&format!("= {n}("))).collect();
    assert!(missing.is_empty(), "tasks no test here calls: {missing:?}");
}

#[test]
fn a_model_that_does_not_fit_the_task_is_rejected() {
    // A float-input model on a token task: the checker must refuse it.
    let spec =
        spec().replace("experiment add   { task add   model tok_lstm", "experiment add   { task add   model vec_lstm");
    let spec = lang::parse_str("tasks.mem", &spec).expect("parses");
    let Err(errors) = check::check(&spec, &memctl::prims::Primitives) else {
        panic!("a float-input model checked against token input")
    };
    let text = format!("{errors:?}");
    assert!(text.contains("token"), "{text}");
}

/// The readers of data sets, on small files written here: each checks against a tiny token
/// model, trains two steps and reports its own metrics on every test split.
#[test]
fn data_readers_check_and_train_with_a_tiny_model() {
    let dir = tempfile::tempdir().unwrap();
    let babi = dir.path().join("babi");
    crate::support::write_babi(&babi);
    let corpus = dir.path().join("corpus");
    std::fs::create_dir(&corpus).unwrap();
    for (name, text) in [
        ("train.txt", "the cat sat on the mat\n".repeat(8)),
        ("valid.txt", "the mat sat\n".into()),
        ("test.txt", "a cat\n".into()),
    ] {
        std::fs::write(corpus.join(name), text).unwrap();
    }
    let jsonl = dir.path().join("examples.jsonl");
    let lines: String = (0..20)
        .map(|i| format!("{{\"input\": [{}, {}], \"target\": [{}]}}\n", i % 7, i % 3, (i % 7 + i % 3) % 4))
        .collect();
    std::fs::write(&jsonl, lines).unwrap();
    let spec = format!(
        r#"
task qa = babi(path = "{}", max_facts = 3)
task lm = corpus(path = "{}", level = "word", length = 4)
task ch = corpus(path = "{}", length = 6)
task js = jsonl(path = "{}", valid = 0.2, test = 0.2)

{}
experiment qa {{ task qa model tok_lstm train {{ batch = 4, steps = 2, eval_every = 1 }} }}
experiment lm {{ task lm model tok_lstm train {{ batch = 4, steps = 2, eval_every = 1 }} }}
experiment ch {{ task ch model tok_lstm train {{ batch = 4, steps = 2, eval_every = 1 }} }}
experiment js {{ task js model tok_lstm train {{ batch = 4, steps = 2, eval_every = 1 }} }}
"#,
        babi.display(),
        corpus.display(),
        corpus.join("train.txt").display(),
        jsonl.display(),
        token_lstm("tok_lstm", 8)
    );
    let outcomes = trained_for_two_steps("readers.mem", &spec);
    assert_eq!(outcomes.len(), 4);
    for (name, out) in &outcomes {
        let metrics: &[&str] = match name.as_str() {
            "qa" => &["error", "accuracy", "qa1_error", "qa20_error"],
            "lm" => &["perplexity", "accuracy"],
            "ch" => &["perplexity", "bits_per_char"],
            _ => &["seq_accuracy", "accuracy"],
        };
        for m in metrics {
            let v = out.final_metrics.get(*m).unwrap_or_else(|| panic!("{}: no {m} in {:?}", name, out.final_metrics));
            assert!(v.is_finite(), "{}: {m} = {v}", name);
        }
        if let Some(p) = out.final_metrics.get("perplexity") {
            // exp of a mean cross-entropy, near the vocabulary size for an untrained model.
            assert!(*p > 1.0 && *p < 100.0, "{}: perplexity {p}", name);
        }
        if let Some(e) = out.final_metrics.get("error") {
            assert!((0.0..=100.0).contains(e), "{e}");
            let accuracy = out.final_metrics["accuracy"];
            assert!((e - 100.0 * (1.0 - accuracy)).abs() < 1e-9, "error is 100 (1 - accuracy): {e} vs {accuracy}");
        }
    }
}
