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

use super::*;

/// The per-head size `dh` of the vector argument `name` split into `heads` heads.
pub fn split_size(args: &Args, name: &'static str, heads: usize, what: &str) -> Result<usize, PrimError> {
    let s = args.shape(name)?;
    match s[..] {
        [n] if n % heads == 0 => Ok(n / heads),
        [n] => {
            Err(PrimError::new(format!("`{name}` ({what}) has {n} elements, which do not split into {heads} heads"))
                .on(name)
                .hint(format!("its size must be a multiple of heads = {heads}")))
        }
        [h, dh] if h == heads => Ok(dh),
        _ => Err(PrimError::new(format!(
            "`{name}` ({what}) must be a vector [{heads}·dh] or split into heads [{heads}, dh], but has shape {}",
            ShapeDisplay(s)
        ))
        .on(name)),
    }
}

/// Checks that `name` is one probability per head (`[heads]`) or one shared scalar (`[]`).
pub fn check_per_head(args: &Args, name: &'static str, heads: usize) -> Result<(), PrimError> {
    let s = args.shape(name)?;
    if s.is_empty() || s[..] == [heads] {
        return Ok(());
    }
    Err(PrimError::new(format!(
        "`{name}` must be one scalar per head [{heads}] or a single scalar [], but has shape {}",
        ShapeDisplay(s)
    ))
    .on(name))
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
        _ => Err(PrimError::new(format!(
            "`{name}` must be a tape [heads, L, d/heads] (one row per position), but has shape {}",
            ShapeDisplay(s)
        ))
        .on(name)
        .hint("declare it e.g. `state T = zeros(heads, L, d / heads)`; use heads = 1 for one tape")),
    }
}

/// Checks that `name` is a head position `[heads, L]` for a tape of `L` positions.
pub fn check_position(args: &Args, name: &'static str, heads: usize, len: usize) -> Result<(), PrimError> {
    let s = args.shape(name)?;
    if s[..] == [heads, len] {
        return Ok(());
    }
    Err(PrimError::shape_mismatch(name, &[heads, len], s, "(one position vector per head over the tape's L positions)")
        .hint(format!("a head position state is declared e.g. `state Hr = identity({heads}, {len})`")))
}
