//! Reduce — the NAM paper's sequence reduction (§4.1, Table 1): drop the zeros from a digit
//! string, as masked completion (hwnam831/neuralattentionmemory @972108f `ReductionDatasetAE`;
//! docs/models.md, NAM tasks).
//!
//! An example with `n` digits, each 0 with probability ½, else uniform in 1–9, placed at an
//! offset `pos` uniform in `0..=D − n` and followed by a delimiter:
//!
//! ```text
//!   input   pad… | d1 … dn  delim | pad pad …     pad…
//!   target  pad… | pad … pad pad  | nz1 … nzk     pad…
//! ```
//!
//! e.g. `3 0 5 0` at offset 0 in a D = 4 set (length 9): input `3 0 5 0 _ P P P P`, target
//! `P P P P P 3 5 P P` (`_` delimiter, `P` pad). As the code, the target is pad everywhere
//! except the positions right after the delimiter, which hold the non-zero digits in order
//! (the digits themselves are not echoed). Length `2D + 1` for a set whose longest example has
//! `D` digits.
//!
//! Vocabulary 12 as the code (0–9 digits, 10 delimiter, 11 pad): input `tokens(12)`, target
//! `Classes(12)` at every position; metric `seq_accuracy` (paper). Splits: see [`super::nam`];
//! the OD ranges (11..13, 14..16) are the paper's and the code's alike, so there is no `od`
//! option.

use rand::Rng;
use rand_chacha::ChaCha8Rng;

use super::define::task_kind;
use super::nam::{self, DELIM, NamTask, Rule};

task_kind! {
    ReduceKind = "reduce",
    "reduce: after a digit string and a delimiter, output its non-zero digits in order (NAM §4.1)",
    options: &nam::OPTIONS_WITHOUT_OD,
    builds: |o| NamTask { rule: Reduce, config: o.parse()? },
}

#[derive(Clone, Copy, Debug)]
pub struct Reduce;

impl Rule for Reduce {
    const VOCAB: usize = 12;
    /// Echoing the digits, or answering pads only, is right when no digit is 0, or every one is:
    /// each digit is 0 with probability ½, so either is right for 2⁻ⁿ of the n-digit examples.
    const SHORTCUT: &'static str = "the digits echoed (or pads only)";
    fn shortcut_right(&self, n: usize) -> f64 {
        0.5f64.powi(n as i32)
    }

    fn seq_len(&self, max_digits: usize) -> usize {
        2 * max_digits + 1
    }
    fn example(&self, rng: &mut ChaCha8Rng, n: usize, max_digits: usize, input: &mut [u32], target: &mut [u32]) {
        let digits: Vec<u32> = (0..n).map(|_| if rng.random_bool(0.5) { rng.random_range(1..10) } else { 0 }).collect();
        let pos = rng.random_range(0..=max_digits - n);
        input[pos..pos + n].copy_from_slice(&digits);
        input[pos + n] = DELIM;
        for (t, d) in target[pos + n + 1..].iter_mut().zip(digits.iter().filter(|d| **d != 0)) {
            *t = *d;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::nam::{PAD, testing};
    use super::super::prelude::*;
    use super::*;

    /// (digits, target after the delimiter up to the first pad), checking pads elsewhere.
    fn parse(x: &[u32], y: &[u32]) -> (Vec<u32>, Vec<u32>) {
        let delim = x.iter().position(|t| *t == DELIM).unwrap();
        let start = x.iter().position(|t| *t != PAD).unwrap();
        let digits = x[start..delim].to_vec();
        assert!(digits.iter().all(|d| *d < 10));
        assert!(x[delim + 1..].iter().all(|t| *t == PAD), "input after the delimiter is pad");
        assert!(y[..=delim].iter().all(|t| *t == PAD), "target up to the delimiter is pad");
        let k = y[delim + 1..].iter().position(|t| *t == PAD).unwrap_or(y.len() - delim - 1);
        assert!(y[delim + 1 + k..].iter().all(|t| *t == PAD));
        (digits, y[delim + 1..delim + 1 + k].to_vec())
    }

    #[test]
    fn targets_are_the_non_zero_digits_in_order() {
        let data = ReduceKind.instantiate(&[]).unwrap().data(3, &Device::Cpu).unwrap();
        let (mut zeros, mut total) = (0, 0);
        for (x, y) in testing::split(data.as_ref(), Split::Test(1)) {
            assert_eq!(x.len(), 27);
            let (digits, answer) = parse(&x, &y);
            let non_zero: Vec<u32> = digits.iter().copied().filter(|d| *d != 0).collect();
            assert_eq!(answer, non_zero);
            zeros += digits.len() - non_zero.len();
            total += digits.len();
        }
        let rate = zeros as f64 / total as f64;
        assert!((0.45..0.55).contains(&rate), "zeros with probability ½: {rate}");
    }

    #[test]
    fn the_stated_shortcut_level_is_what_echoing_or_answering_pads_scores() {
        // 60 000 test examples: the level (≈ 1 %) is then known to ± 0.2 points (5 sd).
        let sizes = [10, 1, 64, 16, 60_000].map(crate::value::Value::Int);
        let data = ReduceKind.instantiate(&sizes).unwrap().data(3, &Device::Cpu).unwrap();
        let examples = testing::split(data.as_ref(), Split::Test(0));
        assert_eq!(examples.len(), 60_000);
        let n = examples.len() as f64;
        let (mut echo_right, mut pads_right) = (0, 0);
        for (x, y) in &examples {
            let (digits, answer) = parse(x, y);
            echo_right += usize::from(answer == digits);
            pads_right += usize::from(answer.is_empty());
        }
        let levels = crate::tasks::trivial_levels("reduce", &Default::default());
        assert_eq!(levels.iter().map(|l| l.metric).collect::<Vec<_>>(), nam::TEST_SEQ_METRICS);
        let level = levels[0].value;
        let id_digits = 5..=10; // the defaults' in-distribution test digits
        assert!((level - id_digits.map(|n| 0.5f64.powi(n)).sum::<f64>() / 6.0).abs() < 1e-12);
        let tolerance = 5.0 * (level * (1.0 - level) / n).sqrt();
        for (what, right) in [("echoing the digits", echo_right), ("answering pads only", pads_right)] {
            let rate = right as f64 / n;
            assert!((rate - level).abs() < tolerance, "{what}: {rate} against the stated {level} (± {tolerance})");
        }
    }

    #[test]
    fn layout_of_a_full_length_example() {
        let mut rng = <ChaCha8Rng as rand::SeedableRng>::seed_from_u64(9);
        let (mut x, mut y) = (vec![PAD; 9], vec![PAD; 9]);
        Reduce.example(&mut rng, 4, 4, &mut x, &mut y);
        // n = D: the only offset is 0; the delimiter is at 4.
        assert_eq!(x[4], DELIM);
        let (digits, answer) = parse(&x, &y);
        assert_eq!(digits.len(), 4);
        assert_eq!(answer, digits.iter().copied().filter(|d| *d != 0).collect::<Vec<_>>());
    }

    #[test]
    fn shared_nam_checks() {
        testing::common_checks(&ReduceKind, |d| 2 * d + 1, |x, y| parse(x, y).0.len());
    }
}
