//! Example calls of a primitive: argument shapes and options that fit it. The registry's tests
//! run every primitive's gradient checks on its examples, and `memctl prims` can show them.

use super::{ArgVal, Args, Primitive};
use crate::ty::Ty;
use crate::value::Value;

/// One argument of an example call.
#[derive(Clone, Debug, PartialEq)]
pub enum ExampleArg {
    /// A float tensor of this per-example shape.
    Tensor(Vec<usize>),
    /// A tensor shared by the whole batch (batch axis 1), such as a `scalar`'s value.
    Shared(Vec<usize>),
    /// Token ids from a vocabulary of this size.
    Tokens(usize),
    Value(Value),
}

impl ExampleArg {
    pub fn tensor(shape: &[usize]) -> ExampleArg {
        ExampleArg::Tensor(shape.to_vec())
    }
    pub fn shared(shape: &[usize]) -> ExampleArg {
        ExampleArg::Shared(shape.to_vec())
    }
    pub fn int(i: i64) -> ExampleArg {
        ExampleArg::Value(Value::Int(i))
    }
    pub fn float(f: f64) -> ExampleArg {
        ExampleArg::Value(Value::Float(f))
    }
    pub fn boolean(b: bool) -> ExampleArg {
        ExampleArg::Value(Value::Bool(b))
    }
    pub fn string(s: &str) -> ExampleArg {
        ExampleArg::Value(Value::Str(s.to_string()))
    }
    pub fn ints(v: &[i64]) -> ExampleArg {
        ExampleArg::Value(Value::List(v.iter().map(|&i| Value::Int(i)).collect()))
    }
}

/// Short constructors for writing examples: `[("M", t(&[4, 4])), ("nq", int(2))]`.
pub mod example_args {
    use super::ExampleArg;

    /// A float tensor of this per-example shape.
    pub fn t(shape: &[usize]) -> ExampleArg {
        ExampleArg::tensor(shape)
    }
    /// A tensor shared by the whole batch.
    pub fn shared(shape: &[usize]) -> ExampleArg {
        ExampleArg::shared(shape)
    }
    pub fn tokens(vocab: usize) -> ExampleArg {
        ExampleArg::Tokens(vocab)
    }
    pub fn int(i: i64) -> ExampleArg {
        ExampleArg::int(i)
    }
    pub fn float(f: f64) -> ExampleArg {
        ExampleArg::float(f)
    }
    pub fn boolean(b: bool) -> ExampleArg {
        ExampleArg::boolean(b)
    }
    pub fn string(s: &str) -> ExampleArg {
        ExampleArg::string(s)
    }
    pub fn ints(v: &[i64]) -> ExampleArg {
        ExampleArg::ints(v)
    }
}

/// A call that fits: named arguments; the others take their defaults.
#[derive(Clone, Debug, PartialEq)]
pub struct Example {
    pub args: Vec<(&'static str, ExampleArg)>,
}

impl Example {
    pub fn new(args: impl Into<Vec<(&'static str, ExampleArg)>>) -> Example {
        Example { args: args.into() }
    }

    /// The arguments bound to `prim`'s signature, defaults filled in; `None` if an example
    /// names an argument the primitive does not have.
    pub fn bind(&self, prim: &dyn Primitive) -> Option<Args> {
        let signature = prim.signature();
        if self.args.iter().any(|(name, _)| !signature.iter().any(|s| s.name == *name)) {
            return None;
        }
        let values = signature
            .iter()
            .map(|spec| match self.args.iter().find(|(n, _)| *n == spec.name) {
                Some((_, ExampleArg::Tensor(s) | ExampleArg::Shared(s))) => ArgVal::Tensor(Ty::Tensor(s.clone())),
                Some((_, ExampleArg::Tokens(v))) => ArgVal::Tensor(Ty::Tokens(*v)),
                Some((_, ExampleArg::Value(v))) => ArgVal::Value(v.clone()),
                None => spec.default.value().map_or(ArgVal::Absent, ArgVal::Value),
            })
            .collect();
        Some(Args { signature, values })
    }

    /// The tensor arguments given, in signature order.
    pub fn tensor_args(&self, prim: &dyn Primitive) -> Vec<ExampleArg> {
        prim.signature()
            .iter()
            .filter_map(|spec| self.args.iter().find(|(n, _)| *n == spec.name).map(|(_, a)| a.clone()))
            .filter(|a| !matches!(a, ExampleArg::Value(_)))
            .collect()
    }
}
