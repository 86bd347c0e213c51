//! A primitive's arguments: what each must be ([`ArgSpec`]), and their values as bound at one
//! call site ([`Args`]), with typed accessors that turn a wrong value into a [`PrimError`].

use super::{Hint, PrimError, PrimErrorKind};
use crate::ty::{Shape, Ty};
use crate::value::{Kind, Value};

/// What an argument must be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArgKind {
    /// A runtime value (tensor or tokens) wired from another node.
    Tensor,
    /// A value known before the model runs.
    Value(Kind),
}

/// The default of an argument.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Default {
    Required,
    /// An optional tensor input.
    Absent,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(&'static str),
}

impl Default {
    pub fn value(self) -> Option<Value> {
        match self {
            Default::Bool(b) => Some(Value::Bool(b)),
            Default::Int(i) => Some(Value::Int(i)),
            Default::Float(f) => Some(Value::Float(f)),
            Default::Str(s) => Some(Value::Str(s.to_string())),
            Default::Required | Default::Absent => None,
        }
    }
}

#[derive(Clone, Copy, Debug)]
pub struct ArgSpec {
    pub name: &'static str,
    pub kind: ArgKind,
    pub default: Default,
}

impl ArgSpec {
    pub const fn tensor(name: &'static str) -> ArgSpec {
        ArgSpec { name, kind: ArgKind::Tensor, default: Default::Required }
    }
    pub const fn optional_tensor(name: &'static str) -> ArgSpec {
        ArgSpec { name, kind: ArgKind::Tensor, default: Default::Absent }
    }
    pub const fn value(name: &'static str, kind: Kind, default: Default) -> ArgSpec {
        ArgSpec { name, kind: ArgKind::Value(kind), default }
    }
}

/// Short constructors for signatures, so that a primitive's argument list reads like a call
/// (`[tensor("M"), int("heads"), float_or("lambda", 0.35)]`).
pub mod arg {
    use super::{ArgSpec, Default};
    use crate::value::Kind;

    /// A tensor input.
    pub const fn tensor(name: &'static str) -> ArgSpec {
        ArgSpec::tensor(name)
    }
    /// A tensor input that may be left out.
    pub const fn optional(name: &'static str) -> ArgSpec {
        ArgSpec::optional_tensor(name)
    }
    /// A required integer.
    pub const fn int(name: &'static str) -> ArgSpec {
        ArgSpec::value(name, Kind::Int, Default::Required)
    }
    pub const fn int_or(name: &'static str, default: i64) -> ArgSpec {
        ArgSpec::value(name, Kind::Int, Default::Int(default))
    }
    pub const fn float_or(name: &'static str, default: f64) -> ArgSpec {
        ArgSpec::value(name, Kind::Float, Default::Float(default))
    }
    pub const fn bool_or(name: &'static str, default: bool) -> ArgSpec {
        ArgSpec::value(name, Kind::Bool, Default::Bool(default))
    }
    pub const fn str_or(name: &'static str, default: &'static str) -> ArgSpec {
        ArgSpec::value(name, Kind::Str, Default::Str(default))
    }
    /// A required list of integers.
    pub const fn list(name: &'static str) -> ArgSpec {
        ArgSpec::value(name, Kind::List, Default::Required)
    }
}

/// One argument as bound at a call site.
#[derive(Clone, Debug, PartialEq)]
pub enum ArgVal {
    Tensor(Ty),
    Value(Value),
    Absent,
}

/// The arguments of one call, aligned with the primitive's signature.
#[derive(Clone, Debug)]
pub struct Args {
    pub signature: &'static [ArgSpec],
    pub values: Vec<ArgVal>,
}

impl Args {
    fn find(&self, name: &str) -> Option<&ArgVal> {
        self.signature.iter().position(|s| s.name == name).and_then(|i| self.values.get(i))
    }

    fn missing(name: &'static str) -> PrimError {
        PrimError::new(PrimErrorKind::Unbound).on(name)
    }

    pub fn is_present(&self, name: &str) -> bool {
        matches!(self.find(name), Some(ArgVal::Tensor(_)))
    }

    /// The type of a tensor argument.
    pub fn ty(&self, name: &'static str) -> Result<&Ty, PrimError> {
        match self.find(name) {
            Some(ArgVal::Tensor(t)) => Ok(t),
            _ => Err(Args::missing(name)),
        }
    }

    /// The shape of a float tensor argument (tokens are rejected with a hint).
    pub fn shape(&self, name: &'static str) -> Result<&Shape, PrimError> {
        match self.ty(name)? {
            Ty::Tensor(s) => Ok(s),
            Ty::Tokens(_) => Err(PrimError::new(PrimErrorKind::TokensNotFloat).on(name).hint(Hint::Embed)),
        }
    }

    /// The shape of a tensor argument that must have `rank` dimensions.
    pub fn shape_of_rank(&self, name: &'static str, rank: usize, what: &'static str) -> Result<&Shape, PrimError> {
        let s = self.shape(name)?;
        if s.len() != rank {
            return Err(PrimError::new(PrimErrorKind::Rank { what, rank, found: s.clone() }).on(name));
        }
        Ok(s)
    }

    /// The size of a tensor argument's last axis and the axes before it, for a primitive that
    /// works along that axis; a scalar is an error saying what the primitive `needs`.
    pub fn last_axis(&self, name: &'static str, needs: &'static str) -> Result<(usize, &[usize]), PrimError> {
        match self.shape(name)?.split_last() {
            Some((&last, lead)) => Ok((last, lead)),
            None => Err(PrimError::new(PrimErrorKind::Scalar { needs }).on(name)),
        }
    }

    pub fn value(&self, name: &'static str) -> Result<&Value, PrimError> {
        match self.find(name) {
            Some(ArgVal::Value(v)) => Ok(v),
            _ => Err(Args::missing(name)),
        }
    }

    pub fn bool(&self, name: &'static str) -> Result<bool, PrimError> {
        self.value(name)?.as_bool().ok_or_else(|| Args::missing(name))
    }

    pub fn float(&self, name: &'static str) -> Result<f64, PrimError> {
        self.value(name)?.as_float().ok_or_else(|| Args::missing(name))
    }

    pub fn str(&self, name: &'static str) -> Result<&str, PrimError> {
        self.value(name)?.as_str().ok_or_else(|| Args::missing(name))
    }

    /// A positive integer option (a size).
    pub fn size(&self, name: &'static str) -> Result<usize, PrimError> {
        let v = self.value(name)?.as_int().ok_or_else(|| Args::missing(name))?;
        positive(name, v)
    }

    /// A list of positive integers (layer sizes).
    pub fn sizes(&self, name: &'static str) -> Result<Vec<usize>, PrimError> {
        match self.value(name)? {
            Value::List(items) => items
                .iter()
                .map(|v| match v {
                    Value::Int(i) => positive(name, *i),
                    other => Err(not_sizes(name, format!("a list holding {}", other.describe()))),
                })
                .collect(),
            Value::Int(i) => Ok(vec![positive(name, *i)?]),
            other => Err(not_sizes(name, other.describe())),
        }
    }
}

/// The largest size an option may give (2^24: far beyond any model that fits in memory, and
/// small enough that products of a few sizes cannot overflow).
pub const MAX_SIZE: i64 = 1 << 24;

fn positive(name: &'static str, v: i64) -> Result<usize, PrimError> {
    if v <= 0 || v > MAX_SIZE {
        return Err(PrimError::new(PrimErrorKind::Size { found: v, max: MAX_SIZE }).on(name));
    }
    Ok(v as usize)
}

fn not_sizes(name: &'static str, found: String) -> PrimError {
    PrimError::new(PrimErrorKind::NotSizes { found }).on(name)
}
