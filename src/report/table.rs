//! A sheet as a terminal table (comfy-table): three significant digits, `mean ± std (n)`.

use comfy_table::{CellAlignment, Table, presets::UTF8_FULL_CONDENSED};

use super::sheet::{Cell, Sheet};

pub fn render(sheet: &Sheet) -> String {
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED).set_header(sheet.columns.clone());
    for row in &sheet.rows {
        t.add_row(row.iter().map(|c| {
            let cell = comfy_table::Cell::new(c.display());
            if matches!(c, Cell::Int(_) | Cell::Float(_) | Cell::Seconds(_) | Cell::Stat(_)) {
                cell.set_alignment(CellAlignment::Right)
            } else {
                cell
            }
        }));
    }
    t.to_string()
}
