//! bAbI question answering (Weston et al. 2015, "Towards AI-Complete Question Answering"),
//! read from the files of the Facebook release: SAM Table 4 trains on `en-valid-10k`, all 20
//! tasks jointly, and reports the error rate per task.
//!
//! **Files.** `path` names a folder in the `en-valid-10k` layout of `tasks_1-20_v1-2.tar.gz`:
//! `qa{N}_train.txt`, `qa{N}_valid.txt` and `qa{N}_test.txt` for N = 1..20. A relative path is
//! relative to the spec file it is written in. `task = N` reads task N's three files; `task = 0`
//! (the default) all 60, trained and validated jointly.
//!
//! **Format.** Numbered lines; the numbering restarts at 1 for a new story. A statement is
//! `id sentence`, a question `id question<TAB>answer<TAB>supporting facts` (the supporting
//! facts are line numbers of the story, checked but not used); `→` is a tab:
//!
//! ```text
//! 1 Mary moved to the bathroom.
//! 2 John went to the hallway.
//! 3 Where is Mary? →bathroom→1
//! ```
//!
//! **Examples.** One per question: the statements of its story before it (the last
//! `max_facts` of them when `max_facts > 0`; earlier questions are left out), then the
//! question, word by word, then one answer step, scored:
//!
//! ```text
//!   input   pad … mary moved to the bathroom . john went to the hallway . where is mary ?  ANS
//!   target                                                                                  bathroom
//! ```
//!
//! Words are lowercased and `. , ? ! ; :` split off as tokens of their own. The vocabulary is
//! `<pad>`, `<unk>`, `<answer>`, then the training files' words, sorted; a word first seen in a
//! validation or test file is `<unk>`. An answer is one class, as written: the multi-word
//! answers of tasks 8 and 19 (`apple,football`, `n,w`) are classes of their own rather than
//! sequences. The classes are `<unk>` (an answer no training question has) and the training
//! answers, sorted.
//!
//! **Splits and metric.** Validation: the `valid` files. Test: the `test` files as one set
//! (`test`, the mean over the tasks' questions), and with `task = 0` each task's test file as a
//! split of its own (`qa1` … `qa20`, reported as `qa3_error`, …). The paper's metric is the
//! error rate in percent, `error` (100 · (1 − accuracy)); a task counts as failed above 5 %.
//!
//! Batches pad stories on the left (see [`super::token_examples`]); training batches are drawn
//! uniformly from the training questions.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::data_digest::DataDigest;
use super::data_file::{self, DataError, numbered_lines};
use super::define::task_kind;
use super::options::{Options, TaskOption};
use super::prelude::*;
use super::token_examples::{ExampleData, Examples, Layout, Part};
use super::vocab::Interner;
use crate::signature::Hint;

static OPTIONS: [TaskOption; 3] = [
    TaskOption::path("path", "the bAbI folder (en-valid-10k)"),
    TaskOption::int("task", 0, 0, TASKS as i64),
    TaskOption::int("max_facts", 0, 0, 1 << 20),
];

/// Token ids of the reserved words.
const PAD: u32 = 0;
const UNKNOWN: u32 = 1;
const ANSWER: u32 = 2;
const RESERVED: [&str; 3] = ["<pad>", "<unk>", "<answer>"];

/// The test splits with `task = 0`: all tasks, then each (`task = N` has only the first).
static SPLITS: [&str; 21] = [
    "test", "qa1", "qa2", "qa3", "qa4", "qa5", "qa6", "qa7", "qa8", "qa9", "qa10", "qa11", "qa12", "qa13", "qa14",
    "qa15", "qa16", "qa17", "qa18", "qa19", "qa20",
];

const TASKS: usize = 20;

/// What a bAbI folder holds (for messages).
const LAYOUT: &str =
    "a bAbI folder in the en-valid-10k layout (qa1_train.txt, qa1_valid.txt, qa1_test.txt, … qa20_test.txt)";

task_kind! {
    BabiKind = "babi",
    "bAbI question answering read from files: a story and a question word by word, then the answer (SAM Table 4)",
    options: &OPTIONS,
    reads: "a folder in bAbI's en-valid-10k layout (qa{N}_train.txt, qa{N}_valid.txt, qa{N}_test.txt, N = 1..20), \
             relative to the spec file; input tokens(V), target one class per answer; metrics loss, accuracy, \
             seq_accuracy, error (%); test sets test and, with task = 0, qa1 … qa20",
}

fn instantiate(o: &Options, dir: &Path) -> Result<Box<dyn Task>, PrimError> {
    let path = o.path("path")?;
    let task = o.int("task")?;
    let max_facts = o.int("max_facts")?;
    let folder = data_file::resolve(dir, &path);
    let sets = read(&folder, task, max_facts).map_err(|e| {
        let missing = matches!(e, DataError::Missing { .. });
        let err = e.on_path();
        if missing { err.hint(Hint::BabiData { dir: folder.display().to_string() }) } else { err }
    })?;
    Ok(Box::new(Babi { sets: Arc::new(sets), joint: task == 0 }))
}

/// The questions of some files, with the statements they follow.
#[derive(Debug, Default)]
struct Stories {
    /// The statements' tokens, one after the other (a story's statements are consecutive).
    tokens: Vec<u32>,
    /// Where each statement starts in `tokens`, and one more entry: the end.
    starts: Vec<usize>,
    /// The questions' tokens.
    question_tokens: Vec<u32>,
    questions: Vec<Question>,
}

#[derive(Clone, Debug)]
struct Question {
    /// The statements it follows (indices into `starts`).
    facts: (usize, usize),
    /// Its tokens in `question_tokens`.
    text: (usize, usize),
    answer: [u32; 1],
    /// Which bAbI task (1..=20).
    task: usize,
}

impl Examples for Stories {
    fn len(&self) -> usize {
        self.questions.len()
    }
    fn input_len(&self, i: usize) -> usize {
        let q = &self.questions[i];
        self.starts[q.facts.1] - self.starts[q.facts.0] + q.text.1 - q.text.0
    }
    fn input(&self, i: usize, out: &mut Vec<u32>) {
        let q = &self.questions[i];
        out.extend_from_slice(&self.tokens[self.starts[q.facts.0]..self.starts[q.facts.1]]);
        out.extend_from_slice(&self.question_tokens[q.text.0..q.text.1]);
    }
    fn target(&self, i: usize) -> &[u32] {
        &self.questions[i].answer
    }
}

/// The three sets, in final ids.
#[derive(Debug)]
struct Sets {
    /// What was read ([`DataDigest`]).
    digest: String,
    vocab: usize,
    classes: usize,
    train: Arc<Stories>,
    validation: Arc<Stories>,
    test: Arc<Stories>,
}

/// Reads task `task`'s files (all 20 tasks' with 0) from `folder`.
fn read(folder: &Path, task: usize, max_facts: usize) -> Result<Sets, DataError> {
    if !data_file::is_dir(folder, LAYOUT)? {
        return Err(DataError::Unreadable {
            path: folder.to_path_buf(),
            reason: format!("it is a file; expected {LAYOUT}"),
        });
    }
    let tasks: Vec<usize> = if task == 0 { (1..=TASKS).collect() } else { vec![task] };
    let mut words: Interner<String> = Interner::default();
    let mut answers: Interner<String> = Interner::default();
    let mut digest = DataDigest::default();
    let mut read_split = |split: &str, words: &mut Interner<String>, answers: &mut Interner<String>| {
        let mut stories = Stories { starts: vec![0], ..Stories::default() };
        for &t in &tasks {
            let file: PathBuf = folder.join(format!("qa{t}_{split}.txt"));
            let text = data_file::read_text(&file, "a bAbI task file (numbered story lines and questions)")?;
            digest.add_lines(&text);
            parse(&file, &text, t, max_facts, words, answers, &mut stories)?;
        }
        Ok::<_, DataError>(stories)
    };
    let mut train = read_split("train", &mut words, &mut answers)?;
    let (known_words, known_answers) = (words.len(), answers.len());
    let mut validation = read_split("valid", &mut words, &mut answers)?;
    let mut test = read_split("test", &mut words, &mut answers)?;
    let vocab = words.finish(&RESERVED, known_words, UNKNOWN as usize);
    let classes = answers.finish(&["<unk>"], known_answers, 0);
    for s in [&mut train, &mut validation, &mut test] {
        vocab.map_all(&mut s.tokens);
        vocab.map_all(&mut s.question_tokens);
        for q in &mut s.questions {
            q.answer[0] = classes.map(q.answer[0]);
        }
    }
    Ok(Sets {
        digest: digest.finish(),
        vocab: vocab.len(),
        classes: classes.len(),
        train: Arc::new(train),
        validation: Arc::new(validation),
        test: Arc::new(test),
    })
}

/// Parses one file of task `task` into `into` (provisional ids).
fn parse(
    path: &Path,
    text: &str,
    task: usize,
    max_facts: usize,
    words: &mut Interner<String>,
    answers: &mut Interner<String>,
    into: &mut Stories,
) -> Result<(), DataError> {
    let questions_before = into.questions.len();
    let mut previous: Option<usize> = None;
    let mut story_start = into.starts.len() - 1;
    let mut tokens = vec![];
    for (n, line) in numbered_lines(text) {
        if line.trim().is_empty() {
            continue;
        }
        let at = Line { path, n };
        let line = line.trim_start();
        let (number, rest) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
        let id = at.number(number, previous)?;
        if id == 1 {
            story_start = into.starts.len() - 1;
        }
        previous = Some(id);
        tokens.clear();
        if !rest.contains('\t') {
            at.fact(rest, &mut tokens, words)?;
            into.tokens.extend_from_slice(&tokens);
            into.starts.push(into.tokens.len());
            continue;
        }
        let answer = at.question(rest, id, &mut tokens, words)?;
        let end = into.starts.len() - 1;
        let start = if max_facts > 0 { end.saturating_sub(max_facts).max(story_start) } else { story_start };
        let text_start = into.question_tokens.len();
        into.question_tokens.extend_from_slice(&tokens);
        into.questions.push(Question {
            facts: (start, end),
            text: (text_start, into.question_tokens.len()),
            answer: [answers.id(answer.as_str())],
            task,
        });
    }
    if into.questions.len() == questions_before {
        return Err(DataError::File {
            path: path.to_path_buf(),
            problem: "no questions; expected lines `id question<TAB>answer<TAB>supporting facts`".into(),
        });
    }
    Ok(())
}

/// One line of a task file, read by its kind; each error names the file and the line.
#[derive(Clone, Copy)]
struct Line<'a> {
    path: &'a Path,
    n: usize,
}

impl Line<'_> {
    fn expected(self, expected: impl Into<String>, found: &str) -> DataError {
        DataError::line(self.path, self.n, expected, found)
    }

    /// The line's number, which continues the story (`previous + 1`) or starts a new one (1).
    fn number(self, number: &str, previous: Option<usize>) -> Result<usize, DataError> {
        let Some(id) = number.parse::<usize>().ok().filter(|id| *id >= 1) else {
            return Err(self.expected("a line number", number));
        };
        match previous {
            _ if id == 1 => Ok(id),
            Some(p) if id == p + 1 => Ok(id),
            Some(p) => Err(self.expected(format!("line number {} (or 1 to start a new story)", p + 1), number)),
            None => Err(self.expected("line number 1 (a file starts with a story)", number)),
        }
    }

    /// A story sentence (the text after the number): its tokens into `tokens`.
    fn fact(self, rest: &str, tokens: &mut Vec<u32>, words: &mut Interner<String>) -> Result<(), DataError> {
        // bAbI's story sentences never ask; a `?` without a tab is a question whose answer is
        // missing (or whose tabs became spaces), and reading it as a fact would silently
        // corrupt the story.
        if rest.contains('?') {
            let expected = "a tab and an answer after the question (`id question<TAB>answer<TAB>supporting facts`)";
            return Err(self.expected(expected, rest.trim()));
        }
        tokenize(rest, &mut |w| tokens.push(words.id(w)));
        if tokens.is_empty() {
            return Err(self.expected("a sentence after the line number", rest.trim()));
        }
        Ok(())
    }

    /// A question `question<TAB>answer<TAB>supporting facts` (the text after number `id`): its
    /// tokens into `tokens`; the answer, lowercased.
    fn question(
        self,
        rest: &str,
        id: usize,
        tokens: &mut Vec<u32>,
        words: &mut Interner<String>,
    ) -> Result<String, DataError> {
        let fields: Vec<&str> = rest.split('\t').collect();
        if fields.len() > 3 {
            let expected = "a question line `id question<TAB>answer<TAB>supporting facts` (two tabs)";
            return Err(self.expected(expected, rest));
        }
        tokenize(fields[0], &mut |w| tokens.push(words.id(w)));
        if tokens.is_empty() {
            return Err(self.expected("a question before the tab", fields[0].trim()));
        }
        let answer = fields[1].trim().to_lowercase();
        if answer.is_empty() || answer.contains(char::is_whitespace) {
            let expected = "an answer (one word, or words joined by commas) after the tab";
            return Err(self.expected(expected, fields[1]));
        }
        for fact in fields.get(2).map_or("", |f| *f).split_whitespace() {
            if !fact.parse::<usize>().is_ok_and(|f| f >= 1 && f < id) {
                return Err(self.expected(format!("supporting facts: line numbers below {id}"), fact));
            }
        }
        Ok(answer)
    }
}

/// Lowercased words, with `. , ? ! ; :` as tokens of their own.
fn tokenize(text: &str, emit: &mut dyn FnMut(&str)) {
    for word in text.split_whitespace() {
        let word = word.to_lowercase();
        let mut rest = word.as_str();
        while let Some(i) = rest.find(['.', ',', '?', '!', ';', ':']) {
            if i > 0 {
                emit(&rest[..i]);
            }
            emit(&rest[i..i + 1]);
            rest = &rest[i + 1..];
        }
        if !rest.is_empty() {
            emit(rest);
        }
    }
}

#[derive(Debug)]
struct Babi {
    sets: Arc<Sets>,
    /// All 20 tasks (`task = 0`): a test split per task.
    joint: bool,
}

impl Task for Babi {
    fn data_digest(&self) -> Option<&str> {
        Some(&self.sets.digest)
    }
    fn input(&self) -> Ty {
        Ty::Tokens(self.sets.vocab)
    }
    fn target(&self) -> Target {
        Target::Classes(self.sets.classes)
    }
    fn test_splits(&self) -> &'static [&'static str] {
        if self.joint { &SPLITS } else { &SPLITS[..1] }
    }
    fn task_metric_names(&self) -> &'static [&'static str] {
        &["error"]
    }
    fn task_metrics(&self, batch: &Batch, logits: &Tensor) -> candle_core::Result<Vec<(&'static str, f64, f64)>> {
        let predicted: Vec<u32> = logits.argmax(candle_core::D::Minus1)?.flatten_all()?.to_vec1()?;
        let targets: Vec<u32> = batch.targets.flatten_all()?.to_vec1()?;
        let wrong = predicted.iter().zip(&targets).filter(|(p, t)| p != t).count();
        Ok(vec![("error", 100.0 * wrong as f64, targets.len() as f64)])
    }
    fn data(&self, seed: u64, device: &Device) -> candle_core::Result<Box<dyn TaskData>> {
        let s = &self.sets;
        let mut tests = vec![Part::all(s.test.clone())];
        if self.joint {
            for t in 1..=TASKS {
                let members = (0..s.test.len()).filter(|&i| s.test.questions[i].task == t).collect();
                tests.push(Part { set: s.test.clone(), members });
            }
        }
        let parts = (Part::all(s.train.clone()), Part::all(s.validation.clone()), tests);
        let layout = Layout::After { pad: PAD, answer: ANSWER };
        Ok(Box::new(ExampleData::new(layout, parts, seed, device)?))
    }
}

#[cfg(test)]
mod tests {
    use super::super::token_examples::testing;
    use super::*;

    const QA1: &str = "1 Mary moved to the bathroom.\n2 John went to the hallway.\n3 Where is Mary? \tbathroom\t1\n\
                       4 Daniel went back to the hallway.\n5 Where is Daniel? \thallway\t4\n\
                       1 Sandra journeyed to the garden.\n2 Where is Sandra? \tgarden\t1\n";
    const QA2: &str = "1 John picked up the apple.\n2 John went to the office.\n3 What is John carrying? \tapple\t1\n";

    /// A folder with `tasks` tasks: each split's files hold `QA1` (and task 2 `QA2`).
    fn folder(tasks: usize) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for t in 1..=tasks {
            for split in ["train", "valid", "test"] {
                let text = if t == 2 { QA2 } else { QA1 };
                std::fs::write(dir.path().join(format!("qa{t}_{split}.txt")), text).unwrap();
            }
        }
        dir
    }

    fn options(path: &Path, task: i64, max_facts: i64) -> Vec<Value> {
        vec![Value::Str(path.display().to_string()), Value::Int(task), Value::Int(max_facts)]
    }

    /// The first error of task `task` on a folder whose `qa1_train.txt` holds `text`.
    fn error_for(text: &[u8]) -> String {
        let dir = folder(1);
        std::fs::write(dir.path().join("qa1_train.txt"), text).unwrap();
        let e = BabiKind.instantiate(&options(dir.path(), 1, 0)).err().unwrap();
        assert_eq!(e.arg, Some("path"));
        e.to_string().replace(&dir.path().display().to_string(), "DIR")
    }

    const LAYOUT_AFTER: Layout = Layout::After { pad: PAD, answer: ANSWER };

    #[test]
    fn tokenizes_lowercase_words_and_punctuation() {
        let mut out = vec![];
        tokenize("Where is Mary? ", &mut |w| out.push(w.to_string()));
        tokenize("the kitchen,hallway.", &mut |w| out.push(w.to_string()));
        assert_eq!(out, ["where", "is", "mary", "?", "the", "kitchen", ",", "hallway", "."]);
    }

    #[test]
    fn questions_read_as_story_then_question_then_answer() {
        let dir = folder(1);
        let task = BabiKind.instantiate(&options(dir.path(), 1, 0)).unwrap();
        // Words: 17 distinct in QA1, after the 3 reserved; answers: 3, after `<unk>`.
        assert_eq!(task.input(), Ty::Tokens(3 + 17));
        assert_eq!(task.target(), Target::Classes(4));
        assert_eq!(task.test_splits(), &["test"]);
        let data = task.data(0, &Device::Cpu).unwrap();
        assert_eq!(data.train_size(), Some(3));
        let mut got = testing::examples(data.as_ref(), Split::Validation, LAYOUT_AFTER);
        got.sort_by_key(|(x, _)| x.len());
        // The vocabulary: the story's and questions' words, sorted, after the reserved three.
        let mut words: Vec<String> = vec![];
        for line in QA1.lines() {
            let sentence = line.split('\t').next().unwrap();
            let sentence = sentence.split_once(' ').unwrap().1;
            tokenize(sentence, &mut |w| {
                if !words.iter().any(|v| v == w) {
                    words.push(w.to_string())
                }
            });
        }
        words.sort();
        let text = |ids: &[u32]| -> String {
            ids.iter().map(|&i| words[i as usize - 3].as_str()).collect::<Vec<_>>().join(" ")
        };
        let answers = ["bathroom", "garden", "hallway"]; // sorted, after `<unk>`
        let decoded: Vec<(String, &str)> = got.iter().map(|(x, y)| (text(x), answers[y[0] as usize - 1])).collect();
        assert_eq!(
            decoded,
            vec![
                ("sandra journeyed to the garden . where is sandra ?".to_string(), "garden"),
                ("mary moved to the bathroom . john went to the hallway . where is mary ?".to_string(), "bathroom"),
                (
                    "mary moved to the bathroom . john went to the hallway . daniel went back to the hallway . \
                     where is daniel ?"
                        .to_string(),
                    "hallway"
                ),
            ]
        );

        // max_facts keeps the last statements before each question.
        let short = BabiKind.instantiate(&options(dir.path(), 1, 1)).unwrap().data(0, &Device::Cpu).unwrap();
        let mut got = testing::examples(short.as_ref(), Split::Test(0), LAYOUT_AFTER);
        got.sort_by_key(|(x, _)| x.len());
        assert_eq!(text(&got[2].0), "daniel went back to the hallway . where is daniel ?");
    }

    #[test]
    fn all_tasks_train_jointly_and_test_per_task() {
        let dir = folder(20);
        let task = BabiKind.instantiate(&options(dir.path(), 0, 0)).unwrap();
        assert_eq!(task.test_splits().len(), 21);
        assert_eq!(task.test_splits()[3], "qa3");
        assert_eq!(task.task_metric_names(), &["error"]);
        let data = task.data(0, &Device::Cpu).unwrap();
        assert_eq!(data.train_size(), Some(19 * 3 + 1));
        assert_eq!(testing::examples(data.as_ref(), Split::Test(0), LAYOUT_AFTER).len(), 58);
        assert_eq!(testing::examples(data.as_ref(), Split::Test(1), LAYOUT_AFTER).len(), 3);
        assert_eq!(testing::examples(data.as_ref(), Split::Test(2), LAYOUT_AFTER).len(), 1);
        // The error metric: wrong answers in percent.
        let b = data.eval_batches(Split::Test(2), 8).unwrap().remove(0);
        let classes = task.target().size();
        let right = b.targets.flatten_all().unwrap().to_vec1::<u32>().unwrap()[0] as usize;
        let mut logits = vec![0f32; classes];
        logits[(right + 1) % classes] = 1.0;
        let logits = Tensor::from_vec(logits, (1, 1, classes), &Device::Cpu).unwrap();
        assert_eq!(task.task_metrics(&b, &logits).unwrap(), vec![("error", 100.0, 1.0)]);
    }

    #[test]
    fn same_seed_same_batches() {
        let dir = folder(20);
        let task = BabiKind.instantiate(&options(dir.path(), 0, 0)).unwrap();
        let draw = |seed| {
            let mut d = task.data(seed, &Device::Cpu).unwrap();
            (0..4).map(|_| d.train_batch(3).unwrap().inputs.to_vec2::<u32>().unwrap()).collect::<Vec<_>>()
        };
        assert_eq!(draw(5), draw(5));
        assert_ne!(draw(5), draw(6));
    }

    #[test]
    fn relative_paths_resolve_against_the_given_folder() {
        let dir = folder(1);
        let sub = dir.path().join("specs");
        std::fs::create_dir(&sub).unwrap();
        let rel = vec![Value::Str("..".into()), Value::Int(1), Value::Int(0)];
        assert!(BabiKind.instantiate_in(&rel, &sub).is_ok());
    }

    #[test]
    fn missing_data_says_where_to_get_it_and_where_to_put_it() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("en-valid-10k");
        let e = BabiKind.instantiate(&options(&missing, 0, 0)).err().unwrap();
        assert_eq!(e.arg, Some("path"));
        assert_eq!(
            e.to_string(),
            format!(
                "`{}` does not exist; expected a bAbI folder in the en-valid-10k layout (qa1_train.txt, \
                 qa1_valid.txt, qa1_test.txt, … qa20_test.txt) there",
                missing.display()
            )
        );
        assert_eq!(
            e.hint.unwrap().to_string(),
            format!(
                "download https://dl.fbaipublicfiles.com/babi/tasks_1-20_v1-2.tar.gz, unpack it (`tar xzf \
                 tasks_1-20_v1-2.tar.gz`) and move its folder `tasks_1-20_v1-2/en-valid-10k` to `{}`, or set \
                 `path` to where that folder is",
                missing.display()
            )
        );
        // A folder without one of the files.
        let partial = folder(1);
        let e = BabiKind.instantiate(&options(partial.path(), 0, 0)).err().unwrap();
        assert_eq!(
            e.to_string(),
            format!(
                "`{}` does not exist; expected a bAbI task file (numbered story lines and questions) there",
                partial.path().join("qa2_train.txt").display()
            )
        );
        assert!(e.hint.is_some());
        // A file, not a folder.
        let file = partial.path().join("qa1_train.txt");
        let e = BabiKind.instantiate(&options(&file, 1, 0)).err().unwrap();
        assert!(e.to_string().starts_with(&format!("cannot read `{}`: it is a file; expected", file.display())));
        let empty = vec![Value::Str(" ".into()), Value::Int(1), Value::Int(0)];
        assert_eq!(
            BabiKind.instantiate(&empty).err().unwrap().to_string(),
            "`path` must name the bAbI folder (en-valid-10k), found \" \""
        );
    }

    #[test]
    fn each_malformed_input_has_its_located_message() {
        assert_eq!(
            error_for(b"\n \n"),
            "DIR/qa1_train.txt: the file is empty; expected a bAbI task file (numbered story lines and questions)"
        );
        assert_eq!(
            error_for(b"1 Mary went home.\nJohn went to the kitchen.\n"),
            "DIR/qa1_train.txt:2: expected a line number, found \"John\""
        );
        assert_eq!(
            error_for(b"1 Mary went home.\n3 Where is Mary?\thome\t1\n"),
            "DIR/qa1_train.txt:2: expected line number 2 (or 1 to start a new story), found \"3\""
        );
        assert_eq!(
            error_for(b"2 Mary went home.\n"),
            "DIR/qa1_train.txt:1: expected line number 1 (a file starts with a story), found \"2\""
        );
        assert_eq!(
            error_for(b"1 Mary went home.\n2\n"),
            "DIR/qa1_train.txt:2: expected a sentence after the line number, found nothing"
        );
        assert_eq!(
            error_for(b"1 Mary went home.\n2 Where is Mary?\t\t1\n"),
            "DIR/qa1_train.txt:2: expected an answer (one word, or words joined by commas) after the tab, found nothing"
        );
        assert_eq!(
            error_for(b"1 Mary went home.\n2 Where is Mary?\n"),
            "DIR/qa1_train.txt:2: expected a tab and an answer after the question (`id \
             question<TAB>answer<TAB>supporting facts`), found \"Where is Mary?\""
        );
        assert_eq!(
            error_for(b"1 Mary went home.\n2 Where is Mary?  home  1\n"),
            "DIR/qa1_train.txt:2: expected a tab and an answer after the question (`id \
             question<TAB>answer<TAB>supporting facts`), found \"Where is Mary?  home  1\""
        );
        assert_eq!(
            error_for(b"1 Mary went home.\n2 \thome\t1\n"),
            "DIR/qa1_train.txt:2: expected a question before the tab, found nothing"
        );
        assert_eq!(
            error_for(b"1 Mary went home.\n2 Where is Mary?\thome\t1 x\n"),
            "DIR/qa1_train.txt:2: expected supporting facts: line numbers below 2, found \"x\""
        );
        assert_eq!(
            error_for(b"1 Mary went home.\n2 Where is Mary?\thome\t1\tmore\n"),
            "DIR/qa1_train.txt:2: expected a question line `id question<TAB>answer<TAB>supporting facts` (two \
             tabs), found \"Where is Mary?\\thome\\t1\\tmore\""
        );
        assert_eq!(
            error_for(b"1 Mary went home.\n2 John went out.\n"),
            "DIR/qa1_train.txt: no questions; expected lines `id question<TAB>answer<TAB>supporting facts`"
        );
        assert_eq!(error_for(b"1 Mary went \xff.\n"), "DIR/qa1_train.txt:1: expected UTF-8 text, found other bytes");
    }
}
