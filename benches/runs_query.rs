//! `cargo bench --bench runs_query`: `memctl runs --where ... --group-by ...` over 10 000 runs,
//! each with 200-point curves, must take well under 200 ms.
//!
//! Fills a temporary store with synthetic runs (configs from a real checked spec), then times
//! (a) opening the store and reading every summary, (b) the whole query in-process (open,
//! read, filter, group, render), and (c) the `memctl runs` process end to end.

use std::collections::BTreeMap;
use std::time::Instant;

use memctl::store::{RunRecord, Status, Store};
use memctl::value::Value;

const RUNS: usize = 10_000;
const POINTS: u64 = 200;
const REPEATS: usize = 11;

const SPEC: &str = r#"
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

fn synthetic(base: &memctl::check::TrialConfig, i: usize) -> RunRecord {
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
            os: "linux".into(),
            arch: "x86_64".into(),
            cpus: 2,
            threads: 1,
            device: "cpu".into(),
            memctl_version: "0".into(),
            features: vec![],
            pid: 1,
            process: None,
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

/// `median X ms (min Y)`: on a busy machine the minimum is the better estimate.
fn median(mut v: Vec<f64>) -> String {
    v.sort_by(f64::total_cmp);
    format!("{:.1} ms (min {:.1})", v[v.len() / 2], v[0])
}

/// CPU seconds (user + system) used by finished child processes so far.
fn children_cpu() -> f64 {
    // SAFETY: getrusage only writes the struct it is given.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut u) };
    let t = |v: libc::timeval| v.tv_sec as f64 + v.tv_usec as f64 * 1e-6;
    t(u.ru_utime) + t(u.ru_stime)
}

fn main() {
    let spec = memctl::lang::parse_str("bench.mem", SPEC).unwrap_or_else(|e| panic!("{}", e.render(false)));
    let program = memctl::check::check(&spec, &memctl::prims::Primitives)
        .unwrap_or_else(|d| panic!("{}", d.render(&spec.sources, false)));
    let base = program.experiments[0].trials[0].config.clone();
    // RUNS_QUERY_STORE=PATH keeps the filled store there (for timing `memctl` by hand).
    let dir = tempfile::tempdir().expect("temporary directory");
    let path = std::env::var_os("RUNS_QUERY_STORE").map_or_else(|| dir.path().join("store"), std::path::PathBuf::from);
    let _ = std::fs::remove_dir_all(&path);
    let t0 = Instant::now();
    {
        let store = Store::open(&path).expect("store opens");
        let records: Vec<RunRecord> = (0..RUNS).map(|i| synthetic(&base, i)).collect();
        for chunk in records.chunks(1000) {
            store.put_many(chunk).expect("records written");
        }
    }
    eprintln!("filled {RUNS} runs in {:.1} s", t0.elapsed().as_secs_f64());

    let filter = "d in [48, 96] and (status == \"done\" or accuracy > 0.9) and not \"ablation\" in tags";
    let group_by = "d,gates";

    // (a) Opening the store and reading every summary.
    let mut open_read = vec![];
    for _ in 0..REPEATS {
        let t = Instant::now();
        let store = Store::open(&path).expect("store opens");
        let s = store.summaries().expect("summaries");
        assert_eq!(s.len(), RUNS);
        open_read.push(t.elapsed().as_secs_f64() * 1e3);
    }
    println!("open store + read {RUNS} summaries: median {}", median(open_read));

    // (b) The whole query in-process, as `memctl runs --where ... --group-by ...` does it.
    let mut query = vec![];
    let mut stages = [vec![], vec![], vec![], vec![], vec![], vec![]];
    let mut table = String::new();
    for _ in 0..REPEATS {
        let t = Instant::now();
        let store = Store::open(&path).expect("store opens");
        let t1 = t.elapsed().as_secs_f64();
        let runs = store.summaries().expect("summaries");
        let t2 = t.elapsed().as_secs_f64();
        let q = memctl::query::prepare(filter, &runs).unwrap_or_else(|e| panic!("{}", e.0.render(&e.1, false)));
        let t3 = t.elapsed().as_secs_f64();
        let view = memctl::report::view::View {
            filter: Some(q),
            group_by: Some(group_by.split(',').map(String::from).collect()),
            ..Default::default()
        };
        let sheet = memctl::report::view::build(&runs, &view).expect("sheet");
        let t4 = t.elapsed().as_secs_f64();
        table = memctl::report::table::render(&sheet);
        let t5 = t.elapsed().as_secs_f64();
        query.push(t5 * 1e3);
        drop(store);
        let t6 = t.elapsed().as_secs_f64();
        for (i, d) in [t1, t2 - t1, t3 - t2, t4 - t3, t5 - t4, t6 - t5].into_iter().enumerate() {
            stages[i].push(d * 1e3);
        }
    }
    println!("in-process query (open, read, filter, group, render): median {}", median(query));
    let names =
        ["open", "read summaries", "parse + check filter", "filter + group", "render", "close (not in the total)"];
    for (n, v) in names.iter().zip(stages) {
        println!("    {n}: median {}", median(v));
    }
    println!("{table}");

    // (c) The `memctl runs` process end to end.
    let mut process = vec![];
    let cpu0 = children_cpu();
    for _ in 0..REPEATS {
        let t = Instant::now();
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_memctl"))
            .arg("--store")
            .arg(&path)
            .args(["runs", "--where", filter, "--group-by", group_by])
            .output()
            .expect("memctl runs");
        process.push(t.elapsed().as_secs_f64() * 1e3);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }
    println!("`memctl runs --where ... --group-by {group_by}` process: median {}", median(process));
    println!("    CPU time (user + system) per process: {:.1} ms", (children_cpu() - cpu0) * 1e3 / REPEATS as f64);

    // For comparison: ungrouped, every matching row as a table.
    let mut rows = vec![];
    for _ in 0..REPEATS {
        let t = Instant::now();
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_memctl"))
            .arg("--store")
            .arg(&path)
            .args(["runs", "--where", filter, "--format", "csv"])
            .output()
            .expect("memctl runs");
        rows.push(t.elapsed().as_secs_f64() * 1e3);
        assert!(out.status.success());
    }
    println!("`memctl runs --where ... --format csv` (all matching rows) process: median {}", median(rows));
    println!("store size {:.0} MB", walk(&path) as f64 / 1e6);
}

fn walk(p: &std::path::Path) -> u64 {
    std::fs::read_dir(p).map_or(0, |d| {
        d.filter_map(|e| e.ok())
            .map(|e| if e.path().is_dir() { walk(&e.path()) } else { e.metadata().map_or(0, |m| m.len()) })
            .sum()
    })
}
