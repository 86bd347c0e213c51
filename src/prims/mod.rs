//! Memory primitives and tensor glue: the building blocks a `.mem` step is wired from.
//!
//! A [`Primitive`] declares its signature (checked by the checker, no candle involved) and,
//! given the shapes and options of one call, returns an [`Instance`]: output types, the
//! parameters the call site owns, its FLOPs, and the [`Op`] that runs it on a batch.
//!
//! Adding a primitive: one file in this folder implementing [`Primitive`], plus its `mod`
//! line and one entry in [`PRIMS`]. The checker, compiler and `memctl prims` read the registry.

use std::sync::Arc;

use candle_core::Tensor;

use crate::graph::{Init, Shape, ShapeDisplay, Ty};
use crate::value::{Kind, Value};

pub mod add;
pub mod affine;
pub mod backward;
mod binary;
pub mod concat;
pub mod distill;
pub mod div;
pub mod embed;
pub mod embedding;
pub mod flatten;
pub mod fusion;
pub mod gru_cell;
pub mod head_move;
mod heads;
pub mod item_write;
pub mod kanerva_read;
pub mod kanerva_update;
pub mod key_jump;
pub mod layer_norm;
pub mod linear;
pub mod lstm_cell;
pub mod matmul;
pub mod mhdpa;
pub mod mlp;
pub mod mul;
pub mod nam_attend;
pub mod nam_rd;
pub mod nam_wr;
pub mod normalize;
pub mod opa_attend;
pub mod outer;
pub mod rel_read;
pub mod relu;
pub mod reshape;
pub mod rmc_gate;
pub mod sam_read;
pub mod scalar;
pub mod sigmoid;
pub mod slice;
pub mod softmax;
pub mod sub;
pub mod tanh;
pub mod tape_read;
pub mod tape_write;
pub mod transfer;
mod unary;

#[cfg(test)]
pub(crate) mod testing;

/// Every primitive, by name. Order is the order of `memctl prims`.
pub static PRIMS: &[&dyn Primitive] = &[
    &item_write::ItemWrite,
    &rel_read::RelRead,
    &sam_read::SamRead,
    &opa_attend::OpaAttend,
    &transfer::Transfer,
    &distill::Distill,
    &nam_wr::NamWr,
    &nam_rd::NamRd,
    &nam_attend::NamAttend,
    &tape_write::TapeWrite,
    &tape_read::TapeRead,
    &key_jump::KeyJump,
    &head_move::HeadMove,
    &mhdpa::Mhdpa,
    &rmc_gate::RmcGate,
    &kanerva_update::KanervaUpdate,
    &kanerva_read::KanervaRead,
    &lstm_cell::LstmCell,
    &gru_cell::GruCell,
    &linear::Linear,
    &mlp::Mlp,
    &embed::Embed,
    &embedding::Embedding,
    &layer_norm::LayerNorm,
    &scalar::Scalar,
    &sigmoid::Sigmoid,
    &tanh::Tanh,
    &relu::Relu,
    &softmax::Softmax,
    &add::Add,
    &sub::Sub,
    &mul::Mul,
    &div::Div,
    &affine::Affine,
    &outer::Outer,
    &matmul::MatMul,
    &concat::Concat,
    &slice::Slice,
    &reshape::Reshape,
    &flatten::Flatten,
    &normalize::Normalize,
];

/// Looks a primitive up by name.
pub fn get(name: &str) -> Option<&'static dyn Primitive> {
    PRIMS.iter().copied().find(|p| p.name() == name)
}

/// A building block of a step.
pub trait Primitive: Send + Sync {
    /// The name used in `.mem` files (the papers' names: `samRead`, `itemWrite`, ...).
    fn name(&self) -> &'static str;
    /// One line: what it computes and the paper equation.
    fn summary(&self) -> &'static str;
    /// Arguments, in positional order.
    fn signature(&self) -> &'static [ArgSpec];
    /// Names of the outputs (most primitives have one).
    fn outputs(&self) -> &'static [&'static str] {
        &["out"]
    }
    /// Checks one call's shapes and options and configures it.
    fn instantiate(&self, args: &Args) -> Result<Instance, PrimError>;
}

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
        PrimError::new(format!("internal: argument `{name}` is not bound")).on(name)
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
            Ty::Tokens(_) => Err(PrimError::new(format!("`{name}` is a token id, not a float tensor"))
                .on(name)
                .hint("turn tokens into vectors with `embedding(x, size)`")),
        }
    }

    /// The shape of a tensor argument that must have `rank` dimensions.
    pub fn shape_of_rank(&self, name: &'static str, rank: usize, what: &str) -> Result<&Shape, PrimError> {
        let s = self.shape(name)?;
        if s.len() != rank {
            return Err(PrimError::new(format!(
                "`{name}` must be {what} ({rank} dimension{}), but has shape {}",
                if rank == 1 { "" } else { "s" },
                ShapeDisplay(s)
            ))
            .on(name));
        }
        Ok(s)
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
                    other => {
                        Err(PrimError::new(format!("`{name}` must be a list of sizes, but holds {}", other.describe()))
                            .on(name))
                    }
                })
                .collect(),
            Value::Int(i) => Ok(vec![positive(name, *i)?]),
            other => {
                Err(PrimError::new(format!("`{name}` must be a list of sizes, found {}", other.describe())).on(name))
            }
        }
    }
}

fn positive(name: &'static str, v: i64) -> Result<usize, PrimError> {
    if v <= 0 || v > 1 << 24 {
        return Err(PrimError::new(format!("`{name}` must be a size between 1 and 16777216, found {v}")).on(name));
    }
    Ok(v as usize)
}

/// Why a call does not fit; the checker locates it at the named argument (or the call).
#[derive(Clone, Debug, PartialEq)]
pub struct PrimError {
    pub arg: Option<&'static str>,
    pub message: String,
    pub hint: Option<String>,
}

impl PrimError {
    pub fn new(message: impl Into<String>) -> PrimError {
        PrimError { arg: None, message: message.into(), hint: None }
    }
    /// Blames an argument.
    pub fn on(mut self, arg: &'static str) -> PrimError {
        self.arg = Some(arg);
        self
    }
    pub fn hint(mut self, hint: impl Into<String>) -> PrimError {
        self.hint = Some(hint.into());
        self
    }

    /// "`b` must have the shape [4], found [5]".
    pub fn shape_mismatch(arg: &'static str, expected: &[usize], found: &[usize], why: &str) -> PrimError {
        PrimError::new(format!(
            "`{arg}` must have shape {} {why}, but has shape {}",
            ShapeDisplay(expected),
            ShapeDisplay(found)
        ))
        .on(arg)
    }
}

/// A parameter one call site owns, named relative to the call site.
#[derive(Clone, Debug, PartialEq)]
pub struct ParamDecl {
    pub name: String,
    pub shape: Shape,
    pub init: Init,
}

impl ParamDecl {
    pub fn new(name: impl Into<String>, shape: Shape, init: Init) -> ParamDecl {
        ParamDecl { name: name.into(), shape, init }
    }

    /// A `fan_in → fan_out` dense layer's weight `[fan_out, fan_in]` and bias `[fan_out]`, with
    /// PyTorch's default init U(±1/√fan_in) (the authors' code relies on it).
    pub fn dense(prefix: &str, fan_in: usize, fan_out: usize) -> [ParamDecl; 2] {
        let bound = 1.0 / (fan_in as f64).sqrt();
        [
            ParamDecl::new(join(prefix, "weight"), vec![fan_out, fan_in], Init::Uniform(bound)),
            ParamDecl::new(join(prefix, "bias"), vec![fan_out], Init::Uniform(bound)),
        ]
    }
}

fn join(prefix: &str, leaf: &str) -> String {
    if prefix.is_empty() { leaf.to_string() } else { format!("{prefix}.{leaf}") }
}

/// A configured call: everything the checker and compiler need.
pub struct Instance {
    pub op: Arc<dyn Op>,
    pub outputs: Vec<Ty>,
    pub params: Vec<ParamDecl>,
    /// Forward FLOPs per example per time step (multiply-add = 2).
    pub flops: u64,
}

impl Instance {
    pub fn new(op: impl Op + 'static, outputs: Vec<Ty>, params: Vec<ParamDecl>, flops: u64) -> Instance {
        Instance { op: Arc::new(op), outputs, params, flops }
    }
}

/// The runtime half of a primitive: batch-first candle computation.
///
/// `inputs` are the present tensor arguments in signature order, each with a leading batch
/// dimension (which may be 1 for values shared by the whole batch, such as a learned scalar);
/// `params` are the call site's parameters in the order of [`Instance::params`].
///
/// An op may also provide its own reverse mode (used by training on the CPU, see
/// [`backward`]): `has_backward` true, `forward_train` (the same outputs, computed by fused
/// kernels, plus what the backward needs) and `backward`. Without one, training
/// differentiates `forward` with candle's autograd.
pub trait Op: Send + Sync {
    fn forward(&self, inputs: &[&Tensor], params: &[&Tensor]) -> candle_core::Result<Vec<Tensor>>;

    /// Whether `forward_train` and `backward` are implemented.
    fn has_backward(&self) -> bool {
        false
    }

    /// The forward of a training run: outputs equal to [`Op::forward`]'s (inputs are
    /// contiguous, CPU, f32 or f64) and the values [`Op::backward`] needs.
    fn forward_train(&self, inputs: &[&Tensor], params: &[&Tensor]) -> candle_core::Result<(Vec<Tensor>, Saved)> {
        Ok((self.forward(inputs, params)?, vec![]))
    }

    /// The gradients of the loss with respect to the inputs (`None` where not needed), given
    /// those with respect to the outputs; adds the parameters' gradients into `param_grads`
    /// (one per parameter of the call, in order).
    fn backward(&self, _b: &Backward<'_>, _param_grads: &mut [ParamGrad]) -> candle_core::Result<Vec<Option<Tensor>>> {
        candle_core::bail!("this primitive has no manual backward")
    }
}

pub use backward::{Backward, ParamGrad, Saved};

/// Checks `names` are unique and non-empty (used by a test and by `memctl prims`).
pub fn registry_problems() -> Vec<String> {
    let mut problems = vec![];
    for (i, p) in PRIMS.iter().enumerate() {
        if PRIMS[..i].iter().any(|q| q.name() == p.name()) {
            problems.push(format!("primitive `{}` is registered twice", p.name()));
        }
        if p.summary().is_empty() {
            problems.push(format!("primitive `{}` has no summary", p.name()));
        }
    }
    problems
}
