//! Reading a task's options: values aligned with its signature, checked against their ranges.
//!
//! Every problem is a [`PrimError`] naming the option, so the checker points at it.

use super::*;

/// A task's options, aligned with its signature (defaults already filled in by the checker).
pub(super) struct Options<'a> {
    signature: &'static [ArgSpec],
    values: &'a [Value],
}

impl<'a> Options<'a> {
    pub(super) fn new(signature: &'static [ArgSpec], values: &'a [Value]) -> Options<'a> {
        Options { signature, values }
    }

    fn value(&self, name: &'static str) -> Option<Value> {
        let i = self.signature.iter().position(|s| s.name == name)?;
        self.values.get(i).cloned().or_else(|| self.signature[i].default.value())
    }

    /// An integer in `lo..=hi`.
    pub(super) fn int(&self, name: &'static str, lo: i64, hi: i64) -> Result<usize, PrimError> {
        let v = self.value(name).and_then(|v| v.as_int()).ok_or_else(|| missing(name))?;
        if v < lo || v > hi {
            return Err(PrimError::task(format!("`{name}` must be between {lo} and {hi}, found {v}")).on(name));
        }
        Ok(v as usize)
    }

    /// A float in `lo..=hi` (`hi_open`: `lo..hi`).
    pub(super) fn float(&self, name: &'static str, lo: f64, hi: f64, hi_open: bool) -> Result<f64, PrimError> {
        let v = self.value(name).and_then(|v| v.as_float()).ok_or_else(|| missing(name))?;
        let above = if hi_open { v >= hi } else { v > hi };
        if !v.is_finite() || v < lo || above {
            let to = if hi_open { format!("below {hi}") } else { format!("at most {hi}") };
            return Err(PrimError::task(format!("`{name}` must be at least {lo} and {to}, found {v}")).on(name));
        }
        Ok(v)
    }

    /// A path: a non-empty string; `what` says what it should name.
    pub(super) fn path(&self, name: &'static str, what: &str) -> Result<String, PrimError> {
        let v = self.value(name).ok_or_else(|| missing(name))?;
        match v.as_str() {
            Some(s) if !s.trim().is_empty() => Ok(s.to_string()),
            _ => Err(PrimError::task(format!("`{name}` must name {what}, found {v}")).on(name)),
        }
    }

    /// One of `choices`; returns its index.
    pub(super) fn choice(&self, name: &'static str, choices: &[&str]) -> Result<usize, PrimError> {
        let v = self.value(name).ok_or_else(|| missing(name))?;
        let s = v.as_str().unwrap_or_default();
        choices.iter().position(|c| *c == s).ok_or_else(|| {
            let list = choices.iter().map(|c| format!("\"{c}\"")).collect::<Vec<_>>().join(", ");
            PrimError::task(format!("`{name}` must be one of {list}, found {v}")).on(name)
        })
    }
}

fn missing(name: &'static str) -> PrimError {
    PrimError::task(format!("internal: option `{name}` is not bound")).on(name)
}

/// `lo ≤ hi` for a pair of range options; blames `hi`.
pub(super) fn ordered(lo: (&'static str, usize), hi: (&'static str, usize)) -> Result<(), PrimError> {
    if lo.1 > hi.1 {
        return Err(PrimError::task(format!("`{}` ({}) must be at least `{}` ({})", hi.0, hi.1, lo.0, lo.1)).on(hi.0));
    }
    Ok(())
}

/// The `valid` and `test` fractions of a data file cut into three sets: each in [0, 1), and
/// together leaving some `what` ("text", "examples") to train on; blames `test`.
pub(super) fn held_out_fractions(o: &Options, what: &str) -> Result<(f64, f64), PrimError> {
    let valid = o.float("valid", 0.0, 1.0, true)?;
    let test = o.float("test", 0.0, 1.0, true)?;
    if valid + test >= 1.0 {
        let message = format!("`valid` + `test` ({valid} + {test}) must leave some {what} to train on");
        return Err(PrimError::task(message).on("test"));
    }
    Ok((valid, test))
}
