//! Compile-time values: model parameters, primitive options, task and train settings, sweep values.

use std::fmt;

use serde::{Deserialize, Serialize};

/// A value known before anything runs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Value {
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    List(Vec<Value>),
}

/// The kind of a [`Value`], for signatures and messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    Bool,
    Int,
    Float,
    Str,
    List,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Bool => "bool",
            Kind::Int => "int",
            Kind::Float => "float",
            Kind::Str => "str",
            Kind::List => "list",
        }
    }

    /// `an int`, `a float`, `a bool`, `a str`, `a list`: the kind with its article, for messages.
    pub fn with_article(self) -> String {
        let article = if self == Kind::Int { "an" } else { "a" };
        format!("{article} {self}")
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Value {
    pub fn kind(&self) -> Kind {
        match self {
            Value::Bool(_) => Kind::Bool,
            Value::Int(_) => Kind::Int,
            Value::Float(_) => Kind::Float,
            Value::Str(_) => Kind::Str,
            Value::List(_) => Kind::List,
        }
    }

    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Value::Bool(b) => Some(*b),
            _ => None,
        }
    }

    pub fn as_int(&self) -> Option<i64> {
        match self {
            Value::Int(i) => Some(*i),
            _ => None,
        }
    }

    /// Ints widen to floats.
    pub fn as_float(&self) -> Option<f64> {
        match self {
            Value::Float(f) => Some(*f),
            Value::Int(i) => Some(*i as f64),
            _ => None,
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }

    /// Converts to `kind` where that loses nothing (int → float); `None` otherwise.
    pub fn coerce(&self, kind: Kind) -> Option<Value> {
        match (self, kind) {
            (v, k) if v.kind() == k => Some(v.clone()),
            (Value::Int(i), Kind::Float) => Some(Value::Float(*i as f64)),
            _ => None,
        }
    }

    /// "the int 3", "the list [1, 2]": how messages refer to a value.
    pub fn describe(&self) -> String {
        format!("the {} {self}", self.kind())
    }
}

/// `items` as `[a, b, c]`, each in its own `Display` form.
pub fn write_list<T: fmt::Display>(f: &mut fmt::Formatter<'_>, items: &[T]) -> fmt::Result {
    f.write_str("[")?;
    for (i, v) in items.iter().enumerate() {
        if i > 0 {
            f.write_str(", ")?;
        }
        write!(f, "{v}")?;
    }
    f.write_str("]")
}

/// Whether a number is written with an exponent where people read it (labels, query output):
/// past several zeros, as a learning rate of 1e-7 or a diverged loss of 1e37.
pub fn wants_exponent(x: f64) -> bool {
    x != 0.0 && x.is_finite() && !(1e-5..1e16).contains(&x.abs())
}

/// A value as labels show it (a trial's swept values, a curve's legend): as its `Display`, but
/// a float past many zeros with an exponent (`lr=1e-7`, not `lr=0.0000001`). `Display` itself
/// stays as it is: the step graph's fingerprint, and so trial identities, hold its text.
pub struct Label<'a>(pub &'a Value);

impl fmt::Display for Label<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Value::Float(x) if wants_exponent(*x) => write!(f, "{x:e}"),
            Value::List(items) => write_list(f, &items.iter().map(Label).collect::<Vec<_>>()),
            v => write!(f, "{v}"),
        }
    }
}

/// `name=value` pairs joined by spaces, each value as a [`Label`]: how a trial's swept values
/// are shown.
pub fn assignments<'a>(pairs: impl IntoIterator<Item = &'a (String, Value)>) -> String {
    pairs.into_iter().map(|(k, v)| format!("{k}={}", Label(v))).collect::<Vec<_>>().join(" ")
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Bool(b) => write!(f, "{b}"),
            Value::Int(i) => write!(f, "{i}"),
            Value::Float(x) => {
                if x.fract() == 0.0 && x.abs() < 1e15 {
                    write!(f, "{x:.1}")
                } else {
                    write!(f, "{x}")
                }
            }
            Value::Str(s) => write!(f, "\"{s}\""),
            Value::List(items) => write_list(f, items),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Label, Value, assignments};

    #[test]
    fn labels_write_floats_past_many_zeros_with_an_exponent_and_display_stays() {
        let swept = [
            ("lr".to_string(), Value::Float(1e-7)),
            ("d".to_string(), Value::Int(96)),
            ("alpha".to_string(), Value::Float(0.5)),
            ("scale".to_string(), Value::Float(1e37)),
            ("rates".to_string(), Value::List(vec![Value::Float(3e-6), Value::Float(0.01)])),
        ];
        assert_eq!(assignments(&swept), "lr=1e-7 d=96 alpha=0.5 scale=1e37 rates=[3e-6, 0.01]");
        assert_eq!(Label(&Value::Float(2.0)).to_string(), "2.0");
        // Identities hash `Display`'s text: it does not change.
        assert_eq!(Value::Float(1e-7).to_string(), "0.0000001");
    }
}
