//! A sheet as CSV: exact values (full precision, RFC 3339 dates, lists joined by `;`); a
//! `mean ± std (n)` column becomes three, `NAME_mean`, `NAME_std` and `NAME_n`.

use super::sheet::{Cell, Sheet};

pub fn render(sheet: &Sheet) -> Result<String, csv::Error> {
    let stat_cols: Vec<bool> = (0..sheet.columns.len()).map(|c| sheet.stats.get(c) == Some(&true)).collect();
    let mut w = csv::Writer::from_writer(vec![]);
    let mut header = vec![];
    for (name, stat) in sheet.columns.iter().zip(&stat_cols) {
        if *stat {
            header.extend([format!("{name}_mean"), format!("{name}_std"), format!("{name}_n")]);
        } else {
            header.push(name.clone());
        }
    }
    w.write_record(&header)?;
    for row in &sheet.rows {
        let mut out = vec![];
        for (cell, stat) in row.iter().zip(&stat_cols) {
            match (cell, stat) {
                (Cell::Stat(s), _) => {
                    out.extend([s.mean.to_string(), s.std.map_or(String::new(), |v| v.to_string()), s.n.to_string()])
                }
                (_, true) => out.extend([String::new(), String::new(), "0".into()]),
                (c, false) => out.push(c.exact()),
            }
        }
        w.write_record(&out)?;
    }
    let bytes = w.into_inner().map_err(|e| e.into_error())?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}
