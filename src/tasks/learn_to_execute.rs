//! Learning to Execute — program evaluation and memorisation (Zaremba & Sutskever 2014; RMC
//! Table 1, Santoro et al. 2018 §5.2): read a program character by character, then write what
//! it computes, character by character. The `mode`s are `addition`, `control`, `program`
//! (RMC's Add, Control, Program) and the memorisation tasks `copy`, `reverse`, `double` (RMC's
//! Copy, Reverse, Double). The programs are the `grammar`'s:
//! - `"zaremba"` (default): the LTE paper's Python programs, with variables, `print` and
//!   numbers of up to `length` digits, answers exact ([`super::lte_program`]);
//! - `"sonnet"`: the RMC authors' data for Table 1, DeepMind Sonnet's generator: expressions
//!   such as `x=(12if34<56else78)for[3]x+=90`, numbers of exactly `length` digits, answers
//!   modulo `10^(length+1)` ([`super::lte_sonnet`]).
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
//! Tokens: one per character of the grammar's fixed alphabet ([`ZAREMBA_ALPHABET`], 50
//! characters; [`SONNET_ALPHABET`], 31), digits first (so a digit's id is its value); the
//! target is a class of the same alphabet. Training data is fresh every batch, at the
//! `curriculum`'s difficulty ([`super::lte_curriculum`]): `"mix"` (default; the LTE paper's
//! mix strategy: every program draws its length in `1..=length` and its nesting in
//! `1..=nesting`), `"baseline"` (every program at `length` and `nesting`), `"naive"` (every
//! program at a level that starts at length 1 and nesting 1 and moves up every `level_batches`
//! training batches, the length first) or `"combine"` (Sonnet's combined curriculum, the
//! default of its generator and of the RMC authors' example script: every program draws its
//! length and nesting uniformly up to that level's).
//! Validation and test sets are fixed and always at `length` and `nesting`, as LTE's and
//! Sonnet's test sets. `nesting` is not used by the memorisation modes.
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
use super::lte_curriculum::Curriculum;
use super::lte_program::{self, Example, Hardness, Mode};
use super::lte_sonnet;
use super::options::{Options, TaskOption};
use super::prelude::*;

static OPTIONS: [TaskOption; 6] = [
    TaskOption::choice("mode", "program", &Mode::NAMES),
    // At most `Mode::max_length` of the chosen mode (read with `int_in`).
    TaskOption::int("length", 5, 1, 1000),
    TaskOption::int("nesting", 2, 1, 10),
    TaskOption::choice("curriculum", "mix", &Curriculum::NAMES),
    // Added after trials were recorded, hence left out of their identity at the default.
    TaskOption::choice("grammar", "zaremba", &Grammar::NAMES).left_out_of_identity_at_default(),
    TaskOption::int("level_batches", 1000, 1, 1_000_000_000).left_out_of_identity_at_default(),
];

/// The Zaremba grammar's character vocabulary, one token per character: digits, letters, the
/// program symbols, then the end token `.`, the answer delimiter `@` and pad `_`.
pub const ZAREMBA_ALPHABET: &str = "0123456789abcdefghijklmnopqrstuvwxyz +-*=<>():\n.@_";
/// The Sonnet grammar's: digits, the symbols and the letters its programs use (`x`, and those
/// of `if`, `else`, `for`), then `.`, `@` and `_`.
pub const SONNET_ALPHABET: &str = "0123456789+-*=<>()[]efilorsx.@_";
const END: char = '.';
const DELIM: char = '@';
const PAD: char = '_';

/// The token of `c` in `alphabet`, which holds every character a generator writes.
fn token(alphabet: &str, c: char) -> u32 {
    alphabet.find(c).unwrap_or_else(|| panic!("{c:?} is not in the learnToExecute alphabet {alphabet:?}")) as u32
}

task_kind! {
    LearnToExecuteKind = "learnToExecute",
    "Learning to Execute: read a program (addition, control, program) or a number (copy, reverse, double) \
         character by character, write its output; the LTE paper's or Sonnet's (RMC Table 1's) grammar; \
         accuracy per character (RMC Table 1), seq_accuracy per answer",
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
    grammar: Grammar,
    /// Training batches per level of the `naive` and `combine` curricula.
    level_batches: usize,
}

/// Whose programs: the LTE paper's or Sonnet's (see the module comment).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
enum Grammar {
    Zaremba,
    Sonnet,
}

impl Grammar {
    /// The names in specs: the variants', lowercased (as they deserialize).
    const NAMES: [&'static str; 2] = ["zaremba", "sonnet"];

    fn alphabet(self) -> &'static str {
        match self {
            Grammar::Zaremba => ZAREMBA_ALPHABET,
            Grammar::Sonnet => SONNET_ALPHABET,
        }
    }

    fn example(self, rng: &mut ChaCha8Rng, mode: Mode, hardness: Hardness) -> Example {
        match self {
            Grammar::Zaremba => lte_program::example(rng, mode, hardness),
            Grammar::Sonnet => lte_sonnet::example(rng, mode, hardness),
        }
    }
}

/// Tries per example before a training batch gives up on its answer length and starts over.
const TRIES: usize = 1000;

impl LearnToExecute {
    /// A program of the training batch that `drawn` training batches precede.
    fn train_example(&self, rng: &mut ChaCha8Rng, drawn: usize) -> Example {
        let hardness = self.curriculum.hardness(self.target, self.level_batches, drawn, rng);
        self.grammar.example(rng, self.mode, hardness)
    }

    /// Examples whose answers have one length, as a batch (see the module comment).
    fn layout(&self, examples: &[Example], device: &Device) -> candle_core::Result<Batch> {
        layout(examples, self.grammar.alphabet(), device)
    }
}

impl Fresh for LearnToExecute {
    fn max_steps(&self) -> Option<usize> {
        // A program's text is not bounded by the options in a closed form.
        None
    }
    fn input(&self) -> Ty {
        Ty::Tokens(self.grammar.alphabet().len())
    }
    fn target(&self) -> Target {
        Target::Classes(self.grammar.alphabet().len())
    }
    /// A batch as the first of a trial's (where a curriculum starts).
    fn train_batch(&self, rng: &mut ChaCha8Rng, batch: usize, device: &Device) -> candle_core::Result<Batch> {
        self.train_batch_after(rng, 0, batch, device)
    }
    fn train_batch_after(
        &self,
        rng: &mut ChaCha8Rng,
        drawn: usize,
        batch: usize,
        device: &Device,
    ) -> candle_core::Result<Batch> {
        let n = batch.max(1);
        loop {
            let first = self.train_example(rng, drawn);
            let want = first.answer.len();
            let mut examples = vec![first];
            let mut tries = 0;
            while examples.len() < n && tries < TRIES * n {
                let e = self.train_example(rng, drawn);
                if e.answer.len() == want {
                    examples.push(e);
                }
                tries += 1;
            }
            if examples.len() == n {
                return self.layout(&examples, device);
            }
        }
    }

    fn held_out(&self, rng: &mut ChaCha8Rng, n: usize, device: &Device) -> candle_core::Result<Vec<Batch>> {
        let mut by_length: BTreeMap<usize, Vec<Example>> = BTreeMap::new();
        for _ in 0..n {
            let e = self.grammar.example(rng, self.mode, self.target);
            by_length.entry(e.answer.len()).or_default().push(e);
        }
        by_length.values().map(|group| self.layout(group, device)).collect()
    }
}

/// Examples whose answers have one length, as a batch of `alphabet`'s tokens (see the module
/// comment).
fn layout(examples: &[Example], alphabet: &str, device: &Device) -> candle_core::Result<Batch> {
    let n = examples.len();
    let q = examples.iter().map(|e| e.program.len()).max().unwrap_or(0);
    let k = examples.first().map_or(0, |e| e.answer.len()) + 1;
    let steps = q + 1 + k;
    let token = |c| token(alphabet, c);
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
        text_in(ZAREMBA_ALPHABET, tokens)
    }

    fn text_in(alphabet: &str, tokens: &[u32]) -> String {
        tokens.iter().map(|&t| char::from(alphabet.as_bytes()[t as usize])).collect()
    }

    /// Every example of a batch of the Zaremba grammar as (program, answer with its end
    /// token), checking the layout.
    fn decode(b: &Batch) -> Vec<(String, String)> {
        decode_in(ZAREMBA_ALPHABET, b)
    }

    /// [`decode`] for the grammar of `alphabet`.
    fn decode_in(alphabet: &str, b: &Batch) -> Vec<(String, String)> {
        let x = b.inputs.t().unwrap().to_vec2::<u32>().unwrap();
        let y = b.targets.t().unwrap().to_vec2::<u32>().unwrap();
        let (steps, k) = (b.steps().unwrap(), y[0].len());
        let q = steps - k - 1;
        assert_eq!(b.scored, (q + 1..steps).collect::<Vec<_>>(), "the steps after the delimiter are scored");
        x.iter()
            .zip(&y)
            .map(|(x, y)| {
                let row = text_in(alphabet, x);
                assert_eq!(&row[q..], format!("{DELIM}{}", PAD.to_string().repeat(k)), "delimiter, then pads");
                let program = row[..q].trim_start_matches(PAD).to_string();
                assert!(!program.contains([PAD, DELIM, END]), "{program:?}");
                let answer = text_in(alphabet, y);
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
        let b =
            layout(&[Example { program: "12".into(), answer: "12".into() }], ZAREMBA_ALPHABET, &Device::Cpu).unwrap();
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

    fn sonnet(options: &[(&str, Value)]) -> Box<dyn Task> {
        let mut all = vec![("grammar", Value::Str("sonnet".into()))];
        all.extend(options.iter().cloned());
        task(&all)
    }

    fn split_in(alphabet: &str, data: &dyn TaskData, which: Split) -> Vec<(String, String)> {
        data.eval_batches(which, 64).unwrap().iter().flat_map(|b| decode_in(alphabet, b)).collect()
    }

    /// The digits of a Sonnet program's numbers (all have the same), its loop counts left out.
    fn literal_length(program: &str) -> usize {
        lte_sonnet::tests::numbers(program).first().map_or(0, |n| n.len())
    }

    #[test]
    fn sonnet_targets_are_what_the_programs_compute() {
        for name in ["addition", "control", "program"] {
            let t = sonnet(&[
                ("mode", Value::Str(name.into())),
                ("length", Value::Int(3)),
                ("nesting", Value::Int(3)),
                ("validation", Value::Int(200)),
            ]);
            assert_eq!((t.input(), t.target()), (Ty::Tokens(31), Target::Classes(31)), "Sonnet's alphabet");
            let mut data = t.data(1, &Device::Cpu).unwrap();
            let held_out = split_in(SONNET_ALPHABET, data.as_ref(), Split::Validation);
            assert_eq!(held_out.len(), 200);
            for (program, _) in &held_out {
                assert_eq!(literal_length(program), 3, "held out at the target length: {program}");
                assert_eq!(program.matches('(').count(), 2, "held out at nesting 3: {program}");
            }
            let train = (0..5).flat_map(|_| decode_in(SONNET_ALPHABET, &data.train_batch(16).unwrap()));
            for (program, answer) in held_out.into_iter().chain(train) {
                let expected = lte_sonnet::tests::answer(&program, literal_length(&program));
                assert_eq!(format!("{expected}{END}"), answer, "{name}: {program}");
            }
        }
    }

    #[test]
    fn a_sonnet_program_by_hand() {
        // `x=(12if34<56else78)for[3]x+=90`: 34 < 56, so 12, then 3 × 90 added: 282.
        let program = "x=(12if34<56else78)for[3]x+=90";
        let b = layout(&[Example { program: program.into(), answer: "282".into() }], SONNET_ALPHABET, &Device::Cpu)
            .unwrap();
        assert_eq!(decode_in(SONNET_ALPHABET, &b), [(program.to_string(), "282.".to_string())]);
        assert_eq!(lte_sonnet::tests::answer(program, 2), "282");
        let digits = b.targets.flatten_all().unwrap().to_vec1::<u32>().unwrap();
        assert_eq!(digits[..3], [2, 8, 2], "a digit's token is its value");
    }

    #[test]
    fn the_combine_curriculum_moves_up_a_length_every_level_batches() {
        let t = sonnet(&[
            ("mode", Value::Str("copy".into())),
            ("length", Value::Int(4)),
            ("curriculum", Value::Str("combine".into())),
            ("level_batches", Value::Int(20)),
            ("validation", Value::Int(50)),
        ]);
        let mut data = t.data(7, &Device::Cpu).unwrap();
        // A copy's answer is its program, so each batch holds one length.
        let lengths: Vec<usize> =
            (0..120).map(|_| decode_in(SONNET_ALPHABET, &data.train_batch(4).unwrap())[0].0.len()).collect();
        let seen = |range: std::ops::Range<usize>| {
            let mut s = lengths[range].to_vec();
            s.sort();
            s.dedup();
            s
        };
        assert_eq!(seen(0..20), [1], "level 1");
        assert_eq!(seen(20..40), [1, 2], "level 2: lengths up to 2");
        assert_eq!(seen(40..60), [1, 2, 3]);
        assert_eq!(seen(60..120), [1, 2, 3, 4], "the target, and no further");
        let held_out = split_in(SONNET_ALPHABET, data.as_ref(), Split::Validation);
        assert!(held_out.iter().all(|(p, _)| p.len() == 4), "held out at the target");
    }

    #[test]
    fn the_naive_curriculum_moves_up_the_nesting_once_the_length_is_at_its_target() {
        let t = sonnet(&[
            ("mode", Value::Str("program".into())),
            ("length", Value::Int(1)),
            ("nesting", Value::Int(3)),
            ("curriculum", Value::Str("naive".into())),
            ("level_batches", Value::Int(10)),
            ("validation", Value::Int(5)),
            ("test", Value::Int(5)),
        ]);
        let mut data = t.data(8, &Device::Cpu).unwrap();
        for (batches, parentheses) in [(0..10, 0), (10..20, 1), (20..40, 2)] {
            for i in batches {
                for (program, _) in decode_in(SONNET_ALPHABET, &data.train_batch(4).unwrap()) {
                    assert_eq!(literal_length(&program), 1, "{program}");
                    assert_eq!(
                        program.matches('(').count(),
                        parentheses,
                        "batch {i}: nesting {}: {program}",
                        parentheses + 1
                    );
                }
            }
        }
    }

    #[test]
    fn a_resumed_trial_draws_the_same_curriculum() {
        // A resumed trial draws its earlier batches again from a fresh stream; the level comes
        // from the count of batches drawn, so the batches after it are the uninterrupted ones.
        let t = sonnet(&[
            ("curriculum", Value::Str("combine".into())),
            ("level_batches", Value::Int(3)),
            ("validation", Value::Int(5)),
            ("test", Value::Int(5)),
        ]);
        let draw = || {
            let mut d = t.data(9, &Device::Cpu).unwrap();
            (0..12).map(|_| decode_in(SONNET_ALPHABET, &d.train_batch(8).unwrap())).collect::<Vec<_>>()
        };
        let all = draw();
        assert_eq!(all, draw());
        let nested = |batch: &Vec<(String, String)>| batch.iter().map(|(p, _)| p.matches('(').count()).max().unwrap();
        assert_eq!(nested(&all[0]), 0, "level 1: one operation");
        assert!(all[11].iter().map(|(p, _)| literal_length(p)).max().unwrap() > 1, "later levels: longer numbers");
    }

    #[test]
    fn the_sonnet_grammar_is_deterministic_per_seed() {
        for name in Mode::NAMES {
            let t = sonnet(&[
                ("mode", Value::Str(name.into())),
                ("length", Value::Int(3)),
                ("curriculum", Value::Str("combine".into())),
                ("level_batches", Value::Int(2)),
                ("validation", Value::Int(50)),
                ("test", Value::Int(50)),
            ]);
            let draw = |seed: u64| {
                let mut d = t.data(seed, &Device::Cpu).unwrap();
                let train: Vec<_> =
                    (0..6).flat_map(|_| decode_in(SONNET_ALPHABET, &d.train_batch(8).unwrap())).collect();
                (train, split_in(SONNET_ALPHABET, d.as_ref(), Split::Validation))
            };
            let a = draw(5);
            assert_eq!(a, draw(5), "{name}: same seed, same data");
            assert_ne!(a, draw(6), "{name}: another seed, other data");
        }
    }

    #[test]
    fn the_default_grammar_draws_the_data_it_drew_before_the_option() {
        // Seed 1's first validation programs and training batches, as drawn before the
        // `grammar` and `level_batches` options and the new curricula existed: the defaults
        // keep the data, as they keep the trials' identity.
        let t = mode("program", 2, 2);
        let mut data = t.data(1, &Device::Cpu).unwrap();
        let shown = |examples: Vec<(String, String)>| -> Vec<String> {
            examples.into_iter().map(|(p, a)| format!("{}={a}", p.replace('\n', ";"))).collect()
        };
        let validation = shown(split(data.as_ref(), Split::Validation))[..3].to_vec();
        assert_eq!(
            validation,
            ["print(5)=5.", "print(40 if 27>78 else (1 if 69<87 else 61))=1.", "print(8 if 69>63 else 29)=8."]
        );
        let train = shown((0..3).flat_map(|_| decode(&data.train_batch(2).unwrap())).collect());
        assert_eq!(
            train,
            [
                "print(4*84)=336.",
                "i=35;print(i-(73 if 58<77 else 24))=-38.",
                "i=83;for x in range(7):i+=4;print(i)=111.",
                "h=67;print(h+81)=148.",
                "print(1*4)=4.",
                "print(7)=7.",
            ]
        );
    }

    #[test]
    fn grammar_and_level_options_are_checked() {
        let err = |options: &[(&str, Value)]| {
            let values: Vec<Value> = LearnToExecuteKind
                .signature()
                .iter()
                .map(|s| {
                    options.iter().find(|(n, _)| *n == s.name).map_or(s.default.value().unwrap(), |(_, v)| v.clone())
                })
                .collect();
            LearnToExecuteKind.instantiate(&values).err()
        };
        let e = err(&[("grammar", Value::Str("python".into()))]).unwrap();
        assert_eq!(e.arg, Some("grammar"));
        assert!(e.to_string().contains("\"zaremba\", \"sonnet\""), "{e}");
        assert_eq!(err(&[("level_batches", Value::Int(0))]).unwrap().arg, Some("level_batches"));
        let e = err(&[("curriculum", Value::Str("blend".into()))]).unwrap();
        assert!(e.to_string().contains("\"mix\", \"baseline\", \"naive\", \"combine\""), "{e}");
        assert!(
            err(&[("grammar", Value::Str("sonnet".into())), ("curriculum", Value::Str("combine".into()))]).is_none()
        );
        let e = err(&[("grammar", Value::Str("sonnet".into())), ("length", Value::Int(10))]).unwrap();
        assert_eq!(e.arg, Some("length"), "programs: length ≤ 9 in either grammar");
    }
}
