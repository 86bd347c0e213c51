//! The `memctl` binary end to end.

use std::path::Path;
use std::process::{Command, Output};

use crate::support::{memctl_at, spec_folder, text, tiny_spec};

fn memctl(store: &Path, args: &[&str]) -> Output {
    memctl_at(store).args(args).output().expect("memctl runs")
}

#[test]
fn sweep_records_runs_and_skips_them_the_second_time() {
    let (_dir, spec, store) = spec_folder(&tiny_spec());
    let out = memctl(&store, &["sweep", spec.to_str().unwrap(), "--threads", "1"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("3 trials run, 0 already done, 0 failed"), "{}", text(&out.stderr));
    // It ends with its runs as `memctl runs` lists them.
    let table = text(&out.stdout);
    assert!(table.contains("tiny_stm") && table.contains("tiny_lstm") && table.contains("wall"), "{table}");
    assert!(!table.contains("loss"), "the compact columns (the stop metric or accuracy), not every metric: {table}");
    assert_eq!(table.lines().filter(|l| l.contains("done")).count(), 3, "{table}");

    // Quiet: only the closing count, no line per evaluation or trial, no table.
    let quiet = memctl(&store, &["sweep", spec.to_str().unwrap(), "--threads", "1", "--force", "-q"]);
    assert_eq!(quiet.status.code(), Some(0), "{}", text(&quiet.stderr));
    assert_eq!(text(&quiet.stderr).trim(), "3 trials run, 0 already done, 0 failed");
    assert_eq!(text(&quiet.stdout), "");

    let again = memctl(&store, &["sweep", spec.to_str().unwrap(), "--threads", "1"]);
    assert!(text(&again.stderr).contains("0 trials run, 3 already done"), "{}", text(&again.stderr));

    let runs = memctl(&store, &["runs", "--format", "records"]);
    let records: serde_json::Value = serde_json::from_slice(&runs.stdout).unwrap();
    let records = records.as_array().unwrap();
    assert_eq!(records.len(), 6, "three trials, each run twice");
    for r in records {
        assert_eq!(r["status"], "done");
        assert!(r["final_metrics"]["accuracy"].as_f64().is_some());
        assert_eq!(r["spec_text"].as_str().unwrap(), tiny_spec());
        // The wall time is the span the run was recorded over, as shown while it trained.
        let span = r["ended_at"].as_f64().unwrap() - r["started_at"].as_f64().unwrap();
        assert!((r["wall_seconds"].as_f64().unwrap() - span).abs() < 1e-6, "{r}");
    }
    let table = text(&memctl(&store, &["runs"]).stdout);
    assert!(table.contains("tiny_stm") && table.contains("tiny_lstm") && table.contains("accuracy"), "{table}");
}

#[test]
fn a_store_held_too_long_gets_a_message_naming_the_holder() {
    let dir = tempfile::tempdir().unwrap();
    let store_path = dir.path().join("store");
    memctl::store::Store::open(&store_path).unwrap();
    // Another process in a session that does not end: it holds sled's lock, and its holder
    // line names it (as memctl writes it at the start of every session).
    // sled's flusher thread lets go of the store just opened a moment after it is dropped.
    let held = (0..200)
        .find_map(|_| {
            let opened = sled::Config::new().path(store_path.join("db")).open().ok();
            if opened.is_none() {
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
            opened
        })
        .expect("the store's lock is free within 10 s of closing it");
    std::fs::write(store_path.join("holder"), "pid 4242: memctl sweep big.mem").unwrap();
    let started = std::time::Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_memctl"))
        .env("NO_COLOR", "1")
        .env("MEMCTL_STORE_WAIT", "0.5")
        .arg("--store")
        .arg(&store_path)
        .arg("runs")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(err.contains("is in use by another memctl process (pid 4242: memctl sweep big.mem)"), "{err}");
    assert!(err.contains("MEMCTL_STORE_WAIT") && err.contains("--store"), "{err}");
    assert!(started.elapsed() >= std::time::Duration::from_millis(500), "it waited its turn first");
    // Once the holder lets go, the same command succeeds.
    drop(held);
    let out = memctl(&store_path, &["runs"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
}

#[test]
fn check_reports_a_located_error_and_exit_code_2() {
    let (_dir, spec, store) = spec_folder(&tiny_spec().replace("relRead(Mr, c, b)", "relRaed(Mr, c, b)"));
    let out = memctl(&store, &["check", spec.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(err.contains("unknown primitive `relRaed`"), "{err}");
    assert!(err.contains("tiny.mem:12:10"), "{err}");
    assert!(err.contains("did you mean `relRead`?"), "{err}");
}

/// A name given twice on the command line is refused, with a form that sweeps both values; a
/// range is not offered inside a list, which holds values only.
#[test]
fn an_override_given_twice_is_refused_with_a_form_that_works() {
    let (_dir, spec, store) = spec_folder(&tiny_spec());
    let spec = spec.to_str().unwrap();
    let err = text(&memctl(&store, &["sweep", spec, "seed=1", "seed=3", "--dry-run"]).stderr);
    assert!(err.contains("give one value, or a list to sweep: `seed=1,3`"), "{err}");
    assert_eq!(memctl(&store, &["sweep", spec, "seed=1,3", "--dry-run"]).status.code(), Some(0));
    let twice = memctl(&store, &["sweep", spec, "seed=1..2", "seed=3", "--dry-run"]);
    let err = text(&twice.stderr);
    assert_eq!(twice.status.code(), Some(2), "{err}");
    assert!(err.contains("give one value, or one list (`a,b,c`) or one range (`a..b`) to sweep"), "{err}");
}

#[test]
fn a_sweep_of_a_file_without_experiments_is_an_error() {
    let (_dir, spec, store) = spec_folder("task t = assocRetrieval(pairs = 2)\n");
    let out = memctl(&store, &["sweep", spec.to_str().unwrap()]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("defines no experiment, so there is nothing to run"), "{err}");
}

#[test]
fn cuda_without_the_feature_is_a_clear_error() {
    if cfg!(feature = "cuda") {
        return;
    }
    let (_dir, spec, store) = spec_folder(&tiny_spec());
    let out = memctl(&store, &["run", spec.to_str().unwrap(), "--device", "cuda"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("--features cuda"), "{}", text(&out.stderr));
    // Named by the spec's `device` setting: refused before any trial is claimed and recorded.
    let out = memctl(&store, &["sweep", spec.to_str().unwrap(), "device=\"cuda\""]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("--features cuda"), "{}", text(&out.stderr));
    assert!(!store.exists(), "nothing recorded");
    let out = memctl(&store, &["run", spec.to_str().unwrap(), "device=\"cuda\""]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(!store.exists(), "nothing recorded");
}

#[test]
fn several_gpus_are_for_a_sweep_and_a_bad_list_is_a_clear_error() {
    let (_dir, spec, store) = spec_folder(&tiny_spec());
    let spec = spec.to_str().unwrap();
    let cases: &[(&[&str], &str)] = &[
        (&["run", spec, "--device", "cuda:0,1"], "only a sweep spreads"),
        (&["sweep", spec, "--device", "cuda:0,0"], "names cuda:0 twice"),
        (&["sweep", spec, "--device", "cuda:0,x"], "unknown device `cuda:0,x`"),
        (&["sweep", spec, "--device", "cuda:0,2", "--executor", "slurm"], "on Slurm each array task"),
    ];
    for (args, says) in cases {
        let out = memctl(&store, args);
        let err = text(&out.stderr);
        assert_ne!(out.status.code(), Some(0), "{args:?}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
    if !cfg!(feature = "cuda") {
        for device in ["cuda:all", "cuda:0,1"] {
            let out = memctl(&store, &["sweep", spec, "--device", device]);
            assert!(text(&out.stderr).contains("--features cuda"), "{device}: {}", text(&out.stderr));
        }
    }
    let runs = memctl(&store, &["runs", "--all"]);
    assert!(!text(&runs.stdout).contains("running"), "{}", text(&runs.stdout));
}

#[test]
fn a_trial_too_big_for_memory_is_refused_at_its_batch_size_before_anything_runs() {
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("big.mem");
    // A batch of 2^40 sequences cannot fit on any machine this test runs on.
    std::fs::write(&spec, tiny_spec().replacen("batch = 16", "batch = 1099511627776", 1)).unwrap();
    let store = dir.path().join("store");
    for verb in ["sweep", "run"] {
        let out = memctl(&store, &[verb, spec.to_str().unwrap(), "--threads", "1"]);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{verb}: {err}");
        assert!(err.contains("needs about") && err.contains("free"), "{verb}: {err}");
        assert!(err.contains("big.mem:33:") && err.contains("the batch size"), "{verb}: {err}");
        assert!(err.contains("lower `batch`"), "{verb}: {err}");
    }
    // Set on the command line, the batch size is pointed at there, not in the spec.
    let spec = dir.path().join("small.mem");
    std::fs::write(&spec, tiny_spec()).unwrap();
    let out = memctl(&store, &["sweep", spec.to_str().unwrap(), "batch=1099511627776", "--threads", "1"]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("<command line>:1:7") && err.contains("set on the command line"), "{err}");
    assert!(!err.contains("small.mem:33:"), "{err}");
    let runs = memctl(&store, &["runs", "--all"]);
    assert!(!text(&runs.stdout).contains("running"), "{}", text(&runs.stdout));
}

/// Data sets larger than any machine's memory are refused at the task, before they are
/// generated.
#[test]
fn a_trial_whose_data_sets_cannot_fit_is_refused_at_its_task() {
    let (_dir, spec, store) = spec_folder(
        r#"
model m() {
  state h = zeros(4)
  step x { h = tanh(linear(x, 4) + h)  out linear(h, output_size) }
}
experiment huge {
  task copy(width = 512, max_len = 2000, validation = 10000000, test = 10000000)
  model m
  train { optimizer = adam(lr = 1e-3), batch = 8, steps = 2 }
}
"#,
    );
    let out = memctl(&store, &["sweep", spec.to_str().unwrap(), "--threads", "1"]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("error[C095]") && err.contains("data sets"), "{err}");
    assert!(err.contains(":7:8") && err.contains("the task"), "{err}");
    assert!(err.contains("lower the task's `train`, `validation` or `test`"), "{err}");
}

/// Under an address space limit (`ulimit -v`), the memory free is what the limit leaves: data
/// sets that the host could hold but the limit cannot are refused, not generated until an
/// allocation fails and aborts the process.
#[test]
fn an_address_space_limit_counts_as_the_memory_free() {
    let spec = tiny_spec().replace(
        "assocRetrieval(pairs = 2, train = 64, validation = 32, test = 32)",
        "assocRetrieval(pairs = 26, train = 10000000, validation = 1000000, test = 1000000)",
    );
    let (_dir, spec, store) = spec_folder(&spec);
    let mut command = memctl_at(&store);
    command.args(["sweep", spec.to_str().unwrap(), "--dry-run", "--threads", "1"]);
    crate::support::limit_address_space(&mut command, 1536 << 20);
    let out = command.output().unwrap();
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("error[C095]") && err.contains("data sets"), "{err}");
    // `505 MB free`: less than the limit, not the host's memory.
    let free = err.split("this machine has ").nth(1).and_then(|rest| rest.split(" free").next()).unwrap_or_default();
    let bytes = match free.split_once(' ') {
        Some((n, "MB")) => n.parse::<f64>().ok().map(|n| n * 1e6),
        Some((n, "GB")) => n.parse::<f64>().ok().map(|n| n * 1e9),
        _ => None,
    };
    assert!(bytes.is_some_and(|b| b < (1536u64 << 20) as f64), "{free}: {err}");
}

#[test]
fn check_prints_the_memory_each_model_needs_to_train() {
    let (_dir, spec, store) = spec_folder(&tiny_spec());
    let out = memctl(&store, &["check", spec.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(stdout.contains("memory to train: ") && stdout.contains("activations"), "{stdout}");
    // For a sweep about to run on a GPU, without opening one.
    for device in ["cuda", "cuda:all", "cuda:0,2"] {
        let out = memctl(&store, &["check", spec.to_str().unwrap(), "--device", device]);
        let stdout = text(&out.stdout);
        assert!(stdout.contains("memory to train on a GPU: ") && !stdout.contains("memory to train: "), "{stdout}");
    }
    let out = memctl(&store, &["check", spec.to_str().unwrap(), "--device", "gpu"]);
    assert!(
        out.status.code() != Some(0) && text(&out.stderr).contains("unknown device `gpu`"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn tasks_lists_every_task_with_its_options_and_metrics_and_an_unknown_one_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let out = memctl(&store, &["tasks"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let listing = text(&out.stdout);
    for kind in memctl::tasks::TASKS {
        assert!(
            listing.contains(&format!("\n{}(", kind.name())) || listing.starts_with(&format!("{}(", kind.name())),
            "{} missing:\n{listing}",
            kind.name()
        );
    }
    // A task's own metrics and its extra test sets are named.
    let tsp = text(&memctl(&store, &["tasks", "tsp"]).stdout);
    assert!(tsp.starts_with("tsp(points = 10"), "{tsp}");
    assert!(tsp.contains("tour_length") && tsp.contains("n10_<metric>"), "{tsp}");

    // A reader of files says what it reads, not that its defaults fail.
    let babi = text(&memctl(&store, &["tasks", "babi"]).stdout);
    assert!(babi.starts_with("babi(path, task = 0, max_facts = 0)"), "{babi}");
    assert!(babi.contains("reads a folder in bAbI's en-valid-10k layout") && babi.contains("error (%)"), "{babi}");
    assert!(!babi.contains("do not configure"), "{babi}");

    // Each option with its default and what it accepts, and a line to copy into a spec.
    let palindrome = text(&memctl(&store, &["tasks", "palindrome"]).stdout);
    let od = palindrome.lines().find(|l| l.trim_start().starts_with("od ")).unwrap_or_else(|| panic!("{palindrome}"));
    assert!(od.contains("\"paper\"") && od.contains("one of paper, code"), "{od}");
    let digits = palindrome.lines().find(|l| l.trim_start().starts_with("digits ")).unwrap();
    assert!(digits.contains("1 to 1000, at least `min_digits`"), "{digits}");
    assert!(palindrome.contains("example: task data = palindrome(digits = 10)"), "{palindrome}");
    assert!(babi.contains("example: task data = babi(path = \"…\", task = 0)"), "{babi}");

    // One generated sequence: what the model reads, and answers at the scored steps.
    let sample = memctl(&store, &["tasks", "palindrome", "--sample", "--seed", "2"]);
    assert_eq!(sample.status.code(), Some(0), "{}", text(&sample.stderr));
    let sample = text(&sample.stdout);
    let rows: Vec<&str> = sample.lines().skip(2).collect();
    assert!(rows.len() >= 3 && rows.iter().any(|r| r.split_whitespace().count() == 3), "a scored step: {sample}");
    assert_eq!(sample, text(&memctl(&store, &["tasks", "palindrome", "--sample", "--seed", "2"]).stdout), "seeded");
    let unsampled = memctl(&store, &["tasks", "babi", "--sample"]);
    assert!(text(&unsampled.stderr).contains("reads its data from files"), "{}", text(&unsampled.stderr));

    let unknown = memctl(&store, &["tasks", "tps"]);
    assert_eq!(unknown.status.code(), Some(2));
    let err = text(&unknown.stderr);
    assert!(err.contains("no task `tps`; did you mean `tsp`?"), "{err}");
    let far = text(&memctl(&store, &["tasks", "sorting"]).stderr);
    assert!(far.contains("no task `sorting`; the tasks are") && far.contains("prioritySort"), "{far}");
}

/// specs/paper/sam_babi.mem (SAM Table 4) trains when given bAbI data on the command line: its
/// own path (the repository's `data/`, not shipped) is replaced before the task reads it.
#[test]
fn the_babi_paper_spec_trains_when_pointed_at_data() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("en-valid-10k");
    crate::support::write_babi(&data);
    let spec = Path::new(env!("CARGO_MANIFEST_DIR")).join("specs/paper/sam_babi.mem");
    let path = format!("path=\"{}\"", data.display());
    let store = dir.path().join("store");
    let args = [
        "sweep",
        spec.to_str().unwrap(),
        &path,
        "steps=2",
        "eval_every=1",
        "d=8",
        "nr=8",
        "hidden=8",
        "--threads",
        "1",
        "--quiet",
    ];
    let out = memctl(&store, &args);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let runs = memctl(&store, &["runs", "--format", "records"]);
    let records: serde_json::Value = serde_json::from_slice(&runs.stdout).unwrap();
    let records = records.as_array().unwrap();
    assert_eq!(records.len(), 2);
    for r in records {
        assert_eq!(r["status"], "done", "{r}");
        for m in ["error", "qa1_error", "qa20_error"] {
            assert!(r["final_metrics"][m].as_f64().is_some(), "{m}: {}", r["final_metrics"]);
        }
        // The option as written on the command line is the trial's.
        assert_eq!(r["config"]["task_options"]["path"].as_str(), Some(data.to_str().unwrap()), "{r}");
    }
}

/// A trial's identity leaves the experiment's name out, so a renamed experiment's trials are
/// done already; the sweep names the experiment they are recorded under, which `runs` and
/// `results` select them by.
#[test]
fn a_renamed_experiments_trials_are_done_under_the_name_they_were_recorded_as() {
    let (dir, spec, store) = spec_folder(&crate::support::tiny_lstm_sweep("first", "steps = 2", "seed in 1..2"));
    let out = memctl(&store, &["sweep", spec.to_str().unwrap(), "--threads", "1", "-q"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let renamed = dir.path().join("renamed.mem");
    std::fs::write(&renamed, std::fs::read_to_string(&spec).unwrap().replace("experiment first", "experiment second"))
        .unwrap();
    let again = memctl(&store, &["sweep", renamed.to_str().unwrap(), "--threads", "1"]);
    let err = text(&again.stderr);
    assert!(err.contains("already done (run 1, recorded as experiment `first`), skipped"), "{err}");
    assert!(err.contains("0 trials run, 2 already done"), "{err}");
    let same = text(&memctl(&store, &["sweep", spec.to_str().unwrap(), "--threads", "1"]).stderr);
    assert!(same.contains("already done (run 1), skipped"), "{same}");
}

/// A data path given on the command line is relative to where memctl runs; the trial keeps it
/// relative to the spec's folder, so the same file named from another folder is the same
/// trial, already done.
#[test]
fn a_command_line_data_path_names_the_same_trial_from_any_folder() {
    let dir = tempfile::tempdir().unwrap();
    crate::support::jsonl_task_at(dir.path());
    let store = dir.path().join("store");
    let sweep_in = |folder: &str, spec: &str, data: &str| {
        let out = memctl_at(&store)
            .current_dir(dir.path().join(folder))
            .args(["sweep", spec, &format!("path=\"{data}\""), "--threads", "1", "-q"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        text(&out.stderr)
    };
    assert_eq!(sweep_in(".", "specs/j.mem", "data/d.jsonl").trim(), "1 trial run, 0 already done, 0 failed");
    assert_eq!(sweep_in("data", "../specs/j.mem", "d.jsonl").trim(), "0 trials run, 1 already done, 0 failed");
    let runs = memctl(&store, &["runs", "--format", "records"]);
    let records: serde_json::Value = serde_json::from_slice(&runs.stdout).unwrap();
    assert_eq!(records.as_array().map(Vec::len), Some(1), "{records}");
    assert_eq!(records[0]["config"]["task_options"]["path"], "../data/d.jsonl", "{records}");
}

/// `doctor --check` on the CPU trains every model family with candle's autograd and with
/// memctl's tape, then evaluates each three times, and passes; on a build without CUDA,
/// asking for CUDA says how to get it.
#[test]
fn doctor_check_compares_every_model_family_and_passes_on_the_cpu() {
    let dir = tempfile::tempdir().unwrap();
    let out = memctl(&dir.path().join("store"), &["doctor", "--check", "--device", "cpu", "--steps", "3"]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    for family in ["check_stm", "check_lstm", "check_rmc", "check_lsam", "check_namtm", "check_pkm"] {
        let line = stdout.lines().find(|l| l.trim_start().starts_with(family)).unwrap_or_else(|| panic!("{stdout}"));
        assert!(line.contains("3 × eager (not on a CUDA device); 3 × eager"), "{line}");
    }
    assert!(stdout.contains("check: passed"), "{stdout}");
    if !cfg!(feature = "cuda") {
        let cuda = memctl(&dir.path().join("store"), &["doctor", "--check", "--device", "cuda"]);
        assert_ne!(cuda.status.code(), Some(0));
        assert!(text(&cuda.stderr).contains("--features cuda"), "{}", text(&cuda.stderr));
    }
}

/// `runs` on a store not made yet says so and succeeds (a `watch memctl runs` may start
/// before the sweep); on a file, every command says it is a file.
#[test]
fn a_store_not_made_yet_has_no_runs_and_a_file_is_no_store() {
    let dir = tempfile::tempdir().unwrap();
    let later = dir.path().join("later");
    let out = memctl(&later, &["runs"]);
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("no store at"));
    let file = dir.path().join("data.jsonl");
    std::fs::write(&file, "{}\n").unwrap();
    for args in [&["runs"][..], &["show", "1"], &["ui"]] {
        let out = memctl(&file, args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains("it is a file, not a folder"), "{args:?}: {err}");
    }
}

/// `status` of a folder that does not exist is an error, as `sync` of one is, not an empty
/// report.
#[test]
fn status_of_a_missing_folder_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no_such");
    let out = memctl(&dir.path().join("store"), &["status", missing.to_str().unwrap()]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("no_such: no such folder"), "{err}");
    let empty = memctl(&dir.path().join("store"), &["status", dir.path().to_str().unwrap()]);
    assert_eq!(empty.status.code(), Some(0));
    assert!(text(&empty.stdout).contains("no Slurm sweeps under"), "{}", text(&empty.stdout));
}
