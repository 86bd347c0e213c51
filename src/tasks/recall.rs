//! The layout of the write-then-query memory tasks (`patternCompletion`, `rgbBinding`): a
//! sequence writes P stored patterns of N bits, then queries Q of them, each shown partially
//! or noisily, and asks for the whole stored pattern after each query. Inputs are bipolar,
//! width N + 2:
//!
//! ```text
//!   steps 0..P       write: [pattern_i as ±1 (N) | 1 | 0]
//!   steps P..P+Q     query: [pattern_j as shown (N) | 0 | 1]    scored: pattern_j ∈ {0,1}^N
//! ```
//!
//! Each query picks one of the P stored patterns uniformly (independently per query).

use candle_core::Device;
use rand::Rng;
use rand_chacha::ChaCha8Rng;

use super::contract::Batch;
use super::fresh::Seq;

/// How many patterns of how many bits are written, and how many queried.
#[derive(Clone, Copy, Debug)]
pub(super) struct Shape {
    pub patterns: usize,
    pub bits: usize,
    pub queries: usize,
}

/// `n` sequences: `store` draws one sequence's P × N stored bits; `show` gives bit `c` of a
/// queried pattern as the query shows it (±1, or 0 for unknown).
pub(super) fn batch(
    rng: &mut ChaCha8Rng,
    n: usize,
    Shape { patterns, bits, queries }: Shape,
    mut store: impl FnMut(&mut ChaCha8Rng, &mut [bool]),
    mut show: impl FnMut(&mut ChaCha8Rng, usize, bool) -> f32,
    device: &Device,
) -> candle_core::Result<Batch> {
    let mut x = Seq::zeros(patterns + queries, n, bits + 2);
    let mut y = Seq::zeros(queries, n, bits);
    let mut stored = vec![false; patterns * bits];
    for b in 0..n {
        store(rng, &mut stored);
        for (i, pattern) in stored.chunks_exact(bits).enumerate() {
            let row = x.row_mut(i, b);
            for (r, &bit) in row.iter_mut().zip(pattern) {
                *r = bipolar(bit);
            }
            row[bits] = 1.0;
        }
        for k in 0..queries {
            let j = rng.random_range(0..patterns);
            let pattern = &stored[j * bits..(j + 1) * bits];
            let row = x.row_mut(patterns + k, b);
            for (c, &bit) in pattern.iter().enumerate() {
                row[c] = show(rng, c, bit);
            }
            row[bits + 1] = 1.0;
            for (t, &bit) in y.row_mut(k, b).iter_mut().zip(pattern) {
                *t = if bit { 1.0 } else { 0.0 };
            }
        }
    }
    x.into_batch(y, device)
}

/// A bit as presented: 1 → 1, 0 → −1.
pub(super) fn bipolar(bit: bool) -> f32 {
    if bit { 1.0 } else { -1.0 }
}
