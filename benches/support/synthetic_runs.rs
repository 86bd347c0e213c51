//! Synthetic run records for the store benchmarks: 10 000 runs of a real checked spec's
//! trial, each with three 200-point curves (a store of about 270 MB).

use std::collections::BTreeMap;

use memctl::store::{RunRecord, Status, Store};
use memctl::value::Value;

pub const RUNS: usize = 10_000;
const POINTS: u64 = 200;

pub const SPEC: &str = r#"
task assoc = assocRetrieval(pairs = 4, train = 20000, validation = 1000, test = 2000)
model stm(d = 24, nq = 1, nr = 24, gates = true, transfer = true, input_width = 32) {
  state Mi = learned(d, d)
  state Mr = learned(nq, d, d)
  step token {
    x = embed(token, input_width)
    a = linear(x, d)
    b = linear(x, d)
    c = linear(x, nq)
    vr = relRead(Mr, c, b)
    Mi = itemWrite(Mi, a, gated = gates)
    R = samRead(Mi + scalar(0.0) * (vr ⊗ b), nq = nq)
    if transfer { Mi = Mi + scalar(0.0) * transfer(R) }
    Mr = scalar(0.0) * Mr + R
    h = mlp(distill(Mr, nr = nr), [128, 128])
    out linear(h, output_size)
  }
}
experiment bench {
  task assoc
  model stm
  train { optimizer = adam(lr = 3e-3), batch = 32, steps = 20000, eval_every = 100,
          clip_value = 10, stop_when = accuracy >= 0.98 }
  sweep { d in [24, 48, 96], gates in [true, false], seed in 1..5 }
}
"#;

pub fn synthetic(base: &memctl::check::TrialConfig, i: usize) -> RunRecord {
    let mut config = base.clone();
    let d = [24i64, 48, 96][i % 3];
    let gates = (i / 3) % 2 == 0;
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
    let status = if i % 17 == 0 { Status::Failed } else { Status::Done };
    let mut final_metrics = BTreeMap::new();
    if status == Status::Done {
        final_metrics.insert("accuracy".into(), 0.5 + x / 2.0);
        final_metrics.insert("loss".into(), 1.0 - x);
        final_metrics.insert("val_accuracy".into(), 0.5 + x / 2.1);
        final_metrics.insert("val_loss".into(), 1.0 - x / 1.1);
    }
    RunRecord {
        record_version: memctl::store::record::RECORD_VERSION,
        id: i as u64 + 1,
        trial_key: format!("{:016x}", i),
        status,
        config: memctl::store::StoredConfig::of(&config),
        spec_path: "specs/bench.mem".into(),
        spec_text: SPEC.into(),
        spec_hash: "0".repeat(64),
        environment: memctl::store::Environment {
            hostname: "bench".into(),
            cpus: 2,
            threads: 1,
            device: "cpu".into(),
            ..Default::default()
        },
        started_at: 1.7e9 + i as f64 * 60.0,
        ended_at: Some(1.7e9 + i as f64 * 60.0 + 50.0),
        curves,
        final_metrics,
        steps_run: 20000,
        steps_to_converge: (i % 5 != 0).then_some(1000 + (i as u64 % 13) * 100),
        epochs_to_converge: None,
        stop_reason: "stop_when".into(),
        param_count: 12345,
        flops_per_step: 1_000_000,
        wall_seconds: 50.0,
        train_seconds: 45.0,
        eval_seconds: 5.0,
        error: None,
        tags: if i % 10 == 0 { vec!["ablation".into()] } else { vec![] },
        progress: None,
    }
}

/// Fills the store at `path` with [`RUNS`] synthetic runs (ids 1..=RUNS).
pub fn fill(path: &std::path::Path) {
    let spec = memctl::lang::parse_str("bench.mem", SPEC).unwrap_or_else(|e| panic!("{}", e.render(false)));
    let program = memctl::check::check(&spec, &memctl::prims::Primitives)
        .unwrap_or_else(|d| panic!("{}", d.render(&spec.sources, false)));
    let base = program.experiments[0].trials[0].config.clone();
    let store = Store::open(path).expect("store opens");
    let records: Vec<RunRecord> = (0..RUNS).map(|i| synthetic(&base, i)).collect();
    for chunk in records.chunks(1000) {
        store.put_many(chunk).expect("records written");
    }
}
