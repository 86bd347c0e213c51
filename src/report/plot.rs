//! Drawing learning curves with plotters: PNG (bitmap, text in the embedded Noto Sans, so no
//! system fonts are needed) or SVG, chosen by the file's extension. Each series is one line
//! (`stroke-width` 2 in SVG), with an optional translucent band and, on a short curve, a
//! marker at each point; legend, title and axis labels.

use std::path::{Path, PathBuf};
use std::sync::Once;

use plotters::coord::Shift;
use plotters::prelude::*;

pub struct Series {
    pub label: String,
    /// `(step, value)`.
    pub points: Vec<(f64, f64)>,
    /// `(step, low, high)` around the line.
    pub band: Option<Vec<(f64, f64, f64)>>,
}

pub struct Plot<'a> {
    pub title: &'a str,
    pub x_label: &'a str,
    pub y_label: &'a str,
    pub series: &'a [Series],
    /// The value axis, fixed (`0..1` for accuracies); `None` fits it to the data.
    pub y_range: Option<(f64, f64)>,
}

/// A curve of at most this many points gets a marker on each: a one-point curve is a line of
/// no length, invisible without one, and on a long curve markers would hide the line.
pub const MARKED_POINTS: usize = 25;

/// Tableau's ten colours.
const COLORS: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];

const SIZE: (u32, u32) = (960, 600);

fn register_font() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // The bytes are a valid font shipped by the `notosans` crate; failure would only mean
        // text is missing, which drawing then reports.
        let _ = plotters::style::register_font("sans-serif", FontStyle::Normal, notosans::REGULAR_TTF);
    });
}

/// Why a plot was not drawn.
#[derive(Debug, thiserror::Error)]
pub enum PlotError {
    #[error("nothing to plot: no run has this curve")]
    NoSeries,
    #[error("cannot make the folder {}: {}", .0.display(), .1)]
    Folder(PathBuf, std::io::Error),
    #[error("`{}` is a folder; name the plot file (`{}/plot.svg`)", .0.display(), .0.display())]
    IsFolder(PathBuf),
    #[error("`{}`: the plot file must end in .png or .svg", .0.display())]
    Extension(PathBuf),
    /// The backend's own error (writing the file, rendering text).
    #[error("{0}")]
    Drawing(Box<dyn std::error::Error + Send + Sync>),
}

/// Draws `plot` into `path` (`.png` or `.svg`).
pub fn draw(path: &Path, plot: &Plot) -> Result<(), PlotError> {
    register_font();
    if plot.series.is_empty() {
        return Err(PlotError::NoSeries);
    }
    if path.is_dir() {
        return Err(PlotError::IsFolder(path.to_path_buf()));
    }
    let ext = path.extension().and_then(|e| e.to_str()).map(str::to_ascii_lowercase);
    if !matches!(ext.as_deref(), Some("svg" | "png")) {
        return Err(PlotError::Extension(path.to_path_buf()));
    }
    // A missing folder is made, as `results -o` does; done here because the drawing backends
    // wrap the OS error in two layers of their own words.
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty() && !d.is_dir()) {
        std::fs::create_dir_all(dir).map_err(|e| PlotError::Folder(dir.to_path_buf(), e))?;
    }
    match ext.as_deref() {
        Some("svg") => {
            let root = SVGBackend::new(path, SIZE).into_drawing_area();
            chart(&root, plot).map_err(|e| PlotError::Drawing(Box::new(e)))
        }
        Some("png") => {
            let root = BitMapBackend::new(path, SIZE).into_drawing_area();
            chart(&root, plot).map_err(|e| PlotError::Drawing(Box::new(e)))
        }
        _ => Err(PlotError::Extension(path.to_path_buf())),
    }
}

fn chart<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    plot: &Plot,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    root.fill(&WHITE)?;
    let (x0, x1, mut y0, mut y1) = bounds(plot.series);
    if let Some((lo, hi)) = plot.y_range {
        (y0, y1) = (lo, hi);
    }
    let (x_decimals, y_decimals) = (decimals(x1 - x0), decimals(y1 - y0));
    let mut chart = ChartBuilder::on(root)
        .caption(plot.title, ("sans-serif", 24))
        .margin(16)
        .x_label_area_size(48)
        .y_label_area_size(72)
        .build_cartesian_2d(x0..x1, y0..y1)?;
    chart
        .configure_mesh()
        .x_desc(plot.x_label)
        .x_label_formatter(&|x| format!("{x:.x_decimals$}"))
        .y_label_formatter(&|y| format!("{y:.y_decimals$}"))
        .y_desc(plot.y_label)
        .axis_desc_style(("sans-serif", 18))
        .label_style(("sans-serif", 14))
        .light_line_style(WHITE.mix(0.0))
        .draw()?;
    for (i, s) in plot.series.iter().enumerate() {
        if let Some(band) = &s.band {
            let color = COLORS[i % COLORS.len()];
            let mut outline: Vec<(f64, f64)> = band.iter().map(|(x, _, hi)| (*x, *hi)).collect();
            outline.extend(band.iter().rev().map(|(x, lo, _)| (*x, *lo)));
            chart.draw_series(std::iter::once(Polygon::new(outline, color.mix(0.18).filled())))?;
        }
    }
    for (i, s) in plot.series.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        chart
            .draw_series(LineSeries::new(s.points.iter().copied(), color.stroke_width(2)))?
            .label(s.label.as_str())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 24, y)], color.stroke_width(4)));
        if s.points.len() <= MARKED_POINTS {
            chart.draw_series(s.points.iter().map(|p| Circle::new(*p, 4, color.filled())))?;
        }
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerRight)
        .label_font(("sans-serif", 14))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK.mix(0.4))
        .draw()?;
    root.present()?;
    Ok(())
}

/// Axis ranges covering every finite point and band, with a 5 % margin on the value axis. A
/// single step or value gets a span around it, so that its tick labels differ. The value axis
/// stays within ±[`FARTHEST`], so that its span is a number.
pub fn bounds(series: &[Series]) -> (f64, f64, f64, f64) {
    let (mut x0, mut x1, mut y0, mut y1) = (f64::INFINITY, f64::NEG_INFINITY, f64::INFINITY, f64::NEG_INFINITY);
    for s in series {
        // A diverged run's inf loss would otherwise make the whole axis unusable.
        for (x, y) in s.points.iter().filter(|(x, y)| x.is_finite() && y.is_finite()) {
            (x0, x1, y0, y1) = (x0.min(*x), x1.max(*x), y0.min(*y), y1.max(*y));
        }
        for (_, lo, hi) in s.band.iter().flatten().filter(|(_, lo, hi)| lo.is_finite() && hi.is_finite()) {
            (y0, y1) = (y0.min(*lo), y1.max(*hi));
        }
    }
    if !x0.is_finite() || !y0.is_finite() || !x1.is_finite() || !y1.is_finite() {
        return (0.0, 1.0, 0.0, 1.0);
    }
    if x1 <= x0 {
        let half = if x0 == 0.0 { 1.0 } else { x0.abs() * 0.5 };
        (x0, x1) = (x0 - half, x0 + half);
    }
    let (y0, y1) = (y0.clamp(-FARTHEST, FARTHEST), y1.clamp(-FARTHEST, FARTHEST));
    let pad = if y1 > y0 {
        (y1 - y0) * 0.05
    } else if y0 == 0.0 {
        0.5
    } else {
        y0.abs() * 0.1
    };
    (x0, x1, y0 - pad, y1 + pad)
}

/// How far from zero the value axis reaches, before its margin: a quarter of the largest
/// float, so that its span is a number.
const FARTHEST: f64 = f64::MAX / 4.0;

/// Decimals that tell apart the tick labels of an axis spanning `span` (about ten ticks):
/// none for steps, `2` for 0.085..0.109.
pub fn decimals(span: f64) -> usize {
    if !span.is_finite() || span <= 0.0 {
        return 0;
    }
    (-(span / 10.0).log10().floor()).clamp(0.0, 12.0) as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one_point(x: f64, y: f64) -> Series {
        Series { label: "a".into(), points: vec![(x, y)], band: None }
    }

    #[test]
    fn values_out_to_the_largest_floats_and_infinities_leave_a_finite_axis() {
        let series = Series {
            label: "a".into(),
            points: vec![(0.0, -1e308), (1.0, 1e308), (2.0, f64::INFINITY), (3.0, f64::NAN)],
            band: None,
        };
        let (x0, x1, y0, y1) = bounds(&[series]);
        assert!((x0, x1) == (0.0, 1.0) && y0 < -1e307 && y1 > 1e307 && (y1 - y0).is_finite(), "{y0}..{y1}");
        // Every point past the clamp: still an axis from low to high.
        let (_, _, y0, y1) = bounds(&[one_point(0.0, 1e308)]);
        assert!(y0 < y1 && (y1 - y0).is_finite(), "{y0}..{y1}");
        // An inf loss leaves the others' range as it is.
        let diverged = Series { label: "b".into(), points: vec![(0.0, 0.5), (1.0, f64::INFINITY)], band: None };
        let (_, _, y0, y1) = bounds(&[diverged]);
        assert!(y0 < 0.5 && y1 > 0.5 && y1 < 1.0, "{y0}..{y1}");
    }

    #[test]
    fn a_single_step_and_value_get_a_span_around_them() {
        let (x0, x1, y0, y1) = bounds(&[one_point(250.0, 0.096)]);
        assert!(x0 < 250.0 && 250.0 < x1 && x1 - x0 >= 100.0, "{x0}..{x1}");
        assert!(y0 < 0.096 && 0.096 < y1, "{y0}..{y1}");
        let labels: Vec<String> = [y0, 0.096, y1].iter().map(|y| format!("{y:.d$}", d = decimals(y1 - y0))).collect();
        assert!(labels[0] != labels[1] && labels[1] != labels[2], "{labels:?}");
        let (x0, x1, ..) = bounds(&[one_point(0.0, 1.0)]);
        assert!(x0 < 0.0 && x1 > 0.0);
    }

    #[test]
    fn tick_decimals_follow_the_span() {
        assert_eq!(decimals(1000.0), 0);
        assert_eq!(decimals(0.024), 3);
        assert_eq!(decimals(1.0), 1);
        assert_eq!(decimals(0.0), 0);
    }
}
