//! `cargo bench --bench store_concurrency`: the store shared while a sweep trains.
//!
//! 1. `memctl runs --where ... --group-by ...` over 10 000 runs, each a separate process, while
//!    a sweep in this process trains and writes into the same store: under 200 ms.
//! 2. What the store costs that sweep: its time in store sessions (waiting for the readers'
//!    turns included) and in checkpoints, over the sweep's wall time: under 1 %.
//! 3. STM configuration B's checkpoint (`specs/bench/stm.mem stm_b`): its size, the time to
//!    serialise and save it (written and synced to disk), and the time to load it back.
//!
//! `STORE_BENCH_STEPS` sets the sweep's trial length (default 3000 steps).

use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use candle_core::Device;
use memctl::store::checkpoints::CheckpointDir;
use memctl::store::{RunRecord, Status, Store, cost};
use memctl::sweep::{self, Options, Reporter, SpecSource};
use memctl::train::checkpoint::{Checkpoints, TrainState};
use memctl::train::{Autograd, Observer};

#[path = "support/synthetic_runs.rs"]
mod synthetic_runs;
use synthetic_runs::RUNS;

/// The sweep that writes while the queries run: eight LSTM trials with frequent evaluations,
/// so that each rewrites its progress as often as the store allows.
fn sweep_spec(steps: usize) -> String {
    format!(
        r#"
task assoc = assocRetrieval(pairs = 4, train = 2000, validation = 256, test = 256)
model lstm(hidden = 64) {{
  state c = zeros(hidden)
  state h = zeros(hidden)
  step token {{
    c, h = lstmCell(c, h, embed(token, 32))
    out linear(h, output_size)
  }}
}}
experiment writer {{
  task assoc
  model lstm
  train {{ batch = 32, steps = {steps}, eval_every = 100 }}
  sweep {{ seed in 1..8 }}
}}
"#
    )
}

struct Quiet;

impl Reporter for Quiet {
    fn trial_finished(&self, _: usize, record: &RunRecord) {
        assert_eq!(record.status, Status::Done, "{:?}", record.error);
    }
    fn warning(&self, message: &str) {
        eprintln!("warning: {message}");
    }
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn check(name: &str, text: &str) -> memctl::check::Program {
    let spec = memctl::lang::parse_str(name, text).unwrap_or_else(|e| panic!("{}", e.render(false)));
    memctl::check::check(&spec, &memctl::prims::Primitives)
        .unwrap_or_else(|d| panic!("{}", d.render(&spec.sources, false)))
}

fn queries_while_a_sweep_writes(path: &Path) {
    let steps = std::env::var("STORE_BENCH_STEPS").ok().and_then(|s| s.parse().ok()).unwrap_or(3000);
    let pause: u64 = std::env::var("STORE_BENCH_PAUSE_MS").ok().and_then(|s| s.parse().ok()).unwrap_or(100);
    let text = sweep_spec(steps);
    let program = check("writer.mem", &text);
    let trials = program.experiments[0].trials.clone();
    let spec = SpecSource { path: "writer.mem".into(), text };
    let opts = Options::one_at_a_time();
    let done = AtomicBool::new(false);
    let before = cost::spent();
    let (sweep_wall, samples) = std::thread::scope(|s| {
        let sweeper = s.spawn(|| {
            let started = Instant::now();
            let store = Store::open(path).expect("store opens");
            let summary = sweep::run_all(&store, &spec, &trials, &opts, &Quiet, &AtomicBool::new(false));
            done.store(true, Ordering::SeqCst);
            let summary = summary.expect("the sweep runs");
            assert_eq!((summary.ran, summary.failed), (trials.len(), 0));
            started.elapsed()
        });
        let mut samples = vec![];
        while !done.load(Ordering::SeqCst) {
            let t = Instant::now();
            let out = std::process::Command::new(env!("CARGO_BIN_EXE_memctl"))
                .arg("--store")
                .arg(path)
                .args(["runs", "--where", "d in [48, 96] and status == \"done\"", "--group-by", "d,gates"])
                .env("NO_COLOR", "1")
                .output()
                .expect("memctl runs");
            assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
            samples.push(t.elapsed().as_secs_f64() * 1e3);
            std::thread::sleep(Duration::from_millis(pause));
        }
        (sweeper.join().expect("the sweep thread"), samples)
    });
    let in_store = cost::spent().in_the_way - before.in_the_way;
    let in_background = cost::spent().in_background - before.in_background;
    let mut sorted = samples.clone();
    sorted.sort_by(f64::total_cmp);
    println!(
        "`memctl runs --where … --group-by …` over {RUNS} runs while a sweep writes: {} queries, \
         median {:.1} ms, p90 {:.1} ms, max {:.1} ms ({} over 200 ms)",
        sorted.len(),
        percentile(&sorted, 0.5),
        percentile(&sorted, 0.9),
        sorted[sorted.len() - 1],
        sorted.iter().filter(|&&ms| ms > 200.0).count(),
    );
    println!(
        "the store's cost to that sweep ({} trials of {steps} steps, {:.1} s): {:.3} s in its way, \
         {:.2} % of its time, {:.1} ms per trial; {:.3} s writing progress in the background",
        trials.len(),
        sweep_wall.as_secs_f64(),
        in_store.as_secs_f64(),
        100.0 * in_store.as_secs_f64() / sweep_wall.as_secs_f64(),
        in_store.as_secs_f64() * 1e3 / trials.len() as f64,
        in_background.as_secs_f64(),
    );
}

/// Saves the state it is given (once) into a checkpoint directory, timing each part.
struct Timed {
    dir: CheckpointDir,
    measured: Mutex<Option<(usize, Duration, Duration)>>,
}

impl Checkpoints for Timed {
    fn resume(&self, _: &Device) -> candle_core::Result<Option<TrainState>> {
        Ok(None)
    }
    fn every(&self) -> Option<Duration> {
        None
    }
    fn save(&self, state: &TrainState) {
        let t = Instant::now();
        let bytes = state.to_bytes().expect("serialises");
        let serialised = t.elapsed();
        self.dir.save("b", &bytes).expect("saves");
        *self.measured.lock().unwrap() = Some((bytes.len(), serialised, t.elapsed() - serialised));
    }
}

/// Stops training after a few steps (a clean stop saves a checkpoint).
struct StopAfter<'a>(usize, &'a AtomicBool);

impl Observer for StopAfter<'_> {
    fn on_step(&self, step: usize, _: usize, _: f64) {
        if step >= self.0 {
            self.1.store(true, Ordering::SeqCst);
        }
    }
}

fn stm_b_checkpoint(dir: &Path) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("specs/bench/stm.mem");
    let spec = memctl::lang::load(&path).unwrap_or_else(|e| panic!("{}", e.render(false)));
    let program = memctl::check::check(&spec, &memctl::prims::Primitives)
        .unwrap_or_else(|d| panic!("{}", d.render(&spec.sources, false)));
    let trial = &program.experiments.iter().find(|e| e.name == "stm_b").expect("stm_b").trials[0];
    let timed = Timed { dir: CheckpointDir::new(dir), measured: Mutex::new(None) };
    let stop = AtomicBool::new(false);
    let device = Device::Cpu;
    memctl::train::train_resumable(trial, &device, Autograd::default_for(&device), &StopAfter(3, &stop), &stop, &timed);
    let (size, serialised, written) = timed.measured.lock().unwrap().expect("a checkpoint at the stop");
    let t = Instant::now();
    let bytes = timed.dir.load("b").expect("loads").expect("is there");
    TrainState::from_bytes(&bytes, &device).expect("reads");
    let loaded = t.elapsed();
    println!(
        "STM configuration B checkpoint ({} parameters; parameters and RMSprop state): {:.2} MB, \
         serialised in {:.1} ms, written and synced in {:.1} ms, loaded in {:.1} ms",
        trial.graph.param_count(),
        size as f64 / 1e6,
        serialised.as_secs_f64() * 1e3,
        written.as_secs_f64() * 1e3,
        loaded.as_secs_f64() * 1e3,
    );
}

fn main() {
    memctl::ftz::enable();
    let dir = tempfile::tempdir().expect("temporary directory");
    let store = dir.path().join("store");
    let t = Instant::now();
    synthetic_runs::fill(&store);
    eprintln!("filled {RUNS} runs in {:.1} s", t.elapsed().as_secs_f64());
    queries_while_a_sweep_writes(&store);
    stm_b_checkpoint(&dir.path().join("checkpoints"));
}
