//! The Slurm executor when Slurm itself fails, with stand-in `sbatch` and `squeue` scripts on
//! `PATH` (no cluster needed): a queue that cannot be read is never taken for an empty one,
//! and a submission `sbatch` refused leaves nothing behind.

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

#[test]
fn a_queue_that_cannot_be_read_submits_nothing_again_and_no_trial_is_called_missing() {
    let dir = tempfile::tempdir().unwrap();
    let spec = format!(
        "{TINY_TASK}{}experiment e {{\n  task tiny\n  model lstm\n  train {{ steps = 2 }}\n  sweep {{ seed in 1..2 }}\n}}\n",
        token_lstm("lstm", 4)
    );
    std::fs::write(dir.path().join("s.mem"), spec).unwrap();
    let bin = dir.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    stand_in(&bin, "sbatch", "888", "", 0);
    stand_in(&bin, "squeue", "", "slurm_load_jobs error: Unable to contact slurm controller", 1);
    let sweep = ["sweep", "s.mem", "--executor", "slurm", "--shared-dir", "shared"];
    let first = memctl_with(&bin, dir.path(), &sweep);
    assert_eq!(first.status.code(), Some(0), "{}", text(&first.stderr));

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
