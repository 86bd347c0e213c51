//! How large and how deep a spec may be, so that reading it cannot exhaust memory (a spec
//! named by mistake as `/dev/zero` or a data file), and parsing it, and walking its tree later
//! (checking, dropping), cannot exhaust the stack. The parser and the loader refuse past these,
//! and the errors that say so print them ([`SpecErrorKind`](super::error_kind::SpecErrorKind)).

/// Largest spec file read (real specs are a few kB; every run's record keeps its spec's text).
pub const MAX_SPEC_BYTES: u64 = 4 << 20;

/// Deepest bracket nesting accepted (real specs use fewer than ten levels).
pub const MAX_NESTING: usize = 64;

/// Deepest expression tree accepted (operators, prefix operators, calls and lists together).
pub const MAX_EXPR_DEPTH: usize = 200;

/// How deep `use` may nest files.
pub const MAX_USE_DEPTH: usize = 16;
