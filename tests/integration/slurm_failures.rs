//! The Slurm executor with stand-in `sbatch` and `squeue` scripts on `PATH` (no cluster
//! needed): a queue that cannot be read is never taken for an empty one, a submission `sbatch`
//! refused leaves nothing behind, a synced run deleted from the store stays deleted, and a task
//! started in another folder works in the submission's.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use crate::support::{TINY_TASK, memctl_at, text, token_lstm};

/// Writes an executable `name` into `bin` that prints `stdout`, `stderr` and exits `code`.
fn stand_in(bin: &Path, name: &str, stdout: &str, stderr: &str, code: i32) {
    let script = format!("#!/bin/sh\nprintf '%s' '{stdout}'\nprintf '%s\\n' '{stderr}' >&2\nexit {code}\n");
    let path = bin.join(name);
    std::fs::write(&path, script).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// `memctl` in `dir` with `bin` first on `PATH`.
fn memctl_with(bin: &Path, dir: &Path, args: &[&str]) -> std::process::Output {
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    memctl_at(&dir.join("store")).current_dir(dir).env("PATH", path).args(args).output().unwrap()
}

/// Submits a sweep of two trials through a stand-in `sbatch` (job 888), with a stand-in
/// `squeue` that fails with `squeue_error`: the folder and the stand-ins' folder.
fn submitted(squeue_error: &str) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let spec = format!(
        "{TINY_TASK}{}experiment e {{\n  task tiny\n  model lstm\n  train {{ steps = 2 }}\n  sweep {{ seed in 1..2 }}\n}}\n",
        token_lstm("lstm", 4)
    );
    std::fs::write(dir.path().join("s.mem"), spec).unwrap();
    let bin = dir.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    stand_in(&bin, "sbatch", "888", "", 0);
    stand_in(&bin, "squeue", "", squeue_error, 1);
    let first = memctl_with(&bin, dir.path(), &SWEEP);
    assert_eq!(first.status.code(), Some(0), "{}", text(&first.stderr));
    (dir, bin)
}

const SWEEP: [&str; 6] = ["sweep", "s.mem", "--executor", "slurm", "--shared-dir", "shared"];

#[test]
fn a_queue_that_cannot_be_read_submits_nothing_again_and_no_trial_is_called_missing() {
    let (dir, bin) = submitted("slurm_load_jobs error: Unable to contact slurm controller");
    let sweep = SWEEP;

    // The second submission cannot tell which trials are queued: it submits none.
    let again = memctl_with(&bin, dir.path(), &sweep);
    let err = text(&again.stderr);
    assert_ne!(again.status.code(), Some(0), "{err}");
    assert!(err.contains("`squeue` failed: slurm_load_jobs error: Unable to contact slurm controller"), "{err}");
    let sweep_dir = std::fs::read_dir(dir.path().join("shared")).unwrap().next().unwrap().unwrap().path();
    let manifests = || std::fs::read_dir(sweep_dir.join("manifests")).unwrap().count();
    assert_eq!(manifests(), 1, "{err}");

    let status = memctl_with(&bin, dir.path(), &["status", "shared"]);
    let out = text(&status.stdout);
    assert!(out.contains("submission 1: the queue cannot be read"), "{out}");
    assert!(out.contains("2 trials: 2 without a result yet") && !out.contains("missing"), "{out}");

    let sync = text(&memctl_with(&bin, dir.path(), &["sync", "shared"]).stderr);
    assert!(sync.contains("2 without a result yet") && sync.contains("some may still be queued"), "{sync}");

    // With every trial done, a submission has nothing to ask the queue about.
    let local = memctl_with(&bin, dir.path(), &["sweep", "s.mem", "--threads", "1", "-q"]);
    assert_eq!(local.status.code(), Some(0), "{}", text(&local.stderr));
    let nothing = memctl_with(&bin, dir.path(), &sweep);
    assert_eq!(nothing.status.code(), Some(0), "{}", text(&nothing.stderr));
    assert_eq!(manifests(), 1);

    // A job squeue no longer knows has left the queue: its trials without a result are missing.
    stand_in(&bin, "squeue", "", "slurm_load_jobs error: Invalid job id specified", 1);
    let out = text(&memctl_with(&bin, dir.path(), &["status", "shared"]).stdout);
    assert!(out.contains("2 trials: 2 missing"), "{out}");

    // A submission sbatch refuses leaves no manifest that would read as one.
    stand_in(&bin, "sbatch", "", "sbatch: error: Batch job submission failed: Invalid account", 1);
    let refused = memctl_with(&bin, dir.path(), &[&sweep[..], &["--force"]].concat());
    assert!(text(&refused.stderr).contains("Invalid account"), "{}", text(&refused.stderr));
    assert_eq!(manifests(), 1);
}

/// `memctl rm` of a run that came from a shard: `sync` does not add it back, and submitting the
/// sweep again submits its trial (its shard no longer settles it).
#[test]
fn a_synced_run_deleted_from_the_store_is_not_synced_back_and_its_trial_is_submitted_again() {
    let (dir, bin) = submitted("slurm_load_jobs error: Invalid job id specified");
    let sweep = SWEEP;
    // The array tasks, run by hand.
    let sweep_dir = std::fs::read_dir(dir.path().join("shared")).unwrap().next().unwrap().unwrap().path();
    let manifest = std::fs::read_dir(sweep_dir.join("manifests")).unwrap().next().unwrap().unwrap().path();
    for index in ["0", "1"] {
        let worker =
            memctl_with(&bin, dir.path(), &["worker", "--manifest", manifest.to_str().unwrap(), "--index", index]);
        assert_eq!(worker.status.code(), Some(0), "{}", text(&worker.stderr));
    }
    let sync = text(&memctl_with(&bin, dir.path(), &["sync", "shared"]).stderr);
    assert!(sync.contains("2 imported"), "{sync}");

    let runs = text(&memctl_with(&bin, dir.path(), &["runs", "--format", "json"]).stdout);
    let runs: Vec<serde_json::Value> = serde_json::from_str(&runs).unwrap();
    let id = runs[0]["id"].to_string();
    let rm = memctl_with(&bin, dir.path(), &["rm", &id, "--yes"]);
    assert_eq!(rm.status.code(), Some(0), "{}", text(&rm.stderr));

    let sync = text(&memctl_with(&bin, dir.path(), &["sync", "shared"]).stderr);
    assert!(
        sync.contains("0 imported, 1 already in the store, 1 deleted here (`memctl rm`), not added again"),
        "{sync}"
    );
    let left = text(&memctl_with(&bin, dir.path(), &["runs", "--format", "json"]).stdout);
    assert_eq!(serde_json::from_str::<Vec<serde_json::Value>>(&left).unwrap().len(), 1, "{left}");

    let again = memctl_with(&bin, dir.path(), &sweep);
    let err = text(&again.stderr);
    assert_eq!(again.status.code(), Some(0), "{err}");
    assert!(err.contains("1 trial to submit; 1 done in the store, 0 finished on the cluster"), "{err}");
    // Its new run comes in.
    let manifests: Vec<_> =
        std::fs::read_dir(sweep_dir.join("manifests")).unwrap().map(|e| e.unwrap().path()).collect();
    let second = manifests.into_iter().find(|m| *m != manifest).unwrap();
    let worker = memctl_with(&bin, dir.path(), &["worker", "--manifest", second.to_str().unwrap(), "--index", "0"]);
    assert_eq!(worker.status.code(), Some(0), "{}", text(&worker.stderr));
    let sync = text(&memctl_with(&bin, dir.path(), &["sync", "shared"]).stderr);
    assert!(sync.contains("1 imported, 1 already in the store"), "{sync}");
}

/// An array task that Slurm starts in another folder (`--sbatch-arg=--chdir=…`) works in the
/// submission's: the binary (`--memctl`, given relative), the manifest and the logs are named by
/// absolute paths, and a data file given on the command line relative to the submission's
/// folder is found.
#[test]
fn a_worker_started_in_another_folder_reads_the_data_the_submission_named() {
    let dir = tempfile::tempdir().unwrap();
    crate::support::jsonl_task_at(dir.path());
    for folder in ["bin", "elsewhere"] {
        std::fs::create_dir(dir.path().join(folder)).unwrap();
    }
    let bin = dir.path().join("bin");
    // A stand-in sbatch that keeps its arguments.
    let args_file = dir.path().join("sbatch-args");
    let sbatch = format!("#!/bin/sh\nprintf '%s\\n' \"$@\" > '{}'\nprintf 888\n", args_file.display());
    std::fs::write(bin.join("sbatch"), sbatch).unwrap();
    std::fs::set_permissions(bin.join("sbatch"), std::fs::Permissions::from_mode(0o755)).unwrap();
    stand_in(&bin, "squeue", "", "slurm_load_jobs error: Invalid job id specified", 1);
    let submit = memctl_with(
        &bin,
        dir.path(),
        &[
            "sweep",
            "specs/j.mem",
            "path=\"data/d.jsonl\"",
            "--executor",
            "slurm",
            "--shared-dir",
            "shared",
            "--memctl",
            "tools/memctl",
        ],
    );
    assert_eq!(submit.status.code(), Some(0), "{}", text(&submit.stderr));

    let args = std::fs::read_to_string(&args_file).unwrap();
    let wrap = args.lines().last().unwrap();
    let binary = dir.path().join("tools/memctl");
    assert!(wrap.starts_with(&format!("exec '{}' worker", binary.display())), "{wrap}");
    let manifest = wrap.split("--manifest ").nth(1).unwrap().split(" --index").next().unwrap().trim_matches('\'');
    assert!(Path::new(manifest).is_absolute(), "{wrap}");
    let output = args.lines().find_map(|a| a.strip_prefix("--output=")).unwrap();
    assert!(Path::new(output).is_absolute(), "{args}");

    let elsewhere = dir.path().join("elsewhere");
    let worker = memctl_with(&bin, &elsewhere, &["worker", "--manifest", manifest, "--index", "0"]);
    assert_eq!(worker.status.code(), Some(0), "{}", text(&worker.stderr));
    let sync = text(&memctl_with(&bin, dir.path(), &["sync", "shared"]).stderr);
    assert!(sync.contains("1 imported"), "{sync}");
}
