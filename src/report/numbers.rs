//! Number formatting for tables and summaries.

/// `1234567` → `1,234,567`.
pub fn count(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// `1.5e6` → `1.50 M` (SI prefix, three significant digits).
pub fn si(x: f64) -> String {
    let (v, p) = match x.abs() {
        a if a >= 1e12 => (x / 1e12, "T"),
        a if a >= 1e9 => (x / 1e9, "G"),
        a if a >= 1e6 => (x / 1e6, "M"),
        a if a >= 1e3 => (x / 1e3, "k"),
        _ => (x, ""),
    };
    format!("{} {p}", sig3(v))
}

/// Bytes as `512 B`, `3.25 MB`, `1.20 GB` (decimal units, three significant digits).
pub fn bytes(n: u64) -> String {
    if n < 1000 {
        return format!("{n} B");
    }
    format!("{}B", si(n as f64))
}

/// Three significant digits: `0.8412` → `0.841`, `97.25` → `97.3`.
pub fn sig3(v: f64) -> String {
    if v == 0.0 || !v.is_finite() {
        return format!("{v}");
    }
    if v.abs() >= 1e6 || v.abs() < 1e-3 {
        return format!("{v:.2e}");
    }
    let digits = (2 - v.abs().log10().floor() as i32).max(0) as usize;
    format!("{v:.digits$}")
}

/// Seconds as `42.1s`, `3m05s`, `1h02m`.
pub fn duration(secs: f64) -> String {
    if secs < 60.0 {
        format!("{secs:.1}s")
    } else if secs < 3600.0 {
        format!("{}m{:02}s", (secs / 60.0) as u64, (secs % 60.0) as u64)
    } else {
        format!("{}h{:02}m", (secs / 3600.0) as u64, ((secs % 3600.0) / 60.0) as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats() {
        assert_eq!(count(1234567), "1,234,567");
        assert_eq!(count(12), "12");
        assert_eq!(si(1.5e6), "1.50 M");
        assert_eq!(si(950.0), "950 ");
        assert_eq!(sig3(0.84123), "0.841");
        assert_eq!(sig3(9.1e29), "9.10e29");
        assert_eq!(duration(185.0), "3m05s");
        assert_eq!(duration(3.25), "3.2s");
    }
}
