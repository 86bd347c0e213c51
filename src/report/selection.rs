//! Which runs make up a results table's rows.
//!
//! A trial (one identity: same data, weights and settings) counts once, by its newest finished
//! run: a `--force` re-run replaces the earlier run, it is not one more seed. A row combines
//! runs of one spec version only (`lang::version`: the spec's tokens, so an edited comment is
//! the same version): when a row has runs of several versions, the version of its newest run is
//! the row's and the others are left out (and counted), so that runs of an edited spec are
//! never averaged with runs of the old one. The choice is per row,
//! not per experiment, because a sweep of an edited spec skips the trials whose identity did
//! not change: their runs keep the older spec hash and still are the current spec's results.

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};

use crate::lang::version::experiment_version;
use crate::store::{RunRecord, Status};
use crate::value::{Label, Value};

/// One row of a table: its key values and the runs behind it.
#[derive(Debug)]
pub struct Row<'a> {
    /// The values of the table's row keys, as text (`·` where a run has no such key).
    pub key: Vec<String>,
    /// The spec version the row's runs share ([`experiment_version`]).
    pub version: String,
    /// The spec hash of the row's newest run (its runs may differ in comments).
    pub spec_hash: String,
    pub runs: Vec<&'a RunRecord>,
}

/// The rows of a table and what was left out of them.
#[derive(Debug, Default)]
pub struct Selection<'a> {
    /// In key order, numbers by value (`k = 2` before `k = 10`).
    pub rows: Vec<Row<'a>>,
    /// Finished runs of a trial that has a newer finished run.
    pub repeats_left_out: usize,
    /// Runs of a row's older spec versions.
    pub older_versions_left_out: usize,
}

impl Row<'_> {
    /// The configuration names, other than the seed and the table's `row_keys`, whose values
    /// differ among the row's runs, with those values (`·` for a run without the name): a row
    /// meant to average seeds that averages these as well. A value only some runs set (a
    /// command-line `lr=1e30`) counts as much as a swept one.
    pub fn mixed(&self, row_keys: &[String]) -> Vec<(String, BTreeSet<String>)> {
        let configs: Vec<BTreeMap<String, String>> = self.runs.iter().map(|r| configuration(r)).collect();
        let names: BTreeSet<&String> =
            configs.iter().flat_map(BTreeMap::keys).filter(|n| *n != "seed" && !row_keys.contains(n)).collect();
        names
            .into_iter()
            .filter_map(|name| {
                let values: BTreeSet<String> =
                    configs.iter().map(|c| c.get(name).cloned().unwrap_or_else(|| "·".into())).collect();
                (values.len() > 1).then(|| (name.clone(), values))
            })
            .collect()
    }
}

/// What a run computed, by the names row keys read ([`key_value`]): the model, the task, the
/// parameters, task options and training settings, without the settings that change how it
/// ran but not what it computed (`train_config::NOT_IN_IDENTITY`: the device, checkpointing).
/// A name an earlier of those has too is qualified by its section (`train.lr`), as a row key
/// reads the earlier one.
fn configuration(r: &RunRecord) -> BTreeMap<String, String> {
    let c = &r.config;
    let mut out: BTreeMap<String, String> =
        [("model".to_string(), c.model.clone()), ("task".to_string(), c.task.clone())].into();
    let mut train = c.train.clone();
    train.retain(|k, _| !crate::train_config::NOT_IN_IDENTITY.contains(&k.as_str()));
    for (section, values) in [("param", &c.params), ("task", &c.task_options), ("train", &train)] {
        for (name, v) in values {
            let name = if out.contains_key(name) { format!("{section}.{name}") } else { name.clone() };
            let shown = match v {
                Value::Str(s) => s.clone(),
                // `1e30`, not thirty-one digits.
                other => Label(other).to_string(),
            };
            out.insert(name, shown);
        }
    }
    out
}

impl Selection<'_> {
    pub fn runs(&self) -> impl Iterator<Item = &RunRecord> {
        self.rows.iter().flat_map(|r| r.runs.iter().copied())
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }
}

/// The finished runs of `experiments`, grouped into rows by the values of `row_keys`.
pub fn select<'a>(runs: &'a [RunRecord], experiments: &[String], row_keys: &[String]) -> Selection<'a> {
    // The newest finished run of each trial (ids grow with time).
    let mut newest: BTreeMap<&str, &RunRecord> = BTreeMap::new();
    let mut finished = 0;
    for r in runs.iter().filter(|r| r.status == Status::Done && experiments.contains(&r.config.experiment)) {
        finished += 1;
        let slot = newest.entry(r.trial_key.as_str()).or_insert(r);
        if r.id > slot.id {
            *slot = r;
        }
    }
    let mut by_key: BTreeMap<Vec<String>, Vec<&RunRecord>> = BTreeMap::new();
    for r in newest.values() {
        by_key.entry(row_keys.iter().map(|k| key_value(r, k)).collect()).or_default().push(r);
    }
    // Each spec text's version once per set of swept axes (runs of a sweep share theirs).
    let mut versions: BTreeMap<(&str, Vec<&str>), String> = BTreeMap::new();
    let mut version_of = |r: &'a RunRecord| -> String {
        // A record without its text (none that this memctl writes) has its hash as its version.
        if r.spec_text.is_empty() {
            return r.spec_hash.clone();
        }
        let swept: Vec<&str> = r.config.swept.iter().map(|(axis, _)| axis.as_str()).collect();
        versions
            .entry((r.spec_hash.as_str(), swept.clone()))
            .or_insert_with(|| experiment_version(&r.spec_text, &swept))
            .clone()
    };
    let mut selection = Selection { repeats_left_out: finished - newest.len(), ..Selection::default() };
    for (key, mut runs) in by_key {
        runs.sort_by_key(|r| r.id);
        let Some(newest) = runs.last().copied() else { continue };
        let version = version_of(newest);
        let before = runs.len();
        runs.retain(|r| version_of(r) == version);
        selection.older_versions_left_out += before - runs.len();
        selection.rows.push(Row { key, version, spec_hash: newest.spec_hash.clone(), runs });
    }
    selection.rows.sort_by(|a, b| key_order(&a.key, &b.key));
    selection
}

/// Row keys compared value by value: numbers by value, before any text; text as text (a total
/// order, as sorting needs).
fn key_order(a: &[String], b: &[String]) -> Ordering {
    let value = |x: &String, y: &String| match (x.parse::<f64>(), y.parse::<f64>()) {
        (Ok(x), Ok(y)) => x.total_cmp(&y),
        (Ok(_), Err(_)) => Ordering::Less,
        (Err(_), Ok(_)) => Ordering::Greater,
        (Err(_), Err(_)) => x.cmp(y),
    };
    a.iter().zip(b).map(|(x, y)| value(x, y)).find(|o| o.is_ne()).unwrap_or_else(|| a.len().cmp(&b.len()))
}

/// A run's value of a table metric: a final metric, or `ms_per_step`, `steps_to_converge`,
/// `epochs_to_converge`.
pub fn metric(r: &RunRecord, name: &str) -> Option<f64> {
    match name {
        "ms_per_step" => (r.steps_run > 0).then(|| 1e3 * r.train_seconds / r.steps_run as f64),
        "steps_to_converge" => r.steps_to_converge.map(|s| s as f64),
        "epochs_to_converge" => r.epochs_to_converge,
        _ => r.final_metrics.get(name).copied(),
    }
}

/// A run's value for a row key: a swept or fixed parameter, a task option, a training setting
/// (`lr`, `batch`), or the model/task/experiment.
pub fn key_value(r: &RunRecord, key: &str) -> String {
    let c = &r.config;
    match key {
        "model" => c.model.clone(),
        "experiment" => c.experiment.clone(),
        "task" => c.task.clone(),
        "seed" => c.seed.to_string(),
        _ => {
            c.params.get(key).or_else(|| c.task_options.get(key)).or_else(|| c.train.get(key)).map_or("·".into(), plain)
        }
    }
}

fn plain(v: &Value) -> String {
    match v {
        Value::Str(s) => s.clone(),
        other => other.to_string(),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A finished run of experiment `exp`, trial `trial`, spec version `hash`, with `params`
    /// and an accuracy.
    pub(crate) fn run(id: u64, trial: &str, hash: &str, params: &[(&str, Value)], accuracy: f64) -> RunRecord {
        let mut r: RunRecord =
            crate::store::record::decode(include_bytes!("../../tests/fixtures/run_record_v1.json")).unwrap();
        r.id = id;
        r.trial_key = trial.into();
        r.spec_hash = hash.into();
        // A text whose tokens differ with `hash`.
        r.spec_text = format!("experiment exp {{ task {hash} }}");
        r.status = Status::Done;
        r.config.experiment = "exp".into();
        r.config.params = params.iter().map(|(k, v)| (k.to_string(), v.clone())).collect();
        r.final_metrics = [("accuracy".to_string(), accuracy)].into();
        r
    }

    fn rows(s: &Selection) -> Vec<(Vec<String>, Vec<u64>)> {
        s.rows.iter().map(|r| (r.key.clone(), r.runs.iter().map(|r| r.id).collect())).collect()
    }

    #[test]
    fn a_forced_rerun_replaces_the_trials_run_and_is_not_another_seed() {
        let d = [("d", Value::Int(8))];
        let runs = [run(1, "t1", "h", &d, 0.5), run(2, "t2", "h", &d, 0.7), run(3, "t1", "h", &d, 0.9)];
        let s = select(&runs, &["exp".into()], &["d".into()]);
        assert_eq!(rows(&s), vec![(vec!["8".to_string()], vec![2, 3])]);
        assert_eq!((s.repeats_left_out, s.older_versions_left_out), (1, 0));
    }

    #[test]
    fn an_older_spec_versions_runs_are_not_mixed_into_a_row() {
        let d = [("d", Value::Int(8))];
        // Seeds 1–2 under the old spec, seed 1 again (a new identity) under the new one.
        let runs = [run(1, "old1", "v1", &d, 0.2), run(2, "old2", "v1", &d, 0.3), run(3, "new1", "v2", &d, 0.9)];
        let s = select(&runs, &["exp".into()], &["d".into()]);
        assert_eq!(rows(&s), vec![(vec!["8".to_string()], vec![3])]);
        assert_eq!(s.rows[0].spec_hash, "v2");
        assert_eq!(s.older_versions_left_out, 2);
    }

    #[test]
    fn a_comment_edit_between_seeds_does_not_split_a_row() {
        let d = [("d", Value::Int(8))];
        let mut edited = run(2, "seed2", "v1-commented", &d, 0.8);
        edited.spec_text = "// seeds 2 and 3 ran later\nexperiment exp {\n  task v1\n}\n".into();
        let runs = [run(1, "seed1", "v1", &d, 0.7), edited];
        let s = select(&runs, &["exp".into()], &["d".into()]);
        assert_eq!(rows(&s), vec![(vec!["8".to_string()], vec![1, 2])]);
        assert_eq!((s.rows[0].spec_hash.as_str(), s.older_versions_left_out), ("v1-commented", 0));
    }

    #[test]
    fn seeds_chosen_on_the_command_line_share_a_row() {
        let k = [("k", Value::Int(15))];
        // Seed 1 swept alone, seed 3 later with a list of k: one spec, chosen in parts.
        let mut seed1 = run(1, "seed1", "h1", &k, 0.3);
        seed1.spec_text = "experiment exp { task v1 }\n// ---- <command line>\nseed=1".into();
        let mut seed3 = run(2, "seed3", "h3", &k, 0.4);
        seed3.spec_text =
            "experiment exp { task v1 }\n// ---- <command line>\nseed=3\n// ---- <command line>\nk=[15,10]".into();
        for r in [&mut seed1, &mut seed3] {
            r.config.swept = vec![("seed".into(), Value::Int(1)), ("k".into(), Value::Int(15))];
        }
        // The same seed with fewer steps is another experiment.
        let mut short = run(3, "short", "h4", &k, 0.1);
        short.spec_text = "experiment exp { task v1 }\n// ---- <command line>\nsteps=100".into();
        short.config.swept = seed1.config.swept.clone();
        let runs = [seed1.clone(), seed3.clone()];
        let s = select(&runs, &["exp".into()], &["k".into()]);
        assert_eq!(rows(&s), vec![(vec!["15".to_string()], vec![1, 2])]);
        assert_eq!(s.older_versions_left_out, 0);
        let all = [seed1, seed3, short];
        let s = select(&all, &["exp".into()], &["k".into()]);
        assert_eq!(rows(&s), vec![(vec!["15".to_string()], vec![3])]);
        assert_eq!(s.older_versions_left_out, 2);
    }

    #[test]
    fn a_row_the_edited_spec_did_not_rerun_keeps_its_version() {
        // The sweep of the edited spec (v2) skipped d = 8, whose identity did not change.
        let runs = [run(1, "a", "v1", &[("d", Value::Int(8))], 0.5), run(2, "b", "v2", &[("d", Value::Int(16))], 0.6)];
        let s = select(&runs, &["exp".into()], &["d".into()]);
        assert_eq!(rows(&s), vec![(vec!["8".to_string()], vec![1]), (vec!["16".to_string()], vec![2])]);
        assert_eq!(s.older_versions_left_out, 0);
    }

    #[test]
    fn a_row_is_mixed_by_any_configuration_value_its_runs_differ_in() {
        let mixed = |runs: &[RunRecord], keys: &[&str]| {
            let keys: Vec<String> = keys.iter().map(|k| k.to_string()).collect();
            let row =
                Row { key: vec![], version: String::new(), spec_hash: String::new(), runs: runs.iter().collect() };
            row.mixed(&keys).into_iter().map(|(k, v)| (k, v.into_iter().collect::<Vec<_>>())).collect::<Vec<_>>()
        };
        let a = run(1, "a", "h", &[("d", Value::Int(8))], 0.5);
        // Another seed, device and checkpointing: not mixed.
        let mut b = a.clone();
        b.config.seed = 7;
        b.config.train.insert("device".into(), Value::Str("cuda:0".into()));
        b.config.train.insert("keep_checkpoint".into(), Value::Bool(true));
        assert!(mixed(&[a.clone(), b.clone()], &[]).is_empty());
        // A task option, a parameter only one run has, and another model.
        b.config.task_options.insert("pairs".into(), Value::Int(3));
        b.config.params.insert("nq".into(), Value::Int(2));
        b.config.model = "stm".into();
        let v = |xs: &[&str]| xs.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert_eq!(
            mixed(&[a.clone(), b.clone()], &[]),
            vec![
                ("model".into(), v(&["lstm", "stm"])),
                ("nq".into(), v(&["2", "·"])),
                ("pairs".into(), v(&["2", "3"]))
            ]
        );
        // Row keys split rows; they do not mix them.
        assert_eq!(mixed(&[a.clone(), b.clone()], &["model", "nq"]), vec![("pairs".into(), v(&["2", "3"]))]);
        // A training setting shadowed by a parameter of the same name is named by its section.
        let (mut c, mut e) = (a.clone(), a);
        c.config.params.insert("lr".into(), Value::Int(1));
        e.config.params.insert("lr".into(), Value::Int(1));
        e.config.train.insert("lr".into(), Value::Float(0.5));
        assert_eq!(mixed(&[c, e], &["lr"]), vec![("train.lr".into(), v(&["0.001", "0.5"]))]);
    }

    #[test]
    fn rows_are_ordered_by_number_where_their_keys_are_numbers() {
        let runs: Vec<RunRecord> = [10, 2, 100, 1]
            .iter()
            .enumerate()
            .map(|(i, k)| run(i as u64, &format!("t{i}"), "h", &[("k", Value::Int(*k))], 0.5))
            .collect();
        let keys: Vec<String> =
            select(&runs, &["exp".into()], &["k".into()]).rows.iter().map(|r| r.key[0].clone()).collect();
        assert_eq!(keys, ["1", "2", "10", "100"]);
        assert_eq!(key_order(&["b".into()], &["a".into()]), Ordering::Greater);
        assert_eq!(key_order(&["9".into(), "x".into()], &["9".into(), "y".into()]), Ordering::Less);
        // Numbers before text, so that the order is total: 9 < 10 < 3x, never 3x < 9.
        assert_eq!(key_order(&["3x".into()], &["9".into()]), Ordering::Greater);
        assert_eq!(key_order(&["10".into()], &["3x".into()]), Ordering::Less);
    }

    #[test]
    fn unfinished_runs_and_other_experiments_are_not_selected() {
        let mut failed = run(1, "a", "h", &[], 0.0);
        failed.status = Status::Failed;
        let mut other = run(2, "b", "h", &[], 0.5);
        other.config.experiment = "other".into();
        let runs = [failed, other];
        assert!(select(&runs, &["exp".into()], &[]).is_empty());
    }
}
