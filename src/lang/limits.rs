//! How deep a spec may nest, so that parsing it, and walking its tree later (checking,
//! dropping), cannot exhaust the stack. The parser and the loader refuse past these, and the
//! errors that say so print them ([`SpecErrorKind`](super::error_kind::SpecErrorKind)).

/// Deepest bracket nesting accepted (real specs use fewer than ten levels).
pub const MAX_NESTING: usize = 64;

/// Deepest expression tree accepted (operators, prefix operators, calls and lists together).
pub const MAX_EXPR_DEPTH: usize = 200;

/// How deep `use` may nest files.
pub const MAX_USE_DEPTH: usize = 16;
