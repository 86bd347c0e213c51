//! A sheet as a Markdown table (GitHub style), cells shown as in the terminal table.

use super::sheet::{Cell, Sheet};

pub fn render(sheet: &Sheet) -> String {
    let esc = |s: &str| s.replace('|', "\\|");
    let mut out = format!("| {} |\n", sheet.columns.iter().map(|c| esc(c)).collect::<Vec<_>>().join(" | "));
    let numeric =
        |c: usize| {
            sheet.rows.iter().all(|r| {
                matches!(r[c], Cell::Int(_) | Cell::Float(_) | Cell::Seconds(_) | Cell::Stat(_) | Cell::Missing)
            }) && !sheet.rows.is_empty()
        };
    let rules: Vec<&str> = (0..sheet.columns.len()).map(|c| if numeric(c) { "---:" } else { "---" }).collect();
    out.push_str(&format!("| {} |\n", rules.join(" | ")));
    for row in &sheet.rows {
        out.push_str(&format!("| {} |\n", row.iter().map(|c| esc(&c.display())).collect::<Vec<_>>().join(" | ")));
    }
    out
}
