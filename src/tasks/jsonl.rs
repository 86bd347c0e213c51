//! Any token-sequence task, read from JSON-lines files: one example per line,
//!
//! ```text
//! {"input": [4, 17, 9], "target": [2]}
//! {"input": ["the", "cat", "sat"], "target": ["animal"]}
//! ```
//!
//! **Files.** `path` names either a folder holding `train.jsonl`, `valid.jsonl` and
//! `test.jsonl`, or one file, cut in file order: the last `test` fraction of its examples is the
//! test set, the `valid` fraction before it the validation set, the rest the training set (put
//! the lines in random order first if the file is sorted). A relative path is relative to the
//! spec file it is written in. Blank lines are skipped; other keys of an object are ignored.
//!
//! **Tokens.** `input` and `target` are non-empty lists, each either of token ids or of
//! strings (the two lists may differ, but every example's `input` is of one kind, and every
//! `target` too):
//! - **ids** (integers ≥ 0) are used as they are: the input vocabulary is the largest input id
//!   in any file plus one, the classes the largest target id plus one;
//! - **strings** are mapped through a vocabulary built from the training file: `<pad>`,
//!   `<unk>`, `<answer>`, then its input strings, sorted (a string first seen in a held-out
//!   file is `<unk>`); classes `<unk>`, then the training targets, sorted.
//!
//! **Layout.** `layout = "after"` (the default): the input, then one answer step per target
//! token, scored; inputs are left-padded (with ids, the pad and answer tokens are the two ids
//! after the largest). `layout = "aligned"`: one target per input token, every step scored;
//! `target` must be as long as `input`. See [`super::token_examples`] for the batches.
//!
//! Metrics: the target's (`loss`, `accuracy`, `seq_accuracy`: every target token right).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::Value as Json;

use super::data_digest::DataDigest;
use super::data_file::{self, DataError, numbered_lines};
use super::define::task_kind;
use super::options::{Options, TaskOption};
use super::prelude::*;
use super::token_examples::{ExampleData, Layout, Listed, Part};
use super::vocab::{Interner, Vocab};

static OPTIONS: [TaskOption; 4] = [
    TaskOption::path("path", "a .jsonl file, or a folder holding train.jsonl, valid.jsonl and test.jsonl"),
    TaskOption::choice("layout", "after", &["after", "aligned"]),
    TaskOption::float_below("valid", 0.1, 0.0, 1.0),
    TaskOption::float_below("test", 0.1, 0.0, 1.0),
];

/// The largest token id accepted (a vocabulary of 16 M).
const MAX_ID: u64 = (1 << 24) - 1;

/// Reserved string tokens (ids 0, 1, 2).
const RESERVED: [&str; 3] = ["<pad>", "<unk>", "<answer>"];

/// What a JSON-lines file holds (for messages).
const LINES: &str = "JSON lines {\"input\": [...], \"target\": [...]}";

task_kind! {
    JsonlKind = "jsonl",
    "any token-sequence task read from JSON lines {\"input\": [...], \"target\": [...]}",
    options: &OPTIONS,
    reads: "JSON lines {\"input\": [...], \"target\": [...]} (token ids or strings) from a .jsonl file (cut by the \
             fractions `valid` and `test`) or a folder holding train.jsonl, valid.jsonl and test.jsonl, relative to \
             the spec file; the targets follow the input (layout = \"after\") or align with it (\"aligned\"); \
             metrics loss, accuracy, seq_accuracy",
}

fn instantiate(o: &Options, dir: &Path) -> Result<Box<dyn Task>, PrimError> {
    let path = o.path("path")?;
    let aligned = o.choice("layout")? == 1;
    let (valid, test) = super::options::held_out_fractions(o, "examples")?;
    let at = data_file::resolve(dir, &path);
    let sets = read(&at, aligned, (valid, test)).map_err(DataError::on_path)?;
    Ok(Box::new(sets))
}

/// Whether a list holds token ids or strings, and the first line that showed it.
#[derive(Clone, Copy, Debug, PartialEq)]
enum TokenKind {
    Ids,
    Strings,
}

/// One side of the examples (inputs or targets) while reading.
#[derive(Default)]
struct Side {
    /// The kind of the first token read, and where: its file and line.
    kind: Option<(TokenKind, PathBuf, usize)>,
    strings: Interner<String>,
    largest: u32,
}

impl Side {
    /// The tokens of one list (`key` of line `n`), as ids or provisional string ids.
    fn tokens(&mut self, path: &Path, n: usize, key: &str, list: Option<&Json>) -> Result<Vec<u32>, DataError> {
        let items = match list {
            Some(Json::Array(items)) if !items.is_empty() => items,
            Some(other) => {
                let expected = format!("\"{key}\" to be a non-empty list of tokens");
                return Err(DataError::line(path, n, expected, &other.to_string()));
            }
            None => return Err(DataError::line(path, n, format!("an \"{key}\" key"), "none")),
        };
        let mut out = Vec::with_capacity(items.len());
        for item in items {
            let kind = match item {
                Json::Number(_) => TokenKind::Ids,
                Json::String(_) => TokenKind::Strings,
                _ => {
                    let expected = format!("\"{key}\" tokens to be token ids or strings");
                    return Err(DataError::line(path, n, expected, &item.to_string()));
                }
            };
            match &self.kind {
                None => self.kind = Some((kind, path.to_path_buf(), n)),
                Some((k, file, first)) if *k != kind => {
                    let what = if *k == TokenKind::Ids { "token ids" } else { "strings" };
                    let at = if file == path { String::new() } else { format!(" of {}", file.display()) };
                    let expected = format!("\"{key}\" tokens to be {what}, as on line {first}{at}");
                    return Err(DataError::line(path, n, expected, &item.to_string()));
                }
                Some(_) => {}
            }
            out.push(match item {
                Json::String(s) => self.strings.id(s.as_str()),
                _ => match item.as_u64().filter(|id| *id <= MAX_ID) {
                    Some(id) => {
                        self.largest = self.largest.max(id as u32);
                        id as u32
                    }
                    None => {
                        let expected = format!("\"{key}\" token ids to be integers from 0 to {MAX_ID}");
                        return Err(DataError::line(path, n, expected, &item.to_string()));
                    }
                },
            });
        }
        Ok(out)
    }

    fn is_strings(&self) -> bool {
        matches!(self.kind, Some((TokenKind::Strings, ..)))
    }
}

/// Reads `path` (a folder of three files, or one file cut by `fractions`).
fn read(path: &Path, aligned: bool, (valid, test): (f64, f64)) -> Result<Jsonl, DataError> {
    let what = "a .jsonl file, or a folder holding train.jsonl, valid.jsonl and test.jsonl";
    let mut inputs = Side::default();
    let mut targets = Side::default();
    let mut digest = DataDigest::default();
    let (train, validation, test, known) = if data_file::is_dir(path, what)? {
        let mut file = |name: &str| -> Result<(std::path::PathBuf, String), DataError> {
            let file = path.join(name);
            let text = data_file::read_text(&file, LINES)?;
            digest.add_lines(&text);
            Ok((file, text))
        };
        let (f, t) = file("train.jsonl")?;
        let train = parse(&f, &t, aligned, &mut inputs, &mut targets)?;
        let known = (inputs.strings.len(), targets.strings.len());
        let (f, t) = file("valid.jsonl")?;
        let validation = parse(&f, &t, aligned, &mut inputs, &mut targets)?;
        let (f, t) = file("test.jsonl")?;
        (train, validation, parse(&f, &t, aligned, &mut inputs, &mut targets)?, known)
    } else {
        let text = data_file::read_text(path, LINES)?;
        digest.add_lines(&text);
        let all = parse(path, &text, aligned, &mut inputs, &mut targets)?;
        let n = all.inputs.len();
        let n_test = (n as f64 * test).round() as usize;
        let n_valid = (n as f64 * valid).round() as usize;
        let train_end = n - n_test - n_valid;
        for (name, count) in [("training", train_end), ("validation", n_valid), ("test", n_test)] {
            if count == 0 {
                let problem = format!(
                    "the {name} part of its {n} examples is empty (`valid` = {valid}, `test` = {test}); give more \
                     examples or other fractions"
                );
                return Err(DataError::File { path: path.to_path_buf(), problem });
            }
        }
        // Strings first seen in the training lines are those with provisional ids below the
        // number of distinct ones there (ids are given in order of first sight).
        let distinct = |lists: &[Vec<u32>]| {
            let mut seen: Vec<u32> = lists.iter().flatten().copied().collect();
            seen.sort_unstable();
            seen.dedup();
            seen.len()
        };
        let known = (distinct(&all.inputs[..train_end]), distinct(&all.targets[..train_end]));
        let part = |r: std::ops::Range<usize>| Listed {
            inputs: all.inputs[r.clone()].to_vec(),
            targets: all.targets[r].to_vec(),
        };
        (part(0..train_end), part(train_end..n - n_test), part(n - n_test..n), known)
    };
    let input_vocab = inputs.is_strings().then(|| inputs.strings.finish(&RESERVED, known.0, 1));
    let classes = targets.is_strings().then(|| targets.strings.finish(&["<unk>"], known.1, 0));
    let mut sets = [train, validation, test];
    for set in &mut sets {
        let map = |v: &Option<Vocab>, lists: &mut Vec<Vec<u32>>| {
            if let Some(v) = v {
                lists.iter_mut().for_each(|l| v.map_all(l));
            }
        };
        map(&input_vocab, &mut set.inputs);
        map(&classes, &mut set.targets);
    }
    let data = inputs.largest as usize + 1;
    let (vocab, layout) = match (&input_vocab, aligned) {
        (Some(v), false) => (v.len(), Layout::After { pad: 0, answer: 2 }),
        (Some(v), true) => (v.len(), Layout::Aligned),
        (None, false) => (data + 2, Layout::After { pad: data as u32, answer: data as u32 + 1 }),
        (None, true) => (data, Layout::Aligned),
    };
    let classes = classes.map_or(targets.largest as usize + 1, |c| c.len());
    let [train, validation, test] = sets.map(Arc::new);
    Ok(Jsonl { digest: digest.finish(), vocab, classes, layout, train, validation, test })
}

/// The examples of one file.
fn parse(file: &Path, text: &str, aligned: bool, inputs: &mut Side, targets: &mut Side) -> Result<Listed, DataError> {
    let mut set = Listed::default();
    for (n, line) in numbered_lines(text) {
        if line.trim().is_empty() {
            continue;
        }
        // A byte-order mark some editors write at the start of a file is no part of the JSON.
        let line = if n == 1 { line.trim_start_matches('\u{feff}') } else { line };
        const OBJECT: &str = "a JSON object {\"input\": [...], \"target\": [...]}";
        let object = match serde_json::from_str::<Json>(line) {
            Ok(Json::Object(o)) => o,
            Ok(_) => return Err(DataError::line(file, n, OBJECT, line)),
            // serde's reason (a syntax error, or nesting past its limit) and its column; its
            // line is always 1, as each line is parsed alone.
            Err(e) => {
                let reason = e.to_string();
                let reason = reason.split_once(" at line ").map_or(reason.as_str(), |(r, _)| r);
                let expected = format!("{OBJECT} ({reason} at column {})", e.column());
                return Err(DataError::line(file, n, expected, line));
            }
        };
        let x = inputs.tokens(file, n, "input", object.get("input"))?;
        let y = targets.tokens(file, n, "target", object.get("target"))?;
        if aligned && x.len() != y.len() {
            let expected =
                format!("a \"target\" as long as the \"input\" ({} tokens) with layout = \"aligned\"", x.len());
            return Err(DataError::line(file, n, expected, &format!("{} tokens", y.len())));
        }
        set.inputs.push(x);
        set.targets.push(y);
    }
    Ok(set)
}

#[derive(Debug)]
struct Jsonl {
    digest: String,
    vocab: usize,
    classes: usize,
    layout: Layout,
    train: Arc<Listed>,
    validation: Arc<Listed>,
    test: Arc<Listed>,
}

impl Task for Jsonl {
    fn data_digest(&self) -> Option<&str> {
        Some(&self.digest)
    }
    fn input(&self) -> Ty {
        Ty::Tokens(self.vocab)
    }
    fn target(&self) -> Target {
        Target::Classes(self.classes)
    }
    fn data(&self, seed: u64, device: &Device) -> candle_core::Result<Box<dyn TaskData>> {
        let parts =
            (Part::all(self.train.clone()), Part::all(self.validation.clone()), vec![Part::all(self.test.clone())]);
        Ok(Box::new(ExampleData::new(self.layout, parts, seed, device)?))
    }
}

#[cfg(test)]
mod tests {
    use super::super::data_file::testing::split_folder;
    use super::super::token_examples::testing;
    use super::*;

    fn options(path: &Path, layout: &str, valid: f64, test: f64) -> Vec<Value> {
        vec![Value::Str(path.display().to_string()), Value::Str(layout.into()), Value::Float(valid), Value::Float(test)]
    }

    fn sorted(mut v: Vec<(Vec<u32>, Vec<u32>)>) -> Vec<(Vec<u32>, Vec<u32>)> {
        v.sort();
        v
    }

    #[test]
    fn token_ids_are_used_as_they_are() {
        let dir = split_folder(
            "jsonl",
            "{\"input\": [3, 1], \"target\": [2]}\n\n{\"input\": [0], \"target\": [1, 1], \"id\": 7}\n",
            "{\"input\": [5, 5, 5], \"target\": [0]}\n",
            "{\"input\": [1], \"target\": [4]}\n",
        );
        let task = JsonlKind.instantiate(&options(dir.path(), "after", 0.1, 0.1)).unwrap();
        // Ids 0..=5, then pad 6 and answer 7; classes 0..=4.
        assert_eq!(task.input(), Ty::Tokens(8));
        assert_eq!(task.target(), Target::Classes(5));
        let layout = Layout::After { pad: 6, answer: 7 };
        let data = task.data(0, &Device::Cpu).unwrap();
        assert_eq!(data.train_size(), Some(2));
        assert_eq!(testing::examples(data.as_ref(), Split::Validation, layout), vec![(vec![5, 5, 5], vec![0])]);
        assert_eq!(testing::examples(data.as_ref(), Split::Test(0), layout), vec![(vec![1], vec![4])]);
        let mut data = data;
        let b = data.train_batch(3).unwrap();
        let ex = testing::decode(&b, layout);
        assert!(ex.iter().all(|e| *e == ex[0]), "one shape per batch, and each shape has one example here");
    }

    #[test]
    fn strings_map_through_the_training_vocabulary() {
        let dir = split_folder(
            "jsonl",
            "{\"input\": [\"the\", \"cat\"], \"target\": [\"animal\"]}\n{\"input\": [\"a\", \"rose\"], \"target\": [\"plant\"]}\n",
            "{\"input\": [\"the\", \"dog\"], \"target\": [\"animal\"]}\n",
            "{\"input\": [\"a\", \"cat\"], \"target\": [\"mineral\"]}\n",
        );
        let task = JsonlKind.instantiate(&options(dir.path(), "after", 0.1, 0.1)).unwrap();
        // <pad> <unk> <answer> a cat rose the; classes <unk> animal plant.
        assert_eq!(task.input(), Ty::Tokens(7));
        assert_eq!(task.target(), Target::Classes(3));
        let layout = Layout::After { pad: 0, answer: 2 };
        let data = task.data(0, &Device::Cpu).unwrap();
        assert_eq!(testing::examples(data.as_ref(), Split::Validation, layout), vec![(vec![6, 1], vec![1])]);
        assert_eq!(testing::examples(data.as_ref(), Split::Test(0), layout), vec![(vec![3, 4], vec![0])]);
    }

    #[test]
    fn aligned_targets_score_every_step_and_one_file_is_cut_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("all.jsonl");
        let lines: String =
            (0..10).map(|i| format!("{{\"input\": [{i}, {i}], \"target\": [{}, 0]}}\n", i % 3)).collect();
        std::fs::write(&file, lines).unwrap();
        let task = JsonlKind.instantiate(&options(&file, "aligned", 0.2, 0.1)).unwrap();
        assert_eq!(task.input(), Ty::Tokens(10));
        assert_eq!(task.target(), Target::Classes(3));
        let data = task.data(0, &Device::Cpu).unwrap();
        assert_eq!(data.train_size(), Some(7));
        let valid = testing::examples(data.as_ref(), Split::Validation, Layout::Aligned);
        assert_eq!(sorted(valid), vec![(vec![7, 7], vec![1, 0]), (vec![8, 8], vec![2, 0])]);
        let test = testing::examples(data.as_ref(), Split::Test(0), Layout::Aligned);
        assert_eq!(test, vec![(vec![9, 9], vec![0, 0])]);
    }

    #[test]
    fn same_seed_same_batches() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("all.jsonl");
        let lines: String =
            (0..40).map(|i| format!("{{\"input\": {:?}, \"target\": [{}]}}\n", vec![i; 1 + i % 4], i % 5)).collect();
        std::fs::write(&file, lines).unwrap();
        let task = JsonlKind.instantiate(&options(&file, "after", 0.1, 0.1)).unwrap();
        let draw = |seed| {
            let mut d = task.data(seed, &Device::Cpu).unwrap();
            (0..4).map(|_| d.train_batch(5).unwrap().inputs.to_vec2::<u32>().unwrap()).collect::<Vec<_>>()
        };
        assert_eq!(draw(2), draw(2));
        assert_ne!(draw(2), draw(3));
    }

    /// The message for a training file holding `train` (valid and test files fine).
    fn error_for(train: &str, layout: &str) -> String {
        let ok = "{\"input\": [1], \"target\": [1]}\n";
        let dir = split_folder("jsonl", train, ok, ok);
        let e = JsonlKind.instantiate(&options(dir.path(), layout, 0.1, 0.1)).err().unwrap();
        assert_eq!(e.arg, Some("path"));
        e.to_string().replace(&dir.path().display().to_string(), "DIR")
    }

    #[test]
    fn each_malformed_line_has_its_located_message() {
        let ok = "{\"input\": [1], \"target\": [1]}\n";
        assert_eq!(
            error_for(&format!("{ok}{{\"input\": [1], \"target\": [1]\n"), "after"),
            "DIR/train.jsonl:2: expected a JSON object {\"input\": [...], \"target\": [...]} (EOF while parsing an \
             object at column 28), found \"{\\\"input\\\": [1], \\\"target\\\": [1]\""
        );
        assert_eq!(
            error_for("[1, 2]\n", "after"),
            "DIR/train.jsonl:1: expected a JSON object {\"input\": [...], \"target\": [...]}, found \"[1, 2]\""
        );
        assert_eq!(
            error_for("{\"target\": [1]}\n", "after"),
            "DIR/train.jsonl:1: expected an \"input\" key, found \"none\""
        );
        assert_eq!(
            error_for("{\"input\": [], \"target\": [1]}\n", "after"),
            "DIR/train.jsonl:1: expected \"input\" to be a non-empty list of tokens, found \"[]\""
        );
        assert_eq!(
            error_for("{\"input\": [1], \"target\": 3}\n", "after"),
            "DIR/train.jsonl:1: expected \"target\" to be a non-empty list of tokens, found \"3\""
        );
        assert_eq!(
            error_for("{\"input\": [1, [2]], \"target\": [3]}\n", "after"),
            "DIR/train.jsonl:1: expected \"input\" tokens to be token ids or strings, found \"[2]\""
        );
        assert_eq!(
            error_for(&format!("{ok}{ok}{{\"input\": [\"a\"], \"target\": [3]}}\n"), "after"),
            "DIR/train.jsonl:3: expected \"input\" tokens to be token ids, as on line 1, found \"\\\"a\\\"\""
        );
        assert_eq!(
            error_for("{\"input\": [-1], \"target\": [3]}\n", "after"),
            "DIR/train.jsonl:1: expected \"input\" token ids to be integers from 0 to 16777215, found \"-1\""
        );
        assert_eq!(
            error_for("{\"input\": [1, 2], \"target\": [3]}\n", "aligned"),
            "DIR/train.jsonl:1: expected a \"target\" as long as the \"input\" (2 tokens) with layout = \"aligned\", \
             found \"1 tokens\""
        );
        assert_eq!(
            error_for("\n\n", "after"),
            "DIR/train.jsonl: the file is empty; expected JSON lines {\"input\": [...], \"target\": [...]}"
        );
    }

    /// A byte-order mark before the first line is no error; a token of the other kind in
    /// another file names the file of the first token.
    #[test]
    fn a_byte_order_mark_is_read_and_a_mix_of_kinds_names_both_files() {
        let ok = "{\"input\": [1], \"target\": [1]}\n";
        let dir = split_folder("jsonl", &format!("\u{feff}{ok}"), ok, ok);
        assert!(JsonlKind.instantiate(&options(dir.path(), "after", 0.1, 0.1)).is_ok());
        let words = "{\"input\": [\"a\"], \"target\": [\"b\"]}\n";
        let dir = split_folder("jsonl", words, &format!("\n\n{ok}"), words);
        let e = JsonlKind.instantiate(&options(dir.path(), "after", 0.1, 0.1)).err().unwrap().to_string();
        let d = dir.path().display();
        assert_eq!(
            e,
            format!(
                "{d}/valid.jsonl:3: expected \"input\" tokens to be strings, as on line 1 of {d}/train.jsonl, found \"1\""
            )
        );
    }

    #[test]
    fn missing_files_and_bad_fractions_have_their_messages() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().display().to_string();
        let e = JsonlKind.instantiate(&options(&dir.path().join("x.jsonl"), "after", 0.1, 0.1)).err().unwrap();
        assert_eq!(
            e.to_string(),
            format!(
                "`{d}/x.jsonl` does not exist; expected a .jsonl file, or a folder holding train.jsonl, valid.jsonl \
                 and test.jsonl there"
            )
        );
        let e = JsonlKind.instantiate(&options(dir.path(), "after", 0.1, 0.1)).err().unwrap();
        assert_eq!(
            e.to_string(),
            format!(
                "`{d}/train.jsonl` does not exist; expected JSON lines {{\"input\": [...], \"target\": [...]}} there"
            )
        );
        let file = dir.path().join("few.jsonl");
        std::fs::write(&file, "{\"input\": [1], \"target\": [1]}\n".repeat(4)).unwrap();
        let e = JsonlKind.instantiate(&options(&file, "after", 0.1, 0.1)).err().unwrap();
        assert_eq!(
            e.to_string(),
            format!(
                "{d}/few.jsonl: the validation part of its 4 examples is empty (`valid` = 0.1, `test` = 0.1); give \
                 more examples or other fractions"
            )
        );
        let e = JsonlKind.instantiate(&options(&file, "after", 0.5, 0.5)).err().unwrap();
        assert_eq!(e.arg, Some("test"));
        let e = JsonlKind.instantiate(&options(&file, "stacked", 0.1, 0.1)).err().unwrap();
        assert_eq!(e.arg, Some("layout"));
    }
}
