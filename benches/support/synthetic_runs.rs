//! Synthetic run records for the store benchmarks: 10 000 runs of a real checked spec's
//! trial (`specs/examples/assoc.mem`), each with three 200-point curves (a store of about 270 MB).

use std::collections::BTreeMap;

use memctl::store::{RunRecord, Status, Store};
use memctl::value::Value;

#[path = "../../tests/integration/made_up_run.rs"]
mod made_up_run;
use made_up_run::made_up_run;

pub const RUNS: usize = 10_000;
const POINTS: u64 = 200;

/// The spec the runs claim to come from: the associative-retrieval examples, whose STM
/// experiment's trial is every run's base configuration.
const SPEC_PATH: &str = "specs/examples/assoc.mem";

pub fn synthetic(base: &memctl::check::TrialConfig, spec_text: &str, i: usize) -> RunRecord {
    let mut config = base.clone();
    let d = [24i64, 48, 96][i % 3];
    let gates = (i / 3).is_multiple_of(2);
    let seed = (i / 6) % 5 + 1;
    config.params.insert("d".into(), Value::Int(d));
    config.params.insert("gates".into(), Value::Bool(gates));
    config.seed = seed as u64;
    config.swept = vec![
        ("d".into(), Value::Int(d)),
        ("gates".into(), Value::Bool(gates)),
        ("seed".into(), Value::Int(seed as i64)),
    ];
    let x = ((i * 7919) % 1000) as f64 / 1000.0;
    let mut curves = BTreeMap::new();
    for name in ["train_loss", "val_accuracy", "val_loss"] {
        curves.insert(name.to_string(), (1..=POINTS).map(|s| (s * 100, x / s as f64)).collect());
    }
    let status = if i.is_multiple_of(17) { Status::Failed } else { Status::Done };
    let mut final_metrics = BTreeMap::new();
    if status == Status::Done {
        final_metrics.insert("accuracy".into(), 0.5 + x / 2.0);
        final_metrics.insert("loss".into(), 1.0 - x);
        final_metrics.insert("val_accuracy".into(), 0.5 + x / 2.1);
        final_metrics.insert("val_loss".into(), 1.0 - x / 1.1);
    }
    RunRecord {
        status,
        curves,
        final_metrics,
        steps_run: 20000,
        steps_to_converge: (!i.is_multiple_of(5)).then_some(1000 + (i as u64 % 13) * 100),
        stop_reason: "stop_when".into(),
        tags: if i.is_multiple_of(10) { vec!["ablation".into()] } else { vec![] },
        ..made_up_run(i as u64 + 1, &config, SPEC_PATH, spec_text)
    }
}

/// Fills the store at `path` with [`RUNS`] synthetic runs (ids 1..=RUNS).
pub fn fill(path: &std::path::Path) {
    let file = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(SPEC_PATH);
    let spec = memctl::lang::load(&file).unwrap_or_else(|e| panic!("{}", e.render(false)));
    let program = memctl::check::check(&spec, &memctl::prims::Primitives)
        .unwrap_or_else(|d| panic!("{}", d.render(&spec.sources, false)));
    let base = program.experiments[0].trials[0].config.clone();
    let text = std::fs::read_to_string(&file).expect("the spec reads");
    let store = Store::open(path).expect("store opens");
    let records: Vec<RunRecord> = (0..RUNS).map(|i| synthetic(&base, &text, i)).collect();
    for chunk in records.chunks(1000) {
        store.put_many(chunk).expect("records written");
    }
}
