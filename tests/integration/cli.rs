//! The `memctl` binary end to end.

use std::path::Path;
use std::process::{Command, Output};

use crate::support::TINY;

fn memctl(store: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_memctl"))
        .arg("--store")
        .arg(store)
        .args(args)
        .env("NO_COLOR", "1")
        .output()
        .expect("memctl runs")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn sweep_records_runs_and_skips_them_the_second_time() {
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("tiny.mem");
    std::fs::write(&spec, TINY).unwrap();
    let store = dir.path().join("store");
    let out = memctl(&store, &["sweep", spec.to_str().unwrap(), "--threads", "1"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("3 trials run, 0 already done, 0 failed"), "{}", text(&out.stderr));

    let again = memctl(&store, &["sweep", spec.to_str().unwrap(), "--threads", "1"]);
    assert!(text(&again.stderr).contains("0 trials run, 3 already done"), "{}", text(&again.stderr));

    let runs = memctl(&store, &["runs", "--format", "records"]);
    let records: serde_json::Value = serde_json::from_slice(&runs.stdout).unwrap();
    let records = records.as_array().unwrap();
    assert_eq!(records.len(), 3);
    for r in records {
        assert_eq!(r["status"], "done");
        assert!(r["final_metrics"]["accuracy"].as_f64().is_some());
        assert_eq!(r["spec_text"].as_str().unwrap(), TINY);
    }
    let table = text(&memctl(&store, &["runs"]).stdout);
    assert!(table.contains("tiny_stm") && table.contains("tiny_lstm") && table.contains("accuracy"), "{table}");
}

#[test]
fn a_locked_store_gets_a_clear_message() {
    let dir = tempfile::tempdir().unwrap();
    let store_path = dir.path().join("store");
    let _held = memctl::store::Store::open(&store_path).unwrap();
    let out = memctl(&store_path, &["runs"]);
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(err.contains("is in use by another memctl process") && err.contains("--store"), "{err}");
}

#[test]
fn check_reports_a_located_error_and_exit_code_2() {
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("bad.mem");
    std::fs::write(&spec, TINY.replace("relRead(Mr, c, b)", "relRaed(Mr, c, b)")).unwrap();
    let out = memctl(&dir.path().join("store"), &["check", spec.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(err.contains("unknown primitive `relRaed`"), "{err}");
    assert!(err.contains("bad.mem:12:10"), "{err}");
    assert!(err.contains("did you mean `relRead`?"), "{err}");
}

#[test]
fn cuda_without_the_feature_is_a_clear_error() {
    if cfg!(feature = "cuda") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("tiny.mem");
    std::fs::write(&spec, TINY).unwrap();
    let out = memctl(&dir.path().join("store"), &["run", spec.to_str().unwrap(), "--device", "cuda"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("--features cuda"), "{}", text(&out.stderr));
}
