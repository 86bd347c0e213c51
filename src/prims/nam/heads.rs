//! Shared argument rules of the multi-head NAM primitives (`namWR`, `namRD`, `namAttend`,
//! the NAM-TM tape primitives): how a vector is split into heads and how a per-head
//! probability is given.
//!
//! - A per-head vector is given flat, `[H·dh]` (head `h` owns elements `h·dh .. (h+1)·dh`, as
//!   the authors' `view(B, H, dh)`), or already split, `[H, dh]`.
//! - A per-head probability (`pw`, `pe`, `pr`) is one scalar per head, `[H]`, or a single
//!   scalar `[]` shared by every head.
//! - A NAM-TM tape is `[H, L, dh]` (per head, one row per position) and a head position is
//!   `[H, L]` (one position vector per head); `H = 1` for a single tape.

use candle_core::Tensor;

use crate::prims::prelude::*;

/// The per-head size `dh` of the vector argument `name` split into `heads` heads.
pub fn split_size(args: &Args, name: &'static str, heads: usize, what: &'static str) -> Result<usize, PrimError> {
    let s = args.shape(name)?;
    match s[..] {
        [n] if n % heads == 0 => Ok(n / heads),
        [len] => Err(PrimError::new(PrimErrorKind::HeadSplit { what, len, heads })
            .on(name)
            .hint(Hint::MultipleOfHeads { heads })),
        [h, dh] if h == heads => Ok(dh),
        _ => {
            let layout = HeadLayout::VectorOrSplit;
            Err(PrimError::new(PrimErrorKind::PerHead { what, heads, layout, found: s.clone() }).on(name))
        }
    }
}

/// Checks that `name` is one probability per head (`[heads]`) or one shared scalar (`[]`).
pub fn check_per_head(args: &Args, name: &'static str, heads: usize) -> Result<(), PrimError> {
    let s = args.shape(name)?;
    if s.is_empty() || s[..] == [heads] {
        return Ok(());
    }
    let layout = HeadLayout::ScalarPerHead;
    Err(PrimError::new(PrimErrorKind::PerHead { what: "a probability", heads, layout, found: s.clone() }).on(name))
}

/// `[B, H·dh]` or `[B, H, dh]` → `[B, H, dh]`.
pub fn to_heads(x: &Tensor, heads: usize) -> candle_core::Result<Tensor> {
    if x.rank() == 3 {
        return Ok(x.clone());
    }
    let (b, n) = x.dims2()?;
    x.reshape((b, heads, n / heads))
}

/// A per-head probability `[B]` or `[B, H]` → `[B, 1]` or `[B, H]` (broadcasts over heads).
pub fn per_head(p: &Tensor) -> candle_core::Result<Tensor> {
    if p.rank() == 1 { p.unsqueeze(1) } else { Ok(p.clone()) }
}

/// Checks the tape argument `name` (`[H, L, dh]`) and returns `(H, L, dh)`.
pub fn tape_dims(args: &Args, name: &'static str) -> Result<(usize, usize, usize), PrimError> {
    let s = args.shape(name)?;
    match s[..] {
        [h, l, dh] => Ok((h, l, dh)),
        _ => {
            let kind = PrimErrorKind::PerHead { what: "a tape", heads: 1, layout: HeadLayout::Tape, found: s.clone() };
            Err(PrimError::new(kind).on(name).hint(Hint::TapeState))
        }
    }
}

/// Checks that `name` is a head position `[heads, L]` for a tape of `L` positions.
pub fn check_position(args: &Args, name: &'static str, heads: usize, len: usize) -> Result<(), PrimError> {
    let s = args.shape(name)?;
    if s[..] == [heads, len] {
        return Ok(());
    }
    Err(PrimError::shape(name, &[heads, len], s, "(one position vector per head over the tape's L positions)")
        .hint(Hint::PositionState { heads, len }))
}
