//! Sweeps that never lose or repeat work: crashes, failures, overrides.

use std::collections::HashMap;
use std::path::Path;
use std::process::Command;

use crate::support::{kill_after_start, memctl_at, spec_folder, text, tiny_lstm_sweep, tiny_spec};

/// `memctl sweep <spec>`, two trials (or packs) at a time on one thread each.
fn two_job_sweep(store: &Path, spec: &Path, pack: &str) -> Command {
    let mut c = memctl_at(store);
    c.arg("sweep").arg(spec).args(["--jobs", "2", "--threads", "1", "--pack", pack]);
    c
}

fn records(store: &Path) -> Vec<serde_json::Value> {
    let out = memctl_at(store).args(["runs", "--all", "--format", "records"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "the store opens: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap().as_array().unwrap().clone()
}

#[test]
fn sigkill_at_random_moments_loses_and_repeats_nothing() {
    sigkill_at_random_moments(&["off"]);
}

#[test]
fn sigkill_at_random_moments_loses_and_repeats_nothing_in_packs() {
    // Two packs of four (one per width), then packs of three and one, and two and two, as
    // the trials still to run regroup after each kill.
    sigkill_at_random_moments(&["4", "3", "2"]);
}

/// Kills sweeps of eight trials at random moments, each sweep packing its trials as the next
/// of `packs` says (`--pack`), then checks that nothing was lost or run twice.
fn sigkill_at_random_moments(packs: &[&str]) {
    let (_dir, spec, store) = spec_folder(&tiny_lstm_sweep(
        "eight",
        "batch = 16, steps = 40, eval_every = 20",
        "hidden in [8, 16]  seed in 1..4",
    ));
    let mut round = 0;
    let mut sweep = || {
        round += 1;
        two_job_sweep(&store, &spec, packs[round % packs.len()])
    };
    // Runs found done after a kill: each must stay done, and its trial never run again.
    let mut done_runs: HashMap<String, u64> = HashMap::new();
    // Kill at varying moments after the n-th trial has started (its `running` record is
    // durable by then), so the kills land mid-trial on a fast machine and a slow one alike.
    for (nth_start, delay_ms) in [(1usize, 0u64), (2, 40), (1, 15), (3, 80), (2, 5)] {
        kill_after_start(&mut sweep(), nth_start, delay_ms);
        // The store opens after every kill, and never holds a duplicate id.
        let recs = records(&store);
        let mut ids: Vec<u64> = recs.iter().map(|r| r["id"].as_u64().unwrap()).collect();
        ids.sort();
        ids.dedup();
        assert_eq!(ids.len(), recs.len(), "duplicate run ids");
        for r in recs.iter().filter(|r| r["status"] == "done") {
            done_runs.insert(r["trial_key"].as_str().unwrap().to_string(), r["id"].as_u64().unwrap());
        }
        for (trial, id) in &done_runs {
            let done_now: Vec<u64> = recs
                .iter()
                .filter(|r| r["trial_key"] == trial.as_str() && r["status"] == "done")
                .map(|r| r["id"].as_u64().unwrap())
                .collect();
            assert_eq!(done_now, vec![*id], "trial {trial}: its done run {id} stays the only done run");
            assert!(
                recs.iter().all(|r| r["trial_key"] != trial.as_str() || r["id"].as_u64().unwrap() <= *id),
                "trial {trial} ran again after it was done"
            );
        }
    }
    let out = sweep().output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let recs = records(&store);
    // At least one kill landed mid-trial (otherwise this test exercised nothing).
    assert!(recs.iter().any(|r| r["status"] == "interrupted"), "no run was interrupted");
    let mut done_per_trial: HashMap<String, usize> = HashMap::new();
    for r in &recs {
        let status = r["status"].as_str().unwrap();
        assert!(status == "done" || status == "interrupted", "unexpected status {status}");
        if status == "done" {
            *done_per_trial.entry(r["trial_key"].as_str().unwrap().to_string()).or_default() += 1;
        }
    }
    assert_eq!(done_per_trial.len(), 8, "every trial is done");
    assert!(done_per_trial.values().all(|&n| n == 1), "each trial done exactly once: {done_per_trial:?}");
    // Nothing is left to do.
    let again = sweep().output().unwrap();
    assert!(String::from_utf8_lossy(&again.stderr).contains("0 trials run, 8 already done"));
}

#[test]
fn a_trial_that_crashes_its_process_is_failed_once_a_probe_sees_it_crash() {
    // Four trials; the two with `hidden = 5000` need 1.6 GB to train.
    let (_dir, spec, store) = spec_folder(&tiny_lstm_sweep(
        "crash",
        "batch = 16, steps = 40, eval_every = 20",
        "hidden in [8, 5000]  seed in 1..2",
    ));
    // An address space of 2.7 GB for the sweep: the big trials' estimates fit in what it
    // leaves, so the memory check lets them through, but their optimiser's temporaries do not,
    // and their allocations abort the process: a crash the check does not foresee.
    // Few malloc arenas, so that the small trials' share does not depend on the cores.
    let sweep = || {
        let mut c = two_job_sweep(&store, &spec, "auto");
        c.env("MALLOC_ARENA_MAX", "2");
        crate::support::limit_address_space(&mut c, 2700 << 20);
        c.output().unwrap()
    };
    use std::os::unix::process::ExitStatusExt;
    let first = sweep();
    assert_eq!(first.status.signal(), Some(libc::SIGABRT), "{}", String::from_utf8_lossy(&first.stderr));
    // Each sweep again probes the trials its predecessor died with, and dies on a big trial it
    // had not suspected yet, until each big trial has been probed: at most one sweep each.
    let mut last = sweep();
    for _ in 0..2 {
        if last.status.signal() != Some(libc::SIGABRT) {
            break;
        }
        last = sweep();
    }
    let stderr = String::from_utf8_lossy(&last.stderr);
    assert_eq!(last.status.code(), Some(1), "the sweep ends, with failures: {stderr}");
    let recs = records(&store);
    for hidden in [8, 5000] {
        for seed in [1, 2] {
            let runs: Vec<&serde_json::Value> = recs
                .iter()
                .filter(|r| r["config"]["params"]["hidden"] == hidden && r["config"]["seed"] == seed)
                .collect();
            let latest = runs.iter().max_by_key(|r| r["id"].as_u64()).unwrap();
            if hidden == 8 {
                assert_eq!(latest["status"], "done", "hidden=8 seed={seed}: {stderr}");
            } else {
                assert_eq!(latest["status"], "failed", "hidden=5000 seed={seed}: {stderr}");
                let error = latest["error"].as_str().unwrap();
                assert!(
                    error.contains("SIGABRT") && error.contains("memory allocation of"),
                    "the crash is named with the probe's last words: {error}"
                );
                let failed = runs.iter().filter(|r| r["status"] == "failed").count();
                assert_eq!(failed, 1, "one probe fails it: {stderr}");
            }
        }
    }
}

#[test]
fn a_failing_trial_is_recorded_and_the_others_complete() {
    let (_dir, spec, store) = spec_folder(&tiny_spec());
    let run = |extra: &[&str]| {
        memctl_at(&store)
            .arg("sweep")
            .arg(&spec)
            .args(["tiny_lstm", "lr=1e-2,1e300", "optimizer=\"sgd\"", "--jobs", "1"])
            .args(extra)
            .output()
            .unwrap()
    };
    let out = run(&[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("2 trials run, 0 already done, 1 failed"), "{err}");
    assert!(err.contains("failed: loss is"), "the failure is printed with its reason: {err}");
    let recs = records(&store);
    let failed: Vec<_> = recs.iter().filter(|r| r["status"] == "failed").collect();
    assert_eq!(failed.len(), 1);
    assert!(failed[0]["error"].as_str().unwrap().contains("loss is"));
    assert_eq!(recs.iter().filter(|r| r["status"] == "done").count(), 1);

    // Failed trials are skipped by default and re-run with --retry-failed.
    let again = run(&[]);
    assert!(String::from_utf8_lossy(&again.stderr).contains("1 failed before (skipped; --retry-failed re-runs them)"));
    let retry = run(&["--retry-failed"]);
    assert!(String::from_utf8_lossy(&retry.stderr).contains("1 trial run, 1 already done, 1 failed"));
}

/// A trial whose update diverges, evaluated before its next step sees the NaN (its `max_time`
/// stops it after one step), fails on the NaN validation loss; the store keeps reading its
/// record (which holds the NaN JSON has no number for as `"NaN"`), so the sweep runs again
/// and `show` shows it.
#[test]
fn a_run_ending_with_a_nan_metric_leaves_the_store_readable() {
    // A linear recurrence, which no squashing keeps finite.
    let spec = "task tiny = assocRetrieval(pairs = 2, train = 64, validation = 32, test = 32)
model linear_rnn(d = 8) {
  state h = zeros(d)
  step token { h = linear(embed(token, d), d) + linear(h, d)  out linear(h, output_size) }
}
experiment diverges {
  task tiny
  model linear_rnn
  train { optimizer = sgd(lr = 1e6), batch = 8, steps = 50, max_time = 1e-7 }
}
";
    let (_dir, spec, store) = spec_folder(spec);
    let sweep = || memctl_at(&store).arg("sweep").arg(&spec).arg("-q").output().unwrap();
    let first = sweep();
    assert_eq!(first.status.code(), Some(1), "{}", text(&first.stderr));
    assert!(text(&first.stderr).contains("validation loss is NaN at step 1"), "{}", text(&first.stderr));
    let recs = records(&store);
    assert_eq!(recs.len(), 1);
    assert_eq!(recs[0]["status"], "failed");
    assert_eq!(recs[0]["curves"]["val_loss"][0][1], "NaN", "a NaN loss, written as such: {}", recs[0]["curves"]);
    let again = sweep();
    assert!(text(&again.stderr).contains("1 failed before (skipped"), "{}", text(&again.stderr));
    let show = memctl_at(&store).args(["show", "1"]).output().unwrap();
    assert!(show.status.success(), "{}", text(&show.stderr));
    assert!(text(&show.stdout).contains("val_loss"), "{}", text(&show.stdout));
}

/// A model whose `m / parts` must be whole, for the override tests.
const SPLIT_MODEL: &str = r#"
task tiny = assocRetrieval(pairs = 2, train = 64, validation = 32, test = 32)
model split(m = 12, parts = 2) {
  state h = zeros(m / parts)
  step token {
    h = tanh(linear(embed(token, 4), m / parts) + linear(h, m / parts))
    out linear(h, output_size)
  }
}
"#;

/// An override given with an experiment's name applies to that experiment alone: `parts=3`
/// suits `twelve` (12 / 3) but not `ten`, whose `m / parts` must be whole.
#[test]
fn overrides_for_a_named_experiment_leave_the_others_as_written() {
    let spec_text = format!(
        "{SPLIT_MODEL}experiment twelve {{ task tiny model split(m = 12) }}\nexperiment ten {{ task tiny model split(m = 10) }}\n"
    );
    let (_dir, spec, store) = spec_folder(&spec_text);
    let dry = |args: &[&str]| memctl_at(&store).arg("sweep").arg(&spec).arg("--dry-run").args(args).output().unwrap();
    let named = dry(&["twelve", "parts=3"]);
    assert_eq!(named.status.code(), Some(0), "{}", text(&named.stderr));
    assert!(text(&named.stdout).contains("parts=3"), "{}", text(&named.stdout));
    // Without a name the override reaches `ten` too, and the check says where it breaks.
    let every = dry(&["parts=3"]);
    assert_eq!(every.status.code(), Some(2));
    assert!(text(&every.stderr).contains("10 / 3 is not a whole number"), "{}", text(&every.stderr));
    // A name that matches no experiment is reported as such, not as an override that sets nothing.
    let unknown = dry(&["eleven", "parts=3"]);
    assert_ne!(unknown.status.code(), Some(0));
    let err = text(&unknown.stderr);
    assert!(err.contains("no experiment `eleven`") && !err.contains("sets nothing"), "{err}");
}

#[test]
fn overrides_replace_sweeps_and_bad_ones_are_located() {
    let (_dir, spec, store) = spec_folder(&tiny_spec());
    let dry = |args: &[&str]| memctl_at(&store).arg("sweep").arg(&spec).arg("--dry-run").args(args).output().unwrap();
    let out = dry(&["tiny_stm", "seed=5", "d=4,6"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("2 of 2 trials would run"), "{text}");
    assert!(text.contains("seed=5 d=4") && text.contains("seed=5 d=6"), "{text}");
    let bad = dry(&["gatse=false"]);
    assert_eq!(bad.status.code(), Some(2));
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(err.contains("<command line>:1:1") && err.contains("`gatse`"), "{err}");
    // A string written as a word: quoted in the hint; a condition: set in the spec.
    let word = dry(&["optimizer=sgd"]);
    let err = String::from_utf8_lossy(&word.stderr);
    assert!(err.contains("unknown name `sgd`") && err.contains(r#"'optimizer="sgd"'"#), "{err}");
    let condition = dry(&["stop_when=accuracy>=0.5"]);
    let err = String::from_utf8_lossy(&condition.stderr);
    assert!(err.contains("`stop_when` is a condition, set in the experiment's `train` block"), "{err}");
}

/// A zip's rows are pairings the spec chose: an override of a zipped name picks rows (keeping
/// each row's partners) instead of pairing the value with every row, and a value no row has is
/// a located error.
#[test]
fn an_override_of_a_zipped_name_picks_the_zips_rows() {
    let zipped = "experiment z {\n  task tiny\n  model split()\n  sweep { seed in 1..2  zip { m in [12, 10, 12], parts in [2, 5, 3] } }\n}\n";
    let (_dir, spec, store) = spec_folder(&format!("{SPLIT_MODEL}{zipped}"));
    let dry = |args: &[&str]| memctl_at(&store).arg("sweep").arg(&spec).arg("--dry-run").args(args).output().unwrap();
    let rows = dry(&["seed=7", "m=12"]);
    let out = text(&rows.stdout);
    assert_eq!(rows.status.code(), Some(0), "{}", text(&rows.stderr));
    assert!(out.contains("2 of 2 trials would run"), "{out}");
    assert!(out.contains("m=12 parts=2") && out.contains("m=12 parts=3") && !out.contains("parts=5"), "{out}");
    // Two names of one zip: the rows that have both.
    let one = text(&dry(&["m=12", "parts=3"]).stdout);
    assert!(one.contains("2 of 2 trials would run") && !one.contains("parts=2"), "{one}");
    let missing = dry(&["m=11"]);
    assert_eq!(missing.status.code(), Some(2));
    let err = text(&missing.stderr);
    assert!(
        err.contains("`m=11` picks no row of the `zip` that pairs `m` with `parts`: its `m` values are 12, 10, 12"),
        "{err}"
    );
    assert!(err.contains("<command line>:1:3"), "{err}");
    // A value of the zip that the override of its partner left out: that override is named.
    let narrowed = dry(&["m=10", "parts=3"]);
    let err = text(&narrowed.stderr);
    assert_eq!(narrowed.status.code(), Some(2), "{err}");
    assert!(err.contains("its `parts` values are 5"), "{err}");
    assert!(err.contains("the override of `m` on the command line left only these rows of the zip"), "{err}");
    // A value the spec's zip never had is not blamed on the other override.
    let err = text(&dry(&["m=10", "parts=7"]).stderr);
    assert!(err.contains("`parts=7` picks no row") && !err.contains("left only these rows"), "{err}");
}

/// A sweep's reporter whose trials hit a bug at the step it holds (their observer panics there).
struct BugAtStep(usize);

impl memctl::sweep::Reporter for BugAtStep {
    fn trial_started(
        &self,
        _: usize,
        _: &memctl::check::Trial,
        _: u64,
        _: Option<u64>,
    ) -> Box<dyn memctl::train::Observer + '_> {
        Box::new(PanicAt(self.0))
    }
    fn warning(&self, message: &str) {
        panic!("unexpected warning: {message}");
    }
}

struct PanicAt(usize);

impl memctl::train::Observer for PanicAt {
    fn on_step(&self, step: usize, _: usize, _: f64) {
        assert_ne!(step, self.0, "a bug at step {step}");
    }
}

#[test]
fn a_trial_failing_between_progress_saves_records_the_steps_it_ran_and_its_evaluations() {
    use memctl::sweep::{self, Options, SpecSource};
    let text = tiny_lstm_sweep("one", "batch = 16, steps = 40, eval_every = 10", "seed in [1]");
    let trial = &crate::support::trials("one.mem", &text)[0];
    let dir = tempfile::tempdir().unwrap();
    let store = memctl::store::Store::open(dir.path()).unwrap();
    let opts = Options::one_at_a_time();
    let spec = SpecSource { path: "one.mem".into(), text };
    let cancel = std::sync::atomic::AtomicBool::new(false);
    sweep::run_trial(&store, &spec, 0, trial, &opts, &BugAtStep(25), &cancel, None).unwrap();
    // What the store keeps: failed at step 25, with the evaluations at steps 10 and 20.
    let r = store.get(1).unwrap();
    assert_eq!(r.status, memctl::store::Status::Failed);
    assert!(r.error.as_deref().is_some_and(|e| e.contains("a bug at step 25")), "{:?}", r.error);
    assert_eq!(r.steps_run, 25);
    let evaluated: Vec<u64> = r.curves["val_accuracy"].iter().map(|(s, _)| *s).collect();
    assert_eq!(evaluated, vec![10, 20]);
    assert!(r.train_seconds > 0.0);
}
