//! Why a call does not fit a primitive, as data: a [`PrimErrorKind`] (one variant per
//! mistake, typed fields), the argument it blames, and an optional [`Hint`]. All the text a
//! user reads is in the two `Display` impls below; the checker adds the location.
//!
//! Each kind has a stable code (`P0xx`), so tests and users can refer to a mistake without
//! matching its wording.

use std::fmt;

use crate::ty::{Shape, ShapeDisplay};

/// Why a call does not fit; the checker locates it at the blamed argument (or the call).
#[derive(Clone, Debug, PartialEq)]
pub struct PrimError {
    pub arg: Option<&'static str>,
    pub kind: PrimErrorKind,
    pub hint: Option<Hint>,
}

#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum PrimErrorKind {
    /// An argument the signature declares was not bound: a bug in memctl, not in the spec.
    Unbound,
    /// Token ids where a float tensor is needed.
    TokensNotFloat,
    /// A float tensor where token ids are needed.
    FloatNotTokens,
    /// A tensor with the wrong number of axes; `what` says what it must be ("a square matrix").
    Rank { what: &'static str, rank: usize, found: Shape },
    /// A scalar where an axis is needed; `needs` finishes "`x` is a scalar; …".
    Scalar { needs: &'static str },
    /// A tensor of the wrong shape; `why` says what the expected shape follows from.
    Shape { expected: Shape, found: Shape, why: &'static str },
    /// Two operands whose shapes do not combine; `how` names the rule they break.
    Incompatible { a: Shape, b: Shape, how: Combine },
    /// An axis of `len` elements that does not split into `heads` heads.
    HeadSplit { what: &'static str, len: usize, heads: usize },
    /// A tensor that must be one vector per head, or split into heads, but is neither.
    PerHead { what: &'static str, heads: usize, layout: HeadLayout, found: Shape },
    /// A per-head vector whose heads do not match the memory's axis.
    PerHeadSize { what: &'static str, per_head: usize, axis: usize },
    /// `heads · head_size` does not give the memory's row size.
    HeadSizes { d: usize, heads: usize, head_size: usize },
    /// A size option outside 1 ..= `max`.
    Size { found: i64, max: i64 },
    /// An integer option below its least value.
    AtLeast { least: i64, found: i64 },
    /// A float option that must be positive and finite.
    Positive { what: &'static str, found: f64 },
    /// An option that must be a list of sizes; `found` describes what it is.
    NotSizes { found: String },
    /// An empty list of layer sizes.
    NoSizes,
    /// A string option outside its choices.
    NotOneOf { choices: &'static [&'static str], found: String },
    /// A reshape to a different number of elements.
    Reshape { from: Shape, to: Shape },
    /// A slice reaching past the end of the last axis.
    SlicePastEnd { start: usize, end: usize, len: usize },
    /// `headMove`'s moves neither 3 (no JUMP) nor 4 per head.
    Moves { heads: usize, found: Shape },
    /// 4 moves (JUMP among them) without a jump position.
    JumpMissing,
    /// A jump position with only 3 moves.
    JumpUnused,
    /// Prose from a task's option check; task options are to move to kinds of their own.
    Task(String),
}

/// How two shapes must relate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Combine {
    /// Broadcast against each other (element-wise operators).
    Broadcast,
    /// Broadcast over their batch axes (`@`).
    BatchBroadcast,
    /// Agree on the contracted axis (`@`).
    Inner,
    /// Agree on every axis but the last (`⊗`, concat).
    Leading { op: &'static str },
}

/// How a per-head tensor may be laid out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HeadLayout {
    /// `[heads·dh]` or `[heads, dh]`.
    VectorOrSplit,
    /// `[heads]` or a single scalar `[]`.
    ScalarPerHead,
    /// A tape `[heads, L, d/heads]`.
    Tape,
    /// A memory matrix `[dv, dk]` (one head) or one per head `[heads, dv/heads, dk/heads]`.
    Memory,
}

/// What to try instead.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum Hint {
    /// Turn token ids into vectors first.
    Embed,
    /// Vectors go through a dense layer, not an embedding.
    UseLinear,
    /// Project the input to the memory's row size first.
    ProjectInput {
        d: usize,
    },
    MultipleOfHeads {
        heads: usize,
    },
    /// How a head-position state is declared.
    PositionState {
        heads: usize,
        len: usize,
    },
    PassJump,
    FourMoves {
        heads: usize,
    },
    NoGating,
    MakeVector,
    SameLeadingAxes,
    BroadcastRule,
    /// How a reshape must match.
    SameElements,
    /// The shape a split vector must have.
    HeadsShape {
        heads: usize,
        size: usize,
    },
    /// How a NAM-TM tape state is declared.
    TapeState,
    /// How a multi-head NAM memory state is declared.
    MemoryState {
        heads: usize,
    },
    /// What an RMC's memory size is made of.
    RmcSize,
    /// The largest `size` a slice starting at `start` can take.
    SliceSize {
        start: usize,
        most: usize,
    },
    /// Where the bAbI tasks come from and where `dir` (the missing folder) must hold them.
    BabiData {
        dir: String,
    },
}

impl PrimError {
    pub fn new(kind: PrimErrorKind) -> PrimError {
        PrimError { arg: None, kind, hint: None }
    }

    /// Blames an argument.
    pub fn on(mut self, arg: &'static str) -> PrimError {
        self.arg = Some(arg);
        self
    }

    pub fn hint(mut self, hint: Hint) -> PrimError {
        self.hint = Some(hint);
        self
    }

    /// "`b` must have shape `[4]` (why), but has shape `[5]`", blaming `arg`.
    pub fn shape(arg: &'static str, expected: &[usize], found: &[usize], why: &'static str) -> PrimError {
        PrimError::new(PrimErrorKind::Shape { expected: expected.to_vec(), found: found.to_vec(), why }).on(arg)
    }

    /// "leading axes differ: op(a, b)", blaming `b`: an operator on the last axes of two
    /// operands whose other axes must be the same.
    pub fn leading_axes_differ(op: &'static str, a: &[usize], b: &[usize]) -> PrimError {
        let how = Combine::Leading { op };
        PrimError::new(PrimErrorKind::Incompatible { a: a.to_vec(), b: b.to_vec(), how })
            .on("b")
            .hint(Hint::SameLeadingAxes)
    }

    /// A task option's check, in prose (see [`PrimErrorKind::Task`]).
    pub fn task(message: impl Into<String>) -> PrimError {
        PrimError::new(PrimErrorKind::Task(message.into()))
    }

    /// The message, without location (what the checker prints after the primitive's name).
    pub fn message(&self) -> String {
        self.to_string()
    }
}

impl PrimErrorKind {
    /// The stable code of this kind of mistake.
    pub fn code(&self) -> &'static str {
        match self {
            PrimErrorKind::Unbound => "P000",
            PrimErrorKind::TokensNotFloat => "P001",
            PrimErrorKind::FloatNotTokens => "P002",
            PrimErrorKind::Rank { .. } => "P003",
            PrimErrorKind::Scalar { .. } => "P004",
            PrimErrorKind::Shape { .. } => "P005",
            PrimErrorKind::Incompatible { .. } => "P006",
            PrimErrorKind::HeadSplit { .. } => "P007",
            PrimErrorKind::PerHead { .. } => "P008",
            PrimErrorKind::HeadSizes { .. } => "P009",
            PrimErrorKind::Size { .. } => "P010",
            PrimErrorKind::AtLeast { .. } => "P011",
            PrimErrorKind::Positive { .. } => "P012",
            PrimErrorKind::NotSizes { .. } => "P013",
            PrimErrorKind::NoSizes => "P014",
            PrimErrorKind::NotOneOf { .. } => "P015",
            PrimErrorKind::Reshape { .. } => "P016",
            PrimErrorKind::SlicePastEnd { .. } => "P017",
            PrimErrorKind::Moves { .. } => "P018",
            PrimErrorKind::JumpMissing => "P019",
            PrimErrorKind::JumpUnused => "P020",
            PrimErrorKind::PerHeadSize { .. } => "P021",
            PrimErrorKind::Task(_) => "P099",
        }
    }
}

impl fmt::Display for PrimError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let arg = self.arg.unwrap_or("the argument");
        match &self.kind {
            PrimErrorKind::Unbound => write!(f, "internal: argument `{arg}` is not bound"),
            PrimErrorKind::TokensNotFloat => write!(f, "`{arg}` is a token id, not a float tensor"),
            PrimErrorKind::FloatNotTokens => write!(f, "`{arg}` must be token ids, but is a float tensor"),
            PrimErrorKind::Rank { what, rank, found } => write!(
                f,
                "`{arg}` must be {what} ({rank} dimension{}), but has shape {}",
                if *rank == 1 { "" } else { "s" },
                ShapeDisplay(found)
            ),
            PrimErrorKind::Scalar { needs } => write!(f, "`{arg}` is a scalar; {needs}"),
            PrimErrorKind::Shape { expected, found, why } => write!(
                f,
                "`{arg}` must have shape {} {why}, but has shape {}",
                ShapeDisplay(expected),
                ShapeDisplay(found)
            ),
            PrimErrorKind::Incompatible { a, b, how } => {
                let (a, b) = (ShapeDisplay(a), ShapeDisplay(b));
                match how {
                    Combine::Broadcast => write!(f, "shapes {a} and {b} do not broadcast"),
                    Combine::BatchBroadcast => write!(f, "batch axes of {a} and {b} do not broadcast"),
                    Combine::Inner => write!(f, "inner dimensions differ: {a} @ {b}"),
                    Combine::Leading { op } => write!(f, "leading axes differ: {op}({a}, {b})"),
                }
            }
            PrimErrorKind::HeadSplit { what, len, heads } => {
                write!(f, "`{arg}` ({what}) has {len} elements, which do not split into {heads} heads")
            }
            PrimErrorKind::PerHead { what, heads, layout, found } => {
                let found = ShapeDisplay(found);
                match layout {
                    HeadLayout::VectorOrSplit => write!(
                        f,
                        "`{arg}` ({what}) must be a vector [{heads}·dh] or split into heads [{heads}, dh], but has shape {found}"
                    ),
                    HeadLayout::ScalarPerHead => write!(
                        f,
                        "`{arg}` must be one scalar per head [{heads}] or a single scalar [], but has shape {found}"
                    ),
                    HeadLayout::Tape => {
                        write!(
                            f,
                            "`{arg}` must be a tape [heads, L, d/heads] (one row per position), but has shape {found}"
                        )
                    }
                    HeadLayout::Memory if *heads == 1 => {
                        write!(f, "`{arg}` must be a memory matrix [dv, dk] (or [1, dv, dk]), but has shape {found}")
                    }
                    HeadLayout::Memory => write!(
                        f,
                        "with heads = {heads}, `{arg}` must hold one matrix per head [{heads}, dv/{heads}, dk/{heads}], but has shape {found}"
                    ),
                }
            }
            PrimErrorKind::PerHeadSize { what, per_head, axis } => {
                write!(f, "`{arg}` ({what}) has {per_head} elements per head, but the memory's {what} axis has {axis}")
            }
            PrimErrorKind::HeadSizes { d, heads, head_size } => write!(
                f,
                "`{arg}` has rows of size {d}, but heads · head_size = {heads} · {head_size} = {}",
                heads * head_size
            ),
            PrimErrorKind::Size { found, max } => {
                write!(f, "`{arg}` must be a size between 1 and {max}, found {found}")
            }
            PrimErrorKind::AtLeast { least, found } => write!(f, "`{arg}` must be {least} or more, found {found}"),
            PrimErrorKind::Positive { what, found } => write!(f, "`{arg}` must be a positive {what}, found {found}"),
            PrimErrorKind::NotSizes { found } => write!(f, "`{arg}` must be a list of sizes, found {found}"),
            PrimErrorKind::NoSizes => write!(f, "`{arg}` must list at least one layer size"),
            PrimErrorKind::NotOneOf { choices, found } => {
                let list: Vec<String> = choices.iter().map(|c| format!("\"{c}\"")).collect();
                write!(f, "`{arg}` must be {}, found \"{found}\"", one_of(&list))
            }
            PrimErrorKind::Reshape { from, to } => write!(
                f,
                "cannot reshape {} ({} elements) to {} ({} elements)",
                ShapeDisplay(from),
                from.iter().product::<usize>(),
                ShapeDisplay(to),
                to.iter().product::<usize>()
            ),
            PrimErrorKind::SlicePastEnd { start, end, len } => {
                write!(f, "slice {start} .. {end} is past the end of the last axis ({len} elements)")
            }
            PrimErrorKind::Moves { heads, found } => write!(
                f,
                "`{arg}` must be [{heads}, 4] (LEFT, NO-OP, RIGHT, JUMP probabilities per head) or [{heads}, 3] \
                 (no JUMP), but has shape {}",
                ShapeDisplay(found)
            ),
            PrimErrorKind::JumpMissing => write!(f, "4 moves include JUMP, but no `jump` position is given"),
            PrimErrorKind::JumpUnused => write!(f, "a `jump` position is given, but `moves` has no JUMP probability"),
            PrimErrorKind::Task(message) => f.write_str(message),
        }
    }
}

/// The bAbI tasks' release (Weston et al. 2015, v1.2: 20 tasks, en-valid-10k among its layouts).
pub const BABI_URL: &str = "https://dl.fbaipublicfiles.com/babi/tasks_1-20_v1-2.tar.gz";

/// `"a"`, `"a" or "b"`, `one of "a", "b", "c"`.
fn one_of(items: &[String]) -> String {
    match items {
        [one] => one.clone(),
        [a, b] => format!("{a} or {b}"),
        _ => format!("one of {}", items.join(", ")),
    }
}

impl fmt::Display for Hint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Hint::Embed => f.write_str("turn tokens into vectors with `embedding(x, size)`"),
            Hint::UseLinear => f.write_str("use `linear(x, size)` on vector inputs"),
            Hint::ProjectInput { d } => write!(f, "project the input first: `linear(x, {d})`"),
            Hint::MultipleOfHeads { heads } => write!(f, "its size must be a multiple of heads = {heads}"),
            Hint::PositionState { heads, len } => {
                write!(f, "a head position state is declared e.g. `state Hr = identity({heads}, {len})`")
            }
            Hint::PassJump => {
                f.write_str("pass `keyJump(K, q)` as the third argument, or 3 moves for the \"No Jmp\" variant")
            }
            Hint::FourMoves { heads } => write!(f, "pass 4 moves per head ([{heads}, 4]) to use JUMP"),
            Hint::NoGating => f.write_str("for no gating, use the attended memory directly"),
            Hint::MakeVector => f.write_str("make it a vector with `reshape(x, [1])`"),
            Hint::SameLeadingAxes => f.write_str("both operands must have the same shape except for the last axis"),
            Hint::BroadcastRule => f.write_str("trailing dimensions must be equal or 1"),
            Hint::SameElements => f.write_str("the product of the sizes must equal the number of elements"),
            Hint::HeadsShape { heads, size } => {
                write!(f, "with heads = {heads}, it must have shape [{}]", heads * size)
            }
            Hint::TapeState => {
                f.write_str("declare it e.g. `state T = zeros(heads, L, d / heads)`; use heads = 1 for one tape")
            }
            Hint::MemoryState { heads } => {
                write!(f, "declare it e.g. `state M = zeros({heads}, d / {heads}, d / {heads})`")
            }
            Hint::RmcSize => f.write_str("the memory size of an RMC is heads · head_size"),
            Hint::SliceSize { start, most } => write!(f, "with `start` = {start}, `size` can be at most {most}"),
            Hint::BabiData { dir } => write!(
                f,
                "download {BABI_URL}, unpack it (`tar xzf tasks_1-20_v1-2.tar.gz`) and move its folder \
                 `tasks_1-20_v1-2/en-valid-10k` to `{dir}`, or set `path` to where that folder is"
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_unique() {
        let kinds = [
            PrimErrorKind::Unbound,
            PrimErrorKind::TokensNotFloat,
            PrimErrorKind::FloatNotTokens,
            PrimErrorKind::Rank { what: "", rank: 1, found: vec![] },
            PrimErrorKind::Scalar { needs: "" },
            PrimErrorKind::Shape { expected: vec![], found: vec![], why: "" },
            PrimErrorKind::Incompatible { a: vec![], b: vec![], how: Combine::Inner },
            PrimErrorKind::HeadSplit { what: "", len: 1, heads: 1 },
            PrimErrorKind::PerHead { what: "", heads: 1, layout: HeadLayout::Tape, found: vec![] },
            PrimErrorKind::HeadSizes { d: 1, heads: 1, head_size: 1 },
            PrimErrorKind::Size { found: 0, max: 1 },
            PrimErrorKind::AtLeast { least: 0, found: -1 },
            PrimErrorKind::Positive { what: "", found: 0.0 },
            PrimErrorKind::NotSizes { found: String::new() },
            PrimErrorKind::NoSizes,
            PrimErrorKind::NotOneOf { choices: &["a"], found: String::new() },
            PrimErrorKind::Reshape { from: vec![], to: vec![] },
            PrimErrorKind::SlicePastEnd { start: 0, end: 1, len: 0 },
            PrimErrorKind::Moves { heads: 1, found: vec![] },
            PrimErrorKind::JumpMissing,
            PrimErrorKind::JumpUnused,
            PrimErrorKind::PerHeadSize { what: "", per_head: 1, axis: 2 },
            PrimErrorKind::Task(String::new()),
        ];
        let mut codes: Vec<&str> = kinds.iter().map(PrimErrorKind::code).collect();
        codes.sort_unstable();
        codes.dedup();
        assert_eq!(codes.len(), kinds.len());
    }

    #[test]
    fn messages_name_the_argument_and_both_shapes() {
        let e = PrimError::shape("a", &[8], &[16], "to write into a [d, d] memory");
        assert_eq!(e.to_string(), "`a` must have shape [8] to write into a [d, d] memory, but has shape [16]");
        let e = PrimError::new(PrimErrorKind::NotOneOf { choices: &["unit", "memory"], found: "x".into() }).on("style");
        assert_eq!(e.to_string(), "`style` must be \"unit\" or \"memory\", found \"x\"");
    }
}
