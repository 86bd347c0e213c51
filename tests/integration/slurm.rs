//! The Slurm executor against a real cluster (`../shared/ci/slurm-local.sh up` starts a
//! one-node cluster; `.ci/run` does so before the tests). Skipped, saying so, where no cluster
//! answers.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

fn memctl(store: &Path, cwd: &Path, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_memctl"))
        .arg("--store")
        .arg(store)
        .args(args)
        .current_dir(cwd)
        .env("NO_COLOR", "1")
        .output()
        .expect("memctl runs")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Whether a Slurm controller answers with a usable node.
fn cluster_up() -> bool {
    Command::new("sinfo").args(["-h", "-o", "%T"]).output().is_ok_and(|o| {
        o.status.success() && text(&o.stdout).lines().any(|l| ["idle", "mixed", "allocated"].contains(&l.trim()))
    })
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

const SPEC: &str = r#"
task tiny = assocRetrieval(pairs = 2, train = 64, validation = 32, test = 32)
model lstm(hidden = 16) {
  state c = zeros(hidden)
  state h = zeros(hidden)
  step token {
    c, h = lstmCell(c, h, embed(token, 8))
    out linear(h, output_size)
  }
}
experiment quick {
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
    if !cluster_up() {
        eprintln!("skipping the Slurm test: no Slurm cluster answers (start one with ../shared/ci/slurm-local.sh up)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let cwd = dir.path();
    std::fs::write(cwd.join("s.mem"), SPEC).unwrap();
    let store = cwd.join("store");
    let shared = cwd.join("shared");
    let submit = |experiment: &str| -> String {
        let out = memctl(
            &store,
            cwd,
            &["sweep", "s.mem", experiment, "--executor", "slurm", "--shared-dir", shared.to_str().unwrap()],
        );
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        text(&out.stdout).trim().to_string()
    };
    let sync = || text(&memctl(&store, cwd, &["sync", shared.to_str().unwrap()]).stderr);

    // Four tiny trials through one job array; every one lands in the store exactly once.
    let job = submit("quick");
    assert!(!job.is_empty() && job.chars().all(|c| c.is_ascii_digit()), "job id: {job:?}");
    wait_for(&job, Duration::from_secs(180));
    assert!(sync().contains("4 imported, 0 already in the store"));
    assert!(sync().contains("0 imported, 4 already in the store"), "syncing twice adds nothing");
    assert_eq!(done_runs(&store, cwd).len(), 4);
    let again = memctl(
        &store,
        cwd,
        &["sweep", "s.mem", "quick", "--executor", "slurm", "--shared-dir", shared.to_str().unwrap()],
    );
    assert!(text(&again.stderr).contains("0 trials to submit; 4 done in the store"), "{}", text(&again.stderr));

    // Kill one array task mid-run: it leaves no result; resubmitting runs only that trial.
    let job = submit("slow");
    let start = Instant::now();
    loop {
        let out = Command::new("squeue").args(["-h", "-r", "-j", &job, "-o", "%K %T"]).output().unwrap();
        if text(&out.stdout).lines().any(|l| l.trim() == "1 RUNNING") {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(120), "task 1 never ran: {}", text(&out.stdout));
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_millis(500));
    assert!(Command::new("scancel").arg(format!("{job}_1")).status().unwrap().success());
    wait_for(&job, Duration::from_secs(300));
    let status = text(&memctl(&store, cwd, &["status", shared.to_str().unwrap()]).stdout);
    assert!(status.contains("1 missing"), "{status}");
    let synced = sync();
    assert!(synced.contains("3 imported") && synced.contains("1 without a result yet"), "{synced}");
    let resubmitted = memctl(
        &store,
        cwd,
        &["sweep", "s.mem", "slow", "--executor", "slurm", "--shared-dir", shared.to_str().unwrap()],
    );
    assert!(
        text(&resubmitted.stderr).contains("1 trial to submit; 3 done in the store"),
        "{}",
        text(&resubmitted.stderr)
    );
    wait_for(text(&resubmitted.stdout).trim(), Duration::from_secs(300));
    assert!(sync().contains("1 imported"));
    let done = done_runs(&store, cwd);
    assert_eq!(done.len(), 8);
    let mut keys: Vec<&str> = done.iter().map(|r| r["trial_key"].as_str().unwrap()).collect();
    keys.sort();
    keys.dedup();
    assert_eq!(keys.len(), 8, "every trial is in the store once");
}
