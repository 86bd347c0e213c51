//! A store the user may read but not write (a colleague's, a read-only mount): `runs` and
//! `show` read it, and commands that write say why they cannot.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output};

use crate::support::{memctl_at, spec_folder, text, tiny_lstm_sweep};

/// Sets `mode` on `path` and on everything below it.
fn chmod_all(path: &Path, dirs: u32, files: u32) {
    let meta = std::fs::metadata(path).unwrap();
    if meta.is_dir() {
        for entry in std::fs::read_dir(path).unwrap() {
            chmod_all(&entry.unwrap().path(), dirs, files);
        }
    }
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(if meta.is_dir() { dirs } else { files })).unwrap();
}

/// `memctl --store STORE ARGS` as a user who may not write STORE: this user when it is not
/// root (the folder is made read-only), or, as root (which writes anywhere), the user
/// `nobody` through util-linux's `setpriv`, running a copy of the binary it may execute.
fn as_reader(dir: &Path, store: &Path, args: &[&str]) -> Output {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let mut command = if root {
        let binary = dir.join("memctl-for-nobody");
        if !binary.exists() {
            std::fs::copy(env!("CARGO_BIN_EXE_memctl"), &binary).unwrap();
            std::fs::set_permissions(&binary, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        let mut c = Command::new("setpriv");
        c.args(["--reuid=65534", "--regid=65534", "--clear-groups"]).arg(binary);
        c.arg("--store").arg(store).env("NO_COLOR", "1").env("HOME", "/nonexistent");
        c
    } else {
        memctl_at(store)
    };
    command.args(args).output().expect("setpriv (util-linux) runs the reader as root's tests need")
}

#[test]
fn a_store_the_user_cannot_write_is_read_and_writes_to_it_are_refused() {
    let spec = tiny_lstm_sweep("two", "batch = 16, steps = 20, eval_every = 10", "seed in 1..2");
    let (dir, spec, store) = spec_folder(&spec);
    let out = memctl_at(&store).arg("sweep").arg(&spec).args(["--jobs", "1", "--threads", "1"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    // Readable by everyone, writable by no one (the temporary folder is the owner's alone).
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    chmod_all(&store, 0o555, 0o444);

    let runs = as_reader(dir.path(), &store, &["runs", "--format", "json"]);
    let listed: serde_json::Value = serde_json::from_slice(&runs.stdout)
        .unwrap_or_else(|e| panic!("{e}: {} {}", text(&runs.stdout), text(&runs.stderr)));
    assert_eq!(listed.as_array().map(Vec::len), Some(2), "{}", text(&runs.stderr));
    let show = as_reader(dir.path(), &store, &["show", "1"]);
    assert_eq!(show.status.code(), Some(0), "{}", text(&show.stderr));
    assert!(text(&show.stdout).contains("status: done"), "{}", text(&show.stdout));

    for args in [&["tag", "1", "kept"][..], &["rm", "1", "--yes"][..]] {
        let out = as_reader(dir.path(), &store, args);
        let stderr = text(&out.stderr);
        assert_ne!(out.status.code(), Some(0), "{args:?} must fail: {stderr}");
        assert!(stderr.contains("cannot be written here") && stderr.contains("help:"), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
    let sweep = as_reader(dir.path(), &store, &["sweep", spec.to_str().unwrap(), "--force"]);
    assert!(text(&sweep.stderr).contains("cannot be written here"), "{}", text(&sweep.stderr));

    chmod_all(&store, 0o755, 0o644);
    let runs = memctl_at(&store).args(["runs", "--format", "json"]).output().unwrap();
    let listed: serde_json::Value = serde_json::from_slice(&runs.stdout).unwrap();
    assert_eq!(listed.as_array().map(Vec::len), Some(2), "nothing was written");
}
