//! `memctl search-report`: a search's configurations, best first (the mean ± standard
//! deviation over seeds), the training steps it used against running every configuration to
//! its budget and against the full grid, and a text plot of the metric against each searched
//! name.

use comfy_table::{CellAlignment, Table, presets::UTF8_FULL_CONDENSED};

use crate::check::search::{Domain, SearchSpec};
use crate::search::summary::{ConfigRuns, MeanSd, mean_sd};
use crate::store::{Status, StudyRecord};

/// The whole report as text.
pub fn render(
    experiment: &str,
    spec: &SearchSpec,
    study: &StudyRecord,
    rows: &[ConfigRuns],
    steps_per_trial: u64,
) -> String {
    let metric = spec.metric.as_ref().map_or("metric", |m| m.name.as_str());
    // Rows are distinct configurations; a study older than proposals that skip the ones tried
    // may hold repeats, which are shown once.
    let from_runs = rows.iter().filter(|r| study.from_runs(r.config)).count();
    let proposed = rows.len() - from_runs;
    let mut known = match (proposed, from_runs) {
        (_, 0) => format!("{proposed} of {} configurations proposed", spec.trials),
        (0, k) => format!("{k} configuration{} known from runs", if k == 1 { "" } else { "s" }),
        (p, k) => format!("{p} of {} configurations proposed, {k} more known from runs", spec.trials),
    };
    let repeats = study.configs.len().saturating_sub(rows.len());
    if repeats > 0 {
        known.push_str(&format!(" (and {repeats} proposed again, shown once)"));
    }
    let seeds = spec.seeds.len();
    let mut out = format!("search {experiment}: {known}, {seeds} seed{} each\n", if seeds == 1 { "" } else { "s" });
    out.push_str(&table(spec, metric, rows));
    out.push('\n');
    out.push_str(&compute(spec, rows, steps_per_trial));
    if spec.prune.is_some() && proposed > 0 {
        let judged: Vec<_> = study.reports.iter().filter(|r| !study.from_runs(r.at.config)).collect();
        let pruned = judged.iter().filter(|r| !r.decision.keep).count();
        let guarded = judged.iter().filter(|r| r.decision.guarded).count();
        out.push_str(&format!(
            "rung decisions: {}, {pruned} pruned, {guarded} kept by the plateau guard (metric below the cut-off, loss still falling)\n",
            judged.len()
        ));
    }
    if from_runs > 0 {
        out.push_str(&format!(
            "known from runs: {}, not proposed by a study in this store (runs imported from the store that ran \
             the search, or of an earlier search over these names); numbered in the order they started, with \
             only the decisions that pruned\n",
            match (proposed, from_runs) {
                (0, _) => "every configuration".to_string(),
                (p, 1) => format!("#{}", p + 1),
                (p, k) => format!("#{}–#{}", p + 1, p + k),
            }
        ));
    }
    // One plot per searched name.
    for (i, d) in spec.dims.iter().enumerate() {
        let log = matches!(d.domain, Domain::LogUniform { .. });
        let points: Vec<(f64, f64, bool)> = rows
            .iter()
            .filter_map(|r| {
                let x = r.values.get(i)?;
                let x = match &d.domain {
                    Domain::Values(vs) => vs.iter().position(|v| v == x)? as f64,
                    _ => x.as_float()?,
                };
                let y = score(r)?;
                Some((if log { x.log10() } else { x }, y, r.finished()))
            })
            .collect();
        let labels: Option<Vec<String>> = match &d.domain {
            Domain::Values(vs) => Some(vs.iter().map(short).collect()),
            _ => None,
        };
        out.push('\n');
        out.push_str(&plot(&d.name.name, metric, log, &points, labels.as_deref()));
    }
    out
}

/// A configuration's mean metric over its seeds.
fn score(r: &ConfigRuns) -> Option<f64> {
    mean_sd(r.seeds.iter().map(|s| s.metric)).map(|m| m.mean)
}

/// How far a configuration got, the rank's first key: every seed run to its budget; some seeds
/// to their budget, none pruned or failed (the others not run yet); pruned, at a later rung
/// first; none of these (running, failed). A pruned configuration's mean is at its rung, so it
/// does not compare with means at the budget.
fn progress(r: &ConfigRuns) -> (u8, usize) {
    let done = r.seeds.iter().any(|s| s.status == Some(Status::Done));
    let failed = r.seeds.iter().any(|s| s.status == Some(Status::Failed));
    match r.pruned_at {
        _ if r.finished() => (3, 0),
        Some(rung) => (1, rung),
        None if done && !failed => (2, 0),
        None => (0, 0),
    }
}

/// The configurations best first: by how far they got ([`progress`]), then by their mean metric.
fn ranked(rows: &[ConfigRuns], higher_is_better: bool) -> Vec<&ConfigRuns> {
    let mut order: Vec<&ConfigRuns> = rows.iter().collect();
    order.sort_by(|a, b| {
        // A configuration without a mean yet comes after those with one.
        progress(b).cmp(&progress(a)).then_with(|| match (score(a), score(b)) {
            (Some(x), Some(y)) => {
                let ord = x.total_cmp(&y);
                if higher_is_better { ord.reverse() } else { ord }
            }
            (x, y) => y.is_some().cmp(&x.is_some()),
        })
    });
    order
}

/// The configurations as a table, best first ([`ranked`]).
fn table(spec: &SearchSpec, metric: &str, rows: &[ConfigRuns]) -> String {
    let higher = spec.metric.as_ref().is_none_or(|m| m.higher_is_better);
    let test_name = metric.strip_prefix("val_").unwrap_or(metric);
    let order = ranked(rows, higher);
    let mut t = Table::new();
    let mut header: Vec<String> = vec!["#".into()];
    header.extend(spec.dims.iter().map(|d| d.name.name.clone()));
    header.extend(["status".into(), format!("{metric} (mean ± sd)"), format!("test {test_name}"), "steps".into()]);
    t.load_preset(UTF8_FULL_CONDENSED).set_header(header);
    for r in &order {
        let mut cells: Vec<comfy_table::Cell> = vec![comfy_table::Cell::new(r.config + 1)];
        cells.extend(r.values.iter().map(|v| comfy_table::Cell::new(short(v))));
        let status = match (r.finished(), r.pruned_at) {
            (true, _) => "finished".to_string(),
            (_, Some(rung)) => format!("pruned at rung {rung}"),
            _ => {
                let done = r.seeds.iter().filter(|s| s.status.is_some()).count();
                let failed = r.seeds.iter().filter(|s| s.status == Some(Status::Failed)).count();
                match failed {
                    0 => format!("{done}/{} seeds run", r.seeds.len()),
                    f if f == r.seeds.len() => "failed".into(),
                    f => format!("{done}/{} seeds run, {f} failed", r.seeds.len()),
                }
            }
        };
        cells.push(comfy_table::Cell::new(status));
        let right = |s: String| comfy_table::Cell::new(s).set_alignment(CellAlignment::Right);
        cells.push(right(pm(mean_sd(r.seeds.iter().map(|s| s.metric)))));
        cells.push(right(pm(mean_sd(r.seeds.iter().map(|s| s.test)))));
        cells.push(right(r.steps().to_string()));
        t.add_row(cells);
    }
    t.to_string()
}

/// The training steps the search used, against running these configurations to their budget
/// and against the full grid (where the searched names list their values).
fn compute(spec: &SearchSpec, rows: &[ConfigRuns], steps_per_trial: u64) -> String {
    let used: u64 = rows.iter().map(ConfigRuns::steps).sum();
    let seeds = spec.seeds.len() as u64;
    let unpruned = rows.len() as u64 * seeds * steps_per_trial;
    let mut line = format!("training steps: {used}");
    if unpruned > 0 {
        line.push_str(&format!(
            ", {:.0} % of the {unpruned} these {} configurations take to their budget",
            100.0 * used as f64 / unpruned as f64,
            rows.len()
        ));
    }
    let grid: Option<u64> = spec.dims.iter().map(|d| d.domain.listed().map(|v| v.len() as u64)).product();
    if let Some(g) = grid {
        let full = g * seeds * steps_per_trial;
        line.push_str(&format!(
            "; the full grid ({g} configurations) takes {full}: {:.0} %",
            100.0 * used as f64 / full.max(1) as f64
        ));
    }
    line.push('\n');
    line
}

/// `0.912 ± 0.013 (2)`, `0.167 (1)` for one seed's value, or `–`: the seeds whose value is
/// missing or not finite do not count.
fn pm(v: Option<MeanSd>) -> String {
    match v {
        Some(MeanSd { mean, n: 1, .. }) => format!("{mean:.3} (1)"),
        Some(MeanSd { mean, sd, n }) => format!("{mean:.3} ± {sd:.3} ({n})"),
        None => "–".into(),
    }
}

/// A value as a short label (floats to 3 significant digits).
fn short(v: &crate::value::Value) -> String {
    match v {
        crate::value::Value::Float(f) if (0.01..1000.0).contains(&f.abs()) => format!("{f:.3}"),
        crate::value::Value::Float(f) => format!("{f:.2e}"),
        v => v.to_string(),
    }
}

const WIDTH: usize = 48;
const HEIGHT: usize = 10;

/// A scatter of `(x, y, finished)`: `●` a finished configuration, `×` a pruned or unfinished
/// one (its value at its last evaluation).
fn plot(name: &str, metric: &str, log: bool, points: &[(f64, f64, bool)], labels: Option<&[String]>) -> String {
    let mut out = format!("{metric} against {name}{}:\n", if log { " (log scale)" } else { "" });
    if points.is_empty() {
        out.push_str("  (no results yet)\n");
        return out;
    }
    let (x0, x1) = match labels {
        Some(l) => (-0.5, l.len() as f64 - 0.5),
        None => bounds(points.iter().map(|p| p.0)),
    };
    let (y0, y1) = bounds(points.iter().map(|p| p.1));
    let mut grid = vec![vec![' '; WIDTH]; HEIGHT];
    for &(x, y, finished) in points {
        let col = (((x - x0) / (x1 - x0)) * (WIDTH - 1) as f64).round().clamp(0.0, (WIDTH - 1) as f64) as usize;
        let row = (((y1 - y) / (y1 - y0)) * (HEIGHT - 1) as f64).round().clamp(0.0, (HEIGHT - 1) as f64) as usize;
        let mark = if finished { '●' } else { '×' };
        if grid[row][col] != '●' {
            grid[row][col] = mark;
        }
    }
    for (i, row) in grid.iter().enumerate() {
        let label = match i {
            0 => format!("{y1:>8.3}"),
            i if i == HEIGHT - 1 => format!("{y0:>8.3}"),
            _ => " ".repeat(8),
        };
        out.push_str(&format!("{label} │{}\n", row.iter().collect::<String>().trim_end()));
    }
    out.push_str(&format!("{} └{}\n", " ".repeat(8), "─".repeat(WIDTH)));
    let axis = match labels {
        Some(l) => {
            let mut line = vec![' '; WIDTH + 16];
            for (i, text) in l.iter().enumerate() {
                let col = (((i as f64 - x0) / (x1 - x0)) * (WIDTH - 1) as f64).round() as usize;
                for (k, c) in text.chars().enumerate() {
                    if let Some(slot) = line.get_mut(10 + col + k) {
                        *slot = c;
                    }
                }
            }
            line.into_iter().collect::<String>().trim_end().to_string()
        }
        None => {
            let show = |v: f64| if log { format!("{:.3e}", 10f64.powf(v)) } else { format!("{v:.3}") };
            let (a, b) = (show(x0), show(x1));
            format!("{}{a}{}{b}", " ".repeat(10), " ".repeat((WIDTH).saturating_sub(a.len() + b.len())))
        }
    };
    out.push_str(&axis);
    out.push_str("\n  ● finished   × pruned or unfinished\n");
    out
}

/// The range of `values`, widened when it is a single point.
fn bounds(values: impl Iterator<Item = f64>) -> (f64, f64) {
    let (lo, hi) = values.fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), v| (a.min(v), b.max(v)));
    if hi - lo < 1e-12 { (lo - 0.5, hi + 0.5) } else { (lo, hi) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::search::summary::SeedRun;

    /// A configuration with one of its two seeds run to the budget ranks below the finished
    /// ones and above those pruned at a rung, whatever their means (the probe's 0.430 ranked
    /// below pruned 0.240 and 0.220).
    #[test]
    fn configurations_rank_by_how_far_they_got_then_by_their_mean() {
        let seed = |seed: u64, status: Option<Status>, metric: Option<f64>| SeedRun {
            seed,
            run: status.map(|_| seed),
            status,
            steps_run: 0,
            metric,
            test: None,
        };
        let config = |config, seeds: Vec<SeedRun>, pruned_at| ConfigRuns {
            config,
            values: vec![],
            sampler: "tpe".into(),
            seeds,
            pruned_at,
        };
        let (done, pruned, running) = (Some(Status::Done), Some(Status::Pruned), Some(Status::Running));
        let rows = vec![
            config(0, vec![seed(1, pruned, Some(0.24)), seed(2, pruned, Some(0.25))], Some(1)),
            config(1, vec![seed(1, done, Some(0.43)), seed(2, None, None)], None),
            config(2, vec![seed(1, done, Some(0.40)), seed(2, done, Some(0.42))], None),
            config(3, vec![seed(1, running, None), seed(2, None, None)], None),
            config(4, vec![seed(1, pruned, Some(0.22)), seed(2, pruned, Some(0.20))], Some(2)),
            config(5, vec![seed(1, done, Some(0.50)), seed(2, Some(Status::Failed), None)], None),
            config(6, vec![seed(1, done, Some(0.35)), seed(2, running, None)], None),
        ];
        let order: Vec<usize> = ranked(&rows, true).iter().map(|r| r.config).collect();
        assert_eq!(order, [2, 1, 6, 4, 0, 5, 3]);
    }

    #[test]
    fn a_plot_puts_the_best_point_on_the_top_row_and_the_worst_on_the_bottom() {
        let p = plot("lr", "val_accuracy", true, &[(-4.0, 0.25, false), (-3.0, 0.9, true), (-2.0, 0.5, true)], None);
        let lines: Vec<&str> = p.lines().collect();
        assert!(lines[1].starts_with("   0.900 │") && lines[1].ends_with('●'), "{p}");
        assert!(lines[HEIGHT].starts_with("   0.250 │×"), "{p}");
    }
}
