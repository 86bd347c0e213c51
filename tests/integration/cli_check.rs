//! `memctl check` as a user runs it: the built binary on spec files.

use std::path::Path;
use std::process::{Command, Output};

fn memctl_check(files: &[&Path], cwd: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_memctl"))
        .args(["--color", "never", "check"])
        .args(files)
        .current_dir(cwd)
        .env_remove("MEMCTL_STORE")
        .output()
        .expect("run memctl")
}

/// `memctl check <name>` with `contents` written to `name` in a fresh folder: the exit code,
/// stdout and stderr.
fn check_file(name: &str, contents: impl AsRef<[u8]>) -> (Option<i32>, String, String) {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(dir.path().join(name), contents).expect("write");
    let out = memctl_check(&[Path::new(name)], dir.path());
    (out.status.code(), String::from_utf8_lossy(&out.stdout).into(), String::from_utf8_lossy(&out.stderr).into())
}

const VALID: &str = "task t = assocRetrieval(pairs = 2)
model m(d = 8) {
  state M = zeros(d, d)
  step x {
    e = embed(x, 16)
    M = itemWrite(M, linear(e, d))
    out linear(e, output_size)
  }
}
experiment ex {
  task t
  model m
  sweep { d in [4, 8]  seed in 1..3 }
}
";

#[test]
fn a_trial_listed_twice_counts_once_as_a_sweep_runs_it() {
    let (code, stdout, stderr) = check_file("twice.mem", VALID.replace("seed in 1..3", "seed in [1, 1, 2, 2, 3]"));
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        stdout.contains("experiment ex: 6 trials (4 more repeat others' configuration and seed exactly), task"),
        "{stdout}"
    );
    assert!(stdout.contains("packs: 6 trials in 2 groups"), "{stdout}");
}

/// A sweep of many model sizes lists the first sixteen, then counts the others in one line
/// with their range of sizes.
#[test]
fn a_sweep_of_many_sizes_lists_sixteen_and_counts_the_rest() {
    let (code, stdout, stderr) = check_file("sizes.mem", VALID.replace("d in [4, 8]", "d in 1..20"));
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(stdout.lines().filter(|l| l.starts_with("    model m (d=")).count(), 16, "{stdout}");
    assert!(stdout.contains("model m (d=16): ") && !stdout.contains("(d=17)"), "{stdout}");
    let lines: Vec<&str> = stdout.lines().collect();
    let more = lines.iter().position(|l| l.contains("… and 4 more model configurations, of ")).expect(&stdout);
    assert!(lines[more].ends_with(" parameters; the largest:"), "{stdout}");
    assert!(lines[more + 1].starts_with("      memory to train: "), "{stdout}");
}

/// Two configurations of one size (a constant swept) are two model lines, not one.
#[test]
fn each_model_configuration_is_listed_even_where_sizes_are_equal() {
    let spec = VALID
        .replace("model m(d = 8)", "model m(d = 8, scale = 1.0)")
        .replace("e = embed(x, 16)", "e = embed(x, 16) * scale")
        .replace("d in [4, 8]", "scale in [1.0, 2.0]");
    let (code, stdout, stderr) = check_file("scales.mem", spec);
    assert_eq!(code, Some(0), "{stderr}");
    for scale in ["1.0", "2.0"] {
        assert!(stdout.contains(&format!("model m (scale={scale}): ")), "{scale}:\n{stdout}");
    }
}

#[test]
fn malformed_spec_exits_2_with_a_located_error() {
    let (code, _, stderr) = check_file("bad.mem", VALID.replace("linear(e, d)", "linaer(e, d)"));
    assert_eq!(code, Some(2), "stderr:\n{stderr}");
    assert!(stderr.contains("error[C060]: unknown primitive `linaer`"), "{stderr}");
    assert!(stderr.contains("bad.mem:6:22"), "{stderr}");
    assert!(stderr.contains("^^^^^^ not a primitive"), "{stderr}");
    assert!(stderr.contains("help: did you mean `linear`?"), "{stderr}");
    assert!(stderr.trim_end().ends_with("bad.mem: 1 error"), "{stderr}");
    // Plain text when asked: no ANSI escapes.
    assert!(!stderr.contains('\u{1b}'), "{stderr}");
}

#[test]
fn syntax_error_exits_2_with_a_located_error() {
    let (code, _, stderr) = check_file("syntax.mem", VALID.replace("model m(d = 8)", "model m(d = )"));
    assert_eq!(code, Some(2), "stderr:\n{stderr}");
    assert!(stderr.contains("error[S001]: syntax error: expected an expression"), "{stderr}");
    assert!(stderr.contains("syntax.mem:2:13"), "{stderr}");
}

#[test]
fn binary_file_and_missing_file_exit_2() {
    let (code, _, stderr) = check_file("junk.mem", [0x7f, 0x45, 0x4c, 0x46, 0xff, 0x00, 0x01]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("spec files must be UTF-8 text"), "{stderr}");
    assert!(stderr.contains("junk.mem:1:5"), "{stderr}");

    let dir = tempfile::tempdir().expect("temp dir");
    let out = memctl_check(&[Path::new("nowhere.mem")], dir.path());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("cannot read `nowhere.mem`: no such file"), "{stderr}");
    assert!(stderr.contains("it is relative to the folder memctl runs in"), "the command line's file: {stderr}");
    // A `use`d file's path is relative to the file that uses it.
    let (_, _, stderr) = check_file("uses.mem", "use \"models/none.mem\"\n");
    assert!(stderr.contains("`use` paths are relative to the file that uses them"), "{stderr}");
}

#[test]
fn valid_spec_exits_0_and_lists_experiments() {
    let (code, stdout, stderr) = check_file("good.mem", VALID);
    assert_eq!(code, Some(0), "stderr:\n{stderr}");
    assert!(stdout.starts_with("good.mem: ok\n"), "{stdout}");
    assert!(stdout.contains("experiment ex: 6 trials, task assocRetrieval"), "{stdout}");
    assert!(stdout.contains("model m (d=4):"), "{stdout}");
    assert!(stdout.contains("model m (d=8):"), "{stdout}");
    assert!(stderr.is_empty(), "{stderr}");
}

#[test]
fn quickstart_checks_and_one_bad_file_fails_the_batch() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = tempfile::tempdir().expect("temp dir");
    let bad = dir.path().join("bad.mem");
    std::fs::write(&bad, "model m(d = 8) {\n").expect("write");
    let quickstart = root.join("specs/quickstart.mem");
    let out = memctl_check(&[&quickstart, &bad], dir.path());
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stdout.contains("experiment quickstart_namtm: 1 trial"), "{stdout}");
    assert!(stdout.contains("experiment quickstart_lstm: 1 trial"), "{stdout}");
    assert!(stderr.contains("bad.mem:2:1"), "{stderr}");
    assert!(stderr.contains("this `{` is not closed"), "{stderr}");
}

/// A spec in `specs/` reading bAbI from `../data/en-valid-10k`, i.e. `data/en-valid-10k` next
/// to `specs/`.
const BABI: &str = "task qa = babi(path = \"../data/en-valid-10k\")
model m(d = 8) {
  step x {
    out linear(embed(x, d), output_size)
  }
}
experiment ex { task qa  model m }
";

#[test]
fn missing_babi_data_is_located_at_the_path_and_says_where_to_get_it() {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::create_dir(dir.path().join("specs")).expect("mkdir");
    std::fs::write(dir.path().join("specs/qa.mem"), BABI).expect("write");
    let out = memctl_check(&[Path::new("specs/qa.mem")], dir.path());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "stderr:\n{stderr}");
    let expected = "error[P099]: babi: `data/en-valid-10k` does not exist; expected a bAbI folder in the en-valid-10k \
                    layout (qa1_train.txt, qa1_valid.txt, qa1_test.txt, … qa20_test.txt) there
 --> specs/qa.mem:1:23
  |
1 | task qa = babi(path = \"../data/en-valid-10k\")
  |                       ^^^^^^^^^^^^^^^^^^^^^^ invalid option
  |
  = help: download https://dl.fbaipublicfiles.com/babi/tasks_1-20_v1-2.tar.gz, unpack it (`tar xzf \
                    tasks_1-20_v1-2.tar.gz`) and move its folder `tasks_1-20_v1-2/en-valid-10k` to \
                    `data/en-valid-10k`, or set `path` to where that folder is

specs/qa.mem: 1 error
";
    assert_eq!(stderr, expected);
}

#[test]
fn data_paths_are_relative_to_the_spec_file_and_bad_lines_are_located_in_the_data() {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::create_dir(dir.path().join("specs")).expect("mkdir");
    let spec = dir.path().join("specs/qa.mem");
    std::fs::write(&spec, BABI).expect("write");
    let data = dir.path().join("data/en-valid-10k");
    crate::support::write_babi(&data);
    // From elsewhere: the path is relative to the spec, not to the working directory.
    let elsewhere = tempfile::tempdir().expect("temp dir");
    let out = memctl_check(&[&spec], elsewhere.path());
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("task babi"));

    std::fs::write(data.join("qa3_train.txt"), "1 Mary went home.\n2 Where is Mary?\thome\t1\nJohn went out.\n")
        .expect("write");
    let out = memctl_check(&[Path::new("specs/qa.mem")], dir.path());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.starts_with(
            "error[P099]: babi: data/en-valid-10k/qa3_train.txt:3: expected a line number, found \"John\"\n --> specs/qa.mem:1:23"
        ),
        "{stderr}"
    );
}
