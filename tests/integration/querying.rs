//! Querying past runs: `memctl runs` filters, grouping and formats, `show`, `diff`, `plot`,
//! `tag`, `rm`, `ablate` and `import`, against stores filled with synthetic runs (no training)
//! except for one tiny ablation.

use std::path::Path;
use std::process::{Command, Output, Stdio};

use memctl::store::RunRecord;
use memctl::value::Value;

use crate::support::{spec_folder, tiny_spec};
use crate::synthetic::{filled, one_point_run, open};

/// Runs memctl. A `Store` this process just dropped can hold sled's file lock for a few more
/// milliseconds (its I/O threads finish asynchronously), so a locked store is retried briefly.
fn memctl(store: &Path, args: &[&str]) -> Output {
    memctl_in(Path::new("."), store, args)
}

/// [`memctl`] run in the folder `cwd`.
fn memctl_in(cwd: &Path, store: &Path, args: &[&str]) -> Output {
    for _ in 0..100 {
        let out = Command::new(env!("CARGO_BIN_EXE_memctl"))
            .current_dir(cwd)
            .arg("--store")
            .arg(store)
            .args(args)
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .output()
            .expect("memctl runs");
        if !String::from_utf8_lossy(&out.stderr).contains("is in use by another memctl process") {
            return out;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    panic!("the store stayed locked");
}

fn ok(out: &Output) -> String {
    assert_eq!(out.status.code(), Some(0), "stderr: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn json(out: &Output) -> Vec<serde_json::Value> {
    serde_json::from_str::<serde_json::Value>(&ok(out)).unwrap().as_array().unwrap().clone()
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-12
}

#[test]
fn grouping_gives_mean_sample_std_and_count() {
    let (_dir, store) = filled();
    let rows = json(&memctl(&store, &["runs", "--group-by", "d,gates", "--format", "json"]));
    assert_eq!(rows.len(), 3, "{rows:?}");
    // Groups come in order of their values: (48, true), (96, false), (96, true).
    let g48 = &rows[0];
    assert_eq!((g48["d"].as_i64(), g48["gates"].as_bool(), g48["runs"].as_i64()), (Some(48), Some(true), Some(3)));
    // accuracy 0.5, 0.7, 0.9: mean 0.7, sample std sqrt((0.04 + 0 + 0.04) / 2) = 0.2.
    assert!(close(g48["accuracy"]["mean"].as_f64().unwrap(), 0.7));
    assert!(close(g48["accuracy"]["std"].as_f64().unwrap(), 0.2));
    assert_eq!(g48["accuracy"]["n"], 3);
    // steps to converge 100, 300 (seed 3 never converged): mean 200, std sqrt(2 * 100²) = 141.42…, n 2.
    assert!(close(g48["steps_to_converge"]["mean"].as_f64().unwrap(), 200.0));
    assert!(close(g48["steps_to_converge"]["std"].as_f64().unwrap(), 20000f64.sqrt()));
    assert_eq!(g48["steps_to_converge"]["n"], 2);
    // (96, false): one done run with 0.25 and a failed one with no metrics.
    let ungated = &rows[1];
    assert_eq!((ungated["gates"].as_bool(), ungated["runs"].as_i64()), (Some(false), Some(2)));
    assert_eq!(ungated["accuracy"]["mean"], 0.25);
    assert!(ungated["accuracy"]["std"].is_null(), "one value has no sample std");
    assert_eq!(ungated["accuracy"]["n"], 1);
    assert!(ungated["steps_to_converge"].is_null());
    // accuracy 1.0, 0.8: mean 0.9, std sqrt(0.02) = 0.1414…
    let g96 = &rows[2];
    assert!(close(g96["accuracy"]["mean"].as_f64().unwrap(), 0.9));
    assert!(close(g96["accuracy"]["std"].as_f64().unwrap(), 0.02f64.sqrt()));

    // The table shows `mean ± std (n)`; --sort orders groups by mean.
    let table = ok(&memctl(&store, &["runs", "--group-by", "d", "--sort", "-accuracy", "--where", "gates"]));
    let lines: Vec<&str> = table.lines().filter(|l| l.contains("± ")).collect();
    assert_eq!(lines.len(), 2, "{table}");
    assert!(lines[0].contains("0.900 ± 0.141 (2)") && lines[1].contains("0.700 ± 0.200 (3)"), "{table}");

    // Ids, start times and statuses are not averaged: a group shows the value its runs share,
    // or nothing where they differ.
    let args = ["runs", "--group-by", "d,gates", "--columns", "id,started,status,experiment", "--format", "json"];
    let rows = json(&memctl(&store, &args));
    assert!(rows.iter().all(|r| r["id"].is_null() && r["started"].is_null()), "{rows:?}");
    assert_eq!((rows[0]["status"].as_str(), rows[1]["status"].as_str()), (Some("done"), None), "{rows:?}");
    assert!(rows.iter().all(|r| r["experiment"] == "tiny_stm"), "{rows:?}");
}

#[test]
fn csv_round_trips_exact_values() {
    let (_dir, store) = filled();
    let out = ok(&memctl(&store, &["runs", "--format", "csv", "--where", "status == \"done\"", "--sort", "id"]));
    let mut reader = csv::Reader::from_reader(out.as_bytes());
    let header: Vec<String> = reader.headers().unwrap().iter().map(String::from).collect();
    let col = |n: &str| header.iter().position(|h| h == n).unwrap_or_else(|| panic!("no column {n} in {header:?}"));
    let rows: Vec<csv::StringRecord> = reader.records().map(|r| r.unwrap()).collect();
    assert_eq!(rows.len(), 6);
    let s = open(&store);
    for row in &rows {
        let id: u64 = row[col("id")].parse().unwrap();
        let r = s.get(id).unwrap();
        assert_eq!(row[col("accuracy")].parse::<f64>().unwrap(), r.final_metrics["accuracy"], "run {id}");
        assert_eq!(row[col("loss")].parse::<f64>().unwrap(), r.final_metrics["loss"], "run {id}");
        assert_eq!(Value::Int(row[col("d")].parse().unwrap()), r.config.params["d"]);
        assert_eq!(Value::Bool(row[col("gates")].parse().unwrap()), r.config.params["gates"]);
        assert_eq!(row[col("seed")].parse::<u64>().unwrap(), r.config.seed);
        assert_eq!(&row[col("status")], "done");
        let converged = &row[col("steps_to_converge")];
        assert_eq!(if converged.is_empty() { None } else { Some(converged.parse().unwrap()) }, r.steps_to_converge);
    }
    drop(s);
    // Grouped CSV: mean, std and n columns.
    let out = ok(&memctl(&store, &["runs", "--format", "csv", "--group-by", "d", "--where", "gates"]));
    let mut reader = csv::Reader::from_reader(out.as_bytes());
    let header: Vec<String> = reader.headers().unwrap().iter().map(String::from).collect();
    assert_eq!(header[..5], ["d", "runs", "accuracy_mean", "accuracy_std", "accuracy_n"]);
    let first = reader.records().next().unwrap().unwrap();
    assert!(close(first[2].parse().unwrap(), 0.7) && close(first[3].parse().unwrap(), 0.2) && &first[4] == "3");
    // A column no run of the view has a value in is three columns all the same, so that a
    // script reads the same columns whatever converged.
    let args =
        ["runs", "--format", "csv", "--group-by", "d", "--where", "gates == false", "--columns", "steps_to_converge"];
    let out = ok(&memctl(&store, &args));
    let (header, row) = out.split_once('\n').unwrap();
    assert_eq!(header, "d,runs,steps_to_converge_mean,steps_to_converge_std,steps_to_converge_n", "{out}");
    assert_eq!(row.trim(), "96,2,,,0", "{out}");
}

#[test]
fn json_round_trips_exact_values_in_column_order() {
    let (_dir, store) = filled();
    let out = memctl(&store, &["runs", "--format", "json", "--columns", "id,d,accuracy,started,tags,wall"]);
    let text = ok(&out);
    let rows = json(&out);
    assert_eq!(rows.len(), 7);
    // Newest first, keys in the order asked for.
    assert_eq!(rows[0]["id"], 7);
    assert!(
        text.contains(
            r#"{"id": 7, "d": 96, "accuracy": null, "started": "2025-01-31T07:00:00Z", "tags": [], "wall": 60.0}"#
        ),
        "{text}"
    );
    let s = open(&store);
    for row in &rows[1..] {
        let r = s.get(row["id"].as_u64().unwrap()).unwrap();
        assert_eq!(row["accuracy"].as_f64().unwrap(), r.final_metrics["accuracy"]);
        assert_eq!(row["d"].as_i64().map(Value::Int).unwrap(), r.config.params["d"]);
    }
}

#[test]
fn filters_sort_limit_columns_and_only_changed() {
    let (_dir, store) = filled();
    let ids = |args: &[&str]| -> Vec<i64> {
        let mut a = vec!["runs", "--format", "json", "--columns", "id"];
        a.extend_from_slice(args);
        json(&memctl(&store, &a)).iter().map(|r| r["id"].as_i64().unwrap()).collect()
    };
    assert_eq!(ids(&[]), vec![7, 6, 5, 4, 3, 2, 1]);
    assert_eq!(ids(&["--where", "d in [48, 96] and (status == \"failed\" or accuracy > 0.85)"]), vec![7, 4, 3]);
    assert_eq!(ids(&["--where", "not gates and accuracy < 1"]), vec![6]);
    // A filter may start with a negative number, not read as an option.
    assert_eq!(ids(&["--where", "-1 < accuracy and d == 96"]), vec![6, 5, 4]);
    assert_eq!(ids(&["--sort", "-accuracy", "--limit", "3"]), vec![4, 3, 5]);
    // Missing values sort last either way.
    assert_eq!(ids(&["--sort", "steps_to_converge"]), vec![1, 4, 2, 5, 7, 6, 3]);
    assert_eq!(ids(&["--where", "started >= 2025-01-31T05:00"]), vec![7, 6, 5]);

    // --only-changed: every config value that differs (d, gates, seed) and nothing constant.
    let out = ok(&memctl(&store, &["runs", "--only-changed", "--format", "csv"]));
    let header = out.lines().next().unwrap();
    assert_eq!(header, "id,d,gates,seed,status,accuracy,loss,steps_to_converge,steps_run,wall");
    let out = ok(&memctl(&store, &["runs", "--only-changed", "--format", "csv", "--where", "d == 96 and seed == 1"]));
    assert_eq!(out.lines().next().unwrap(), "id,gates,status,accuracy,loss,steps_to_converge,steps_run,wall");
    // Columns asked for by name: a constant setting goes, a metric stays.
    let args = ["runs", "--only-changed", "--format", "csv", "--columns", "id,d,accuracy", "--where", "id == 1"];
    assert_eq!(ok(&memctl(&store, &args)).lines().next().unwrap(), "id,accuracy");

    // Markdown.
    let md =
        ok(&memctl(&store, &["runs", "--format", "md", "--columns", "id,accuracy", "--limit", "2", "--sort", "id"]));
    assert_eq!(md, "| id | accuracy |\n| ---: | ---: |\n| 1 | 0.500 |\n| 2 | 0.700 |\n");
}

#[test]
fn bad_filters_and_names_are_located_errors() {
    let (_dir, store) = filled();
    let out = memctl(&store, &["runs", "--where", "d in [48, 96] and accurcy > 0.9"]);
    assert_eq!(out.status.code(), Some(2));
    let e = stderr(&out);
    assert!(e.contains("<--where>:1:19") && e.contains("did you mean `accuracy`?"), "{e}");
    assert!(e.contains("d in [48, 96] and accurcy > 0.9"), "the filter is shown: {e}");
    assert!(e.ends_with("\n\n"), "the message ends its line, as `check`'s do: {e:?}");
    let out = memctl(&store, &["runs", "--sort", "acuracy"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("did you mean `accuracy`?"), "{}", stderr(&out));
    let out = memctl(&store, &["runs", "--group-by", "d", "--sort", "seed"]);
    assert!(stderr(&out).contains("cannot sort groups by `seed`"), "{}", stderr(&out));
    // `--limit 0` would print "no runs match" about a store full of matching runs.
    let out = memctl(&store, &["runs", "--limit", "0"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("--limit"), "{}", stderr(&out));
}

#[test]
fn twenty_thousand_nots_are_a_located_error_not_a_crash() {
    let (_dir, store) = filled();
    let out = memctl(&store, &["runs", "--where", &format!("{}gates", "not ".repeat(20_000))]);
    let e = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{e}");
    // Refused at the 65th `not`.
    assert!(e.contains("error[Q011]: brackets and `not`s nested deeper than 64 levels"), "{e}");
    assert!(e.contains("<--where>:1:257"), "{e}");
}

#[test]
fn show_prints_the_record_as_yaml_with_curve_summaries_and_spec() {
    let (_dir, store) = filled();
    let out = ok(&memctl(&store, &["show", "2"]));
    let doc: serde_json::Value = serde_saphyr::from_str(&out).unwrap_or_else(|e| panic!("{e}\n{out}"));
    assert_eq!(doc["id"], 2);
    assert_eq!(doc["parameters"]["d"], 48);
    assert_eq!(doc["final_metrics"]["accuracy"], 0.7);
    assert_eq!(doc["curves"]["val_accuracy"]["best"][0], 30);
    assert_eq!(doc["curves"]["val_accuracy"]["best"][1].as_f64(), Some(0.7));
    assert_eq!(doc["curves"]["train_loss"]["best"][0], 30);
    assert_eq!(doc["curves"]["train_loss"]["first"][1].as_f64(), Some(2.0));
    assert_eq!(doc["curves"]["train_loss"]["best"][1].as_f64(), Some(1.0 - 0.7));
    assert_eq!(doc["spec"].as_str().unwrap().trim_end(), tiny_spec().trim_end());
    let missing = memctl(&store, &["show", "99"]);
    assert_eq!(missing.status.code(), Some(2));
    assert!(stderr(&missing).contains("no run with id 99"));
}

#[test]
fn diff_shows_the_ablation_and_metrics_side_by_side() {
    let (_dir, store) = filled();
    {
        let s = open(&store);
        let mut r = s.get(6).unwrap();
        r.spec_text = tiny_spec().replace("steps = 6", "steps = 8");
        s.put(&r).unwrap();
    }
    let out = ok(&memctl(&store, &["diff", "4", "6"]));
    assert!(out.contains("param.gates") && out.contains("true") && out.contains("false"), "{out}");
    assert!(!out.contains("param.d "), "d is the same: {out}");
    let acc = out.lines().find(|l| l.contains("accuracy")).unwrap();
    assert!(acc.contains("1.00") && acc.contains("0.250") && acc.contains("-0.750"), "{acc}");
    let steps = out.lines().find(|l| l.contains("steps_run")).unwrap();
    assert!(!steps.contains('.'), "a count of steps is whole: {steps}");
    assert!(out.contains("-  train { optimizer = adam(lr = 1e-2), batch = 16, steps = 6"), "{out}");
    assert!(out.contains("+  train { optimizer = adam(lr = 1e-2), batch = 16, steps = 8"), "{out}");
    let same = ok(&memctl(&store, &["diff", "1", "1"]));
    assert!(same.contains("same configuration") && same.contains("same spec text"), "{same}");
}

#[test]
fn plots_are_valid_svg_and_png_with_one_line_per_series() {
    let (dir, store) = filled();
    let svg = dir.path().join("runs.svg");
    ok(&memctl(&store, &["plot", "1", "2", "4", "-o", svg.to_str().unwrap()]));
    let text = std::fs::read_to_string(&svg).unwrap();
    let doc = roxmltree::Document::parse(&text).expect("the SVG parses as XML");
    assert_eq!(doc.root_element().tag_name().name(), "svg");
    // Series lines are polylines of stroke width 2 (legend samples are 4, the grid is lines).
    let lines = |doc: &roxmltree::Document| {
        doc.descendants().filter(|n| n.has_tag_name("polyline") && n.attribute("stroke-width") == Some("2")).count()
    };
    assert_eq!(lines(&doc), 3);
    assert!(text.contains("val_accuracy") && text.contains("training step"), "title and axis labels");
    assert!(text.contains("1: tiny_stm d=48 gates=true seed=1"), "legend");

    // Grouped: one mean line and one band per group.
    let grouped = dir.path().join("groups.svg");
    ok(&memctl(
        &store,
        &[
            "plot",
            "--where",
            "status == \"done\"",
            "--group-by",
            "d,gates",
            "--metric",
            "train_loss",
            "-o",
            grouped.to_str().unwrap(),
        ],
    ));
    let text = std::fs::read_to_string(&grouped).unwrap();
    let doc = roxmltree::Document::parse(&text).unwrap();
    assert_eq!(lines(&doc), 3);
    assert_eq!(doc.descendants().filter(|n| n.has_tag_name("polygon")).count(), 3);
    assert!(text.contains("d=48 gates=true (3 runs)"), "{text}");
    // A trial interrupted and resumed counts once, by its later run, as `runs` lists them.
    let mut attempt = crate::synthetic::record(9, crate::synthetic::config(48, true, 4), 0.1, None);
    attempt.status = memctl::store::Status::Interrupted;
    let resumed = RunRecord {
        trial_key: attempt.trial_key.clone(),
        ..crate::synthetic::record(10, crate::synthetic::config(48, true, 4), 0.3, None)
    };
    open(&store).put_many(&[attempt, resumed]).unwrap();
    let chosen = ["--where", "d == 48", "--group-by", "d", "-o", grouped.to_str().unwrap()];
    ok(&memctl(&store, &[&["plot"], &chosen[..]].concat()));
    let text = std::fs::read_to_string(&grouped).unwrap();
    assert!(text.contains("d=48 (4 runs)"), "{text}");
    // A trial run again to the end (`--force`) counts once too, by its latest run, as
    // `runs --group-by` counts it; `--all` counts every run.
    let again = RunRecord {
        trial_key: open(&store).get(10).unwrap().trial_key,
        ..crate::synthetic::record(11, crate::synthetic::config(48, true, 4), 0.4, None)
    };
    open(&store).put(&again).unwrap();
    let once = memctl(&store, &[&["plot"], &chosen[..]].concat());
    assert!(stderr(&once).contains("note: run 10 left out"), "{}", stderr(&once));
    assert!(std::fs::read_to_string(&grouped).unwrap().contains("d=48 (4 runs)"));
    ok(&memctl(&store, &[&["plot"], &chosen[..], &["--all"]].concat()));
    assert!(std::fs::read_to_string(&grouped).unwrap().contains("d=48 (5 runs)"));
    // A field no plotted run has would make one group of every run: refused, with the likely name.
    let typo = memctl(&store, &["plot", "1", "2", "--group-by", "gate", "-o", grouped.to_str().unwrap()]);
    assert!(!typo.status.success() && stderr(&typo).contains("did you mean `gates`?"), "{}", stderr(&typo));

    // A run stopped at its first evaluation: its one point is a marker, on a span of steps
    // and values whose tick labels differ (not `250` twice, nor `0.0960` twice).
    open(&store).put(&one_point_run(8)).unwrap();
    let one = dir.path().join("one.svg");
    ok(&memctl(&store, &["plot", "8", "-o", one.to_str().unwrap()]));
    let text = std::fs::read_to_string(&one).unwrap();
    let doc = roxmltree::Document::parse(&text).unwrap();
    assert!(text.contains("val_seq_accuracy"), "the curve of the metric it stops on");
    assert_eq!(doc.descendants().filter(|n| n.has_tag_name("circle")).count(), 1, "{text}");
    let labels: Vec<&str> =
        doc.descendants().filter(|n| n.has_tag_name("text")).filter_map(|n| n.text()).map(str::trim).collect();
    let mut distinct = labels.clone();
    distinct.sort_unstable();
    distinct.dedup();
    assert_eq!(distinct.len(), labels.len(), "each tick labelled once: {labels:?}");
    assert!(labels.len() > 8, "ticks on both axes: {labels:?}");
    // A diverged run: a curve of NaN and inf alone draws no line, said as such; alone it is
    // nothing to plot.
    let mut diverged = one_point_run(9);
    diverged.curves.insert("val_seq_accuracy".into(), vec![(250, f64::NAN), (500, f64::INFINITY)]);
    open(&store).put(&diverged).unwrap();
    let both = memctl(&store, &["plot", "8", "9", "-o", one.to_str().unwrap()]);
    ok(&both);
    assert!(stderr(&both).contains("note: run 9 has no finite value of `val_seq_accuracy`"), "{}", stderr(&both));
    // Grouped, it is left out of its group's mean, which it would make NaN throughout.
    let grouped = memctl(&store, &["plot", "8", "9", "--group-by", "d", "-o", one.to_str().unwrap()]);
    ok(&grouped);
    let text = std::fs::read_to_string(&one).unwrap();
    assert!(text.contains("d=48 (1 run)"), "{text}");
    let alone = memctl(&store, &["plot", "9", "-o", one.to_str().unwrap()]);
    assert_eq!(alone.status.code(), Some(2), "{}", stderr(&alone));
    assert!(
        stderr(&alone).contains("every value of `val_seq_accuracy` is NaN or infinite in run 9"),
        "{}",
        stderr(&alone)
    );
    // A fixed axis for accuracies.
    ok(&memctl(&store, &["plot", "8", "--y-range", "0,1", "-o", one.to_str().unwrap()]));
    let text = std::fs::read_to_string(&one).unwrap();
    let doc = roxmltree::Document::parse(&text).unwrap();
    let labels: Vec<&str> = doc.descendants().filter_map(|n| n.text()).map(str::trim).collect();
    assert!(labels.contains(&"0.0") && labels.contains(&"1.0"), "{labels:?}");
    let bad = memctl(&store, &["plot", "8", "--y-range", "1,0", "-o", one.to_str().unwrap()]);
    assert!(stderr(&bad).contains("LO below HI"), "{}", stderr(&bad));

    let png = dir.path().join("runs.png");
    ok(&memctl(&store, &["plot", "1", "2", "-o", png.to_str().unwrap()]));
    let bytes = std::fs::read(&png).unwrap();
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
    assert!(bytes.len() > 5000, "an image with content: {} bytes", bytes.len());

    let bad = memctl(&store, &["plot", "1", "-o", dir.path().join("x.jpg").to_str().unwrap()]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(stderr(&bad).contains("must end in .png or .svg"));
    // A missing folder is made, as `results -o` makes one; a file where it would go is named.
    let nested = dir.path().join("plots").join("deep").join("x.svg");
    ok(&memctl(&store, &["plot", "1", "-o", nested.to_str().unwrap()]));
    assert!(std::fs::read_to_string(&nested).unwrap().starts_with("<svg"));
    let under_a_file = png.join("x.svg");
    let bad = memctl(&store, &["plot", "1", "-o", under_a_file.to_str().unwrap()]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(stderr(&bad).contains("cannot make the folder") && stderr(&bad).contains("runs.png"), "{}", stderr(&bad));
    // A folder named as the file, a path without an extension and a curve no run has: each
    // error names its own cause.
    let bad = memctl(&store, &["plot", "1", "-o", dir.path().to_str().unwrap()]);
    assert!(stderr(&bad).contains("is a folder; name the plot file"), "{}", stderr(&bad));
    let bad = memctl(&store, &["plot", "1", "-o", dir.path().join("x").to_str().unwrap()]);
    assert!(stderr(&bad).starts_with("error: `"), "no `cannot write` before the path: {}", stderr(&bad));
    let bad = memctl(&store, &["plot", "1", "--metric", "val_acuracy", "-o", svg.to_str().unwrap()]);
    assert!(
        stderr(&bad).contains("no run plotted has a curve `val_acuracy`; did you mean `val_accuracy`?"),
        "{}",
        stderr(&bad)
    );
}

#[test]
fn grouping_by_experiment_keeps_apart_experiments_of_different_tasks() {
    let (_dir, store) = filled();
    // Another spec's experiment of the same name, on another task.
    let mut other = crate::synthetic::record(8, crate::synthetic::config(48, true, 1), 0.1, None);
    other.config.task = "palindrome".into();
    other.spec_path = "other.mem".into();
    open(&store).put(&other).unwrap();
    let rows = json(&memctl(&store, &["runs", "--group-by", "experiment", "--format", "json"]));
    let groups: Vec<(&str, i64)> =
        rows.iter().map(|r| (r["experiment"].as_str().unwrap(), r["runs"].as_i64().unwrap())).collect();
    assert_eq!(groups, [("tiny_stm (task assocRetrieval)", 7), ("tiny_stm (task palindrome)", 1)], "{rows:?}");
    // Grouped by something else, the runs of both mix as asked.
    let rows = json(&memctl(&store, &["runs", "--group-by", "d", "--format", "json"]));
    assert_eq!(rows.iter().find(|r| r["d"] == 48).unwrap()["runs"], 4);
}

#[test]
fn tags_are_added_queried_and_removed() {
    let (_dir, store) = filled();
    ok(&memctl(&store, &["tag", "3", "ablation"]));
    ok(&memctl(&store, &["tag", "5", "ablation"]));
    let again = memctl(&store, &["tag", "5", "ablation"]);
    assert!(stderr(&again).contains("already has tag"));
    let ids = |filter: &str| -> Vec<i64> {
        json(&memctl(&store, &["runs", "--format", "json", "--columns", "id", "--where", filter]))
            .iter()
            .map(|r| r["id"].as_i64().unwrap())
            .collect()
    };
    assert_eq!(ids("\"ablation\" in tags"), vec![5, 3]);
    ok(&memctl(&store, &["tag", "5", "ablation", "--remove"]));
    assert_eq!(ids("\"ablation\" in tags"), vec![3]);
    assert_eq!(open(&store).get(3).unwrap().tags, vec!["ablation".to_string()]);
    assert_eq!(memctl(&store, &["tag", "99", "x"]).status.code(), Some(2));
    // Listed joined by commas (by semicolons in CSV), `a,b` would read as two tags.
    for joined in ["a,b", "a;b"] {
        let refused = memctl(&store, &["tag", "3", joined]);
        assert!(stderr(&refused).contains("a tag holds no comma or semicolon"), "{}", stderr(&refused));
    }
    assert_eq!(open(&store).get(3).unwrap().tags, vec!["ablation".to_string()]);
}

#[test]
fn rm_needs_confirmation_and_falls_back_to_an_earlier_run_of_the_trial() {
    let (_dir, store) = filled();
    // Without a terminal and without --yes: refused, nothing deleted.
    let out = memctl(&store, &["rm", "2", "3"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("pass --yes"), "{}", stderr(&out));
    assert!(open(&store).get(2).is_ok());

    ok(&memctl(&store, &["rm", "2", "3", "--yes"]));
    let s = open(&store);
    assert!(matches!(s.get(2), Err(memctl::store::StoreError::NoSuchRun(2))));
    assert!(s.summary(3).is_err());
    assert_eq!(s.summaries().unwrap().len(), 5);
    assert!(s.latest_of_trial("trial2").unwrap().is_none());
    // A trial run twice: deleting the later run makes the earlier one its latest again.
    let mut again = s.get(4).unwrap();
    again.id = 8;
    s.put(&again).unwrap();
    assert_eq!(s.latest_of_trial("trial4").unwrap().unwrap().id, 8);
    s.delete(&[8]).unwrap();
    assert_eq!(s.latest_of_trial("trial4").unwrap().unwrap().id, 4);
    assert!(matches!(s.delete(&[1, 42]), Err(memctl::store::StoreError::NoSuchRun(42))));
    assert!(s.get(1).is_ok(), "a failed delete deletes nothing");
}

#[test]
fn summaries_are_rebuilt_for_a_store_written_before_them() {
    let (_dir, store) = filled();
    {
        // Drop the summaries tree and its version, as in a store from before summaries.
        let db = (0..100)
            .find_map(|_| {
                let db = sled::open(store.join("db")).ok();
                if db.is_none() {
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
                db
            })
            .expect("the store opens");
        db.drop_tree("summaries").unwrap();
        db.open_tree("meta").unwrap().remove("summary_version").unwrap();
        db.flush().unwrap();
    }
    let s = open(&store);
    let summaries = s.summaries().unwrap();
    assert_eq!(summaries.len(), 7);
    assert_eq!(summaries[1].final_metrics["accuracy"], 0.7);
}

#[test]
fn ablate_plans_the_full_model_and_each_switch_off() {
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("tiny.mem");
    std::fs::write(&spec, tiny_spec()).unwrap();
    let ctx = memctl::cli::Context { store: dir.path().join("store"), color: false };
    let variants = memctl::cli::ablate::plan(&spec, "tiny_stm", &[], None, Some(3), &ctx).unwrap().unwrap();
    let names: Vec<&str> = variants.iter().map(|v| v.name.as_str()).collect();
    assert_eq!(names, ["full", "w/o gates", "w/o transfer"]);
    let expect = [(true, true), (false, true), (true, false)];
    for (v, (gates, transfer)) in variants.iter().zip(expect) {
        assert_eq!(v.trials.len(), 3, "{}", v.name);
        let seeds: Vec<u64> = v.trials.iter().map(|t| t.config.seed).collect();
        assert_eq!(seeds, [1, 2, 3]);
        for t in &v.trials {
            assert_eq!(t.config.params["gates"], Value::Bool(gates), "{}", v.name);
            assert_eq!(t.config.params["transfer"], Value::Bool(transfer), "{}", v.name);
            assert_eq!(t.config.params["d"], Value::Int(8), "other parameters untouched");
        }
    }
    // Every trial is distinct.
    let mut keys: Vec<String> =
        variants.iter().flat_map(|v| &v.trials).map(memctl::sweep::identity::trial_key).collect();
    keys.sort();
    keys.dedup();
    assert_eq!(keys.len(), 9);

    // Chosen switches; the experiment's own seeds (1..2) without --seeds.
    let only = memctl::cli::ablate::plan(&spec, "tiny_stm", &[], Some(&["transfer".to_string()]), None, &ctx)
        .unwrap()
        .unwrap();
    assert_eq!(only.iter().map(|v| v.name.as_str()).collect::<Vec<_>>(), ["full", "w/o transfer"]);
    assert_eq!(only[1].trials.len(), 2);
    assert!(only.iter().flat_map(|v| &v.trials).all(|t| t.config.params["gates"] == Value::Bool(true)));
    assert!(only[1].trials.iter().all(|t| t.config.params["transfer"] == Value::Bool(false)));

    let err = memctl::cli::ablate::plan(&spec, "tiny_stm", &[], Some(&["d".to_string()]), None, &ctx).err().unwrap();
    assert!(err.to_string().contains("`d` is the int 8, not a boolean"), "{err}");
    let err = memctl::cli::ablate::plan(&spec, "tiny_lstm", &[], None, None, &ctx).err().unwrap();
    assert!(err.to_string().contains("no boolean parameters"), "{err}");
    let twice = ["gates".to_string(), "gates".to_string()];
    let err = memctl::cli::ablate::plan(&spec, "tiny_stm", &[], Some(&twice), None, &ctx).err().unwrap();
    assert_eq!(err.to_string(), "--switches names `gates` twice");
}

/// `--switches gates,` has an empty name: an error about the list, not about a parameter ``.
#[test]
fn ablate_refuses_an_empty_name_in_the_switches() {
    let (_dir, spec, store) = spec_folder(&tiny_spec());
    let ctx = memctl::cli::Context { store, color: false };
    for list in [&["gates", ""][..], &["", "gates"], &[" "]] {
        let list: Vec<String> = list.iter().map(|s| s.to_string()).collect();
        let err = memctl::cli::ablate::plan(&spec, "tiny_stm", &[], Some(&list), None, &ctx).err().unwrap();
        let err = err.downcast::<memctl::cli::ablate::AblateError>().unwrap();
        assert_eq!(err, memctl::cli::ablate::AblateError::EmptySwitchName { list: list.join(",") });
    }
    let out = memctl(&ctx.store, &["ablate", spec.to_str().unwrap(), "tiny_stm", "--switches", "gates,", "--dry-run"]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        stderr(&out),
        "error: --switches `gates,` has an empty name: list the switches separated by single commas, e.g. `--switches gates,transfer`\n"
    );
}

/// A switch a `zip` pairs with `d`: turning it off would pick the zip's other row, another
/// `d`, so the ablation is refused (naming the zip) rather than compare two widths.
#[test]
fn ablate_refuses_a_switch_zipped_with_another_name() {
    let zipped = "experiment z {\n  task tiny\n  model stm\n  train { batch = 16, steps = 6 }\n  \
                  sweep { zip { gates in [true, false], d in [8, 16] } seed in 1..2 }\n}\n";
    let (_dir, spec, store) = spec_folder(&format!("{}{zipped}", tiny_spec()));
    let ctx = memctl::cli::Context { store, color: false };
    let err = memctl::cli::ablate::plan(&spec, "z", &[], None, None, &ctx).err().unwrap();
    let err = err.downcast::<memctl::cli::ablate::AblateError>().unwrap();
    let memctl::cli::ablate::AblateError::ZippedSwitch { switch, partners, experiment, at } = &err else {
        panic!("{err}")
    };
    assert_eq!((switch.as_str(), &partners[..], experiment.as_str()), ("gates", &["d".to_string()][..], "z"));
    assert!(at.ends_with("tiny.mem:46:11"), "{at}");
    assert!(err.to_string().contains("would pick the zip's other rows and change `d` too"), "{err}");
    // The switch the zip leaves alone is ablated as usual, at each of the zip's rows.
    let only = ["transfer".to_string()];
    let variants = memctl::cli::ablate::plan(&spec, "z", &[], Some(&only), None, &ctx).unwrap().unwrap();
    for v in &variants {
        let rows: Vec<(bool, i64)> = v
            .trials
            .iter()
            .map(|t| (t.config.params["gates"] == Value::Bool(true), t.config.params["d"].as_int().unwrap()))
            .collect();
        assert_eq!(rows, [(true, 8), (true, 8), (false, 16), (false, 16)], "{}", v.name);
    }
}

/// A grid search `s` of two learning rates for the tiny STM, 6 steps each, that prunes half of
/// them at step 2.
fn pruning_search() -> String {
    format!(
        "{}{}",
        crate::support::tiny_spec(),
        "experiment s {\n  task tiny\n  model stm\n  train { optimizer = adam(lr = 1e-3), batch = 16, steps = 6, \
         eval_every = 2 }\n  search { lr in [1e-3, 1e-2]  trials = 2, sampler = grid, prune = asha(metric = \
         val_loss, min_steps = 2, rungs = 1, keep = 1/2) }\n}\n"
    )
}

/// A trial that a search pruned at a rung stopped early: the ablation trains it to its budget
/// rather than compare a run stopped early.
#[test]
fn ablate_trains_a_trial_the_search_pruned_to_its_budget() {
    let (_dir, spec, store) = spec_folder(&pruning_search());
    let ctx = memctl::cli::Context { store: store.clone(), color: false };
    let fixed = ["lr=1e-3".to_string()];
    let variants = memctl::cli::ablate::plan(&spec, "s", &fixed, Some(&["gates".to_string()]), None, &ctx);
    let full = &variants.unwrap().unwrap()[0].trials[0];
    let key = memctl::sweep::identity::trial_key(full);
    let pruned = RunRecord {
        status: memctl::store::Status::Pruned,
        trial_key: key.clone(),
        steps_run: 2,
        ..crate::made_up_run::made_up_run(1, &full.config, "tiny.mem", "")
    };
    open(&store).put(&pruned).unwrap();
    ok(&memctl(&store, &["ablate", spec.to_str().unwrap(), "s", "lr=1e-3", "--switches", "gates", "--quiet"]));
    let latest = open(&store).latest_of_trial(&key).unwrap().unwrap();
    assert_eq!((latest.status, latest.steps_run), (memctl::store::Status::Done, 6), "run {}", latest.id);
}

/// `search-report` shows the run the search pruned, not the one `ablate` then trained to its
/// budget: the configuration stays pruned at its rung, and its steps are the rung's.
#[test]
fn search_report_keeps_a_pruned_configuration_pruned_after_ablate_trains_it() {
    let (_dir, spec, store) = spec_folder(&pruning_search());
    let spec = spec.to_str().unwrap();
    // One trial at a time, so that the second reaches the rung after the first, as ASHA prunes.
    ok(&memctl(&store, &["sweep", spec, "s", "--jobs", "1", "--quiet"]));
    let report = |store| ok(&memctl(store, &["search-report", spec, "s"]));
    let before = report(&store);
    assert!(before.contains("pruned at rung 1") && before.contains("training steps: 8,"), "{before}");
    for lr in ["lr=1e-3", "lr=1e-2"] {
        ok(&memctl(&store, &["ablate", spec, "s", lr, "--switches", "gates", "--quiet"]));
    }
    // The trial the search pruned is now done to its budget in a later run.
    let records = ok(&memctl(&store, &["runs", "--all", "--format", "records"]));
    let records: Vec<serde_json::Value> = serde_json::from_str(&records).unwrap();
    let pruned = records.iter().find(|r| r["status"] == "pruned").expect("a pruned run");
    let rerun = records.iter().find(|r| r["trial_key"] == pruned["trial_key"] && r["status"] == "done");
    assert_eq!(rerun.map(|r| r["steps_run"].clone()), Some(6.into()), "{records:?}");
    assert_eq!(report(&store), before);
    // So in a store the runs were imported into, where the search is known from its runs alone.
    let export = spec.replace("tiny.mem", "export.json");
    std::fs::write(&export, serde_json::to_string(&records).unwrap()).unwrap();
    let elsewhere = Path::new(&export).with_file_name("elsewhere");
    ok(&memctl(&elsewhere, &["import", &export]));
    let imported = report(&elsewhere);
    assert!(imported.contains("pruned at rung 1") && imported.contains("training steps: 8,"), "{imported}");
}

/// A search is ablated at one configuration: every searched name fixed on the command line
/// (else an error that names them), over the search's own seeds (`seed in 1..2`), not the
/// ends of `lr`'s range with the first seed.
#[test]
fn ablate_runs_a_search_at_the_configuration_the_command_line_fixes_over_its_seeds() {
    use memctl::cli::ablate::{AblateError, plan};
    let spec = Path::new(env!("CARGO_MANIFEST_DIR")).join("specs/examples/search.mem");
    let dir = tempfile::tempdir().unwrap();
    let ctx = memctl::cli::Context { store: dir.path().join("store"), color: false };
    let owned = |o: &[&str]| o.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let gates = owned(&["gates"]);

    let err = plan(&spec, "stm_search", &[], Some(&gates), None, &ctx).err().unwrap();
    let err = err.downcast::<AblateError>().unwrap();
    let open = vec![("lr".to_string(), "loguniform(0.0001, 0.01)".to_string()), ("d".into(), "[16, 32]".into())];
    assert_eq!(err, AblateError::Searched { experiment: "stm_search".into(), file: spec.display().to_string(), open });
    let err = plan(&spec, "stm_search", &owned(&["d=16"]), Some(&gates), None, &ctx).err().unwrap();
    assert!(err.to_string().contains("fix `lr` (searched in loguniform(0.0001, 0.01)) on the command line"), "{err}");

    let fixed = owned(&["lr=2e-3", "d=16"]);
    let variants = plan(&spec, "stm_search", &fixed, Some(&gates), None, &ctx).unwrap().unwrap();
    assert_eq!(variants.iter().map(|v| v.name.as_str()).collect::<Vec<_>>(), ["full", "w/o gates"]);
    for (v, on) in variants.iter().zip([true, false]) {
        assert_eq!(v.trials.iter().map(|t| t.config.seed).collect::<Vec<_>>(), [1, 2], "{}", v.name);
        for t in &v.trials {
            assert_eq!(t.config.train.lr, 2e-3);
            assert_eq!((&t.config.params["d"], &t.config.params["gates"]), (&Value::Int(16), &Value::Bool(on)));
        }
    }
    let three = plan(&spec, "stm_search", &fixed, Some(&gates), Some(3), &ctx).unwrap().unwrap();
    assert_eq!(three[1].trials.iter().map(|t| t.config.seed).collect::<Vec<_>>(), [1, 2, 3]);
    // A searched switch is fixed by the variants themselves.
    let d = owned(&["d"]);
    let err = plan(&spec, "stm_search", &owned(&["lr=2e-3"]), Some(&d), None, &ctx).err().unwrap();
    assert!(err.to_string().contains("`d` is the int 16, not a boolean"), "{err}");

    // The seeds once: from --seeds or from an override.
    let seeded = owned(&["lr=2e-3", "d=16", "seed=4"]);
    let err = plan(&spec, "stm_search", &seeded, Some(&gates), Some(2), &ctx).err().unwrap();
    assert_eq!(err.downcast::<AblateError>().unwrap(), AblateError::SeedsTwice);
    let variants = plan(&spec, "stm_search", &seeded, Some(&gates), None, &ctx).unwrap().unwrap();
    assert_eq!(variants[0].trials.iter().map(|t| t.config.seed).collect::<Vec<_>>(), [4]);
    // A switch the command line sets is left as set, and cannot be ablated too.
    let off = owned(&["lr=2e-3", "d=16", "transfer=false"]);
    let variants = plan(&spec, "stm_search", &off, None, None, &ctx).unwrap().unwrap();
    assert_eq!(variants.iter().map(|v| v.name.as_str()).collect::<Vec<_>>(), ["full", "w/o gates", "w/o learn_alpha"]);
    assert!(variants.iter().flat_map(|v| &v.trials).all(|t| t.config.params["transfer"] == Value::Bool(false)));
    let err = plan(&spec, "stm_search", &off, Some(&owned(&["transfer"])), None, &ctx).err().unwrap();
    assert_eq!(err.downcast::<AblateError>().unwrap(), AblateError::SwitchOverridden { name: "transfer".into() });

    let out = memctl(&ctx.store, &["ablate", spec.to_str().unwrap(), "stm_search", "--dry-run"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("e.g. `memctl ablate "), "{}", stderr(&out));
    assert!(stderr(&out).contains(" stm_search lr=… d=…` (`memctl search-report "), "{}", stderr(&out));
    let args = ["ablate", spec.to_str().unwrap(), "stm_search", "lr=2e-3", "d=16", "--switches", "gates", "--dry-run"];
    let out = memctl(&ctx.store, &args);
    assert_eq!(
        ok(&out),
        "full (lr=2e-3 d=16 gates=true): 2 trials\n    lr=0.002 d=16 gates=true seed=1\n    \
         lr=0.002 d=16 gates=true seed=2\nw/o gates (lr=2e-3 d=16 gates=false): 2 trials\n    \
         lr=0.002 d=16 gates=false seed=1\n    lr=0.002 d=16 gates=false seed=2\n"
    );
}

#[test]
fn ablate_runs_the_variants_once_and_prints_the_table() {
    let (_dir, spec, store) = spec_folder(&tiny_spec());
    let args =
        ["ablate", spec.to_str().unwrap(), "tiny_stm", "--switches", "gates", "--seeds", "1", "--threads", "1", "-q"];
    let out = memctl(&store, &args);
    let table = ok(&out);
    assert!(stderr(&out).contains("1 trial run, 0 already done"), "{}", stderr(&out));
    let rows: Vec<&str> = table.lines().filter(|l| l.contains("full") || l.contains("w/o gates")).collect();
    assert_eq!(rows.len(), 2, "{table}");
    assert!(table.contains("steps_to_converge") && table.contains("accuracy"), "{table}");
    // Done trials are not run again; the sweep machinery records them like any other run.
    let again = memctl(&store, &args);
    ok(&again);
    assert!(stderr(&again).contains("0 trials run, 1 already done"), "{}", stderr(&again));
    // A metric no trial reports is an error, not a column of dots, and it comes before any
    // trial trains: a fresh store stays empty.
    let fresh = store.with_file_name("fresh");
    let typo = memctl(&fresh, &[&args[..], &["--metric", "acuracy"]].concat());
    assert_eq!(typo.status.code(), Some(2), "{}", stderr(&typo));
    assert_eq!(
        stderr(&typo),
        "error: --metric `acuracy`: no trial of the ablation reports this final metric; did you mean `accuracy`?\n"
    );
    assert!(!fresh.exists(), "the typo opened the store before refusing");
    let unrelated = memctl(&store, &[&args[..], &["--metric", "perplexity"]].concat());
    assert_eq!(unrelated.status.code(), Some(2));
    assert!(
        stderr(&unrelated).contains("they report: accuracy, loss, seq_accuracy, val_accuracy"),
        "{}",
        stderr(&unrelated)
    );
    let runs = json(&memctl(&store, &["runs", "--format", "json", "--columns", "gates,seed"]));
    assert_eq!(runs.len(), 2);
    assert_eq!(runs.iter().filter(|r| r["gates"] == false).count(), 1);
}

/// `memctl results`: a trial re-run with `--force` counts once and an older spec version's run
/// is left out of its row; the verdict is computed from the criteria; `--data-dir` writes the
/// data behind each table.
#[test]
fn results_count_each_trial_once_and_compute_the_verdict() {
    use crate::synthetic::{config, record};
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let mut old = record(1, config(48, true, 3), 0.1, None);
    // An older spec: another hash and another token (a comment alone is the same version).
    old.spec_hash = "old".into();
    old.spec_text.push_str("\n// the older version\ntask older = assocRetrieval(pairs = 2)\n");
    let mut rerun = record(5, config(96, true, 1), 0.6, None);
    rerun.trial_key = "trial4".into();
    open(&store)
        .put_many(&[
            old,
            record(2, config(48, true, 1), 0.5, None),
            record(3, config(48, true, 2), 0.7, None),
            record(4, config(96, true, 1), 1.0, None),
            rerun,
            record(6, config(96, false, 1), 0.25, None),
        ])
        .unwrap();
    let yaml = dir.path().join("results.yaml");
    std::fs::write(
        &yaml,
        r#"
title: Results
tables:
  - title: "Tiny: gates"
    experiments: [tiny_stm]
    rows: [d, gates]
    metrics: [accuracy]
    criteria:
      - descending: {metric: accuracy, rows: [{d: 96, gates: true}, {d: 96, gates: false}]}
      - at_least: {row: {d: 48, gates: true}, metric: accuracy, value: 0.65}
  - title: "Never run"
    experiments: [nothing]
    rows: [d]
    metrics: [accuracy]
    criteria:
      - above: {row: {d: 8}, metric: accuracy, value: 0.5}
"#,
    )
    .unwrap();
    let data = dir.path().join("data");
    let md = ok(&memctl(&store, &["results", yaml.to_str().unwrap(), "--data-dir", data.to_str().unwrap()]));
    assert!(md.contains("| 48 | true | 0.600 ± 0.141 (2) |"), "{md}");
    assert!(md.contains("| 96 | true | 0.600 (1) |"), "{md}");
    assert!(md.contains("1 earlier run of trials that ran again"), "{md}");
    assert!(md.contains("1 run of older spec versions"), "{md}");
    assert!(md.contains("**Verdict: partly reproduced (1 of 2 criteria met).**"), "{md}");
    assert!(md.contains("- ✗ accuracy of {d: 48, gates: true} = 0.600 (n = 2) ≥ 0.650"), "{md}");
    assert!(md.contains("**Verdict: not run (0 of 1 criteria met, 1 not run).**"), "{md}");
    let table: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(data.join("tiny-gates.json")).unwrap()).unwrap();
    assert_eq!(table["runs"].as_array().map(Vec::len), Some(4));
    assert!(data.join("never-run.json").exists());
    // A metric none of a table's runs has is a typo, named with the likely intent, not a
    // column of `·`; a YAML error names the file.
    let typo = dir.path().join("typo.yaml");
    let one_table = "title: R\ntables:\n  - {title: T, experiments: [tiny_stm], rows: [d], metrics: [acuracy]}\n";
    std::fs::write(&typo, one_table).unwrap();
    let out = memctl(&store, &["results", typo.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("a final metric `acuracy`; did you mean `accuracy`?"), "{err}");
    std::fs::write(&typo, "title: [").unwrap();
    let err = String::from_utf8_lossy(&memctl(&store, &["results", typo.to_str().unwrap()]).stderr).to_string();
    assert!(err.contains("typo.yaml:") && !err.contains("<input>"), "{err}");

    // The data file alone rebuilds its table: imported into an empty store, the same rows.
    let rebuilt = dir.path().join("rebuilt");
    ok(&memctl(&rebuilt, &["import", data.join("tiny-gates.json").to_str().unwrap()]));
    let again = ok(&memctl(&rebuilt, &["results", yaml.to_str().unwrap()]));
    for row in ["| 48 | true | 0.600 ± 0.141 (2) |", "| 96 | true | 0.600 (1) |", "| 96 | false | 0.250 (1) |"] {
        assert!(md.contains(row) && again.contains(row), "{row}:\n{again}");
    }
    let runs = json(&memctl(&rebuilt, &["runs", "--all", "--format", "records"]));
    assert_eq!(runs.len(), 4);
    assert!(runs.iter().all(|r| r["spec_text"].as_str() == Some(tiny_spec().as_str())), "spec texts restored");
}

/// `memctl results -o DOC --data-dir DIR`: each figure is linked by its path from DOC's folder,
/// whether DIR is inside it, beside it or given as an absolute path.
#[test]
fn results_link_figures_from_the_documents_folder() {
    use crate::synthetic::{config, record};
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    open(&store).put_many(&[record(1, config(48, true, 1), 0.5, None)]).unwrap();
    let yaml = "title: R\ntables:\n  - {title: T, experiments: [tiny_stm], rows: [d], metrics: [accuracy], \
                curves: val_accuracy}\n";
    std::fs::write(dir.path().join("r.yaml"), yaml).unwrap();
    std::fs::create_dir(dir.path().join("sub")).unwrap();
    let absolute = dir.path().join("abs");
    for (doc, data, link) in [
        ("sub/out.md", "data", "../data/t.svg"),
        ("out.md", "./sub/data", "sub/data/t.svg"),
        ("sub/out.md", absolute.to_str().unwrap(), "../abs/t.svg"),
    ] {
        ok(&memctl_in(dir.path(), &store, &["results", "r.yaml", "-o", doc, "--data-dir", data]));
        let md = std::fs::read_to_string(dir.path().join(doc)).unwrap();
        assert!(md.contains(&format!("]({link})")), "{doc}, {data}:\n{md}");
        let folder = dir.path().join(doc).parent().unwrap().to_path_buf();
        assert!(folder.join(link).is_file(), "{link} from {}", folder.display());
    }
}

/// The identity and content of a store's runs, ids aside (an import renumbers them).
fn runs_by_identity(store: &Path) -> Vec<(String, f64, serde_json::Value)> {
    let mut runs: Vec<_> = json(&memctl(store, &["runs", "--all", "--format", "records"]))
        .into_iter()
        .map(|mut r| {
            r.as_object_mut().unwrap().remove("id");
            (r["trial_key"].as_str().unwrap().to_string(), r["started_at"].as_f64().unwrap(), r)
        })
        .collect();
    runs.sort_by(|a, b| a.0.cmp(&b.0));
    runs
}

#[test]
fn import_merges_an_export_once_with_pruned_runs_and_leaves_unfinished_and_superseded_runs_out() {
    let (dir, from) = filled();
    // Trial 1 ran again later, better: the rerun is its latest run, wherever the runs go.
    let mut rerun = open(&from).get(1).unwrap();
    (rerun.id, rerun.started_at) = (8, rerun.started_at + 10.0 * 86_400.0);
    rerun.final_metrics.insert("accuracy".into(), 0.95);
    open(&from).put(&rerun).unwrap();
    let export = dir.path().join("runs.json");
    std::fs::write(&export, ok(&memctl(&from, &["runs", "--all", "--format", "records"]))).unwrap();
    let into = dir.path().join("other");
    let file = export.to_str().unwrap();
    // Each trial's latest run (what sweeps skip on): its start and accuracy.
    let latest = |store: &Path| -> Vec<(String, f64, f64)> {
        let s = open(store);
        let keys: std::collections::BTreeSet<String> = s.all().unwrap().into_iter().map(|r| r.trial_key).collect();
        keys.into_iter()
            .map(|k| {
                let r = s.latest_of_trial(&k).unwrap().unwrap();
                (k, r.started_at, r.final_metrics.get("accuracy").copied().unwrap_or(-1.0))
            })
            .collect()
    };
    // Eight finished runs (seven done, one failed) arrive whole, curves and spec text included,
    // in the order they started, so each trial's latest run is the same as in the store they left.
    let first = memctl(&into, &["import", file]);
    assert_eq!(first.status.code(), Some(0), "{}", stderr(&first));
    assert!(stderr(&first).contains("8 imported, 0 already in the store"), "{}", stderr(&first));
    assert_eq!(runs_by_identity(&into), runs_by_identity(&from));
    assert_eq!(latest(&into), latest(&from));
    assert!(latest(&into).iter().any(|(k, _, a)| k == "trial1" && *a == 0.95), "{:?}", latest(&into));
    let again = memctl(&into, &["import", file]);
    assert!(stderr(&again).contains("0 imported, 8 already in the store"), "{}", stderr(&again));

    // Left out: a running run (it resumes where it ran), a failure of a trial done here, a run
    // older than its trial's latest run here, and a run of a trial interrupted here.
    let records: Vec<serde_json::Value> = serde_json::from_str(&std::fs::read_to_string(&export).unwrap()).unwrap();
    let of = |key: &str| records.iter().find(|r| r["trial_key"] == key && r["status"] == "done").unwrap().clone();
    let mut failed_rerun = of("trial2");
    failed_rerun["status"] = "failed".into();
    failed_rerun["started_at"] = (failed_rerun["started_at"].as_f64().unwrap() + 1.0).into();
    let mut running = of("trial3");
    running["trial_key"] = "elsewhere".into();
    running["status"] = "running".into();
    let mut older = of("trial4");
    older["started_at"] = (older["started_at"].as_f64().unwrap() - 1.0).into();
    let mut interrupted_here = open(&into).latest_of_trial("trial5").unwrap().unwrap();
    (interrupted_here.id, interrupted_here.status) = (20, memctl::store::Status::Interrupted);
    interrupted_here.started_at += 1.0;
    open(&into).put(&interrupted_here).unwrap();
    let mut newer_of_interrupted = of("trial5");
    newer_of_interrupted["started_at"] = (interrupted_here.started_at + 1.0).into();
    let partial_file = dir.path().join("partial.json");
    std::fs::write(
        &partial_file,
        serde_json::to_string(&[failed_rerun, running, older, newer_of_interrupted]).unwrap(),
    )
    .unwrap();
    let partial = memctl(&into, &["import", partial_file.to_str().unwrap()]);
    let err = stderr(&partial);
    assert!(err.contains("0 imported, 0 already in the store"), "{err}");
    assert!(err.contains("1 unfinished (not imported"), "{err}");
    assert!(err.contains("1 of trials running or interrupted here"), "{err}");
    assert!(err.contains("2 older than their trial's latest run here or failed or pruned where it is done"), "{err}");
    assert_eq!(runs_by_identity(&into).len(), 9);

    // A pruned run (a search's pruner stopped it) is finished: it comes in, unless its trial is
    // done here.
    let mut pruned = of("trial6");
    (pruned["trial_key"], pruned["status"]) = ("pruned".into(), "pruned".into());
    let mut pruned_after_done = of("trial6");
    pruned_after_done["status"] = "pruned".into();
    pruned_after_done["started_at"] = (pruned_after_done["started_at"].as_f64().unwrap() + 1.0).into();
    std::fs::write(&partial_file, serde_json::to_string(&[pruned, pruned_after_done]).unwrap()).unwrap();
    let err = stderr(&memctl(&into, &["import", partial_file.to_str().unwrap()]));
    assert!(err.contains("1 imported, 0 already in the store, 1 older than"), "{err}");
    assert_eq!(runs_by_identity(&into).len(), 10);

    // Something else is refused with where it went wrong, and changes nothing.
    std::fs::write(&export, "{\"rows\": []}").unwrap();
    let bad = memctl(&into, &["import", file]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(stderr(&bad).contains("runs.json: not an export of runs (an object without `runs`"), "{}", stderr(&bad));
    let rows = memctl(&into, &["runs", "--format", "json"]);
    std::fs::write(&export, &rows.stdout).unwrap();
    let bad = stderr(&memctl(&into, &["import", file]));
    assert!(bad.contains("runs.json: not an export of runs (an array of rows, as `runs --format json`"), "{bad}");
    std::fs::write(&export, "[{\"record_version\": 99}]").unwrap();
    let newer = stderr(&memctl(&into, &["import", file]));
    assert!(
        newer.contains("runs.json: record 1: record version 99 is newer") && !newer.contains("write one"),
        "{newer}"
    );
    // A start no date can show (it would also be its trial's latest run for good).
    let mut far = of("trial6");
    far["started_at"] = 1e300.into();
    std::fs::write(&export, serde_json::to_string(&[far]).unwrap()).unwrap();
    let far = stderr(&memctl(&into, &["import", file]));
    assert!(far.contains("`started_at` is 1e300, not a time in Unix seconds up to 9999-12-31"), "{far}");
    assert_eq!(runs_by_identity(&into).len(), 10);
    // Tags `memctl tag` refuses, which listings would read otherwise, are kept as it would
    // have written them, and said so.
    let mut tagged = of("trial6");
    tagged["tags"] = serde_json::json!(["a,b", " a ", ""]);
    tagged["started_at"] = (tagged["started_at"].as_f64().unwrap() + 5.0).into();
    std::fs::write(&export, serde_json::to_string(&[tagged]).unwrap()).unwrap();
    let err = stderr(&memctl(&into, &["import", file]));
    assert!(err.contains(r#"tags ["a,b", " a ", ""] kept as ["a", "b"]"#) && err.contains("1 imported"), "{err}");
    let rows = json(&memctl(&into, &["runs", "--where", r#""b" in tags and "a" in tags"#, "--format", "json"]));
    assert_eq!(rows.len(), 1, "{rows:?}");
}

/// The README's `ablate` example: its spec checks, and `ablate` plans the full model and the
/// model without JUMP, three seeds each (its training is not run here).
#[test]
fn the_readmes_ablation_example_checks_and_plans_jump_and_no_jump() {
    let spec = Path::new(env!("CARGO_MANIFEST_DIR")).join("specs/examples/ablation.mem");
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let out = memctl(&store, &["check", spec.to_str().unwrap()]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("experiment namtm_jump: 3 trials, task palindrome"), "{stdout}");

    let ctx = memctl::cli::Context { store: store.clone(), color: false };
    let variants = memctl::cli::ablate::plan(&spec, "namtm_jump", &[], None, None, &ctx).unwrap().unwrap();
    assert_eq!(variants.iter().map(|v| v.name.as_str()).collect::<Vec<_>>(), ["full", "w/o jump"]);
    for (v, jump) in variants.iter().zip([true, false]) {
        assert_eq!(v.trials.iter().map(|t| t.config.seed).collect::<Vec<_>>(), [1, 2, 3], "{}", v.name);
        assert!(v.trials.iter().all(|t| t.config.params["jump"] == Value::Bool(jump)), "{}", v.name);
    }
    let out = memctl(
        &store,
        &["ablate", spec.to_str().unwrap(), "namtm_jump", "--metric", "od_hard_seq_accuracy", "--dry-run"],
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert!(
        stdout.starts_with("full (jump=true): 3 trials\n") && stdout.contains("w/o jump (jump=false): 3 trials\n"),
        "{stdout}"
    );
}
