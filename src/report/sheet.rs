//! A sheet: named columns and rows of typed cells, the form every `memctl runs` output
//! (table, CSV, JSON, Markdown) is printed from.

use super::numbers::{duration, sig3};
use crate::query::fields::format_date;
use crate::value::Value;

#[derive(Clone, Debug, PartialEq, Default)]
pub struct Sheet {
    pub columns: Vec<String>,
    pub rows: Vec<Vec<Cell>>,
    /// Which columns hold `mean ± std (n)` statistics, whether or not a row has one (CSV
    /// writes such a column as three, so that a script reads the same columns every time).
    pub stats: Vec<bool>,
    /// Runs the filter kept that a grouped sheet does not count: earlier runs of a trial that
    /// ran again (its latest run stands for it, as in `results`).
    pub left_out: usize,
}

impl Sheet {
    /// A sheet whose statistic columns are those with a statistic in some row.
    pub fn new(columns: Vec<String>, rows: Vec<Vec<Cell>>) -> Sheet {
        let stats = (0..columns.len()).map(|c| rows.iter().any(|r| matches!(r.get(c), Some(Cell::Stat(_))))).collect();
        Sheet { columns, rows, stats, left_out: 0 }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub enum Cell {
    Missing,
    Int(i64),
    Float(f64),
    Bool(bool),
    Text(String),
    /// Unix seconds.
    Date(f64),
    /// A duration in seconds.
    Seconds(f64),
    List(Vec<Cell>),
    Stat(Stat),
}

/// Mean, sample standard deviation (n − 1; `None` for a single value) and count.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Stat {
    pub mean: f64,
    pub std: Option<f64>,
    pub n: usize,
}

impl Cell {
    pub fn of_value(v: &Value) -> Cell {
        match v {
            Value::Bool(b) => Cell::Bool(*b),
            Value::Int(i) => Cell::Int(*i),
            Value::Float(x) => Cell::Float(*x),
            Value::Str(s) => Cell::Text(s.clone()),
            Value::List(items) => Cell::List(items.iter().map(Cell::of_value).collect()),
        }
    }

    /// How a table shows the cell: three significant digits, durations, `·` for missing.
    pub fn display(&self) -> String {
        match self {
            Cell::Missing => "·".into(),
            Cell::Int(i) => i.to_string(),
            Cell::Float(x) => sig3(*x),
            Cell::Bool(b) => b.to_string(),
            // A control character (a terminal escape in a name from an imported record) shows
            // as its escape, not as what it would do to the terminal.
            Cell::Text(s) if s.contains(char::is_control) => s.escape_default().to_string(),
            Cell::Text(s) => s.clone(),
            Cell::Date(t) => format_date(*t).replace('T', " ").trim_end_matches('Z').to_string(),
            Cell::Seconds(s) => duration(*s),
            Cell::List(items) => format!("[{}]", items.iter().map(Cell::display).collect::<Vec<_>>().join(", ")),
            Cell::Stat(s) => s.display(),
        }
    }

    /// The cell as exact text for CSV: full precision, RFC 3339 dates, lists joined by `;`.
    pub fn exact(&self) -> String {
        match self {
            Cell::Missing => String::new(),
            Cell::Int(i) => i.to_string(),
            Cell::Float(x) | Cell::Seconds(x) => x.to_string(),
            Cell::Bool(b) => b.to_string(),
            Cell::Text(s) => s.clone(),
            Cell::Date(t) => format_date(*t),
            Cell::List(items) => items.iter().map(Cell::exact).collect::<Vec<_>>().join(";"),
            Cell::Stat(s) => s.mean.to_string(),
        }
    }

    /// Order for sorting: numbers, then text, ...; statistics by mean; a missing cell as empty
    /// text ([`Cell::order_missing_last`] puts it last).
    pub fn order(&self, other: &Cell) -> std::cmp::Ordering {
        match (self.number(), other.number()) {
            (Some(a), Some(b)) => a.total_cmp(&b),
            (Some(_), None) => std::cmp::Ordering::Less,
            (None, Some(_)) => std::cmp::Ordering::Greater,
            (None, None) => self.exact().cmp(&other.exact()),
        }
    }

    /// [`Cell::order`], reversed where `descending`, with missing cells, and NaN (a diverged
    /// run's metric, which is no better nor worse than any), last either way.
    pub fn order_missing_last(&self, other: &Cell, descending: bool) -> std::cmp::Ordering {
        let last = |c: &Cell| matches!(c, Cell::Missing) || c.number().is_some_and(f64::is_nan);
        match (last(self), last(other)) {
            (true, true) => std::cmp::Ordering::Equal,
            (true, false) => std::cmp::Ordering::Greater,
            (false, true) => std::cmp::Ordering::Less,
            _ if descending => other.order(self),
            _ => self.order(other),
        }
    }

    /// The cell as a number, for ordering: statistics by their mean, booleans as 0 and 1.
    fn number(&self) -> Option<f64> {
        match self {
            Cell::Int(i) => Some(*i as f64),
            Cell::Float(x) | Cell::Date(x) | Cell::Seconds(x) => Some(*x),
            Cell::Stat(s) => Some(s.mean),
            Cell::Bool(b) => Some(f64::from(u8::from(*b))),
            _ => None,
        }
    }
}

impl Stat {
    /// Statistics of `values`; `None` when there are none.
    pub fn of(values: &[f64]) -> Option<Stat> {
        let n = values.len();
        if n == 0 {
            return None;
        }
        let mean = values.iter().sum::<f64>() / n as f64;
        let std = (n > 1).then(|| (values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1) as f64).sqrt());
        Some(Stat { mean, std, n })
    }

    /// `0.912 ± 0.00431 (5)`, or `0.912 (1)` for a single run.
    pub fn display(&self) -> String {
        match self.std {
            Some(s) => format!("{} ± {} ({})", sig3(self.mean), sig3(s), self.n),
            None => format!("{} ({})", sig3(self.mean), self.n),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Cell;

    #[test]
    fn missing_cells_sort_last_both_ways() {
        let mut cells = vec![Cell::Missing, Cell::Int(2), Cell::Float(1.5), Cell::Missing, Cell::Int(3)];
        cells.sort_by(|a, b| a.order_missing_last(b, false));
        assert_eq!(cells, [Cell::Float(1.5), Cell::Int(2), Cell::Int(3), Cell::Missing, Cell::Missing]);
        cells.sort_by(|a, b| a.order_missing_last(b, true));
        assert_eq!(cells, [Cell::Int(3), Cell::Int(2), Cell::Float(1.5), Cell::Missing, Cell::Missing]);
    }
}
