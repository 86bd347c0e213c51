//! Searches: a pruned trial is recorded and never run again; a search killed at any moment
//! loses and repeats nothing.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::{TINY_TASK, kill_after_start, memctl_at, spec_folder, text, token_lstm};

/// A tiny LSTM experiment `name` with a `search` block.
fn tiny_search(name: &str, train: &str, search: &str) -> String {
    format!(
        "\n{TINY_TASK}{}experiment {name} {{\n  task tiny\n  model lstm\n  train {{ {train} }}\n  search {{ {search} }}\n}}\n",
        token_lstm("lstm", 16)
    )
}

fn sweep(store: &Path, spec: &Path, jobs: &str) -> Command {
    let mut c = memctl_at(store);
    c.arg("sweep").arg(spec).args(["--jobs", jobs, "--threads", "1"]);
    c
}

fn records(store: &Path) -> Vec<serde_json::Value> {
    let out = memctl_at(store).args(["runs", "--all", "--format", "records"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "the store opens: {}", text(&out.stderr));
    serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap().as_array().unwrap().clone()
}

/// A grid of two learning rates searched by one sweep, proposed in this order: 3e-2 learns (validation accuracy
/// 0.156 at step 20), 1e-7 cannot move in 20 steps (0.094). ASHA keeping half prunes the
/// second at its only rung (step 20) against the first. The folder, the spec and the store.
fn pruned_grid() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let (dir, spec, store) = spec_folder(&tiny_search(
        "lrs",
        "optimizer = adam(lr = 1e-3), batch = 16, steps = 60, eval_every = 20",
        "lr in [3e-2, 1e-7]  sampler = grid  prune = asha(metric = val_accuracy, min_steps = 20, rungs = 1, keep = 1/2)",
    ));
    let out = sweep(&store, &spec, "1").output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("2 trials run (1 pruned)"), "{}", text(&out.stderr));
    (dir, spec, store)
}

#[test]
fn a_pruned_trial_is_recorded_with_its_rung_and_cutoff_and_never_run_again() {
    let (_dir, spec, store) = pruned_grid();
    let recs = records(&store);
    assert_eq!(recs.len(), 2);
    let kept = recs.iter().find(|r| r["status"] == "done").expect("a done run");
    let pruned = recs.iter().find(|r| r["status"] == "pruned").expect("a pruned run");
    assert_eq!(pruned["config"]["train"]["lr"], 1e-7);
    assert_eq!(pruned["steps_run"], 20);
    let p = &pruned["pruned"];
    assert_eq!(
        (p["rung"].as_u64(), p["step"].as_u64(), p["metric"].as_str()),
        (Some(1), Some(20), Some("val_accuracy"))
    );
    // The cut-off is the kept configuration's validation accuracy at step 20.
    let kept_at_20 = kept["curves"]["val_accuracy"].as_array().unwrap()[0][1].as_f64().unwrap();
    assert_eq!(p["cutoff"].as_f64(), Some(kept_at_20));
    assert!(p["value"].as_f64().unwrap() < kept_at_20);
    // `runs --where` finds it.
    let listed =
        memctl_at(&store).args(["runs", "--where", "status == \"pruned\"", "--format", "records"]).output().unwrap();
    let listed: serde_json::Value = serde_json::from_slice(&listed.stdout).unwrap();
    assert_eq!(listed.as_array().unwrap().iter().map(|r| &r["id"]).collect::<Vec<_>>(), [&pruned["id"]]);
    // Sweeping again runs nothing: the pruned trial is settled, not resumed.
    let again = sweep(&store, &spec, "1").output().unwrap();
    assert!(text(&again.stderr).contains("0 trials run (0 pruned), 2 already settled"), "{}", text(&again.stderr));
    assert_eq!(records(&store).len(), 2);
}

#[test]
fn a_search_killed_at_random_moments_loses_and_repeats_nothing() {
    // 4 configurations × 2 seeds, proposed by TPE and pruned by ASHA: what each sweep proposes
    // depends on what finished before it, so only the study in the store keeps them the same.
    let (_dir, spec, store) = spec_folder(&tiny_search(
        "tpe",
        "optimizer = adam(lr = 1e-3), batch = 16, steps = 60, eval_every = 20",
        "lr ~ loguniform(1e-5, 3e-2)  hidden in [8, 16]  seed in 1..2  trials = 4  sampler = tpe(seed = 1, startup = 2) \
         prune = asha(metric = val_loss, min_steps = 20, rungs = 2, keep = 1/2)",
    ));
    let settled = |r: &serde_json::Value| r["status"] == "done" || r["status"] == "pruned";
    let mut settled_runs: HashMap<String, u64> = HashMap::new();
    for (nth_start, delay_ms) in [(1usize, 0u64), (2, 40), (1, 15), (3, 80), (2, 5)] {
        kill_after_start(&mut sweep(&store, &spec, "2"), nth_start, delay_ms);
        let recs = records(&store);
        for r in recs.iter().filter(|r| settled(r)) {
            settled_runs.insert(r["trial_key"].as_str().unwrap().to_string(), r["id"].as_u64().unwrap());
        }
        for (trial, id) in &settled_runs {
            assert!(
                recs.iter().all(|r| r["trial_key"] != trial.as_str() || r["id"].as_u64().unwrap() <= *id),
                "trial {trial} ran again after it was settled (run {id})"
            );
        }
    }
    let out = sweep(&store, &spec, "2").output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let recs = records(&store);
    assert!(recs.iter().any(|r| r["status"] == "interrupted"), "no run was interrupted");
    let mut per_trial: HashMap<String, usize> = HashMap::new();
    let mut configs: HashSet<String> = HashSet::new();
    for r in recs.iter().filter(|r| settled(r)) {
        *per_trial.entry(r["trial_key"].as_str().unwrap().to_string()).or_default() += 1;
        configs.insert(format!("{} {}", r["config"]["train"]["lr"], r["config"]["params"]["hidden"]));
    }
    assert_eq!(configs.len(), 4, "the study proposed exactly its 4 configurations: {configs:?}");
    assert_eq!(per_trial.len(), 8, "every trial of every configuration is settled once: {per_trial:?}");
    assert!(per_trial.values().all(|&n| n == 1), "each trial settled exactly once: {per_trial:?}");
    let again = sweep(&store, &spec, "2").output().unwrap();
    assert!(text(&again.stderr).contains("0 trials run (0 pruned), 8 already settled"), "{}", text(&again.stderr));
}

/// A search's records, by trial key, run with `--pack` set to `pack` on one worker.
fn search_records(search: &str, pack: &str) -> (String, Vec<serde_json::Value>) {
    let (_dir, spec, store) = spec_folder(&tiny_search(
        "lrs",
        "optimizer = adam(lr = 1e-3), batch = 16, steps = 60, eval_every = 20",
        search,
    ));
    let out = sweep(&store, &spec, "1").args(["--pack", pack]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let mut recs = records(&store);
    recs.sort_by_key(|r| r["trial_key"].as_str().unwrap().to_string());
    (text(&out.stderr), recs)
}

#[test]
fn a_packed_search_trains_a_configurations_seeds_together_and_judges_each_of_them() {
    // The grid of two learning rates with two seeds each: 3e-2 learns, 1e-7 does not, and ASHA
    // keeping half prunes 1e-7 at its rung (step 20).
    let search = "lr in [3e-2, 1e-7]  seed in 1..2  sampler = grid \
                  prune = asha(metric = val_accuracy, min_steps = 20, rungs = 1, keep = 1/2)";
    let (_, alone) = search_records(search, "off");
    let (said, packed) = search_records(search, "2");
    assert!(said.contains("search lrs: up to 2 seeds of a configuration train together as one pack"), "{said}");
    assert_eq!(alone.len(), 4);
    assert_eq!(packed.len(), 4);
    for (a, b) in alone.iter().zip(&packed).filter(|(a, _)| a["config"]["train"]["lr"] == 3e-2) {
        assert_eq!(a["trial_key"], b["trial_key"], "a packed trial keeps its identity");
        for field in ["status", "curves", "final_metrics", "steps_run", "stop_reason"] {
            assert_eq!(a[field], b[field], "{field} of {}", a["trial_key"]);
        }
    }
    // 1e-7: alone, its first seed is pruned at step 20 and its second recorded pruned without
    // training; packed, both trained to the rung together and each was judged there.
    let steps = |recs: &[serde_json::Value]| -> Vec<(String, u64, u64)> {
        recs.iter()
            .filter(|r| r["config"]["train"]["lr"] == 1e-7)
            .map(|r| {
                let (status, steps) = (r["status"].as_str().unwrap().to_string(), r["steps_run"].as_u64().unwrap());
                (status, steps, r["pruned"]["step"].as_u64().unwrap())
            })
            .collect()
    };
    let mut alone_steps = steps(&alone);
    alone_steps.sort();
    assert_eq!(alone_steps, [("pruned".to_string(), 0, 0), ("pruned".to_string(), 20, 20)]);
    assert_eq!(steps(&packed), [("pruned".to_string(), 20, 20), ("pruned".to_string(), 20, 20)]);
}

#[test]
fn a_configuration_pruned_on_another_metric_is_ranked_by_the_searchs_own() {
    // Judged by validation loss, optimised for validation accuracy: the pruned configuration
    // counts for the sampler with its accuracy where it stopped, not with its loss. At step 20,
    // 3e-2 has overshot: its validation loss is above that of 1e-7, which has not moved.
    let source = tiny_search(
        "lrs",
        "optimizer = adam(lr = 1e-3), batch = 16, steps = 60, eval_every = 20",
        "lr in [1e-7, 3e-2]  sampler = grid  metric = val_accuracy \
         prune = asha(metric = val_loss, min_steps = 20, rungs = 1, keep = 1/2)",
    );
    let (_dir, spec, store) = spec_folder(&source);
    let out = sweep(&store, &spec, "1").output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let recs = records(&store);
    let pruned = recs.iter().find(|r| r["status"] == "pruned").expect("3e-2 is pruned");
    let accuracy = pruned["final_metrics"]["val_accuracy"].as_f64().unwrap();
    assert_ne!(Some(accuracy), pruned["pruned"]["value"].as_f64(), "the pruner judged its loss");

    let parsed = memctl::lang::parse_str("tiny.mem", &source).unwrap();
    let program = memctl::check::check(&parsed, &memctl::prims::Primitives).unwrap();
    let plan = program.experiments[0].search.as_deref().unwrap();
    let store = memctl::store::Store::open(&store).unwrap();
    let search = memctl::sweep::search::Search::new(&store, plan, "lrs");
    let study = store.study(search.key(), "lrs").unwrap();
    let outcomes = search.outcomes(&study).unwrap();
    let o = outcomes.iter().find(|o| o.config == 1).unwrap();
    assert_eq!(o.stage, memctl::search::outcome::Stage::Pruned(0));
    assert_eq!(o.value, accuracy);
}

#[test]
fn search_report_marks_a_configuration_whose_every_seed_failed_and_counts_each_mean_s_seeds() {
    // A learning rate of 1e38 makes every loss NaN: both seeds fail.
    let (_dir, spec, store) = spec_folder(&tiny_search(
        "lrs",
        "optimizer = adam(lr = 1e-3), batch = 16, steps = 20, eval_every = 10",
        "lr in [3e-2, 1e38]  seed in 1..2  sampler = grid  metric = val_accuracy",
    ));
    let out = sweep(&store, &spec, "1").output().unwrap();
    assert!(text(&out.stderr).contains("4 trials run"), "{}", text(&out.stderr));
    let out = memctl_at(&store).arg("search-report").arg(&spec).output().unwrap();
    let report = text(&out.stdout);
    let row = |lr: &str| report.lines().find(|l| l.contains(lr)).unwrap_or_default().to_string();
    assert!(row("1.00e38").contains("failed") && !row("1.00e38").contains("seeds run"), "{report}");
    assert!(row("0.030").contains("finished") && row("0.030").contains(" (2)"), "{report}");
}

#[test]
fn search_report_ranks_finished_configurations_best_first_then_pruned_ones_and_counts_the_steps_pruning_saved() {
    // A grid proposed in this order: 3e-2 finishes (validation accuracy 0.219), 1e-7 is pruned
    // at step 20, 5e-2 finishes best (0.281). The report ranks them 3, 1, 2.
    let (_dir, spec, store) = spec_folder(&tiny_search(
        "lrs",
        "optimizer = adam(lr = 1e-3), batch = 16, steps = 60, eval_every = 20",
        "lr in [3e-2, 1e-7, 5e-2]  sampler = grid  prune = asha(metric = val_accuracy, min_steps = 20, rungs = 1, keep = 1/2)",
    ));
    let out = sweep(&store, &spec, "1").output().unwrap();
    assert!(text(&out.stderr).contains("3 trials run (1 pruned)"), "{}", text(&out.stderr));
    let out = memctl_at(&store).arg("search-report").arg(&spec).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let report = text(&out.stdout);
    assert!(report.starts_with("search lrs: 3 of 3 configurations proposed, 1 seed each\n"), "{report}");
    // The table's rows: each configuration's number, status and mean, top to bottom.
    let rows = |report: &str| -> Vec<(String, String, String)> {
        report
            .lines()
            .filter(|l| l.starts_with("│ ") && !l.starts_with("│ #"))
            .map(|l| {
                let cells: Vec<&str> = l.split(['│', '┆']).map(str::trim).collect();
                (cells[1].to_string(), cells[3].to_string(), cells[4].to_string())
            })
            .collect()
    };
    let ranked = rows(&report);
    let statuses: Vec<(&str, &str)> = ranked.iter().map(|(n, s, _)| (n.as_str(), s.as_str())).collect();
    assert_eq!(statuses, [("3", "finished"), ("1", "finished"), ("2", "pruned at rung 1")], "{report}");
    let steps = "training steps: 140, 78 % of the 180 these 3 configurations take to their budget; \
                 the full grid (3 configurations) takes 180: 78 %\n";
    assert!(report.contains(steps), "{report}");
    assert!(report.contains(", 1 pruned, "), "{report}");
    assert!(report.contains("val_accuracy against lr:"), "{report}");

    // Its runs imported into another store, the pruned one too: the study stays behind, and the
    // report is rebuilt from the runs, with the same configurations, outcomes and means.
    let other = store.with_file_name("other");
    let nothing = store.with_file_name("nothing.json");
    std::fs::write(&nothing, "[]").unwrap();
    assert!(memctl_at(&other).arg("import").arg(&nothing).status().unwrap().success());
    let out = memctl_at(&other).arg("search-report").arg(&spec).output().unwrap();
    assert!(text(&out.stdout).contains("search lrs: no configuration proposed or run in"), "{}", text(&out.stdout));
    let export = memctl_at(&store).args(["runs", "--all", "--format", "records"]).output().unwrap();
    let file = store.with_file_name("runs.json");
    std::fs::write(&file, &export.stdout).unwrap();
    let out = memctl_at(&other).arg("import").arg(&file).output().unwrap();
    assert!(text(&out.stderr).contains("3 imported"), "{}", text(&out.stderr));
    let out = memctl_at(&other).arg("search-report").arg(&spec).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let imported = text(&out.stdout);
    assert_eq!(rows(&imported), ranked, "{imported}");
    assert!(imported.contains(steps), "{imported}");
    assert!(imported.starts_with("search lrs: 3 configurations known from runs, 1 seed each\n"), "{imported}");
    assert!(
        imported.contains("known from runs: every configuration, not proposed by a study in this store"),
        "{imported}"
    );
    assert!(!imported.contains("rung decisions:"), "{imported}");

    // Back in the first store, a search over other values (another study): of the earlier
    // runs, those of values in its domains show after what it proposes; 1e-7 is not one.
    let narrower = tiny_search(
        "lrs",
        "optimizer = adam(lr = 1e-3), batch = 16, steps = 60, eval_every = 20",
        "lr in [5e-2, 4e-2, 3e-2]  trials = 2  sampler = grid",
    );
    std::fs::write(&spec, narrower).unwrap();
    let out = sweep(&store, &spec, "1").output().unwrap();
    assert!(
        text(&out.stderr).contains("1 trial run (0 pruned), 1 already settled"),
        "5e-2 ran already: {}",
        text(&out.stderr)
    );
    let out = memctl_at(&store).arg("search-report").arg(&spec).output().unwrap();
    let report = text(&out.stdout);
    assert!(report.starts_with("search lrs: 2 of 2 configurations proposed, 1 more known from runs"), "{report}");
    let lrs: Vec<String> = report
        .lines()
        .filter(|l| l.starts_with("│ ") && !l.starts_with("│ #"))
        .map(|l| l.split(['│', '┆']).map(str::trim).nth(2).unwrap().to_string())
        .collect();
    let mut sorted = lrs.clone();
    sorted.sort();
    assert_eq!(sorted, ["0.030", "0.040", "0.050"], "{report}");
    assert!(report.contains("known from runs: #3, not proposed"), "{report}");
}

/// The overrides a search was swept with make its study, so `search-report` takes them too;
/// without them, the report says the store's runs are another search's and which overrides
/// name it.
#[test]
fn search_report_takes_the_overrides_the_search_was_swept_with() {
    let (_dir, spec, store) = spec_folder(&tiny_search(
        "lrs",
        "optimizer = adam(lr = 1e-3), batch = 16, steps = 60, eval_every = 20",
        "lr in [3e-2, 5e-2]  seed in 1..2  sampler = grid  metric = val_accuracy",
    ));
    let out = sweep(&store, &spec, "1").args(["lrs", "steps=20", "seed=1"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let report = |args: &[&str]| {
        let out = memctl_at(&store).arg("search-report").arg(&spec).args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        text(&out.stdout)
    };
    let plain = report(&[]);
    let (store_name, spec_name) = (store.display(), spec.display());
    assert_eq!(
        plain,
        format!(
            "search lrs: no configuration proposed or run in {store_name} (`memctl sweep {spec_name}` runs the \
             search; `memctl import` brings its runs from the store that ran it)\n\
             the store's 2 runs of experiment `lrs` belong to a search with other settings, steps=20, seed=1 (as \
             their latest run has them): give search-report the overrides their `memctl sweep` was given, e.g. \
             `memctl search-report {spec_name} lrs steps=20 seed=1`\n"
        )
    );
    let swept = report(&["lrs", "steps=20", "seed=1"]);
    assert!(swept.starts_with("search lrs: 2 of 2 configurations proposed, 1 seed each\n"), "{swept}");
    assert_eq!(swept.matches("┆ finished ┆").count(), 2, "{swept}");
    assert!(swept.contains("training steps: 40, 100 % of the 40 these 2 configurations"), "{swept}");
    assert!(!swept.contains("known from runs"), "{swept}");
    // Without the experiment's name, the overrides apply to every search of the spec.
    assert_eq!(report(&["steps=20", "seed=1"]), swept);
}

/// A search stopped by SIGTERM says, as a sweep does, that a trial was interrupted.
#[test]
fn a_search_stopped_by_a_signal_counts_its_interrupted_trial() {
    let (_dir, spec, store) = spec_folder(&tiny_search(
        "lrs",
        "optimizer = adam(lr = 1e-3), batch = 16, steps = 1000000, eval_every = 100",
        "lr in [3e-2, 1e-3]  sampler = grid",
    ));
    let mut command = sweep(&store, &spec, "1");
    let child = command.stdout(std::process::Stdio::null()).stderr(std::process::Stdio::piped()).spawn().unwrap();
    let start = std::time::Instant::now();
    while !(store.join("db").exists() && records(&store).iter().any(|r| r["steps_run"].as_u64() > Some(0))) {
        assert!(start.elapsed().as_secs() < 60, "the search's first trial never reported progress");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    // SAFETY: signalling our own child process.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let out = child.wait_with_output().unwrap();
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("search lrs: 1 trial run (0 pruned), 0 already settled, 0 failed, 1 interrupted"), "{err}");
}

/// A TPE search of a space of fewer configurations than its `trials` runs each once, and
/// `check` and `--dry-run` count those; its report counts each configuration's steps once.
#[test]
fn a_search_of_a_smaller_finite_space_tries_each_configuration_once() {
    let (_dir, spec, store) = spec_folder(&tiny_search(
        "lrs",
        "optimizer = adam(lr = 1e-3), batch = 16, steps = 10, eval_every = 10",
        "lr in [3e-2, 1e-3]  trials = 5  metric = val_accuracy  sampler = tpe(seed = 1, startup = 1)",
    ));
    let check = memctl_at(&store).arg("check").arg(&spec).output().unwrap();
    let check = text(&check.stdout);
    assert!(check.contains("a search of 2 configurations (all its space has; trials = 5) × 1 seed"), "{check}");
    let plan = sweep(&store, &spec, "2").arg("--dry-run").output().unwrap();
    let plan = text(&plan.stdout);
    assert!(plan.contains("0 of 2 configurations proposed so far, each with 1 seed; up to 2 trials"), "{plan}");
    let out = sweep(&store, &spec, "2").output().unwrap();
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(!err.contains("warning"), "{err}");
    assert!(err.contains("search lrs: 2 trials run (0 pruned), 0 already settled, 0 failed"), "{err}");
    let report = memctl_at(&store).arg("search-report").arg(&spec).output().unwrap();
    let report = text(&report.stdout);
    assert!(report.contains("training steps: 20, 100 % of the 20 these 2 configurations"), "{report}");
}
