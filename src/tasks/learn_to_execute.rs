//! Learning to Execute — program evaluation and memorisation (Zaremba & Sutskever 2014; RMC
//! Table 1, Santoro et al. 2018 §5.2): read a Python-like program character by character, then
//! write what it prints, character by character. The programs and the `mode`s are
//! [`super::lte_program`]'s: `addition`, `control`, `program` (RMC's Add, Control, Program) and
//! the memorisation tasks `copy`, `reverse`, `double` (RMC's Copy, Reverse, Double).
//!
//! Layout of a batch whose longest program has `Q` characters and whose answers have `K − 1`
//! characters (`K` answer steps: the characters, then the end token `.`):
//!
//! ```text
//!   input   _ … _  p r i n t ( 1 2 + 3 4 )  @   _  _  _     (left-padded to Q; @ delimiter)
//!   target                                      4  6  .     (Classes, the K steps after @)
//! ```
//!
//! The answer steps read the pad token `_`: no teacher forcing, as RMC's non-autoregressive
//! decoder (which reads zeros). A batch holds answers of one length only (the scored steps are
//! shared by a batch): a training batch takes its first example's answer length and draws
//! further examples until it has enough of that length (so each keeps the distribution of its
//! length); held-out sets draw every example independently and are stored as one group per
//! answer length ([`super::fresh::cut`] batches them).
//!
//! Tokens: one per character of the fixed alphabet [`ALPHABET`] (digits first, so a digit's id
//! is its value; 50 in all); the target is a class of the same alphabet. Training data is
//! fresh every batch, at the `curriculum`'s difficulty: `"mix"` (default; the LTE paper's mix
//! strategy: every program draws its length in `1..=length` and its nesting in
//! `1..=nesting`) or `"baseline"` (every program at `length` and `nesting`). Validation and
//! test sets are fixed and always at `length` and `nesting`, as LTE's test set. `nesting` is
//! not used by the memorisation modes.
//!
//! Metrics: `accuracy` is the per-character accuracy of RMC Table 1 and the LTE paper: the
//! fraction of answer characters (the end token included) predicted right, over every scored
//! step of the split (`train::loss`); `seq_accuracy` is the fraction of answers entirely right.
//! RMC's code scores the digits without the end token, so its figure counts one step fewer
//! per answer.

use std::collections::BTreeMap;

use candle_core::{Device, Tensor};
use rand_chacha::ChaCha8Rng;

use super::define::task_kind;
use super::fresh::{Fresh, FreshTask};
use super::lte_program::{self, Example, Hardness, Mode};
use super::options::{Options, TaskOption};
use super::*;

static OPTIONS: [TaskOption; 4] = [
    TaskOption::choice("mode", "program", &Mode::NAMES),
    // At most `Mode::max_length` of the chosen mode (read with `int_in`).
    TaskOption::int("length", 5, 1, 1000),
    TaskOption::int("nesting", 2, 1, 10),
    TaskOption::choice("curriculum", "mix", &["mix", "baseline"]),
];

/// The character vocabulary, one token per character: digits, letters, the program
/// symbols, then the end token `.`, the answer delimiter `@` and pad `_`.
pub const ALPHABET: &str = "0123456789abcdefghijklmnopqrstuvwxyz +-*=<>():\n.@_";
const VOCAB: usize = ALPHABET.len();
const END: char = '.';
const DELIM: char = '@';
const PAD: char = '_';

fn token(c: char) -> u32 {
    ALPHABET.find(c).unwrap_or_else(|| panic!("{c:?} is not in the learnToExecute alphabet")) as u32
}

task_kind! {
    LearnToExecuteKind = "learnToExecute",
    "Learning to Execute: read a program (addition, control, program) or a number (copy, reverse, double) \
         character by character, write its output; accuracy per character (RMC Table 1), seq_accuracy per answer",
    options: &OPTIONS,
    held_out: (1000, 2000),
}

fn instantiate(o: &Options) -> Result<Box<dyn Task>, PrimError> {
    let task: FreshTask<LearnToExecute> = o.parse()?;
    o.int_in("length", 1, task.generator.mode.max_length() as i64)?;
    Ok(Box::new(task))
}

#[derive(Clone, Copy, Debug, serde::Deserialize)]
struct LearnToExecute {
    mode: Mode,
    /// The held-out sets' difficulty (`length`, `nesting`), and the training curriculum's bound.
    #[serde(flatten)]
    target: Hardness,
    curriculum: Curriculum,
}

/// The difficulty of training programs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
enum Curriculum {
    /// Each bound drawn uniformly up to `target` ([`Hardness::mixed`]).
    Mix,
    /// Always `target`.
    Baseline,
}

/// Tries per example before a training batch gives up on its answer length and starts over.
const TRIES: usize = 1000;

impl LearnToExecute {
    fn train_example(&self, rng: &mut ChaCha8Rng) -> Example {
        let hardness = match self.curriculum {
            Curriculum::Mix => self.target.mixed(rng),
            Curriculum::Baseline => self.target,
        };
        lte_program::example(rng, self.mode, hardness)
    }
}

impl Fresh for LearnToExecute {
    fn input(&self) -> Ty {
        Ty::Tokens(VOCAB)
    }
    fn target(&self) -> Target {
        Target::Classes(VOCAB)
    }
    fn train_batch(&self, rng: &mut ChaCha8Rng, batch: usize, device: &Device) -> candle_core::Result<Batch> {
        let n = batch.max(1);
        loop {
            let first = self.train_example(rng);
            let want = first.answer.len();
            let mut examples = vec![first];
            let mut tries = 0;
            while examples.len() < n && tries < TRIES * n {
                let e = self.train_example(rng);
                if e.answer.len() == want {
                    examples.push(e);
                }
                tries += 1;
            }
            if examples.len() == n {
                return layout(&examples, device);
            }
        }
    }

    fn held_out(&self, rng: &mut ChaCha8Rng, n: usize, device: &Device) -> candle_core::Result<Vec<Batch>> {
        let mut by_length: BTreeMap<usize, Vec<Example>> = BTreeMap::new();
        for _ in 0..n {
            let e = lte_program::example(rng, self.mode, self.target);
            by_length.entry(e.answer.len()).or_default().push(e);
        }
        by_length.values().map(|group| layout(group, device)).collect()
    }
}

/// Examples whose answers have one length, as a batch (see the module comment).
fn layout(examples: &[Example], device: &Device) -> candle_core::Result<Batch> {
    let n = examples.len();
    let q = examples.iter().map(|e| e.program.len()).max().unwrap_or(0);
    let k = examples.first().map_or(0, |e| e.answer.len()) + 1;
    let steps = q + 1 + k;
    let mut inputs = vec![token(PAD); steps * n];
    let mut targets = vec![0u32; k * n];
    for (b, e) in examples.iter().enumerate() {
        debug_assert_eq!(e.answer.len() + 1, k, "one answer length per batch");
        let start = q - e.program.len();
        for (i, c) in e.program.chars().enumerate() {
            inputs[(start + i) * n + b] = token(c);
        }
        inputs[q * n + b] = token(DELIM);
        for (i, c) in e.answer.chars().chain([END]).enumerate() {
            targets[i * n + b] = token(c);
        }
    }
    Ok(Batch {
        inputs: Tensor::from_vec(inputs, (steps, n), device)?,
        scored: (q + 1..steps).collect(),
        targets: Tensor::from_vec(targets, (k, n), device)?,
    })
}

#[cfg(test)]
mod tests {
    use super::super::lte_program::tests::run_python;
    use super::*;

    fn task(options: &[(&str, Value)]) -> Box<dyn Task> {
        let values: Vec<Value> = LearnToExecuteKind
            .signature()
            .iter()
            .map(|s| options.iter().find(|(n, _)| *n == s.name).map_or(s.default.value().unwrap(), |(_, v)| v.clone()))
            .collect();
        LearnToExecuteKind.instantiate(&values).unwrap()
    }

    fn mode(name: &str, length: i64, nesting: i64) -> Box<dyn Task> {
        task(&[
            ("mode", Value::Str(name.into())),
            ("length", Value::Int(length)),
            ("nesting", Value::Int(nesting)),
            ("validation", Value::Int(200)),
            ("test", Value::Int(100)),
        ])
    }

    fn text(tokens: &[u32]) -> String {
        tokens.iter().map(|&t| char::from(ALPHABET.as_bytes()[t as usize])).collect()
    }

    /// Every example of a batch as (program, answer with its end token), checking the layout.
    fn decode(b: &Batch) -> Vec<(String, String)> {
        let x = b.inputs.t().unwrap().to_vec2::<u32>().unwrap();
        let y = b.targets.t().unwrap().to_vec2::<u32>().unwrap();
        let (steps, k) = (b.steps().unwrap(), y[0].len());
        let q = steps - k - 1;
        assert_eq!(b.scored, (q + 1..steps).collect::<Vec<_>>(), "the steps after the delimiter are scored");
        x.iter()
            .zip(&y)
            .map(|(x, y)| {
                let row = text(x);
                assert_eq!(&row[q..], format!("{DELIM}{}", PAD.to_string().repeat(k)), "delimiter, then pads");
                let program = row[..q].trim_start_matches(PAD).to_string();
                assert!(!program.contains([PAD, DELIM, END]), "{program:?}");
                let answer = text(y);
                assert!(answer.ends_with(END) && answer[..k - 1].bytes().all(|c| c.is_ascii_digit() || c == b'-'));
                (program, answer)
            })
            .collect()
    }

    fn split(data: &dyn TaskData, which: Split) -> Vec<(String, String)> {
        data.eval_batches(which, 64).unwrap().iter().flat_map(decode).collect()
    }

    #[test]
    fn targets_are_what_the_programs_print() {
        for name in ["addition", "control", "program"] {
            let t = mode(name, 3, 3);
            let mut data = t.data(1, &Device::Cpu).unwrap();
            let mut examples = split(data.as_ref(), Split::Validation);
            assert_eq!(examples.len(), 200);
            examples.extend((0..5).flat_map(|_| decode(&data.train_batch(16).unwrap())));
            for (program, answer) in examples {
                assert_eq!(format!("{}{END}", run_python(&program)), answer, "{name}:\n{program}");
            }
        }
    }

    #[test]
    fn memorisation_targets_by_hand() {
        for (name, f) in [
            ("copy", (|d: &str| d.to_string()) as fn(&str) -> String),
            ("reverse", |d: &str| d.chars().rev().collect()),
            ("double", |d: &str| format!("{d}{d}")),
        ] {
            let t = mode(name, 7, 2);
            let data = t.data(2, &Device::Cpu).unwrap();
            let batches = data.eval_batches(Split::Test(0), 64).unwrap();
            for b in &batches {
                let k = if name == "double" { 15 } else { 8 };
                assert_eq!((b.steps().unwrap(), b.scored.len()), (7 + 1 + k, k), "{name}: fixed length at the target");
            }
            for (digits, answer) in batches.iter().flat_map(decode) {
                assert_eq!(digits.len(), 7);
                assert_eq!(answer, format!("{}{END}", f(&digits)), "{name}");
            }
        }
        // A hand-laid batch: `12` copied.
        let b = layout(&[Example { program: "12".into(), answer: "12".into() }], &Device::Cpu).unwrap();
        assert_eq!(text(&b.inputs.flatten_all().unwrap().to_vec1::<u32>().unwrap()), "12@___");
        assert_eq!(text(&b.targets.flatten_all().unwrap().to_vec1::<u32>().unwrap()), "12.");
        assert_eq!(b.scored, vec![3, 4, 5]);
    }

    #[test]
    fn shapes_of_batches_and_sets() {
        let t = mode("program", 2, 2);
        assert_eq!(t.input(), Ty::Tokens(50));
        assert_eq!(t.target(), Target::Classes(50));
        let mut data = t.data(3, &Device::Cpu).unwrap();
        assert_eq!(data.train_size(), None);
        for _ in 0..10 {
            let b = data.train_batch(8).unwrap();
            let (steps, k) = (b.steps().unwrap(), b.scored.len());
            assert_eq!(b.inputs.dims(), &[steps, 8]);
            assert_eq!(b.targets.dims(), &[k, 8]);
            assert_eq!(decode(&b).len(), 8);
        }
        let groups = data.eval_batches(Split::Test(0), 1000).unwrap();
        assert_eq!(groups.iter().map(|b| b.batch_size().unwrap()).sum::<usize>(), 100);
        let mut lengths: Vec<usize> = groups.iter().map(|b| b.scored.len()).collect();
        lengths.sort();
        lengths.dedup();
        assert!(lengths.len() >= 3, "answers of several lengths, one group each: {lengths:?}");
        assert!(data.eval_batches(Split::Test(0), 7).unwrap().iter().all(|b| b.batch_size().unwrap() <= 7));
    }

    #[test]
    fn the_curriculum_mixes_difficulties_in_training_only() {
        let length_of = |p: &str| p.len();
        let t = task(&[("mode", Value::Str("copy".into())), ("length", Value::Int(6)), ("validation", Value::Int(50))]);
        let mut data = t.data(4, &Device::Cpu).unwrap();
        let mut train: Vec<usize> =
            (0..40).flat_map(|_| decode(&data.train_batch(4).unwrap())).map(|(p, _)| length_of(&p)).collect();
        train.sort();
        train.dedup();
        assert_eq!(train, (1..=6).collect::<Vec<_>>(), "mix: lengths 1..=6 in training");
        assert!(split(data.as_ref(), Split::Validation).iter().all(|(p, _)| p.len() == 6), "held out at the target");
        let baseline = task(&[
            ("mode", Value::Str("copy".into())),
            ("length", Value::Int(6)),
            ("curriculum", Value::Str("baseline".into())),
            ("validation", Value::Int(5)),
            ("test", Value::Int(5)),
        ]);
        let mut data = baseline.data(4, &Device::Cpu).unwrap();
        assert!((0..10).flat_map(|_| decode(&data.train_batch(4).unwrap())).all(|(p, _)| p.len() == 6));
    }

    #[test]
    fn the_same_seed_gives_the_same_data_and_another_seed_other_data() {
        for name in Mode::NAMES {
            let t = mode(name, 3, 2);
            let draw = |seed: u64| {
                let mut d = t.data(seed, &Device::Cpu).unwrap();
                let train: Vec<_> = (0..3).flat_map(|_| decode(&d.train_batch(8).unwrap())).collect();
                (train, split(d.as_ref(), Split::Validation), split(d.as_ref(), Split::Test(0)))
            };
            let a = draw(5);
            assert_eq!(a, draw(5), "{name}: same seed, same data");
            let b = draw(6);
            assert_ne!(a.0, b.0, "{name}: training batches differ");
            assert_ne!(a.1, b.1, "{name}: validation differs");
            assert_ne!(a.1, a.2, "{name}: validation and test are different draws");
        }
    }

    #[test]
    fn options_are_checked() {
        let err = |options: &[(&str, Value)]| {
            LearnToExecuteKind.instantiate(&{
                LearnToExecuteKind
                    .signature()
                    .iter()
                    .map(|s| {
                        options
                            .iter()
                            .find(|(n, _)| *n == s.name)
                            .map_or(s.default.value().unwrap(), |(_, v)| v.clone())
                    })
                    .collect::<Vec<_>>()
            })
        };
        let e = err(&[("mode", Value::Str("sort".into()))]).err().unwrap();
        assert_eq!(e.arg, Some("mode"));
        assert!(
            e.to_string().contains("\"addition\", \"control\", \"program\", \"copy\", \"reverse\", \"double\""),
            "{e}"
        );
        assert_eq!(err(&[("length", Value::Int(10))]).err().unwrap().arg, Some("length"), "programs: length ≤ 9");
        assert!(err(&[("mode", Value::Str("copy".into())), ("length", Value::Int(40))]).is_ok());
        assert_eq!(err(&[("nesting", Value::Int(0))]).err().unwrap().arg, Some("nesting"));
        assert_eq!(err(&[("curriculum", Value::Str("combined".into()))]).err().unwrap().arg, Some("curriculum"));
    }
}
