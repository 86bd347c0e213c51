//! Language modelling on a plain-text corpus read from files: predict the next character or
//! word at every step, scored by perplexity.
//!
//! **Files.** `path` names either a folder holding `train.txt`, `valid.txt` and `test.txt`
//! (the usual layout of PTB- and WikiText-style corpora, renamed), or one file, cut by position
//! into training, validation and test text: the last `test` fraction of its tokens is the
//! test set, the `valid` fraction before it the validation set, the rest the training set.
//! A relative path is relative to the spec file it is written in.
//!
//! **Tokens.** `level = "char"`: every character, line ends included. `level = "word"`: the
//! words between whitespace, each line's words followed by `<eos>` (as in the PTB; blank lines
//! give nothing). The vocabulary is `<unk>`, then the training text's tokens, sorted; a token
//! first seen in the validation or test text is `<unk>`.
//!
//! **Examples.** A window of `length + 1` consecutive tokens: the first `length` are the
//! input, the last `length` the targets (next-token prediction, every step scored):
//!
//! ```text
//!   input   t1 t2 t3 … tL
//!   target  t2 t3 t4 … tL+1
//! ```
//!
//! Training batches take windows at uniformly random positions of the training text (an epoch
//! is `⌊(n − 1) / length⌋` windows). The validation and test texts are cut into consecutive
//! windows that predict every token after the first once (the last window may be shorter, and
//! forms a batch of its own), visited in a random order fixed by the seed. No state is carried
//! from one window to the next, so each window starts from the model's initial state.
//!
//! **Metrics.** `perplexity`: `exp` of the mean cross-entropy per predicted token over the
//! split (in nats, every token weighing the same, the short last window included); with
//! `level = "char"` also `bits_per_char`, the same mean in bits.

use std::path::Path;
use std::sync::Arc;

use candle_core::{D, DType};
use rand::Rng;
use rand::seq::SliceRandom;
use rand_chacha::ChaCha8Rng;

use super::data_digest::DataDigest;
use super::data_file::{self, DataError, numbered_lines};
use super::define::task_kind;
use super::options::{Options, TaskOption};
use super::prelude::*;
use super::streams::{Stream, stream};
use super::vocab::Interner;

static OPTIONS: [TaskOption; 5] = [
    TaskOption::path("path", "a text file, or a folder holding train.txt, valid.txt and test.txt"),
    TaskOption::choice("level", "char", &["char", "word"]),
    TaskOption::int("length", 100, 1, 1 << 20),
    TaskOption::float_below("valid", 0.05, 0.0, 1.0),
    TaskOption::float_below("test", 0.05, 0.0, 1.0),
];

const UNKNOWN: u32 = 0;
const EOS: &str = "<eos>";

/// What a corpus file holds (for messages).
const TEXT: &str = "plain text";

task_kind! {
    CorpusKind = "corpus",
    "language modelling on a text corpus read from files: the next character or word at every step",
    options: &OPTIONS,
    reads: "a text file (cut into train, valid and test by the fractions `valid` and `test`) or a folder holding \
             train.txt, valid.txt and test.txt, relative to the spec file; input tokens(V), target the next token \
             (V classes) at every step; metrics loss, accuracy, seq_accuracy, perplexity, and bits_per_char \
             with level = \"char\"",
}

fn instantiate(o: &Options, dir: &Path) -> Result<Box<dyn Task>, PrimError> {
    let path = o.path("path")?;
    let words = o.choice("level")? == 1;
    let length = o.int("length")?;
    let (valid, test) = super::options::held_out_fractions(o, "text")?;
    let at = data_file::resolve(dir, &path);
    let texts = read(&at, words, (valid, test)).map_err(DataError::on_path)?;
    // At least one whole training window, and something to predict in each held-out text.
    if texts.train.len() < length + 1 {
        let message = format!(
            "`length` = {length} needs at least {} training tokens; the training text of `{}` has {}",
            length + 1,
            at.display(),
            texts.train.len()
        );
        return Err(PrimError::task(message).on("length"));
    }
    for (name, held_out) in [("validation", &texts.validation), ("test", &texts.test)] {
        if held_out.len() < 2 {
            let what = if words { "words" } else { "characters" };
            return Err(DataError::File {
                path: at.clone(),
                problem: format!("the {name} text has {} token(s); it needs at least 2 {what}", held_out.len()),
            }
            .on_path());
        }
    }
    Ok(Box::new(Corpus { texts: Arc::new(texts), words, length }))
}

/// The three texts as token ids.
#[derive(Debug)]
struct Texts {
    /// What was read ([`DataDigest`]).
    digest: String,
    vocab: usize,
    train: Vec<u32>,
    validation: Vec<u32>,
    test: Vec<u32>,
}

/// Reads `path` (a folder of three files, or one file cut by `fractions`).
fn read(path: &Path, words: bool, (valid, test): (f64, f64)) -> Result<Texts, DataError> {
    let what = "a text file, or a folder holding train.txt, valid.txt and test.txt";
    let mut t = Tokenizer { words, word_ids: Interner::default(), char_ids: Interner::default() };
    let mut digest = DataDigest::default();
    let mut read = |path: &Path| {
        let text = data_file::read_text(path, TEXT)?;
        // Characters are data, line ends included; words are what the spaces separate.
        if words {
            digest.add_words(&text)
        } else {
            digest.add(&text)
        }
        Ok::<_, DataError>(text)
    };
    let (train, known, validation, test) = if data_file::is_dir(path, what)? {
        let train = t.tokens(&read(&path.join("train.txt"))?);
        let known = t.seen();
        (train, known, t.tokens(&read(&path.join("valid.txt"))?), t.tokens(&read(&path.join("test.txt"))?))
    } else {
        let all = t.tokens(&read(path)?);
        let n = all.len();
        let n_test = (n as f64 * test).round() as usize;
        let n_valid = (n as f64 * valid).round() as usize;
        let train_end = n - n_test - n_valid;
        let train = all[..train_end].to_vec();
        // The training part is the text's beginning, and ids are given in order of first
        // sight: the tokens seen in it are those with ids below the number of distinct ones.
        let mut seen = vec![false; t.seen()];
        for &id in &train {
            seen[id as usize] = true;
        }
        let known = seen.iter().filter(|s| **s).count();
        (train, known, all[train_end..n - n_test].to_vec(), all[n - n_test..].to_vec())
    };
    let vocab = if words {
        t.word_ids.finish(&["<unk>"], known, UNKNOWN as usize)
    } else {
        t.char_ids.finish(&["<unk>"], known, UNKNOWN as usize)
    };
    let mut texts = Texts { digest: digest.finish(), vocab: vocab.len(), train, validation, test };
    for t in [&mut texts.train, &mut texts.validation, &mut texts.test] {
        vocab.map_all(t);
    }
    Ok(texts)
}

/// Splits text into characters or words (see the module comment), with provisional ids.
struct Tokenizer {
    words: bool,
    word_ids: Interner<String>,
    char_ids: Interner<char>,
}

impl Tokenizer {
    fn tokens(&mut self, text: &str) -> Vec<u32> {
        let mut ids = vec![];
        if self.words {
            for (_, line) in numbered_lines(text) {
                let before = ids.len();
                ids.extend(line.split_whitespace().map(|w| self.word_ids.id(w)));
                if ids.len() > before {
                    ids.push(self.word_ids.id(EOS));
                }
            }
        } else {
            ids.extend(text.chars().map(|c| self.char_ids.id(&c)));
        }
        ids
    }

    /// How many distinct tokens were seen.
    fn seen(&self) -> usize {
        if self.words { self.word_ids.len() } else { self.char_ids.len() }
    }
}

#[derive(Debug)]
struct Corpus {
    texts: Arc<Texts>,
    words: bool,
    length: usize,
}

impl Task for Corpus {
    fn data_digest(&self) -> Option<&str> {
        Some(&self.texts.digest)
    }
    fn input(&self) -> Ty {
        Ty::Tokens(self.texts.vocab)
    }
    fn target(&self) -> Target {
        Target::Classes(self.texts.vocab)
    }
    fn task_metric_names(&self) -> &'static [&'static str] {
        if self.words { &["perplexity"] } else { &["bits_per_char", "perplexity"] }
    }
    fn task_metrics(&self, batch: &Batch, logits: &Tensor) -> candle_core::Result<Vec<(&'static str, f64, f64)>> {
        // Σ over the batch's tokens of −log softmax(logits)[target], in nats.
        let logits = logits.to_dtype(DType::F64)?;
        let max = logits.max_keepdim(D::Minus1)?;
        let shifted = logits.broadcast_sub(&max)?;
        let lse = shifted.exp()?.sum_keepdim(D::Minus1)?.log()?;
        let picked = shifted.gather(&batch.targets.unsqueeze(D::Minus1)?.contiguous()?, D::Minus1)?;
        let nats = (lse - picked)?.sum_all()?.to_scalar::<f64>()?;
        let tokens = batch.targets.elem_count() as f64;
        let mut out = vec![("perplexity", nats, tokens)];
        if !self.words {
            out.insert(0, ("bits_per_char", nats / std::f64::consts::LN_2, tokens));
        }
        Ok(out)
    }
    fn task_metric_value(&self, name: &'static str, mean: f64) -> f64 {
        if name == "perplexity" { mean.exp() } else { mean }
    }
    fn data(&self, seed: u64, device: &Device) -> candle_core::Result<Box<dyn TaskData>> {
        Ok(Box::new(CorpusData {
            texts: self.texts.clone(),
            length: self.length,
            rng: stream(seed, Stream::Train),
            seed,
            device: device.clone(),
        }))
    }
}

struct CorpusData {
    texts: Arc<Texts>,
    length: usize,
    rng: ChaCha8Rng,
    seed: u64,
    device: Device,
}

impl CorpusData {
    /// Windows of `text` starting at `starts`, each `len` predictions long, as a batch.
    fn batch(&self, text: &[u32], starts: &[usize], len: usize) -> candle_core::Result<Batch> {
        let n = starts.len();
        let mut inputs = vec![0u32; len * n];
        let mut targets = vec![0u32; len * n];
        for (b, &s) in starts.iter().enumerate() {
            for t in 0..len {
                inputs[t * n + b] = text[s + t];
                targets[t * n + b] = text[s + t + 1];
            }
        }
        Ok(Batch {
            inputs: Tensor::from_vec(inputs, (len, n), &self.device)?,
            scored: (0..len).collect(),
            targets: Tensor::from_vec(targets, (len, n), &self.device)?,
        })
    }
}

impl TaskData for CorpusData {
    fn train_batch(&mut self, batch_size: usize) -> candle_core::Result<Batch> {
        let text = &self.texts.train;
        let last = text.len() - self.length - 1;
        let starts: Vec<usize> = (0..batch_size.max(1)).map(|_| self.rng.random_range(0..=last)).collect();
        self.batch(text, &starts, self.length)
    }

    fn eval_batches(&self, split: Split, batch_size: usize) -> candle_core::Result<Vec<Batch>> {
        let (text, which) = match split {
            Split::Validation => (&self.texts.validation, Stream::Validation),
            Split::Test(0) => (&self.texts.test, Stream::Test(0)),
            Split::Test(i) => candle_core::bail!("corpus has one test split, not {}", i + 1),
        };
        // Consecutive windows covering every prediction once; the remainder last.
        let predictions = text.len() - 1;
        let mut starts: Vec<usize> = (0..predictions / self.length).map(|w| w * self.length).collect();
        starts.shuffle(&mut stream(self.seed, which));
        let mut batches: Vec<Batch> =
            starts.chunks(batch_size.max(1)).map(|c| self.batch(text, c, self.length)).collect::<Result<_, _>>()?;
        let rest = predictions % self.length;
        if rest > 0 {
            batches.push(self.batch(text, &[predictions - rest], rest)?);
        }
        Ok(batches)
    }

    fn train_size(&self) -> Option<usize> {
        Some((self.texts.train.len() - 1) / self.length)
    }
}

#[cfg(test)]
mod tests {
    use super::super::data_file::testing::split_folder;
    use super::super::token_examples::Layout;
    use super::super::token_examples::testing::examples;
    use super::*;

    fn options(path: &Path, level: &str, length: i64) -> Vec<Value> {
        vec![
            Value::Str(path.display().to_string()),
            Value::Str(level.into()),
            Value::Int(length),
            Value::Float(0.2),
            Value::Float(0.2),
        ]
    }

    /// Every window of a split, in order of position: (inputs, targets), every step scored.
    fn windows(data: &dyn TaskData, split: Split) -> Vec<(Vec<u32>, Vec<u32>)> {
        examples(data, split, Layout::Aligned)
    }

    #[test]
    fn a_folder_gives_character_windows_with_next_character_targets() {
        let dir = split_folder("txt", "abcab\ncab", "abz", "cba\nab");
        let task = CorpusKind.instantiate(&options(dir.path(), "char", 3)).unwrap();
        // <unk>, then "\n", a, b, c.
        assert_eq!(task.input(), Ty::Tokens(5));
        assert_eq!(task.target(), Target::Classes(5));
        assert_eq!(task.task_metric_names(), &["bits_per_char", "perplexity"]);
        let data = task.data(0, &Device::Cpu).unwrap();
        assert_eq!(data.train_size(), Some(2)); // 9 characters, 8 predictions, windows of 3
        // Validation "abz": one window of 2 predictions; z is unknown.
        assert_eq!(windows(data.as_ref(), Split::Validation), vec![(vec![2, 3], vec![3, 0])]);
        // Test "cba\nab": 5 predictions, one window of 3, then the rest (2).
        let mut test = windows(data.as_ref(), Split::Test(0));
        test.sort_by_key(|(x, _)| std::cmp::Reverse(x.len()));
        assert_eq!(test, vec![(vec![4, 3, 2], vec![3, 2, 1]), (vec![1, 2], vec![2, 3])]);
        let mut data = data;
        let b = data.train_batch(4).unwrap();
        assert_eq!(b.inputs.dims(), &[3, 4]);
        let x = b.inputs.t().unwrap().to_vec2::<u32>().unwrap();
        let y = b.targets.t().unwrap().to_vec2::<u32>().unwrap();
        let train: Vec<u32> = vec![2, 3, 4, 2, 3, 1, 4, 2, 3];
        for (x, y) in x.iter().zip(&y) {
            let at = train.windows(3).position(|w| w == x.as_slice()).expect("a window of the training text");
            assert_eq!(y.as_slice(), &train[at + 1..at + 4]);
        }
    }

    #[test]
    fn one_file_is_cut_by_fraction_into_word_windows() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("corpus.txt");
        // 10 lines of 1 word + <eos>: 20 tokens; valid 0.2 and test 0.2: 12 / 4 / 4.
        let text: String =
            ["a", "b", "a", "c", "a", "b", "a", "c", "d", "e"].iter().map(|w| format!("{w}\n")).collect();
        std::fs::write(&file, text).unwrap();
        let task = CorpusKind.instantiate(&options(&file, "word", 2)).unwrap();
        // <unk>, <eos>, a, b, c (d and e are first seen in the held-out part).
        assert_eq!(task.input(), Ty::Tokens(5));
        assert_eq!(task.task_metric_names(), &["perplexity"]);
        let data = task.data(0, &Device::Cpu).unwrap();
        assert_eq!(data.train_size(), Some(5));
        let mut valid = windows(data.as_ref(), Split::Validation);
        valid.sort_by_key(|(x, _)| std::cmp::Reverse(x.len()));
        assert_eq!(valid, vec![(vec![2, 1], vec![1, 4]), (vec![4], vec![1])]); // "a <eos> c <eos>"
        let test = windows(data.as_ref(), Split::Test(0));
        assert_eq!(test.iter().map(|(x, _)| x.len()).sum::<usize>(), 3);
        assert!(test.iter().all(|(x, y)| x.iter().chain(y).all(|t| [0, 1].contains(t))), "{test:?}");
    }

    #[test]
    fn perplexity_is_exp_of_the_mean_cross_entropy() {
        let dir = split_folder("txt", "abab", "ab", "ba");
        let task = CorpusKind.instantiate(&options(dir.path(), "char", 2)).unwrap();
        let data = task.data(0, &Device::Cpu).unwrap();
        let b = data.eval_batches(Split::Validation, 8).unwrap().remove(0);
        // Uniform logits over 3 classes: cross-entropy ln 3 per token, perplexity 3.
        let logits = Tensor::zeros((1, 1, 3), DType::F32, &Device::Cpu).unwrap();
        let m = task.task_metrics(&b, &logits).unwrap();
        assert_eq!(m[0].0, "bits_per_char");
        assert!((m[0].1 - 3f64.log2()).abs() < 1e-6 && m[0].2 == 1.0, "{m:?}");
        let (name, sum, count) = m[1];
        assert!((task.task_metric_value(name, sum / count) - 3.0).abs() < 1e-6);
    }

    #[test]
    fn same_seed_same_batches() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("c.txt");
        std::fs::write(&file, "the quick brown fox jumps over the lazy dog\n".repeat(5)).unwrap();
        let task = CorpusKind.instantiate(&options(&file, "char", 8)).unwrap();
        let draw = |seed| {
            let mut d = task.data(seed, &Device::Cpu).unwrap();
            let train: Vec<_> = (0..3).map(|_| d.train_batch(4).unwrap().inputs.to_vec2::<u32>().unwrap()).collect();
            (train, windows(d.as_ref(), Split::Validation))
        };
        assert_eq!(draw(1), draw(1));
        assert_ne!(draw(1).0, draw(2).0);
    }

    #[test]
    fn each_bad_input_has_its_message() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().display().to_string();
        let err = |o: &[Value]| CorpusKind.instantiate(o).err().unwrap();
        let e = err(&options(&dir.path().join("none.txt"), "char", 3));
        assert_eq!(e.arg, Some("path"));
        assert_eq!(
            e.to_string(),
            format!(
                "`{d}/none.txt` does not exist; expected a text file, or a folder holding train.txt, valid.txt and test.txt there"
            )
        );
        std::fs::write(dir.path().join("train.txt"), "abcabc").unwrap();
        let e = err(&options(dir.path(), "char", 3));
        assert_eq!(e.to_string(), format!("`{d}/valid.txt` does not exist; expected plain text there"));
        std::fs::write(dir.path().join("valid.txt"), "").unwrap();
        std::fs::write(dir.path().join("test.txt"), "ab").unwrap();
        assert_eq!(
            err(&options(dir.path(), "char", 3)).to_string(),
            format!("{d}/valid.txt: the file is empty; expected plain text")
        );
        std::fs::write(dir.path().join("valid.txt"), "a").unwrap();
        assert_eq!(
            err(&options(dir.path(), "char", 3)).to_string(),
            format!("{d}: the validation text has 1 token(s); it needs at least 2 characters")
        );
        std::fs::write(dir.path().join("valid.txt"), b"ab\n\xfe").unwrap();
        assert_eq!(
            err(&options(dir.path(), "char", 3)).to_string(),
            format!("{d}/valid.txt:2: expected UTF-8 text, found other bytes")
        );
        std::fs::write(dir.path().join("valid.txt"), "ab").unwrap();
        let e = err(&options(dir.path(), "char", 6));
        assert_eq!(e.arg, Some("length"));
        assert_eq!(
            e.to_string(),
            format!("`length` = 6 needs at least 7 training tokens; the training text of `{d}` has 6")
        );
        let mut o = options(dir.path(), "char", 3);
        o[4] = Value::Float(0.8);
        assert_eq!(err(&o).arg, Some("test"));
        o = options(dir.path(), "byte", 3);
        assert_eq!(err(&o).arg, Some("level"));
    }
}
