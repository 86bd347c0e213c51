//! The syntax tree of a `--where` filter.

use crate::source::Span;

/// A filter: tests combined with `and`, `or` and `not`.
#[derive(Clone, Debug, PartialEq)]
pub enum Filter {
    Or(Vec<Filter>),
    And(Vec<Filter>),
    Not(Box<Filter>),
    Test(Test),
}

/// One test on a run.
#[derive(Clone, Debug, PartialEq)]
pub struct Test {
    pub kind: TestKind,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub enum TestKind {
    /// A field alone: true when it is the boolean `true`.
    Truthy(Operand),
    Compare(Operand, CmpOp, Operand),
    /// `item in set` (`negated`: `item not in set`).
    In {
        item: Operand,
        set: Operand,
        negated: bool,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CmpOp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    /// `experiment ~ "quick*"`: glob match (`*` any run of characters, `?` one character).
    Glob,
}

impl CmpOp {
    /// The operator that holds for `b op' a` when `a op b` does.
    pub fn flipped(self) -> CmpOp {
        match self {
            CmpOp::Lt => CmpOp::Gt,
            CmpOp::Le => CmpOp::Ge,
            CmpOp::Gt => CmpOp::Lt,
            CmpOp::Ge => CmpOp::Le,
            other => other,
        }
    }

    pub fn symbol(self) -> &'static str {
        match self {
            CmpOp::Eq => "==",
            CmpOp::Ne => "!=",
            CmpOp::Lt => "<",
            CmpOp::Le => "<=",
            CmpOp::Gt => ">",
            CmpOp::Ge => ">=",
            CmpOp::Glob => "~",
        }
    }

    /// `<`, `<=`, `>`, `>=`: need an order.
    pub fn is_ordering(self) -> bool {
        matches!(self, CmpOp::Lt | CmpOp::Le | CmpOp::Gt | CmpOp::Ge)
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Operand {
    pub kind: OperandKind,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub enum OperandKind {
    /// A run field, as written (`d`, `param.d`, `accuracy`).
    Field(String),
    Lit(Lit),
    List(Vec<(Lit, Span)>),
}

/// A literal value.
#[derive(Clone, Debug, PartialEq)]
pub enum Lit {
    Num(f64),
    /// A number written without a point or exponent, kept exact.
    Int(i128),
    Str(String),
    Bool(bool),
    /// A day, a minute or a second (UTC), as written: its start in Unix seconds and its
    /// length, so that `started == 2025-01-31` holds all day.
    Date(f64, f64),
}

impl Lit {
    /// "the number 48", "the string \"48\"": how messages refer to a literal.
    pub fn describe(&self) -> String {
        match self {
            Lit::Num(x) => format!("the number {x}"),
            Lit::Int(i) => format!("the number {i}"),
            Lit::Str(s) => format!("the string \"{s}\""),
            Lit::Bool(b) => format!("the boolean {b}"),
            Lit::Date(..) => "a date".to_string(),
        }
    }
}
