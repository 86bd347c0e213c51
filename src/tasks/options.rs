//! A task's options, declared once: each [`TaskOption`] gives an option's name, kind and
//! default (the task's signature, which the checker binds, is derived from the table) and the
//! values it accepts (which [`Options`] checks when the task is instantiated).
//!
//! ```text
//! static OPTIONS: [TaskOption; 2] = [TaskOption::int("width", 32, 1, 4096), TaskOption::choice("mode", "flip", &["flip", "erase"])];
//! static SIGNATURE: [ArgSpec; 2] = signature(&OPTIONS);
//! … let o = Options::new(&OPTIONS, values); let width = o.int("width")?;
//! … or, into a struct with the fields `width: usize` and `mode: Mode` (an enum of `flip`, `erase`):
//! let task: Task = o.parse()?;
//! ```
//!
//! Every problem is a [`PrimError`] naming the option, so the checker points at it.

use super::prelude::*;
use crate::signature::Default;
use crate::value::Kind;

/// What values an option accepts.
#[derive(Clone, Copy, Debug)]
pub(super) enum Accepts {
    /// Integers in `lo..=hi`.
    Ints(i64, i64),
    /// Finite floats from `lo` up to `hi` (`hi` itself excluded when `hi_open`).
    Floats { lo: f64, hi: f64, hi_open: bool },
    /// A non-empty path naming this ("the bAbI folder").
    Path(&'static str),
    /// One of these strings.
    Choice(&'static [&'static str]),
}

/// One option of a task: what the checker binds and what the task accepts.
#[derive(Clone, Copy, Debug)]
pub(super) struct TaskOption {
    spec: ArgSpec,
    accepts: Accepts,
    /// The integer option this one may not be below (the lower end of a range it ends).
    at_least: Option<&'static str>,
    /// Whether a trial's identity hashes the option when it is at its default.
    hashed_at_default: bool,
}

impl TaskOption {
    const fn new(spec: ArgSpec, accepts: Accepts) -> TaskOption {
        TaskOption { spec, accepts, at_least: None, hashed_at_default: true }
    }

    /// An option added to a task after trials of it were recorded: a trial's identity hashes
    /// it only when it is set to something other than its default, so that every trial
    /// recorded before the option existed keeps its identity (and is not run again).
    pub(super) const fn left_out_of_identity_at_default(self) -> TaskOption {
        TaskOption { hashed_at_default: false, ..self }
    }

    /// This integer option ends a range that the integer option `lower` starts: it may not be
    /// below it ([`Options::parse`] checks, blaming this one).
    pub(super) const fn at_least(self, lower: &'static str) -> TaskOption {
        TaskOption { at_least: Some(lower), ..self }
    }

    pub(super) const fn int(name: &'static str, default: i64, lo: i64, hi: i64) -> TaskOption {
        TaskOption::new(ArgSpec::value(name, Kind::Int, Default::Int(default)), Accepts::Ints(lo, hi))
    }
    /// A float in `lo..hi`.
    pub(super) const fn float_below(name: &'static str, default: f64, lo: f64, hi: f64) -> TaskOption {
        let accepts = Accepts::Floats { lo, hi, hi_open: true };
        TaskOption::new(ArgSpec::value(name, Kind::Float, Default::Float(default)), accepts)
    }
    /// A required path naming `what`.
    pub(super) const fn path(name: &'static str, what: &'static str) -> TaskOption {
        TaskOption::new(ArgSpec::value(name, Kind::Str, Default::Required), Accepts::Path(what))
    }
    pub(super) const fn choice(
        name: &'static str,
        default: &'static str,
        choices: &'static [&'static str],
    ) -> TaskOption {
        TaskOption::new(ArgSpec::value(name, Kind::Str, Default::Str(default)), Accepts::Choice(choices))
    }
}

impl TaskOption {
    /// What the option accepts, in words for `memctl tasks`: `1 to 4096`, `one of flip,
    /// erase`, `at least 0 and below 1`, `a path to the bAbI folder`; `at least `lower`` where
    /// it ends a range.
    pub(super) fn accepted(&self) -> String {
        let mut text = match self.accepts {
            Accepts::Ints(lo, hi) => format!("{lo} to {hi}"),
            Accepts::Floats { lo, hi, hi_open: true } => format!("at least {lo} and below {hi}"),
            Accepts::Floats { lo, hi, hi_open: false } => format!("{lo} to {hi}"),
            Accepts::Path(what) => format!("a path to {what}"),
            Accepts::Choice(choices) => format!("one of {}", choices.join(", ")),
        };
        if let Some(lower) = self.at_least {
            text.push_str(&format!(", at least `{lower}`"));
        }
        text
    }
}

/// The signature of a task with these options (in their order).
pub(super) fn signature(options: &[TaskOption]) -> Vec<ArgSpec> {
    options.iter().map(|o| o.spec).collect()
}

/// Whether a trial's identity hashes the option `name` set to `value` (see
/// [`TaskOption::left_out_of_identity_at_default`]); an option not in the table is hashed.
pub(super) fn in_identity(options: &[TaskOption], name: &str, value: &Value) -> bool {
    options
        .iter()
        .find(|o| o.spec.name == name)
        .is_none_or(|o| o.hashed_at_default || o.spec.default.value().as_ref() != Some(value))
}

/// A task's option values, aligned with its options (defaults already filled in by the checker).
pub(super) struct Options<'a> {
    options: &'static [TaskOption],
    values: &'a [Value],
}

impl<'a> Options<'a> {
    pub(super) fn new(options: &'static [TaskOption], values: &'a [Value]) -> Options<'a> {
        Options { options, values }
    }

    /// The option's value and what it accepts.
    fn get(&self, name: &'static str) -> Result<(Value, Accepts), PrimError> {
        let i = self.options.iter().position(|o| o.spec.name == name).ok_or_else(|| missing(name))?;
        let value = self.values.get(i).cloned().or_else(|| self.options[i].spec.default.value());
        Ok((value.ok_or_else(|| missing(name))?, self.options[i].accepts))
    }

    /// An integer option, in its declared range.
    pub(super) fn int(&self, name: &'static str) -> Result<usize, PrimError> {
        let (_, Accepts::Ints(lo, hi)) = self.get(name)? else { return Err(missing(name)) };
        self.int_in(name, lo, hi)
    }

    /// An integer option in `lo..=hi`, a range that depends on other options (declare the
    /// widest in the table).
    pub(super) fn int_in(&self, name: &'static str, lo: i64, hi: i64) -> Result<usize, PrimError> {
        let v = self.get(name)?.0.as_int().ok_or_else(|| missing(name))?;
        if v < lo || v > hi {
            return Err(PrimError::task(format!("`{name}` must be between {lo} and {hi}, found {v}")).on(name));
        }
        Ok(v as usize)
    }

    /// A float option, in its declared range.
    pub(super) fn float(&self, name: &'static str) -> Result<f64, PrimError> {
        let (_, Accepts::Floats { lo, hi, hi_open }) = self.get(name)? else { return Err(missing(name)) };
        self.float_in(name, lo, hi, hi_open)
    }

    /// A float option from `lo` up to `hi` (excluded when `hi_open`), a range that depends on
    /// other options (declare the widest in the table).
    pub(super) fn float_in(&self, name: &'static str, lo: f64, hi: f64, hi_open: bool) -> Result<f64, PrimError> {
        let v = self.get(name)?.0.as_float().ok_or_else(|| missing(name))?;
        let above = if hi_open { v >= hi } else { v > hi };
        if !v.is_finite() || v < lo || above {
            let to = if hi_open { format!("below {hi}") } else { format!("at most {hi}") };
            return Err(PrimError::task(format!("`{name}` must be at least {lo} and {to}, found {v}")).on(name));
        }
        Ok(v)
    }

    /// A path option: a non-empty string.
    pub(super) fn path(&self, name: &'static str) -> Result<String, PrimError> {
        let (v, Accepts::Path(what)) = self.get(name)? else { return Err(missing(name)) };
        match v.as_str() {
            Some(s) if !s.trim().is_empty() => Ok(s.to_string()),
            _ => Err(PrimError::task(format!("`{name}` must name {what}, found {v}")).on(name)),
        }
    }

    /// Every option, checked as its reader above checks it (and a range's ends against each
    /// other, [`TaskOption::at_least`]), deserialized by name into `T` (a
    /// struct of the task's options: integers, floats, paths as strings, choices as their
    /// strings, e.g. into an enum). A `T` that does not fit the table is a bug in the task.
    pub(super) fn parse<T: serde::de::DeserializeOwned>(&self) -> Result<T, PrimError> {
        let mut fields = serde_json::Map::new();
        for option in self.options {
            let name = option.spec.name;
            let value = match option.accepts {
                Accepts::Ints(..) => serde_json::Value::from(self.int(name)?),
                Accepts::Floats { .. } => serde_json::Value::from(self.float(name)?),
                Accepts::Path(_) => serde_json::Value::from(self.path(name)?),
                Accepts::Choice(choices) => serde_json::Value::from(choices[self.choice(name)?]),
            };
            fields.insert(name.to_string(), value);
        }
        for option in self.options {
            if let Some(lower) = option.at_least {
                let name = option.spec.name;
                ordered((lower, self.int(lower)?), (name, self.int(name)?))?;
            }
        }
        serde_json::from_value(serde_json::Value::Object(fields)).map_err(|e| {
            let task = std::any::type_name::<T>();
            PrimError::task(format!("internal: the options table does not fit the struct `{task}`: {e}"))
        })
    }

    /// A choice option; returns the index of the value among its choices.
    pub(super) fn choice(&self, name: &'static str) -> Result<usize, PrimError> {
        let (v, Accepts::Choice(choices)) = self.get(name)? else { return Err(missing(name)) };
        let s = v.as_str().unwrap_or_default();
        choices.iter().position(|c| *c == s).ok_or_else(|| {
            let list = choices.iter().map(|c| format!("\"{c}\"")).collect::<Vec<_>>().join(", ");
            PrimError::task(format!("`{name}` must be one of {list}, found {v}")).on(name)
        })
    }
}

/// An option read as something it was not declared as, or not declared: a bug in the task.
fn missing(name: &'static str) -> PrimError {
    PrimError::task(format!("internal: option `{name}` is not bound")).on(name)
}

/// `lo ≤ hi` for a pair of range options; blames `hi`.
fn ordered(lo: (&'static str, usize), hi: (&'static str, usize)) -> Result<(), PrimError> {
    if lo.1 > hi.1 {
        return Err(PrimError::task(format!("`{}` ({}) must be at least `{}` ({})", hi.0, hi.1, lo.0, lo.1)).on(hi.0));
    }
    Ok(())
}

/// The `valid` and `test` fractions of a data file cut into three sets: each in [0, 1), and
/// together leaving some `what` ("text", "examples") to train on; blames `test`.
pub(super) fn held_out_fractions(o: &Options, what: &str) -> Result<(f64, f64), PrimError> {
    let valid = o.float("valid")?;
    let test = o.float("test")?;
    if valid + test >= 1.0 {
        let message = format!("`valid` + `test` ({valid} + {test}) must leave some {what} to train on");
        return Err(PrimError::task(message).on("test"));
    }
    Ok((valid, test))
}

#[cfg(test)]
mod tests {
    use super::*;

    static OPTIONS: [TaskOption; 3] = [
        TaskOption::int("width", 32, 1, 4096),
        TaskOption::float_below("noise", 0.2, 0.0, 0.5),
        TaskOption::choice("mode", "flip", &["flip", "erase"]),
    ];
    #[test]
    fn the_table_gives_the_signature_and_the_ranges() {
        let signature = signature(&OPTIONS);
        let names: Vec<&str> = signature.iter().map(|s| s.name).collect();
        assert_eq!(names, ["width", "noise", "mode"]);
        assert_eq!(signature[0].default, Default::Int(32));
        let values = [Value::Int(5000), Value::Float(0.5), Value::Str("erase".into())];
        let o = Options::new(&OPTIONS, &values);
        let width = o.int("width").unwrap_err();
        assert_eq!(
            (width.arg, width.to_string()),
            (Some("width"), "`width` must be between 1 and 4096, found 5000".into())
        );
        assert_eq!(o.float("noise").unwrap_err().to_string(), "`noise` must be at least 0 and below 0.5, found 0.5");
        assert_eq!(o.choice("mode").unwrap(), 1);
        // A tighter bound that depends on another option.
        assert_eq!(o.int_in("width", 1, 10_000).unwrap(), 5000);
    }

    #[test]
    fn an_option_left_out_of_identity_is_hashed_only_off_its_default() {
        static LATER: [TaskOption; 2] = [
            TaskOption::int("width", 32, 1, 4096),
            TaskOption::choice("mode", "flip", &["flip", "erase"]).left_out_of_identity_at_default(),
        ];
        assert!(in_identity(&LATER, "width", &Value::Int(32)), "an option declared plainly: always hashed");
        assert!(!in_identity(&LATER, "mode", &Value::Str("flip".into())), "at its default");
        assert!(in_identity(&LATER, "mode", &Value::Str("erase".into())));
        assert!(in_identity(&LATER, "depth", &Value::Int(1)), "not in the table: hashed");
    }

    #[test]
    fn an_option_read_as_another_kind_or_not_declared_is_a_bug_named_as_such() {
        let o = Options::new(&OPTIONS, &[]);
        assert!(o.float("width").unwrap_err().to_string().contains("internal"));
        assert!(o.int("depth").unwrap_err().to_string().contains("internal"));
        assert_eq!(o.int("width").unwrap(), 32, "defaults fill what is not given");
    }

    #[derive(Debug, PartialEq, serde::Deserialize)]
    #[serde(rename_all = "lowercase")]
    enum Mode {
        Flip,
        Erase,
    }

    #[derive(Debug, PartialEq, serde::Deserialize)]
    struct Parsed {
        width: usize,
        noise: f64,
        mode: Mode,
    }

    #[test]
    fn parse_checks_every_option_then_fills_a_struct_by_name() {
        let values = [Value::Int(7), Value::Float(0.25), Value::Str("erase".into())];
        let parsed: Parsed = Options::new(&OPTIONS, &values).parse().unwrap();
        assert_eq!(parsed, Parsed { width: 7, noise: 0.25, mode: Mode::Erase });
        let values = [Value::Int(7), Value::Float(0.25), Value::Str("blur".into())];
        let err = Options::new(&OPTIONS, &values).parse::<Parsed>().unwrap_err();
        assert_eq!(err.arg, Some("mode"), "the option's own check, naming it: {err}");
    }

    #[test]
    fn parse_checks_the_ends_of_a_range_against_each_other() {
        static RANGE: [TaskOption; 2] =
            [TaskOption::int("min_len", 1, 1, 100), TaskOption::int("max_len", 20, 1, 100).at_least("min_len")];
        #[derive(Debug, serde::Deserialize)]
        #[allow(dead_code)]
        struct Range {
            min_len: usize,
            max_len: usize,
        }
        assert!(Options::new(&RANGE, &[Value::Int(5), Value::Int(5)]).parse::<Range>().is_ok());
        let err = Options::new(&RANGE, &[Value::Int(6), Value::Int(5)]).parse::<Range>().unwrap_err();
        assert_eq!(
            (err.arg, err.to_string()),
            (Some("max_len"), "`max_len` (5) must be at least `min_len` (6)".into())
        );
    }

    #[test]
    fn a_struct_that_does_not_fit_the_table_is_a_bug_named_as_such() {
        #[derive(Debug, serde::Deserialize)]
        #[allow(dead_code)]
        struct Other {
            depth: usize,
        }
        let err = Options::new(&OPTIONS, &[]).parse::<Other>().unwrap_err().to_string();
        assert!(err.contains("internal") && err.contains("Other") && err.contains("depth"), "{err}");
    }
}
