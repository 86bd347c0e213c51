//! What a spec may ask for at most: bounds that keep a typo from planning a billion trials or
//! a list of a billion values. The checker refuses past them, and the errors that say so print
//! them ([`CheckErrorKind`](super::error_kind::CheckErrorKind)).

/// Longest list a range may produce.
pub const MAX_RANGE: i64 = 100_000;

/// Sweeps larger than this are refused (a typo in a range should not plan a billion trials).
pub const MAX_TRIALS: usize = 100_000;

/// Draws per random group at most.
pub const MAX_DRAWS: i64 = 100_000;

/// Largest size of a state's axis (2^24).
pub const MAX_STATE_AXIS: i64 = 1 << 24;
