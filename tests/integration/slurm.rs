//! The Slurm executor against a real cluster (`../shared/ci/slurm-local.sh up` starts a
//! one-node cluster; `.ci/run` does so before the tests). Where no cluster answers they fail
//! under CI (`CI` or `MEMCTL_REQUIRE_SLURM` set, as `.ci/run` does) and are skipped, saying so,
//! elsewhere.

use crate::support::{TINY_TASK, memctl_at, text, token_lstm};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

fn memctl(store: &Path, cwd: &Path, args: &[&str]) -> std::process::Output {
    memctl_at(store).args(args).current_dir(cwd).output().expect("memctl runs")
}

/// Whether a Slurm controller answers with a usable node.
fn cluster_up() -> bool {
    Command::new("sinfo").args(["-h", "-o", "%T"]).output().is_ok_and(|o| {
        o.status.success() && text(&o.stdout).lines().any(|l| ["idle", "mixed", "allocated"].contains(&l.trim()))
    })
}

/// Whether to run a Slurm test: a cluster answers. Without one, fails under CI and skips
/// elsewhere.
/// The local cluster has one node of 2 CPUs: tests that run jobs on it take turns, so that one
/// test's arrays do not hold the CPUs another test's requeued task waits for.
static CLUSTER: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    CLUSTER.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn cluster_or_skip(test: &str) -> bool {
    if cluster_up() {
        return true;
    }
    let required = ["CI", "MEMCTL_REQUIRE_SLURM"].iter().any(|v| std::env::var_os(v).is_some_and(|s| !s.is_empty()));
    assert!(!required, "{test} needs a Slurm cluster and none answers (../shared/ci/slurm-local.sh up starts one)");
    eprintln!("skipping {test}: no Slurm cluster answers (start one with ../shared/ci/slurm-local.sh up)");
    false
}

/// A Slurm test's turn on the cluster and its folder: the spec as `s.mem`, the store, and the
/// shared directory for manifests and results.
struct ClusterFolder {
    _turn: std::sync::MutexGuard<'static, ()>,
    dir: tempfile::TempDir,
    store: PathBuf,
    shared: PathBuf,
}

impl ClusterFolder {
    /// `None` (the test skips) where no cluster answers outside CI.
    fn new(test: &str, spec: &str) -> Option<ClusterFolder> {
        let turn = one_at_a_time();
        if !cluster_or_skip(test) {
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("s.mem"), spec).unwrap();
        let (store, shared) = (dir.path().join("store"), dir.path().join("shared"));
        Some(ClusterFolder { _turn: turn, dir, store, shared })
    }

    fn cwd(&self) -> &Path {
        self.dir.path()
    }

    fn memctl(&self, args: &[&str]) -> std::process::Output {
        memctl(&self.store, self.cwd(), args)
    }

    /// `memctl sweep s.mem <experiment> --executor slurm`.
    fn submit(&self, experiment: &str) -> std::process::Output {
        self.memctl(&[
            "sweep",
            "s.mem",
            experiment,
            "--executor",
            "slurm",
            "--shared-dir",
            self.shared.to_str().unwrap(),
        ])
    }
}

/// Waits until the array task `task` of `job` is in `state`.
fn wait_for_state(job: &str, task: usize, state: &str, limit: Duration) {
    let start = Instant::now();
    let want = format!("{task} {state}");
    loop {
        let out = Command::new("squeue").args(["-h", "-r", "-j", job, "-o", "%K %T"]).output().unwrap();
        if text(&out.stdout).lines().any(|l| l.trim() == want) {
            return;
        }
        assert!(start.elapsed() < limit, "task {task} of job {job} never {state}: {}", text(&out.stdout));
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Cancels array task 1 of `job` once it has been running for `after`, then waits for the job
/// to end.
fn cancel_task_1(job: &str, after: Duration) {
    wait_for_state(job, 1, "RUNNING", Duration::from_secs(120));
    std::thread::sleep(after);
    assert!(Command::new("scancel").arg(format!("{job}_1")).status().unwrap().success());
    wait_for(job, Duration::from_secs(300));
}

/// Waits until Slurm no longer lists any task of `job`.
fn wait_for(job: &str, limit: Duration) {
    let start = Instant::now();
    loop {
        let out = Command::new("squeue").args(["-h", "-j", job]).output().unwrap();
        if text(&out.stdout).trim().is_empty() {
            return;
        }
        assert!(start.elapsed() < limit, "job {job} still queued after {limit:?}");
        std::thread::sleep(Duration::from_millis(300));
    }
}

fn done_runs(store: &Path, cwd: &Path) -> Vec<serde_json::Value> {
    let out = memctl(store, cwd, &["runs", "--format", "records"]);
    let all: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    all.as_array().unwrap().iter().filter(|r| r["status"] == "done").cloned().collect()
}

fn spec() -> String {
    format!("{TINY_TASK}{}{}", token_lstm("lstm", 16), SPEC_EXPERIMENTS)
}

const SPEC_EXPERIMENTS: &str = r#"experiment quick {
  task tiny
  model lstm
  train { batch = 16, steps = 30, eval_every = 10 }
  sweep { hidden in [8, 16]  seed in 1..2 }
}
// Bounded by time, not steps, so a kill lands mid-run however fast the machine trains.
experiment slow {
  task tiny
  model lstm
  train { batch = 16, steps = 10000000, eval_every = 1000, max_time = 8 }
  sweep { hidden in [8, 16]  seed in 1..2 }
}
"#;

#[test]
fn sweeps_run_on_slurm_sync_once_and_resubmit_only_what_is_missing() {
    let Some(folder) = ClusterFolder::new("the Slurm sweep test", &spec()) else { return };
    let shared = folder.shared.to_str().unwrap();
    let submit = |experiment: &str| -> String {
        let out = folder.submit(experiment);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        text(&out.stdout).trim().to_string()
    };
    let sync = || text(&folder.memctl(&["sync", shared]).stderr);

    // Four tiny trials through one job array; every one lands in the store exactly once.
    let job = submit("quick");
    assert!(!job.is_empty() && job.chars().all(|c| c.is_ascii_digit()), "job id: {job:?}");
    wait_for(&job, Duration::from_secs(180));
    assert!(sync().contains("4 imported, 0 already in the store"));
    assert!(sync().contains("0 imported, 4 already in the store"), "syncing twice adds nothing");
    assert_eq!(done_runs(&folder.store, folder.cwd()).len(), 4);
    let again = folder.submit("quick");
    assert!(text(&again.stderr).contains("0 trials to submit; 4 done in the store"), "{}", text(&again.stderr));

    // Kill one array task mid-run: it leaves no result; resubmitting runs only that trial.
    let job = submit("slow");
    cancel_task_1(&job, Duration::from_millis(500));
    let status = text(&folder.memctl(&["status", shared]).stdout);
    assert!(status.contains("1 missing"), "{status}");
    let synced = sync();
    assert!(synced.contains("3 imported") && synced.contains("1 without a result yet"), "{synced}");
    let resubmitted = folder.submit("slow");
    assert!(
        text(&resubmitted.stderr).contains("1 trial to submit; 3 done in the store"),
        "{}",
        text(&resubmitted.stderr)
    );
    wait_for(text(&resubmitted.stdout).trim(), Duration::from_secs(300));
    assert!(sync().contains("1 imported"));
    let done = done_runs(&folder.store, folder.cwd());
    assert_eq!(done.len(), 8);
    let mut keys: Vec<&str> = done.iter().map(|r| r["trial_key"].as_str().unwrap()).collect();
    keys.sort();
    keys.dedup();
    assert_eq!(keys.len(), 8, "every trial is in the store once");
    let resumed: Vec<_> = done.iter().filter(|r| !r["progress"]["resumed_from"].is_null()).collect();
    assert_eq!(resumed.len(), 1, "the cancelled trial resumed from the checkpoint it saved on SIGTERM");
}

#[test]
fn a_packed_sweep_trains_a_pack_per_array_task_records_what_trials_alone_record_and_resumes_a_killed_pack() {
    let Some(folder) = ClusterFolder::new("the Slurm packs test", &spec()) else { return };
    let shared = folder.shared.to_str().unwrap();
    let submit = |experiment: &str| -> (String, String) {
        let args = ["sweep", "s.mem", experiment, "--executor", "slurm", "--shared-dir", shared, "--pack", "2"];
        let out = folder.memctl(&args);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        (text(&out.stdout).trim().to_string(), text(&out.stderr))
    };
    let sync = || text(&folder.memctl(&["sync", shared]).stderr);

    // Four trials, two shapes (hidden 8 and 16) of two seeds each: two array tasks of two.
    let (job, said) = submit("quick");
    assert!(said.contains("2 array tasks"), "{said}");
    wait_for(&job, Duration::from_secs(180));
    assert!(sync().contains("4 imported"));
    let alone = folder.cwd().join("alone");
    let local = memctl(&alone, folder.cwd(), &["sweep", "s.mem", "quick", "--pack", "off", "--threads", "1", "-q"]);
    assert_eq!(local.status.code(), Some(0), "{}", text(&local.stderr));
    let by_key = |runs: Vec<serde_json::Value>| -> std::collections::BTreeMap<String, serde_json::Value> {
        runs.into_iter().map(|r| (r["trial_key"].as_str().unwrap().to_string(), r["curves"].clone())).collect()
    };
    let (packed, alone) = (by_key(done_runs(&folder.store, folder.cwd())), by_key(done_runs(&alone, folder.cwd())));
    assert_eq!(packed.len(), 4);
    assert_eq!(packed, alone, "a trial trained in a pack on Slurm records the curves it records alone");

    // Kill a packed task mid-run: both its trials are missing, and the resubmission trains
    // them as one pack again, each resumed from the checkpoint it saved on SIGTERM.
    let (job, _) = submit("slow");
    cancel_task_1(&job, Duration::from_secs(2));
    let status = text(&folder.memctl(&["status", shared]).stdout);
    assert!(status.contains("2 missing"), "{status}");
    assert!(sync().contains("2 imported"));
    let (again, said) = submit("slow");
    assert!(said.contains("2 trials to submit") && said.contains("1 array task"), "{said}");
    wait_for(&again, Duration::from_secs(300));
    assert!(sync().contains("2 imported"));
    let done = done_runs(&folder.store, folder.cwd());
    assert_eq!(done.len(), 8);
    let resumed = done.iter().filter(|r| !r["progress"]["resumed_from"].is_null()).count();
    assert_eq!(resumed, 2, "both trials of the killed pack resumed from their checkpoints");
}

/// Four trials checkpointed at every step, the two of the larger rate failing (its loss
/// overflows): packs of two seeds of one rate.
const RERUN_SPEC_EXPERIMENT: &str = r#"experiment rerun {
  task tiny
  model lstm
  train { optimizer = sgd(lr = 1e-2), batch = 16, steps = 30, eval_every = 10, checkpoint_every = 0.00001 }
  sweep { lr in [1e-2, 1e300]  seed in 1..2 }
}
"#;

/// Packed array tasks run the trials `--retry-failed` and `--force` submit again, from the
/// start (not from the checkpoint an earlier run left), and `sync` imports the new runs.
#[test]
fn a_packed_submission_again_with_retry_failed_or_force_trains_its_trials_afresh() {
    let spec = format!("{TINY_TASK}{}{RERUN_SPEC_EXPERIMENT}", token_lstm("lstm", 16));
    let Some(folder) = ClusterFolder::new("the Slurm rerun test", &spec) else { return };
    let shared = folder.shared.to_str().unwrap();
    let submit = |extra: &[&str]| -> (String, String) {
        let mut args = vec!["sweep", "s.mem", "rerun", "--executor", "slurm", "--shared-dir", shared, "--pack", "2"];
        args.extend(extra);
        let out = folder.memctl(&args);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        (text(&out.stdout).trim().to_string(), text(&out.stderr))
    };
    let sync = || text(&folder.memctl(&["sync", shared]).stderr);
    let all_runs = || all_runs(&folder.store, folder.cwd());

    let (job, said) = submit(&[]);
    assert!(said.contains("4 trials to submit") && said.contains("2 array tasks"), "{said}");
    wait_for(&job, Duration::from_secs(180));
    assert!(sync().contains("4 imported"));
    let statuses = |runs: &[serde_json::Value]| -> Vec<String> {
        let mut s: Vec<String> = runs.iter().map(|r| r["status"].as_str().unwrap().to_string()).collect();
        s.sort();
        s
    };
    assert_eq!(statuses(&all_runs()), ["done", "done", "failed", "failed"]);

    let (job, said) = submit(&["--retry-failed"]);
    assert!(said.contains("2 trials to submit") && said.contains("1 array task"), "{said}");
    wait_for(&job, Duration::from_secs(180));
    let synced = sync();
    assert!(synced.contains("2 imported"), "the failed pack ran again: {synced}");
    assert_eq!(statuses(&all_runs()), ["done", "done", "failed", "failed", "failed", "failed"]);

    let (job, said) = submit(&["--force"]);
    assert!(said.contains("4 trials to submit"), "{said}");
    wait_for(&job, Duration::from_secs(180));
    let synced = sync();
    assert!(synced.contains("4 imported"), "every trial ran again: {synced}");
    let runs = all_runs();
    assert_eq!(runs.len(), 10);
    assert_eq!(runs.iter().filter(|r| r["status"] == "done").count(), 4);
    for done in runs.iter().filter(|r| r["status"] == "done") {
        assert!(done["progress"]["resumed_from"].is_null(), "a forced run starts afresh: {}", done["progress"]);
        assert_eq!(done["steps_run"], 30);
    }
}

/// One trial, bounded by time; the test plays Slurm's time-limit warning on it.
fn long_spec() -> String {
    format!("{TINY_TASK}{}{}", token_lstm("lstm", 16), LONG_SPEC_EXPERIMENTS)
}

const LONG_SPEC_EXPERIMENTS: &str = r#"experiment long {
  task tiny
  model lstm
  train { batch = 16, steps = 10000000, eval_every = 1000, max_time = 6 }
}
"#;

#[test]
fn a_task_warned_of_its_time_limit_checkpoints_requeues_itself_and_resumes() {
    let Some(folder) = ClusterFolder::new("the Slurm time-limit test", &long_spec()) else { return };
    let out = folder.submit("long");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let job = text(&out.stdout).trim().to_string();
    wait_for_state(&job, 0, "RUNNING", Duration::from_secs(180));
    std::thread::sleep(Duration::from_secs(1));
    // What `--signal=B:USR1@grace` sends when the time limit is `grace` seconds away.
    let warned = Command::new("scancel").args(["--signal=USR1", "--batch", &format!("{job}_0")]).status().unwrap();
    assert!(warned.success());
    // The task requeued itself; Slurm holds a requeued job back for two minutes, which the
    // test skips.
    wait_for_state(&job, 0, "PENDING", Duration::from_secs(60));
    // Not within the second of the kill, though: slurmd refuses to launch a job whose
    // credential was revoked in the same second it was issued ("Job credential revoked"),
    // and the task would end there instead of resuming.
    std::thread::sleep(Duration::from_secs(2));
    let release = Command::new("scontrol").args(["update", &format!("JobId={job}_0"), "StartTime=now"]).status();
    assert!(release.unwrap().success());
    // The requeued task appends to the same log. squeue can list nothing for a moment while
    // Slurm moves a requeued array task between states, so wait for the resumed run's own
    // lines in the log (it resumed, then recorded its end) as well as for the job to leave the
    // queue.
    let log_path = folder.shared.join("s-long").join("logs").join(format!("{job}_0.log"));
    let start = Instant::now();
    let log = loop {
        let log = std::fs::read_to_string(&log_path).unwrap_or_default();
        let resumed = log.split("resuming from its checkpoint at step").nth(1);
        if resumed.is_some_and(|after| after.contains("memctl worker: done")) {
            break log;
        }
        assert!(start.elapsed() < Duration::from_secs(300), "the requeued task never resumed:\n{log}");
        std::thread::sleep(Duration::from_millis(300));
    };
    wait_for(&job, Duration::from_secs(180));
    assert!(log.contains("time limit near: requeueing this task"), "{log}");
    assert!(log.contains("resuming from its checkpoint at step"), "{log}");
    assert!(text(&folder.memctl(&["sync", folder.shared.to_str().unwrap()]).stderr).contains("1 imported"));
    let done = done_runs(&folder.store, folder.cwd());
    assert_eq!(done.len(), 1, "the trial finished once");
    let resumed_from = done[0]["progress"]["resumed_from"].as_u64().expect("the finished run resumed");
    assert!(resumed_from > 0);
    assert!(done[0]["steps_run"].as_u64().unwrap() > resumed_from);
}

/// Two searches of the tiny LSTM: `tpe` (4 configurations × 2 seeds, pruned by ASHA) and
/// `slow` (a grid of 2 × 2 seeds, each trial bounded by time so that a kill lands mid-run).
fn search_spec() -> String {
    format!("{TINY_TASK}{}{}", token_lstm("lstm", 16), SEARCH_EXPERIMENTS)
}

const SEARCH_EXPERIMENTS: &str = r#"experiment tpe {
  task tiny
  model lstm
  train { optimizer = adam(lr = 1e-3), batch = 16, steps = 60, eval_every = 20 }
  search {
    lr ~ loguniform(1e-5, 3e-2)
    hidden in [8, 16]
    seed in 1..2
    trials = 4, sampler = tpe(seed = 1, startup = 2)
    prune = asha(metric = val_loss, min_steps = 20, rungs = 2, keep = 1/2)
  }
}
experiment slow {
  task tiny
  model lstm
  train { batch = 16, steps = 10000000, eval_every = 1000, max_time = 6 }
  search { hidden in [8, 16]  seed in 1..2  sampler = grid, prune = none }
}
"#;

/// Every run in the store, as records.
fn all_runs(store: &Path, cwd: &Path) -> Vec<serde_json::Value> {
    let out = memctl(store, cwd, &["runs", "--all", "--format", "records"]);
    serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap().as_array().unwrap().clone()
}

/// How many settled (done or pruned) runs each trial has.
fn settled_per_trial(runs: &[serde_json::Value]) -> std::collections::HashMap<String, usize> {
    let mut per_trial = std::collections::HashMap::new();
    for r in runs.iter().filter(|r| r["status"] == "done" || r["status"] == "pruned") {
        *per_trial.entry(r["trial_key"].as_str().unwrap().to_string()).or_default() += 1;
    }
    per_trial
}

#[test]
fn a_search_runs_on_slurm_workers_that_share_the_study_and_a_killed_worker_loses_nothing() {
    let Some(folder) = ClusterFolder::new("the Slurm search test", &search_spec()) else { return };
    let shared = folder.shared.to_str().unwrap();
    let submit = |experiment: &str| {
        folder.memctl(&["sweep", "s.mem", experiment, "--executor", "slurm", "--shared-dir", shared, "--jobs", "2"])
    };

    // Two workers take the study's trials from the store, which proposes each configuration
    // once: 4 configurations, each trial settled exactly once, recorded without `sync`.
    let out = submit("tpe");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("2 search workers"), "{}", text(&out.stderr));
    wait_for(text(&out.stdout).trim(), Duration::from_secs(300));
    let runs = all_runs(&folder.store, folder.cwd());
    let per_trial = settled_per_trial(&runs);
    assert_eq!(per_trial.len(), 8, "every trial of the 4 configurations is settled: {per_trial:?}");
    assert!(per_trial.values().all(|&n| n == 1), "no trial ran twice: {per_trial:?}");
    let configs: std::collections::HashSet<String> =
        runs.iter().map(|r| format!("{} {}", r["config"]["train"]["lr"], r["config"]["params"]["hidden"])).collect();
    assert_eq!(configs.len(), 4, "{configs:?}");
    let status = text(&folder.memctl(&["status", shared]).stdout);
    assert!(status.contains("search tpe, 2 workers: 2 ended"), "{status}");
    let again = submit("tpe");
    assert!(text(&again.stderr).contains("the search is complete; nothing to submit"), "{}", text(&again.stderr));

    // Cancel the second worker mid-trial: its trial is recorded interrupted with a checkpoint,
    // and the worker that takes it next (the other one, or one submitted again) resumes it.
    let out = submit("slow");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let job = text(&out.stdout).trim().to_string();
    cancel_task_1(&job, Duration::from_millis(1500));
    let resubmitted = submit("slow");
    assert_eq!(resubmitted.status.code(), Some(0), "{}", text(&resubmitted.stderr));
    let job = text(&resubmitted.stdout).trim().to_string();
    if !job.is_empty() {
        wait_for(&job, Duration::from_secs(300));
    }
    let runs: Vec<serde_json::Value> =
        all_runs(&folder.store, folder.cwd()).into_iter().filter(|r| r["config"]["experiment"] == "slow").collect();
    let per_trial = settled_per_trial(&runs);
    assert_eq!(per_trial.len(), 4, "every trial of the grid is settled: {per_trial:?}");
    assert!(per_trial.values().all(|&n| n == 1), "no trial ran twice: {per_trial:?}");
    let interrupted: Vec<_> = runs.iter().filter(|r| r["status"] == "interrupted").collect();
    assert_eq!(interrupted.len(), 1, "the cancelled worker's trial: {interrupted:?}");
    let key = &interrupted[0]["trial_key"];
    let resumed = runs.iter().find(|r| &r["trial_key"] == key && r["status"] == "done").expect("it finished later");
    assert!(resumed["progress"]["resumed_from"].as_u64().is_some_and(|s| s > 0), "it resumed from its checkpoint");
}
