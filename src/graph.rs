//! The step graph: a model elaborated for one parameter setting, with every value's shape known.
//!
//! The checker builds it (no candle needed); the compiler lowers each node's checked call to an
//! op and runs them.
//! Nodes are in evaluation order. Shapes are per example: the batch dimension is implicit.

use std::fmt;

use crate::signature::Args;
use crate::source::Span;
pub use crate::ty::{Init, Shape, ShapeDisplay, Ty};

/// Where a node's input comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// The step's input `x_t`.
    Input,
    /// A state's value from the previous time step.
    State(usize),
    /// Output `k` of node `n`.
    Node(usize, usize),
}

/// A learned tensor owned by one call site.
#[derive(Clone, Debug, PartialEq)]
pub struct ParamSpec {
    /// Stable dotted name, e.g. `Mi.itemWrite.gate_mem.weight`.
    pub name: String,
    pub shape: Shape,
    pub init: Init,
}

impl ParamSpec {
    pub fn numel(&self) -> usize {
        self.shape.iter().product()
    }
}

/// The value a state starts from at the beginning of every sequence.
#[derive(Clone, Debug, PartialEq)]
pub enum StateInit {
    Zeros,
    /// A learned initial value, shared by every example (the parameter's index).
    Learned(usize),
    /// A fixed tensor (e.g. RMC's identity memory), row-major.
    Fixed(Vec<f32>),
}

#[derive(Clone, Debug, PartialEq)]
pub struct StateSpec {
    pub name: String,
    pub shape: Shape,
    pub init: StateInit,
    pub span: Span,
}

/// One primitive application.
#[derive(Clone)]
pub struct Node {
    /// The call's arguments as checked (shapes and option values), from which the compiler
    /// lowers the op.
    pub args: Args,
    pub inputs: Vec<Source>,
    /// Indices into [`StepGraph::params`].
    pub params: Vec<usize>,
    pub outputs: Vec<Ty>,
    /// The primitive's name (for profiles and messages).
    pub prim: &'static str,
    /// Dotted name of this call site (the prefix of its parameters' names).
    pub path: String,
    /// The call's option values, `name=value` joined by commas (part of the trial identity).
    pub options: String,
    /// Forward FLOPs per example per time step.
    pub flops: u64,
    /// Elements per example per time step kept for the backward besides the outputs
    /// ([`crate::signature::Inferred::saved`]).
    pub saved: u64,
    pub span: Span,
}

impl fmt::Debug for Node {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Node")
            .field("prim", &self.prim)
            .field("path", &self.path)
            .field("inputs", &self.inputs)
            .finish()
    }
}

/// A model's step, elaborated: what runs at every time step, and what it carries over.
#[derive(Clone, Debug)]
pub struct StepGraph {
    pub model: String,
    pub input: Ty,
    pub states: Vec<StateSpec>,
    pub nodes: Vec<Node>,
    /// The value each state holds after the step (the next step's `State(i)`).
    pub next_states: Vec<Source>,
    pub output: Source,
    pub output_shape: Shape,
    pub params: Vec<ParamSpec>,
}

impl StepGraph {
    /// A canonical description of the wiring, shapes and parameters: equal for two graphs iff
    /// they compute the same thing (comments, spacing and variable names do not matter).
    pub fn fingerprint(&self) -> String {
        use std::fmt::Write;
        let mut s = String::new();
        let _ = write!(s, "in {:?};", self.input);
        for st in &self.states {
            let _ = write!(s, "state {} {:?} {:?};", st.name, st.shape, st.init);
        }
        for n in &self.nodes {
            let _ = write!(s, "{} {} ({}) {:?} {:?};", n.path, n.prim, n.options, n.inputs, n.outputs);
        }
        for p in &self.params {
            let _ = write!(s, "param {} {:?} {:?};", p.name, p.shape, p.init);
        }
        let _ = write!(s, "next {:?}; out {:?} {:?}", self.next_states, self.output, self.output_shape);
        s
    }

    /// Number of learned scalars.
    pub fn param_count(&self) -> usize {
        self.params.iter().map(ParamSpec::numel).sum()
    }

    /// Forward FLOPs per example per time step (multiply-add = 2).
    pub fn flops_per_step(&self) -> u64 {
        self.nodes.iter().map(|n| n.flops).sum()
    }
}
