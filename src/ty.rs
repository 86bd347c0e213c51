//! The types of runtime values every layer shares: a tensor's per-example shape, token ids,
//! and how a parameter is initialised. A leaf: it depends on nothing in memctl and on no
//! tensor library, so the language, the checker and the store can all use it.

use std::fmt;

use serde::{Deserialize, Serialize};

/// Per-example shape of a tensor (the batch dimension is not included).
pub type Shape = Vec<usize>;

/// The type of a runtime value.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Ty {
    /// A float tensor of this per-example shape.
    Tensor(Shape),
    /// One token id per example, from a vocabulary of this size.
    Tokens(usize),
}

impl Ty {
    pub fn shape(&self) -> Option<&Shape> {
        match self {
            Ty::Tensor(s) => Some(s),
            Ty::Tokens(_) => None,
        }
    }
}

impl fmt::Display for Ty {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Ty::Tensor(s) => write!(f, "{}", ShapeDisplay(s)),
            Ty::Tokens(v) => write!(f, "tokens({v})"),
        }
    }
}

/// Displays a shape as `[d0, d1]` (`[]` for a scalar).
pub struct ShapeDisplay<'a>(pub &'a [usize]);

impl fmt::Display for ShapeDisplay<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[")?;
        for (i, d) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{d}")?;
        }
        f.write_str("]")
    }
}

/// How a parameter tensor is initialised (deterministically from the trial seed and its name).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Init {
    /// U(-bound, bound), e.g. PyTorch's default Linear init with bound 1/√fan_in.
    Uniform(f64),
    /// N(0, std²).
    Normal(f64),
    /// Every element equal to this value.
    Constant(f64),
}
