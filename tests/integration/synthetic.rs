//! Stores filled with synthetic runs (no training), shared by the tests that query them:
//! `querying` (the CLI) and `dashboard` (`memctl ui`).

use std::collections::BTreeMap;
use std::path::Path;

use memctl::check::TrialConfig;
use memctl::store::{RunRecord, Status, Store};
use memctl::value::Value;

use crate::made_up_run::made_up_run;
use crate::support::{tiny_spec, trials};

/// Opens the store, waiting out the lock of one this process just dropped.
pub fn open(path: &Path) -> Store {
    for _ in 0..100 {
        match Store::open(path) {
            Err(memctl::store::StoreError::Locked { .. }) => std::thread::sleep(std::time::Duration::from_millis(20)),
            other => return other.unwrap(),
        }
    }
    panic!("the store stayed locked");
}

/// The config of the tiny spec's `tiny_stm` trial with `d`, `gates` and the seed set (and swept).
pub fn config(d: i64, gates: bool, seed: u64) -> TrialConfig {
    let mut c =
        trials("tiny.mem", &tiny_spec()).into_iter().find(|t| t.config.experiment == "tiny_stm").unwrap().config;
    c.params.insert("d".into(), Value::Int(d));
    c.params.insert("gates".into(), Value::Bool(gates));
    c.seed = seed;
    c.swept = vec![
        ("d".into(), Value::Int(d)),
        ("gates".into(), Value::Bool(gates)),
        ("seed".into(), Value::Int(seed as i64)),
    ];
    c
}

/// A finished run with a final accuracy, steps to converge and a three-point curve.
pub fn record(id: u64, config: TrialConfig, accuracy: f64, converged: Option<u64>) -> RunRecord {
    let mut curves = BTreeMap::new();
    curves.insert("val_accuracy".to_string(), vec![(10, accuracy / 4.0), (20, accuracy / 2.0), (30, accuracy)]);
    curves.insert("train_loss".to_string(), vec![(10, 2.0), (20, 1.0), (30, 1.0 - accuracy)]);
    RunRecord {
        curves,
        final_metrics: [("accuracy".to_string(), accuracy), ("loss".to_string(), 1.0 - accuracy)].into(),
        steps_to_converge: converged,
        ..made_up_run(id, &config, "tiny.mem", &tiny_spec())
    }
}

/// A finished run that stopped on `seq_accuracy` at its first evaluation, step 250: one point
/// per curve (val_seq_accuracy 0.096, val_accuracy 0.5).
pub fn one_point_run(id: u64) -> RunRecord {
    let mut r = record(id, config(48, false, 1), 0.5, Some(250));
    r.curves = [
        ("val_seq_accuracy".to_string(), vec![(250, 0.096)]),
        ("val_accuracy".to_string(), vec![(250, 0.5)]),
        ("train_loss".to_string(), vec![(250, 1.5)]),
    ]
    .into();
    r.final_metrics.insert("seq_accuracy".into(), 0.096);
    r.config.train.insert("stop_when".into(), Value::Str("seq_accuracy >= 0.995".into()));
    r.steps_run = 250;
    r
}

/// A temporary folder with a store at `store` in it, filled by [`fill`].
pub fn filled() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    fill(&store);
    (dir, store)
}

/// Seven runs: d=48 gated, seeds 1-3 (accuracy 0.5, 0.7, 0.9; converged at 100, 300, never);
/// d=96 gated, seeds 1-2 (1.0, 0.8; 200, 400); d=96 ungated seed 1 (0.25); and a failed run.
pub fn fill(store: &Path) {
    let s = open(store);
    let mut runs = vec![
        record(1, config(48, true, 1), 0.5, Some(100)),
        record(2, config(48, true, 2), 0.7, Some(300)),
        record(3, config(48, true, 3), 0.9, None),
        record(4, config(96, true, 1), 1.0, Some(200)),
        record(5, config(96, true, 2), 0.8, Some(400)),
        record(6, config(96, false, 1), 0.25, None),
    ];
    let mut failed = record(7, config(96, false, 2), 0.0, None);
    failed.status = Status::Failed;
    failed.final_metrics.clear();
    failed.error = Some("loss is NaN".into());
    runs.push(failed);
    s.put_many(&runs).unwrap();
}
