//! How hard Learning to Execute's training programs are: the curricula of the LTE paper
//! (Zaremba & Sutskever 2014, §4) as DeepMind Sonnet 1 implements them
//! (`sonnet/examples/learn_to_execute.py`, the RMC authors' data, [`super::lte_sonnet`]).
//! Held-out sets are always at the target difficulty, `length` and `nesting` (Sonnet's
//! `BaselineCurriculum`, which its test sets use).
//!
//! - `mix`: every program draws its length uniformly in `1..=length` and its nesting in
//!   `1..=nesting` (the LTE paper's mix strategy; Sonnet's `MixCurriculum`, whose first
//!   release drew the nesting up to `length`, a bug fixed later).
//! - `baseline`: every program at `length` and `nesting`.
//! - `naive`: every program at the current *level*, which starts at length 1 and nesting 1
//!   and moves up one step at a time, the length first up to `length`, then the nesting up to
//!   `nesting` (Sonnet's `NaiveCurriculum`; the LTE code also sets the length back to 1 when
//!   the nesting moves up, Sonnet does not).
//! - `combine`: every program draws its length uniformly in `1..=` the level's length and its
//!   nesting in `1..=` the level's nesting, the level moving up as `naive`'s (Sonnet's
//!   `CombineCurriculum`, the default of its `LearnToExecute`, which the RMC example script
//!   trains with). The LTE paper's combined strategy differs: there a program is at the naive
//!   level, or one time in five drawn as `mix` draws it (`blend` in the LTE code).
//!
//! When the level moves up: Sonnet moves it up at every tenth loss the training loop reports
//! to it (`min_tries`), unless the mean change of the ten losses, over their mean, is at least
//! 0.1. The change is the later loss less the earlier, so a loss that falls or holds always
//! passes; only one that rose by at least 0.9 times its mean holds the level. memctl's data
//! does not see the loss, so the level moves up every `level_batches` training batches: the
//! same schedule while the loss is not rising, with Sonnet's ten reports spread over
//! `level_batches` (default 1000: one report per evaluation at the default `eval_every`, 100).
//! Sonnet's RMC example script (`rmc_learn_to_execute.py`) reports no loss at all (it never
//! calls `evaluate_curriculum`), so there the level stays at length 1 and nesting 1: it
//! trains on single operations of one-digit numbers and tests at length 5, nesting 2. memctl
//! follows the curriculum as its code describes it, not that script's omission.

use rand_chacha::ChaCha8Rng;

use super::lte_program::Hardness;

/// How the difficulty of training programs is drawn (see the module comment).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub(super) enum Curriculum {
    Mix,
    Baseline,
    Naive,
    Combine,
}

impl Curriculum {
    /// The names in specs: the variants', lowercased (as they deserialize).
    pub(super) const NAMES: [&'static str; 4] = ["mix", "baseline", "naive", "combine"];

    /// The difficulty of one program of the training batch that `drawn` training batches
    /// precede, the level moving up every `level_batches` batches.
    pub(super) fn hardness(
        self,
        target: Hardness,
        level_batches: usize,
        drawn: usize,
        rng: &mut ChaCha8Rng,
    ) -> Hardness {
        let level = || level(target, drawn / level_batches.max(1));
        match self {
            Curriculum::Mix => target.mixed(rng),
            Curriculum::Baseline => target,
            Curriculum::Naive => level(),
            Curriculum::Combine => level().mixed(rng),
        }
    }
}

/// The naive level after it has moved up `moves` times from length 1 and nesting 1: the
/// length first, up to the target's, then the nesting, up to the target's.
pub(super) fn level(target: Hardness, moves: usize) -> Hardness {
    let length = (1 + moves).min(target.length);
    let nesting = (1 + moves.saturating_sub(target.length - 1)).min(target.nesting);
    Hardness { length, nesting }
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;

    use super::*;

    fn rng(seed: u64) -> ChaCha8Rng {
        ChaCha8Rng::seed_from_u64(seed)
    }

    fn h(length: usize, nesting: usize) -> Hardness {
        Hardness { length, nesting }
    }

    /// The distinct (length, nesting) pairs of 400 draws.
    fn seen(curriculum: Curriculum, target: Hardness, level_batches: usize, drawn: usize) -> Vec<(usize, usize)> {
        let mut r = rng(drawn as u64);
        let mut out: Vec<(usize, usize)> = (0..400)
            .map(|_| curriculum.hardness(target, level_batches, drawn, &mut r))
            .map(|h| (h.length, h.nesting))
            .collect();
        out.sort();
        out.dedup();
        out
    }

    #[test]
    fn the_level_moves_up_the_length_first_then_the_nesting_and_stops_at_the_target() {
        let target = h(3, 2);
        let levels: Vec<(usize, usize)> = (0..6).map(|m| level(target, m)).map(|h| (h.length, h.nesting)).collect();
        assert_eq!(levels, [(1, 1), (2, 1), (3, 1), (3, 2), (3, 2), (3, 2)]);
        assert_eq!(level(h(1, 1), 0), h(1, 1));
        assert_eq!(level(h(1, 3), 1), h(1, 2), "length 1: the nesting moves up from the first move");
    }

    #[test]
    fn combine_draws_up_to_the_level_of_the_batch() {
        let target = h(3, 2);
        // Levels of 10 batches: (1, 1) for batches 0–9, (2, 1) for 10–19, (3, 1), then (3, 2).
        assert_eq!(seen(Curriculum::Combine, target, 10, 0), [(1, 1)]);
        assert_eq!(seen(Curriculum::Combine, target, 10, 9), [(1, 1)]);
        assert_eq!(seen(Curriculum::Combine, target, 10, 10), [(1, 1), (2, 1)]);
        assert_eq!(seen(Curriculum::Combine, target, 10, 25), [(1, 1), (2, 1), (3, 1)]);
        let top = [(1, 1), (1, 2), (2, 1), (2, 2), (3, 1), (3, 2)];
        assert_eq!(seen(Curriculum::Combine, target, 10, 30), top);
        assert_eq!(seen(Curriculum::Combine, target, 10, 10_000), top, "the level stops at the target");
    }

    #[test]
    fn combine_draws_each_bound_uniformly() {
        let (mut r, n) = (rng(1), 30_000);
        let mut counts = [[0usize; 3]; 3];
        for _ in 0..n {
            let d = Curriculum::Combine.hardness(h(5, 2), 100, 250, &mut r);
            counts[d.length - 1][d.nesting - 1] += 1;
        }
        // Level (3, 1) after two moves: lengths 1–3 a third each, nesting always 1.
        for (length, row) in counts.iter().enumerate() {
            let share = row[0] as f64 / n as f64;
            assert!((share - 1.0 / 3.0).abs() < 0.02, "length {}: {share}", length + 1);
            assert_eq!(row[1..], [0, 0]);
        }
    }

    #[test]
    fn naive_is_the_level_itself_and_mix_and_baseline_ignore_it() {
        let target = h(3, 2);
        assert_eq!(seen(Curriculum::Naive, target, 10, 0), [(1, 1)]);
        assert_eq!(seen(Curriculum::Naive, target, 10, 15), [(2, 1)]);
        assert_eq!(seen(Curriculum::Naive, target, 10, 35), [(3, 2)]);
        for drawn in [0, 15, 1000] {
            assert_eq!(seen(Curriculum::Baseline, target, 10, drawn), [(3, 2)]);
            assert_eq!(seen(Curriculum::Mix, target, 10, drawn), [(1, 1), (1, 2), (2, 1), (2, 2), (3, 1), (3, 2)]);
        }
    }

    #[test]
    fn mix_draws_as_before_the_other_curricula() {
        // Mix's draws are those of `Hardness::mixed`, so the data of specs written before the
        // other curricula is unchanged.
        let (mut a, mut b) = (rng(2), rng(2));
        for _ in 0..50 {
            assert_eq!(Curriculum::Mix.hardness(h(4, 3), 1, 0, &mut a), h(4, 3).mixed(&mut b));
        }
    }
}
