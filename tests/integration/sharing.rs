//! One store, many processes: two sweeps at once (also killed at random moments), `runs`
//! watching a sweep train, checkpoints that resume a killed trial exactly, `--force`, and a
//! trial listed twice.

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::support::{tiny_lstm_sweep, token_lstm};

use crate::support::memctl_at as memctl;
use crate::support::text;

fn records(store: &Path) -> Vec<serde_json::Value> {
    let out = memctl(store).args(["runs", "--all", "--format", "records"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap().as_array().unwrap().clone()
}

/// Done runs per trial.
fn done_per_trial(recs: &[serde_json::Value]) -> HashMap<String, usize> {
    let mut done = HashMap::new();
    for r in recs.iter().filter(|r| r["status"] == "done") {
        *done.entry(r["trial_key"].as_str().unwrap().to_string()).or_insert(0) += 1;
    }
    done
}

fn write_spec(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

fn sweep(store: &Path, spec: &Path) -> Command {
    sweep_on_threads(store, spec, 1)
}

fn sweep_on_threads(store: &Path, spec: &Path, threads: usize) -> Command {
    let mut c = memctl(store);
    c.arg("sweep").arg(spec).args(["--jobs", "1", "--threads", &threads.to_string()]);
    c
}

/// Eight LSTM trials of a few hundred milliseconds each.
fn eight() -> String {
    tiny_lstm_sweep("eight", "batch = 16, steps = 60, eval_every = 20", "hidden in [8, 16]  seed in 1..4")
}

#[test]
fn two_sweeps_at_once_and_a_watching_runs_run_every_trial_exactly_once() {
    let dir = tempfile::tempdir().unwrap();
    // Trials of half a second each, bounded by time (not steps) so that the watcher sees them
    // running however fast the machine trains.
    let timed = tiny_lstm_sweep(
        "eight",
        "batch = 16, steps = 10000000, eval_every = 1000, max_time = 0.5",
        "hidden in [8, 16]  seed in 1..4",
    );
    let spec = write_spec(dir.path(), "eight.mem", &timed);
    let store = dir.path().join("store");
    let mut a = sweep(&store, &spec).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
    let mut b = sweep(&store, &spec).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
    // `watch memctl runs` beside them: every query answers, and some see trials running.
    let mut saw_running = 0;
    while a.try_wait().unwrap().is_none() || b.try_wait().unwrap().is_none() {
        let out = memctl(&store).args(["runs", "--format", "records"]).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        let runs: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).unwrap();
        saw_running += runs.iter().any(|r| r["status"] == "running") as usize;
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(saw_running > 0, "`memctl runs` never saw a trial running");
    let (a, b) = (a.wait_with_output().unwrap(), b.wait_with_output().unwrap());
    assert_eq!(a.status.code(), Some(0), "{}", text(&a.stderr));
    assert_eq!(b.status.code(), Some(0), "{}", text(&b.stderr));
    let recs = records(&store);
    let done = done_per_trial(&recs);
    assert_eq!(done.len(), 8, "every trial is done");
    assert!(done.values().all(|&n| n == 1), "no trial ran twice: {done:?}");
    assert_eq!(recs.len(), 8, "and nothing else was recorded");
    // Between them the two sweeps ran the eight trials; what one ran, the other skipped.
    let ran = |o: &Output| -> usize {
        let err = text(&o.stderr);
        let line = err.lines().find(|l| l.contains(" run, ")).unwrap_or_else(|| panic!("{err}"));
        line.split_whitespace().next().unwrap().parse().unwrap()
    };
    assert_eq!(ran(&a) + ran(&b), 8, "{}\n{}", text(&a.stderr), text(&b.stderr));
}

/// Reads `child`'s stderr until the `n`-th trial reports that it started.
fn wait_for_start(child: &mut Child, n: usize) -> BufReader<std::process::ChildStderr> {
    let mut lines = BufReader::new(child.stderr.take().unwrap());
    let mut started = 0;
    let mut line = String::new();
    while started < n {
        line.clear();
        if lines.read_line(&mut line).unwrap_or(0) == 0 {
            break; // the sweep ended first
        }
        started += usize::from(line.contains(": started"));
    }
    lines
}

#[test]
fn two_sweeps_killed_at_random_moments_still_end_every_trial_once() {
    let dir = tempfile::tempdir().unwrap();
    let spec = write_spec(dir.path(), "eight.mem", &eight());
    let store = dir.path().join("store");
    for (n, delay_ms) in [(1usize, 10u64), (2, 0), (1, 60), (2, 25)] {
        let mut a = sweep(&store, &spec).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
        let mut b = sweep(&store, &spec).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
        let _a_err = wait_for_start(&mut a, n);
        let _b_err = wait_for_start(&mut b, 1);
        std::thread::sleep(Duration::from_millis(delay_ms));
        let _ = a.kill();
        std::thread::sleep(Duration::from_millis(delay_ms / 2));
        let _ = b.kill();
        a.wait().unwrap();
        b.wait().unwrap();
        let recs = records(&store);
        let done = done_per_trial(&recs);
        assert!(done.values().all(|&n| n == 1), "a trial ran twice: {done:?}");
    }
    let out = sweep(&store, &spec).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let recs = records(&store);
    let done = done_per_trial(&recs);
    assert_eq!(done.len(), 8, "every trial is done: {done:?}");
    assert!(done.values().all(|&n| n == 1), "each exactly once: {done:?}");
    for r in &recs {
        let status = r["status"].as_str().unwrap();
        assert!(status == "done" || status == "interrupted", "unexpected status {status}");
    }
    // The interrupted attempts are history: hidden from `runs` unless --all.
    let listed = memctl(&store).args(["runs", "--format", "json"]).output().unwrap();
    let rows: serde_json::Value = serde_json::from_slice(&listed.stdout).unwrap();
    assert_eq!(rows.as_array().unwrap().len(), 8, "{}", text(&listed.stdout));
}

/// One LSTM trial that trains long enough to be caught mid-way, with a checkpoint every
/// ~30 ms of training.
fn long() -> String {
    format!(
        "task tiny = assocRetrieval(pairs = 3, train = 256, validation = 64, test = 64)\n{}{LONG_EXPERIMENT}",
        token_lstm("lstm", 24)
    )
}

/// Long enough (a few seconds) that the tests below catch it mid-way: at 1 500 steps the
/// faster LSTM of issue 16 sometimes finished before the interrupt arrived.
const LONG_EXPERIMENT: &str = r#"experiment long {
  task tiny
  model lstm
  train { optimizer = adam(lr = 3e-3), batch = 16, steps = 6000, eval_every = 400, checkpoint_every = 0.0005 }
}
"#;

/// The newest run (the store holds one trial's runs).
fn newest(store: &Path) -> Option<serde_json::Value> {
    if !store.join("db").exists() {
        return None;
    }
    records(store).into_iter().max_by_key(|r| r["id"].as_u64().unwrap())
}

fn only_record(store: &Path) -> serde_json::Value {
    newest(store).expect("a run")
}

/// Waits (up to a minute) until `cond` holds.
fn eventually(what: &str, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(start.elapsed() < Duration::from_secs(60), "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn checkpoint_exists(store: &Path) -> bool {
    std::fs::read_dir(store.join("checkpoints"))
        .is_ok_and(|d| d.filter_map(Result::ok).any(|e| e.path().extension().is_some_and(|x| x == "ckpt")))
}

/// It trains on two threads (where there are two cores), which split each batch in two, and the
/// sweep that resumes it plans one: it resumes on the two it started with.
#[test]
fn a_killed_trial_resumes_from_its_checkpoint_and_ends_as_an_uninterrupted_run() {
    let dir = tempfile::tempdir().unwrap();
    let spec = write_spec(dir.path(), "long.mem", &long());
    let threads = std::thread::available_parallelism().map_or(1, usize::from).min(2);
    // The reference: the same trial, never interrupted.
    let reference_store = dir.path().join("reference");
    let out = sweep_on_threads(&reference_store, &spec, threads).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let reference = only_record(&reference_store);
    assert!(!checkpoint_exists(&reference_store), "a finished run's checkpoint is pruned");

    let store = dir.path().join("store");
    for signal in [libc::SIGKILL, libc::SIGINT] {
        let before = newest(&store).map_or(0, |r| r["id"].as_u64().unwrap());
        let mut child =
            sweep_on_threads(&store, &spec, threads).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
        // Caught mid-way, in this sweep's own run: after a checkpoint of its own and an
        // evaluation, well before the end.
        wait_for_checkpoint_and_progress(&store, before);
        // SAFETY: signalling our own child process.
        unsafe { libc::kill(child.id() as i32, signal) };
        child.wait().unwrap();
        let r = only_record(&store);
        assert_ne!(r["status"], "done", "caught before the end ({signal})");
    }
    // The Ctrl-C'd run saved a checkpoint as it stopped and says so.
    let stopped = only_record(&store);
    assert_eq!(stopped["status"], "interrupted");
    let at = stopped["progress"]["checkpoint_step"].as_u64().unwrap();
    assert_eq!(at, stopped["steps_run"].as_u64().unwrap(), "a clean stop checkpoints where it stopped");

    let resumed = resume_to_the_end(&store, &spec, at);
    assert_eq!(resumed["final_metrics"], reference["final_metrics"], "the same final metrics, exactly");
    assert_eq!(resumed["curves"], reference["curves"], "the curves continue where they stopped");
    assert_eq!(resumed["steps_run"], reference["steps_run"]);
    assert_eq!(resumed["environment"]["threads"], threads);
    assert!(!checkpoint_exists(&store), "pruned once done");
}

/// Waits until this store's newest run, a later one than run `after`, has saved a checkpoint
/// of its own and trained 200 steps past where it started.
fn wait_for_checkpoint_and_progress(store: &Path, after: u64) {
    eventually("a checkpoint and some progress", || {
        newest(store).is_some_and(|r| {
            let from = r["progress"]["resumed_from"].as_u64().unwrap_or(0);
            r["id"].as_u64().unwrap() > after
                && r["progress"]["checkpoint_step"].as_u64().is_some_and(|c| c > from)
                && r["steps_run"].as_u64().is_some_and(|s| s >= from + 200)
        })
    });
}

/// Sweeps `spec` again and checks that its one trial resumed from its checkpoint at step `at`
/// and finished; the finished record.
fn resume_to_the_end(store: &Path, spec: &Path, at: u64) -> serde_json::Value {
    let out = sweep(store, spec).output().unwrap();
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(err.contains(&format!("resumed from its checkpoint at step {at}")), "{err}");
    let resumed = only_record(store);
    assert_eq!(resumed["status"], "done");
    assert_eq!(resumed["progress"]["resumed_from"], at);
    // Its wall time is this process's: the line and `show` say from where.
    let steps = resumed["steps_run"].as_u64().unwrap();
    assert!(err.contains(&format!("({steps} steps; {} here in ", steps - at)), "{err}");
    assert!(err.contains(&format!(", resumed from step {at})")), "{err}");
    let shown = memctl(store).args(["show", &resumed["id"].to_string()]).output().unwrap();
    let shown = text(&shown.stdout);
    assert!(shown.contains(&format!("  resumed_from_step: {at}\n  over_every_process: ")), "{shown}");
    resumed
}

/// Starts a long sweep, sends it `signals` once it has a checkpoint and progress, and checks
/// that it stopped on its own: exit code 1, its trial interrupted with a checkpoint where it
/// stopped. Returns the spec, the store and that step.
fn stopped_by(dir: &Path, signals: &[libc::c_int]) -> (PathBuf, PathBuf, u64) {
    let spec = write_spec(dir, "long.mem", &long());
    let store = dir.join("store");
    let child = sweep(&store, &spec).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
    wait_for_checkpoint_and_progress(&store, 0);
    for &signal in signals {
        // SAFETY: signalling our own child process.
        unsafe { libc::kill(child.id() as i32, signal) };
    }
    let out = child.wait_with_output().unwrap();
    let err = text(&out.stderr);
    // It ended on its own, counting the trial interrupted (a process killed by the signal has
    // no exit code, and a second Ctrl-C quits with 130 at once).
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("1 interrupted") && !err.contains("stopping now"), "{err}");
    let stopped = only_record(&store);
    assert_eq!(stopped["status"], "interrupted");
    assert_eq!(stopped["stop_reason"], "interrupted", "stopped, not found dead");
    let at = stopped["progress"]["checkpoint_step"].as_u64().unwrap();
    assert_eq!(at, stopped["steps_run"].as_u64().unwrap(), "it checkpointed where it stopped");
    assert!(checkpoint_exists(&store));
    (spec, store, at)
}

#[test]
fn sigterm_stops_a_sweep_as_ctrl_c_does_and_the_next_sweep_resumes_where_it_stopped() {
    let dir = tempfile::tempdir().unwrap();
    let (spec, store, at) = stopped_by(dir.path(), &[libc::SIGTERM]);
    resume_to_the_end(&store, &spec, at);
}

/// One stop that arrives twice at once (`timeout` signals the process, then its process group)
/// stops the sweep as one signal does, with its checkpoint, not as a second Ctrl-C.
#[test]
fn a_signal_delivered_twice_at_once_stops_a_sweep_as_one_signal_does() {
    let dir = tempfile::tempdir().unwrap();
    stopped_by(dir.path(), &[libc::SIGTERM, libc::SIGTERM]);
}

#[test]
fn a_sweep_started_with_sighup_ignored_keeps_running_through_it() {
    use std::os::unix::process::CommandExt;
    let dir = tempfile::tempdir().unwrap();
    let spec = write_spec(dir.path(), "long.mem", &long());
    let store = dir.path().join("store");
    let mut command = sweep(&store, &spec);
    // What `nohup` does before it starts the sweep.
    // SAFETY: only `signal`, which is async-signal-safe, between fork and exec.
    unsafe {
        command.pre_exec(|| {
            libc::signal(libc::SIGHUP, libc::SIG_IGN);
            Ok(())
        })
    };
    let child = command.stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
    wait_for_checkpoint_and_progress(&store, 0);
    // SAFETY: signalling our own child process.
    unsafe { libc::kill(child.id() as i32, libc::SIGHUP) };
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(only_record(&store)["status"], "done");
}

#[test]
fn runs_shows_a_trial_training_in_another_process_and_then_its_end() {
    let dir = tempfile::tempdir().unwrap();
    let spec = write_spec(dir.path(), "long.mem", &long().replace("steps = 6000", "steps = 100000"));
    let store = dir.path().join("store");
    let mut child = sweep(&store, &spec).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
    eventually("a first evaluation", || newest(&store).is_some_and(|r| r["curves"]["val_accuracy"].is_array()));
    let out = memctl(&store).args(["runs", "--format", "json"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "runs works while the sweep trains: {}", text(&out.stderr));
    let rows: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let row = &rows.as_array().unwrap()[0];
    assert_eq!(row["status"], "running", "{row}");
    assert!(row["progress"].as_str().is_some_and(|p| p.ends_with("/100000")), "{row}");
    assert!(row["eta"].is_number() && row["val_accuracy"].is_number(), "{row}");
    let shown = text(&memctl(&store).args(["show", "1"]).output().unwrap().stdout);
    assert!(shown.contains("status: running") && shown.contains("eta:"), "{shown}");
    // A second sweep on the same store leaves the running trial alone.
    let second = sweep(&store, &spec).output().unwrap();
    assert!(text(&second.stderr).contains("1 running in another process"), "{}", text(&second.stderr));
    // `run` always runs its trial: one it cannot run now is a failure.
    let run = memctl(&store).arg("run").arg(&spec).output().unwrap();
    assert_eq!(run.status.code(), Some(1), "{}", text(&run.stderr));
    assert!(text(&run.stderr).contains("the trial is running in another process (run 1)"), "{}", text(&run.stderr));
    child.kill().unwrap();
    child.wait().unwrap();
    // Its process is gone: readers show it interrupted at once.
    let after: serde_json::Value =
        serde_json::from_slice(&memctl(&store).args(["runs", "--format", "json"]).output().unwrap().stdout).unwrap();
    assert_eq!(after[0]["status"], "interrupted", "{after}");
}

#[test]
fn force_runs_done_trials_again_from_scratch() {
    let dir = tempfile::tempdir().unwrap();
    let spec = write_spec(dir.path(), "eight.mem", &eight());
    let store = dir.path().join("store");
    let first = sweep(&store, &spec).args(["hidden=8", "seed=1"]).output().unwrap();
    assert_eq!(first.status.code(), Some(0));
    let again = sweep(&store, &spec).args(["hidden=8", "seed=1"]).output().unwrap();
    assert!(text(&again.stderr).contains("0 trials run, 1 already done"), "{}", text(&again.stderr));
    let forced = sweep(&store, &spec).args(["hidden=8", "seed=1", "--force"]).output().unwrap();
    assert!(text(&forced.stderr).contains("1 trial run, 0 already done"), "{}", text(&forced.stderr));
    let recs = records(&store);
    assert_eq!(recs.len(), 2);
    assert!(recs.iter().all(|r| r["status"] == "done" && r["progress"]["resumed_from"].is_null()));
    // The same seed and settings: the re-run reproduces the first run.
    assert_eq!(recs[0]["final_metrics"], recs[1]["final_metrics"]);
}

#[test]
fn a_trial_listed_twice_runs_once() {
    let dir = tempfile::tempdir().unwrap();
    let spec = write_spec(
        dir.path(),
        "eight.mem",
        &tiny_lstm_sweep("eight", "batch = 16, steps = 60, eval_every = 20", "seed in [1, 1]"),
    );
    let store = dir.path().join("store");
    let out = sweep(&store, &spec).output().unwrap();
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(err.contains("1 trial repeats another's configuration and seed exactly"), "{err}");
    assert!(err.contains("1 trial run, 0 already done"), "{err}");
    assert_eq!(records(&store).len(), 1);
}
