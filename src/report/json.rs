//! A sheet as JSON: an array of objects, keys in column order; numbers as numbers, missing
//! values as `null`, dates as RFC 3339 strings, durations in seconds, statistics as
//! `{"mean": …, "std": …, "n": …}`.

use serde_json::{Value as Json, json};

use super::sheet::{Cell, Sheet};
use crate::query::fields::format_date;

pub fn render(sheet: &Sheet) -> String {
    let mut out = String::from("[");
    for (i, row) in sheet.rows.iter().enumerate() {
        out.push_str(if i == 0 { "\n  {" } else { ",\n  {" });
        for (j, (name, cell)) in sheet.columns.iter().zip(row).enumerate() {
            if j > 0 {
                out.push_str(", ");
            }
            out.push_str(&Json::String(name.clone()).to_string());
            out.push_str(": ");
            out.push_str(&value(cell).to_string());
        }
        out.push('}');
    }
    out.push_str(if sheet.rows.is_empty() { "]" } else { "\n]" });
    out
}

/// The rows as JSON objects, for a caller that sends the column order separately (JSON
/// objects do not keep it).
pub fn row_objects(sheet: &Sheet) -> Vec<Json> {
    let object = |row: &Vec<Cell>| Json::Object(sheet.columns.iter().cloned().zip(row.iter().map(value)).collect());
    sheet.rows.iter().map(object).collect()
}

pub fn value(c: &Cell) -> Json {
    match c {
        Cell::Missing => Json::Null,
        Cell::Int(i) => json!(i),
        Cell::Float(x) | Cell::Seconds(x) => json!(x),
        Cell::Bool(b) => json!(b),
        Cell::Text(s) => json!(s),
        Cell::Date(t) => json!(format_date(*t)),
        Cell::List(items) => Json::Array(items.iter().map(value).collect()),
        Cell::Stat(s) => json!({"mean": s.mean, "std": s.std, "n": s.n}),
    }
}
