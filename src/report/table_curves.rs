//! A results table's learning curves as a figure: one line per row of the table (the mean of
//! its runs' curve at each evaluated step, with a band from the lowest to the highest run), for
//! tables whose description names a curve (`curves: val_accuracy`). `memctl results` draws it
//! beside the table's data file and links it from the document, so that a reader sees how far
//! each row had come when training stopped, and whether it was still rising.

use std::path::Path;

use super::curves::{Band, XAxis, mean_series};
use super::plot::{self, Plot, PlotError, Series};
use super::results::Table;
use super::selection::Selection;

/// One series per row whose runs have the curve, labelled by the row's key values.
pub fn series(t: &Table, metric: &str, selection: &Selection) -> Vec<Series> {
    selection
        .rows
        .iter()
        .filter_map(|row| {
            let members: Vec<_> = row.runs.iter().copied().filter(|r| r.curves.contains_key(metric)).collect();
            if members.is_empty() {
                return None;
            }
            // Keys a row has no value for (`·`: an LSTM row has no `nq`) are left out of its label.
            let label = t
                .rows
                .iter()
                .zip(&row.key)
                .filter(|(_, v)| v.as_str() != "·")
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(" ");
            Some(mean_series(label, &members, metric, Band::Minmax, XAxis::Step))
        })
        .collect()
}

/// Draws the table's curves of `metric` into `path` (.svg or .png); `Ok(false)` when no row
/// has the curve (nothing drawn).
pub fn draw(t: &Table, metric: &str, selection: &Selection, path: &Path) -> Result<bool, PlotError> {
    let series = series(t, metric, selection);
    if series.is_empty() {
        return Ok(false);
    }
    let title = format!("{}: {metric}", t.title);
    plot::draw(
        path,
        &Plot { title: &title, x_label: XAxis::Step.label(), y_label: metric, series: &series, y_range: None },
    )?;
    Ok(true)
}

/// The Markdown that shows the figure, with what its lines and bands are.
pub fn markdown(t: &Table, metric: &str, link: &str) -> String {
    format!(
        "![{}: {metric} against training steps, one line per row (the mean of its runs; the band spans the lowest to the highest run)]({link})",
        t.title
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::selection::select;
    use crate::report::selection::tests::run;
    use crate::value::Value;

    #[test]
    fn a_line_per_row_is_the_mean_of_its_runs_curves() {
        let table: Table = serde_saphyr::from_str(
            "{title: T, experiments: [exp], rows: [nq, d], metrics: [accuracy], curves: val_accuracy}",
        )
        .unwrap();
        let mut runs = vec![];
        for (i, (nq, end)) in [(1, 0.4), (1, 0.6), (8, 0.9)].into_iter().enumerate() {
            let mut r = run(i as u64, &format!("t{i}"), "h", &[("nq", Value::Int(nq))], end);
            r.curves = [("val_accuracy".to_string(), vec![(0, 0.1), (100, end)])].into();
            runs.push(r);
        }
        let selection = select(&runs, &["exp".into()], &table.rows);
        let lines = series(&table, "val_accuracy", &selection);
        assert_eq!(lines.len(), 2);
        assert!(lines[0].label.starts_with("nq=1 (2 runs"), "{}", lines[0].label);
        assert_eq!(lines[0].points, vec![(0.0, 0.1), (100.0, 0.5)]);
        assert_eq!(lines[0].band.as_ref().unwrap()[1], (100.0, 0.4, 0.6));
        assert!(series(&table, "val_loss", &selection).is_empty());
        let svg = std::env::temp_dir().join(format!("memctl-table-curves-{}.svg", std::process::id()));
        assert!(draw(&table, "val_accuracy", &selection, &svg).unwrap());
        assert!(std::fs::read_to_string(&svg).unwrap().contains("<svg"));
        let _ = std::fs::remove_file(&svg);
        assert!(!draw(&table, "val_loss", &selection, &svg).unwrap());
    }
}
