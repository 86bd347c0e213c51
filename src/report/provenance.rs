//! Where and how long a table's runs ran, from their records: the machines (device, CPUs,
//! host), the memctl builds, and the training length (steps, and epochs where the task has a
//! fixed training set), beside the paper's length when the description states it.

use std::collections::{BTreeMap, BTreeSet};

use super::numbers::{count, sig3};
use crate::store::RunRecord;
use crate::value::Value;

/// `cpu (AMD EPYC 7B13) on host vm (2 CPUs, x86_64)`: the machine a run ran on. Records made
/// before memctl kept the processor name only the device.
pub fn machine(r: &RunRecord) -> String {
    let e = &r.environment;
    let device = match (e.processor.as_str(), e.device.starts_with("cuda")) {
        ("", true) => format!("{} (GPU model not recorded)", e.device),
        ("", false) => e.device.clone(),
        (processor, _) => format!("{} ({processor})", e.device),
    };
    format!("{device} on host {} ({} CPU{}, {})", e.hostname, e.cpus, if e.cpus == 1 { "" } else { "s" }, e.arch)
}

/// The memctl build a run ran on: its version, features and commit (12 digits).
pub fn build(r: &RunRecord) -> String {
    let e = &r.environment;
    let mut build = format!("memctl {}", e.memctl_version);
    if !e.features.is_empty() {
        build.push_str(&format!(" ({})", e.features.join(", ")));
    }
    match e.commit.split_once('+') {
        _ if e.commit.is_empty() => build.push_str(" (commit not recorded)"),
        Some((sha, _)) => build.push_str(&format!(" at {} with uncommitted changes", short(sha))),
        None => build.push_str(&format!(" at {}", short(&e.commit))),
    }
    build
}

fn short(sha: &str) -> &str {
    &sha[..sha.len().min(12)]
}

/// Epochs a run trained: steps × batch over the training set, for a task with a fixed one.
pub fn epochs(r: &RunRecord) -> Option<f64> {
    let examples = r.config.task_options.get("train").and_then(Value::as_int).filter(|n| *n > 0)?;
    let batch = r.config.train.get("batch").and_then(Value::as_int)?;
    Some(r.steps_run as f64 * batch as f64 / examples as f64)
}

/// "Ran on cpu on host vm (2 CPUs, x86_64) (12 runs); built as memctl 0.1.0 (12 runs)."
/// Machines of one description that ran in several boots say so, with the runs of each
/// ("(162 runs, over 3 boots: 84, 71 and 7)"): a boot is another machine or one machine
/// restarted, and the records keep nothing else that tells such machines apart. Several builds
/// are counted first, with the runs built from uncommitted changes.
pub fn where_line(runs: &[&RunRecord]) -> String {
    let mut builds = tally(runs, build);
    let distinct: BTreeSet<String> = runs.iter().map(|r| build(r)).collect();
    if distinct.len() > 1 {
        let uncommitted = runs.iter().filter(|r| r.environment.commit.contains('+')).count();
        let changed = distinct.iter().filter(|b| b.ends_with("with uncommitted changes")).count();
        let lead = match changed {
            0 => format!("{} builds", distinct.len()),
            _ => format!(
                "{} builds, {changed} of them with uncommitted changes ({uncommitted} of {} runs)",
                distinct.len(),
                runs.len()
            ),
        };
        builds = format!("{lead}: {builds}");
    }
    format!("Ran on {}; built as {builds}.", machines(runs))
}

/// Each machine description with its runs, and its boots where it ran in more than one.
fn machines(runs: &[&RunRecord]) -> String {
    let mut boots: BTreeMap<String, BTreeMap<&str, usize>> = BTreeMap::new();
    for r in runs {
        let boot = r.environment.process.as_ref().map_or("", |p| p.boot_id.as_str());
        *boots.entry(machine(r)).or_default().entry(boot).or_default() += 1;
    }
    let mut by_count: Vec<(String, Vec<usize>)> = boots
        .into_iter()
        .map(|(m, per_boot)| {
            let mut counts: Vec<usize> = per_boot.into_values().collect();
            counts.sort_by(|a, b| b.cmp(a));
            (m, counts)
        })
        .collect();
    by_count.sort_by(|a, b| b.1.iter().sum::<usize>().cmp(&a.1.iter().sum()).then(a.0.cmp(&b.0)));
    by_count
        .iter()
        .map(|(m, counts)| {
            let n: usize = counts.iter().sum();
            let runs = format!("{n} run{}", if n == 1 { "" } else { "s" });
            match counts.len() {
                1 => format!("{m} ({runs})"),
                boots => format!("{m} ({runs}, over {boots} boots: {})", and_list(counts)),
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// "84, 71 and 7".
fn and_list(counts: &[usize]) -> String {
    let text: Vec<String> = counts.iter().map(|c| count(*c as u64)).collect();
    match text.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} and {last}", rest.join(", ")),
        _ => text.join(""),
    }
}

/// "Trained 1,500–2,300 steps (≈ 2.40–3.68 epochs); the paper: up to 100 epochs."
pub fn length_line(runs: &[&RunRecord], paper: Option<&str>) -> String {
    let steps = range(runs.iter().map(|r| r.steps_run as f64), |v| count(v as u64));
    let epochs = range(runs.iter().filter_map(|r| epochs(r)), sig3);
    let mut line = format!("Trained {} steps", steps.unwrap_or_else(|| "no".into()));
    if let Some(e) = epochs {
        line.push_str(&format!(" (≈ {e} epochs)"));
    }
    if let Some(p) = paper {
        line.push_str(&format!("; the paper: {p}"));
    }
    line.push('.');
    line
}

/// Distinct values with their number of runs, most runs first.
fn tally(runs: &[&RunRecord], of: fn(&RunRecord) -> String) -> String {
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for r in runs {
        *counts.entry(of(r)).or_default() += 1;
    }
    let mut by_count: Vec<(String, usize)> = counts.into_iter().collect();
    by_count.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    by_count
        .iter()
        .map(|(v, n)| format!("{v} ({n} run{})", if *n == 1 { "" } else { "s" }))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `lo–hi`, or the one value.
fn range(values: impl Iterator<Item = f64>, show: fn(f64) -> String) -> Option<String> {
    let (lo, hi) = values.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| (lo.min(v), hi.max(v)));
    if lo > hi {
        return None;
    }
    Some(if lo == hi { show(lo) } else { format!("{}–{}", show(lo), show(hi)) })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::selection::tests::run;

    #[test]
    fn machines_builds_and_lengths_are_read_from_the_records() {
        let mut a = run(1, "a", "h", &[], 0.5);
        let mut b = run(2, "b", "h", &[], 0.5);
        (a.steps_run, b.steps_run) = (1500, 2300);
        b.environment.device = "cuda:0".into();
        let runs = [&a, &b];
        let line = where_line(&runs);
        assert!(line.contains("cpu on host vm (2 CPUs, x86_64) (1 run)"), "{line}");
        assert!(line.contains("cuda:0 (GPU model not recorded)"), "{line}");
        assert!(
            line.contains(&format!("memctl {} (commit not recorded) (2 runs)", a.environment.memctl_version)),
            "{line}"
        );
        // The fixture: 2-pair associative retrieval with 64 training examples, batch 8.
        assert_eq!(epochs(&a), Some(1500.0 * 8.0 / 64.0));
        assert_eq!(
            length_line(&runs, Some("100 epochs")),
            "Trained 1,500–2,300 steps (≈ 188–288 epochs); the paper: 100 epochs."
        );
        // Records that keep the processor and the commit name both.
        (a.environment.processor, b.environment.processor) = ("AMD EPYC 7B13".into(), "NVIDIA H100 80GB HBM3".into());
        a.environment.commit = "0123456789abcdef0123456789abcdef01234567".into();
        b.environment.commit = format!("{}+changes", a.environment.commit);
        let line = where_line(&[&a, &b]);
        assert!(line.contains("cpu (AMD EPYC 7B13) on host vm (2 CPUs, x86_64) (1 run)"), "{line}");
        assert!(line.contains("cuda:0 (NVIDIA H100 80GB HBM3) on host vm"), "{line}");
        assert!(line.contains("at 0123456789ab (1 run)"), "{line}");
        assert!(line.contains("at 0123456789ab with uncommitted changes (1 run)"), "{line}");
        assert!(line.contains("built as 2 builds, 1 of them with uncommitted changes (1 of 2 runs): "), "{line}");
    }

    #[test]
    fn machines_of_one_description_are_told_apart_by_their_boots() {
        let boot = |id: u64, boot_id: &str| {
            let mut r = run(id, "a", "h", &[], 0.5);
            r.environment.process = Some(crate::store::record::ProcessIdentity {
                hostname: "vm".into(),
                boot_id: boot_id.into(),
                pid: 1,
                start_ticks: 1,
            });
            r
        };
        let runs = [boot(1, "x"), boot(2, "x"), boot(3, "y"), boot(4, "x"), boot(5, "z"), boot(6, "y")];
        let line = where_line(&runs.iter().collect::<Vec<_>>());
        assert!(
            line.starts_with("Ran on cpu on host vm (2 CPUs, x86_64) (6 runs, over 3 boots: 3, 2 and 1); "),
            "{line}"
        );
        let line = where_line(&runs[..2].iter().collect::<Vec<_>>());
        assert!(line.starts_with("Ran on cpu on host vm (2 CPUs, x86_64) (2 runs); "), "{line}");
    }
}
