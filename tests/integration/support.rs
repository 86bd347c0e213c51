//! Helpers shared by the integration tests.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use memctl::check::{self, Trial};
use memctl::lang;

/// Parses and checks a spec given as text; panics with the rendered diagnostics on error.
pub fn trials(name: &str, text: &str) -> Vec<Trial> {
    let spec = lang::parse_str(name, text).unwrap_or_else(|e| panic!("{}", e.render(false)));
    let program = check::check(&spec, &memctl::prims::Primitives)
        .unwrap_or_else(|d| panic!("{}", d.render(&spec.sources, false)));
    program.experiments.into_iter().flat_map(|e| e.trials).collect()
}

/// A temporary folder holding `text` as `tiny.mem`; the spec's path, and the path of a store
/// in the folder (not created). The folder is deleted when the `TempDir` is dropped.
pub fn spec_folder(text: &str) -> (tempfile::TempDir, PathBuf, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("tiny.mem");
    std::fs::write(&spec, text).unwrap();
    let store = dir.path().join("store");
    (dir, spec, store)
}

/// `memctl --store <store>`, without colours.
pub fn memctl_at(store: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_memctl"));
    c.arg("--store").arg(store).env("NO_COLOR", "1");
    c
}

/// Output bytes as text.
pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The 2-pair associative-retrieval task most CLI tests train on (a trial takes well under a
/// second).
pub const TINY_TASK: &str = "task tiny = assocRetrieval(pairs = 2, train = 64, validation = 32, test = 32)\n";

/// The LSTM baseline over token inputs, as a `.mem` model `name` with `hidden` units by default.
pub fn token_lstm(name: &str, hidden: usize) -> String {
    format!(
        r#"model {name}(hidden = {hidden}) {{
  state c = zeros(hidden)
  state h = zeros(hidden)
  step token {{
    c, h = lstmCell(c, h, embed(token, 8))
    out linear(h, output_size)
  }}
}}
"#
    )
}

/// A spec of tiny LSTM trials on 2-pair associative retrieval: one experiment `name` with its
/// `train` settings and `sweep` (each trial takes a few hundred milliseconds).
pub fn tiny_lstm_sweep(name: &str, train: &str, sweep: &str) -> String {
    format!(
        "\n{TINY_TASK}{}experiment {name} {{\n  task tiny\n  model lstm\n  train {{ {train} }}\n  sweep {{ {sweep} }}\n}}\n",
        token_lstm("lstm", 16)
    )
}

/// A tiny STM and LSTM on a tiny associative retrieval task.
pub fn tiny_spec() -> String {
    let (stm, experiments) = (TINY_STM, TINY_EXPERIMENTS);
    format!("{stm}{}{experiments}", token_lstm("lstm", 16))
}

const TINY_STM: &str = r#"
task tiny = assocRetrieval(pairs = 2, train = 64, validation = 32, test = 32)

model stm(d = 8, nq = 2, nr = 8, gates = true, transfer = true) {
  state Mi = learned(d, d)
  state Mr = learned(nq, d, d)
  step token {
    x = embed(token, 8)
    a = linear(x, d)
    b = linear(x, d)
    c = linear(x, nq)
    vr = relRead(Mr, c, b)
    Mi = itemWrite(Mi, a, gated = gates)
    R = samRead(Mi + scalar(0.0) * (vr ⊗ b), nq = nq)
    if transfer { Mi = Mi + scalar(0.0) * transfer(R) }
    Mr = scalar(0.0) * Mr + R
    out linear(mlp(distill(Mr, nr = nr, size = 16), [16]), output_size)
  }
}

"#;

const TINY_EXPERIMENTS: &str = r#"
experiment tiny_stm {
  task tiny
  model stm
  train { optimizer = adam(lr = 1e-2), batch = 16, steps = 6, eval_every = 3 }
  sweep { seed in 1..2 }
}

experiment tiny_lstm {
  task tiny
  model lstm
  train { optimizer = rmsprop(lr = 1e-2, momentum = 0.9), batch = 16, steps = 6, eval_every = 3, clip_value = 10 }
}
"#;

/// A tiny bAbI folder in the en-valid-10k layout: every task's train, valid and test file
/// holds two stories (three questions), worded after task 1.
pub fn write_babi(dir: &std::path::Path) {
    const STORIES: &str = "1 Mary moved to the bathroom.\n2 John went to the hallway.\n3 Where is Mary? \tbathroom\t1\n\
                           4 Daniel went back to the hallway.\n5 Where is Daniel? \thallway\t4\n\
                           1 Sandra journeyed to the garden.\n2 Where is Sandra? \tgarden\t1\n";
    std::fs::create_dir_all(dir).unwrap();
    for task in 1..=20 {
        for split in ["train", "valid", "test"] {
            std::fs::write(dir.join(format!("qa{task}_{split}.txt")), STORIES).unwrap();
        }
    }
}

/// Every file under `dir` (recursively) whose extension is `extension`, in path order.
pub fn files_with_extension(dir: &Path, extension: &str) -> Vec<PathBuf> {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
        .map(|e| e.expect("directory entry").path())
        .collect();
    entries.sort();
    let mut files = vec![];
    for path in entries {
        if path.is_dir() {
            files.extend(files_with_extension(&path, extension));
        } else if path.extension().is_some_and(|x| x == extension) {
            files.push(path);
        }
    }
    files
}

/// Runs `sweep` (a `memctl sweep` command) and kills it with SIGKILL `delay_ms` after its
/// `nth_start`-th trial has started (its `running` record is durable by then), or when it ends
/// on its own.
pub fn kill_after_start(sweep: &mut Command, nth_start: usize, delay_ms: u64) {
    let mut child = sweep.stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
    let stderr = BufReader::new(child.stderr.take().unwrap());
    let mut started = 0;
    for line in stderr.lines() {
        let Ok(line) = line else { break };
        if line.ends_with(": started") {
            started += 1;
            if started == nth_start {
                break;
            }
        }
    }
    std::thread::sleep(Duration::from_millis(delay_ms));
    let _ = child.kill(); // the sweep may have ended on its own
    child.wait().unwrap();
}

/// `specs/j.mem` under `dir`: an LSTM on a `jsonl` task whose `path` the spec leaves to the
/// command line (it names a missing file), and 40 examples in `data/d.jsonl`.
pub fn jsonl_task_at(dir: &Path) {
    for folder in ["specs", "data"] {
        std::fs::create_dir_all(dir.join(folder)).unwrap();
    }
    let lines: String =
        (0..40).map(|i| format!("{{\"input\": [{}, {}], \"target\": [{}]}}\n", i % 3, i % 5, i % 2)).collect();
    std::fs::write(dir.join("data/d.jsonl"), lines).unwrap();
    let spec = format!(
        "task t = jsonl(path = \"missing.jsonl\")\n{}experiment e {{\n  task t\n  model lstm\n  train {{ batch = 4, steps = 2, eval_every = 1 }}\n}}\n",
        token_lstm("lstm", 4)
    );
    std::fs::write(dir.join("specs/j.mem"), spec).unwrap();
}

/// Runs `command` with its address space limited to `bytes` (`ulimit -v`).
pub fn limit_address_space(command: &mut Command, bytes: u64) {
    use std::os::unix::process::CommandExt;
    // SAFETY: setrlimit is async-signal-safe, and in the child before exec touches nothing of
    // the parent's.
    unsafe {
        command.pre_exec(move || {
            let limit = libc::rlimit { rlim_cur: bytes, rlim_max: bytes };
            if libc::setrlimit(libc::RLIMIT_AS, &limit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}
