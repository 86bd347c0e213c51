//! The CLI's output, compared exactly with the files in `tests/snapshots/` (as just's tests
//! compare whole outputs): `check` on a spec and on a malformed one, `runs` and `show` after a
//! tiny sweep. What differs between machines and moments — times, dates, the environment,
//! temporary paths, digits below the third of losses — is redacted first.
//!
//! After an intended change of output: `MEMCTL_UPDATE_SNAPSHOTS=1 cargo test snapshots`, then
//! read the diff of `tests/snapshots/` before committing it.

use crate::support::{TINY_TASK, token_lstm};
use std::path::Path;
use std::process::Command;

fn snapshot(name: &str, actual: &str) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/snapshots").join(format!("{name}.txt"));
    if std::env::var_os("MEMCTL_UPDATE_SNAPSHOTS").is_some() {
        std::fs::write(&path, actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path)
        .unwrap_or_else(|_| panic!("no snapshot {}; create it with MEMCTL_UPDATE_SNAPSHOTS=1", path.display()));
    if expected != actual {
        let diff = similar_lines(&expected, actual);
        panic!("output differs from {}:\n{diff}", path.display());
    }
}

/// The lines that differ, `-` expected and `+` actual, in order.
fn similar_lines(expected: &str, actual: &str) -> String {
    let (e, a): (Vec<&str>, Vec<&str>) = (expected.lines().collect(), actual.lines().collect());
    let mut out = String::new();
    for i in 0..e.len().max(a.len()) {
        let (x, y) = (e.get(i).copied(), a.get(i).copied());
        if x != y {
            out += &format!("{:>4} - {}\n     + {}\n", i + 1, x.unwrap_or("∅"), y.unwrap_or("∅"));
        }
    }
    out
}

fn memctl(dir: &Path, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_memctl"))
        .current_dir(dir)
        .args(["--store", "store"])
        .args(args)
        .env("NO_COLOR", "1")
        .env("COLUMNS", "160")
        .output()
        .unwrap();
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (out.status.code().unwrap_or(-1), text(&out.stdout), text(&out.stderr))
}

/// Redacts what legitimately differs between runs: long decimals (kept to 3 digits after the
/// point), durations, dates, and the `environment` and `time` blocks of `show`.
fn redact(text: &str) -> String {
    let mut out = String::new();
    let mut skipping = false;
    for line in text.lines() {
        if line == "environment:" || line == "time:" {
            out += &format!("{line} <redacted>\n");
            skipping = true;
            continue;
        }
        if skipping && line.starts_with("  ") {
            continue;
        }
        skipping = false;
        let mut l = String::new();
        let chars = line.chars();
        // Shorten every decimal fraction to 3 digits.
        let mut digits_after_point: Option<usize> = None;
        for c in chars {
            match (c, digits_after_point) {
                ('.', None) if l.chars().last().is_some_and(|p| p.is_ascii_digit()) => {
                    digits_after_point = Some(0);
                    l.push(c);
                }
                (d, Some(n)) if d.is_ascii_digit() => {
                    if n < 3 {
                        l.push(d);
                    }
                    digits_after_point = Some(n + 1);
                }
                _ => {
                    digits_after_point = None;
                    l.push(c);
                }
            }
        }
        if l.starts_with("started: ") || l.starts_with("ended: ") {
            l = format!("{}: <date>", l.split(':').next().unwrap_or(""));
        }
        out += &l;
        out.push('\n');
    }
    out
}

/// The tiny task and LSTM with one experiment of two seeds.
fn spec() -> String {
    format!("{TINY_TASK}\n{}{EXPERIMENT}", token_lstm("lstm", 16))
}

const EXPERIMENT: &str = r#"
experiment tiny_lstm {
  task tiny
  model lstm(hidden = 8)
  train { optimizer = adam(lr = 1e-2), batch = 16, steps = 6, eval_every = 3 }
  sweep { seed in 1..2 }
}
"#;

#[test]
fn check_prints_trials_parameters_flops_and_memory() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("tiny.mem"), spec()).unwrap();
    let (code, out, err) = memctl(dir.path(), &["check", "tiny.mem"]);
    assert_eq!(code, 0, "{err}");
    snapshot("check", &out);
}

#[test]
fn check_of_a_malformed_spec_underlines_the_cause() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("bad.mem"), spec().replace("lstmCell(c, h,", "lstmCel(c, h,")).unwrap();
    let (code, out, err) = memctl(dir.path(), &["check", "bad.mem"]);
    assert_ne!(code, 0);
    snapshot("check_error", &format!("{out}{err}"));
}

#[test]
fn runs_and_show_after_a_sweep() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("tiny.mem"), spec()).unwrap();
    let (code, _, err) = memctl(dir.path(), &["sweep", "tiny.mem", "--threads", "1", "--jobs", "1"]);
    assert_eq!(code, 0, "{err}");
    let (_, runs, _) = memctl(dir.path(), &["runs", "--columns", "id,experiment,model,seed,status,steps_run"]);
    snapshot("runs", &runs);
    let (_, show, _) = memctl(dir.path(), &["show", "1"]);
    snapshot("show", &redact(&show));
}

#[test]
fn redaction_keeps_three_decimals_and_drops_times() {
    assert_eq!(redact("loss: 2.327342987060547 at 0.1s, step 600\n"), "loss: 2.327 at 0.1s, step 600\n");
    assert_eq!(
        redact("started: \"2026-11-24T16:54:28Z\"\ntime:\n  wall: 0.1s\nsteps_run: 6\n"),
        "started: <date>\ntime: <redacted>\nsteps_run: 6\n"
    );
}
