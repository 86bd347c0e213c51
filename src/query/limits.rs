//! How deep a filter may nest. The parser refuses past it, and the error that says so prints it
//! ([`QueryErrorKind::TooDeep`](super::error_kind::QueryErrorKind::TooDeep)).

/// Deepest nesting accepted, counting each bracket and each `not` as one level: a bound on the
/// depth of the filter's tree, so that checking, evaluating and dropping it (all recursive)
/// cannot exhaust a thread's stack, however long the text.
pub const MAX_NESTING: usize = 64;
