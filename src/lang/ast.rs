//! The syntax tree of a `.mem` file. Every node carries the [`Span`] it was parsed from.

use crate::source::Span;

/// A name with its location.
#[derive(Debug, Clone, PartialEq)]
pub struct Ident {
    pub name: String,
    pub span: Span,
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct File {
    pub uses: Vec<Use>,
    pub models: Vec<Model>,
    pub tasks: Vec<TaskDef>,
    pub experiments: Vec<Experiment>,
}

/// `use "path.mem"`.
#[derive(Debug, Clone, PartialEq)]
pub struct Use {
    pub path: String,
    pub span: Span,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Model {
    pub name: Ident,
    pub params: Vec<Param>,
    pub states: Vec<StateDecl>,
    /// `None` when the model has no `step` block (a checker error).
    pub step: Option<Step>,
    /// Extra `step` blocks (a checker error: a model has exactly one).
    pub extra_steps: Vec<Span>,
    pub span: Span,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TypeName {
    Int,
    Float,
    Bool,
    Str,
}

impl TypeName {
    pub fn as_str(self) -> &'static str {
        match self {
            TypeName::Int => "int",
            TypeName::Float => "float",
            TypeName::Bool => "bool",
            TypeName::Str => "str",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Param {
    pub name: Ident,
    pub ty: Option<(TypeName, Span)>,
    pub default: Option<Expr>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct StateDecl {
    pub name: Ident,
    pub init: Expr,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    pub input: Ident,
    pub body: Vec<Stmt>,
    pub span: Span,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Stmt {
    /// `a, b = expr`
    Assign { targets: Vec<Ident>, value: Expr },
    /// `if c1 { .. } else if c2 { .. } else { .. }`: the arms in order, then the `else` block
    /// (empty when there is none). Flat, so that a long `else if` chain nests nothing.
    If { arms: Vec<IfArm>, otherwise: Vec<Stmt>, span: Span },
    /// `out expr`
    Out { value: Expr, span: Span },
}

/// One `if cond { then }` arm of an `if` statement.
#[derive(Debug, Clone, PartialEq)]
pub struct IfArm {
    pub cond: Expr,
    pub then: Vec<Stmt>,
}

/// `task name = generator(args)`.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskDef {
    pub name: Ident,
    pub call: Call,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Experiment {
    pub name: Ident,
    /// A task name, or an inline generator call.
    pub task: Vec<Call>,
    /// The model with parameter overrides (a bare name is a call with no arguments).
    pub model: Vec<Call>,
    pub train: Vec<Vec<Setting>>,
    pub sweep: Vec<Vec<SweepEntry>>,
    /// `search { … }` blocks (a checker error if more than one).
    pub search: Vec<SearchBlock>,
    pub span: Span,
}

/// `search { … }`: the names searched, the seeds, and the search's settings.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchBlock {
    pub entries: Vec<SearchEntry>,
    pub span: Span,
}

/// One entry of a `search` block.
#[derive(Debug, Clone, PartialEq)]
pub enum SearchEntry {
    /// `d in [48, 96]`, `seed in 1..3`: the values a name may take.
    Axis(SweepAxis),
    /// `lr ~ loguniform(1e-4, 1e-2)`: a distribution to search.
    Draw(Draw),
    /// `trials = 40`, `sampler = tpe(seed = 1)`, `prune = asha(…)`, `metric = val_accuracy`.
    Setting(Setting),
}

/// `key = value` in a `train` block.
#[derive(Debug, Clone, PartialEq)]
pub struct Setting {
    pub key: Ident,
    pub value: Expr,
}

/// `name in values` in a `sweep` block.
#[derive(Debug, Clone, PartialEq)]
pub struct SweepAxis {
    pub name: Ident,
    pub values: Expr,
}

/// One entry of a `sweep` block; the trials are the cartesian product of the entries.
#[derive(Debug, Clone, PartialEq)]
pub enum SweepEntry {
    Axis(SweepAxis),
    /// `zip { a in [..], b in [..] }`: the lists are walked together.
    Zip {
        axes: Vec<SweepAxis>,
        span: Span,
    },
    /// `random(n, seed = s) { a ~ dist(..) ... }`: `n` draws.
    Random {
        args: Vec<Arg>,
        draws: Vec<Draw>,
        span: Span,
    },
}

/// `name ~ distribution(args)` in a `random` group.
#[derive(Debug, Clone, PartialEq)]
pub struct Draw {
    pub name: Ident,
    pub dist: Call,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Call {
    pub callee: Ident,
    pub args: Vec<Arg>,
    /// False for a bare name used where a call is allowed (`model stm`).
    pub parens: bool,
    pub span: Span,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Arg {
    pub name: Option<Ident>,
    pub value: Expr,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Expr {
    pub kind: ExprKind,
    pub span: Span,
}

#[derive(Debug, Clone, PartialEq)]
pub enum ExprKind {
    Int(i64),
    Float(f64),
    Bool(bool),
    Str(String),
    Name(String),
    Call(Call),
    List(Vec<Expr>),
    Unary(UnaryOp, Box<Expr>),
    Binary(BinaryOp, Box<Expr>, Box<Expr>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnaryOp {
    Neg,
    Not,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BinaryOp {
    Range,
    Or,
    And,
    Eq,
    Ne,
    Le,
    Ge,
    Lt,
    Gt,
    Add,
    Sub,
    Mul,
    Div,
    /// `⊙`: element-wise product (same as `*` on tensors).
    Hadamard,
    /// `⊗`: outer product.
    Outer,
    /// `@`: matrix product.
    MatMul,
}

impl BinaryOp {
    pub fn symbol(self) -> &'static str {
        match self {
            BinaryOp::Range => "..",
            BinaryOp::Or => "or",
            BinaryOp::And => "and",
            BinaryOp::Eq => "==",
            BinaryOp::Ne => "!=",
            BinaryOp::Le => "<=",
            BinaryOp::Ge => ">=",
            BinaryOp::Lt => "<",
            BinaryOp::Gt => ">",
            BinaryOp::Add => "+",
            BinaryOp::Sub => "-",
            BinaryOp::Mul => "*",
            BinaryOp::Div => "/",
            BinaryOp::Hadamard => "⊙",
            BinaryOp::Outer => "⊗",
            BinaryOp::MatMul => "@",
        }
    }
}
