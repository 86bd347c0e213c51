//! Addition — the NAM paper's "Fib" (§4.1, Table 1): the number-sequence-prediction task
//! `fib` with two numbers, i.e. **the sum of two numbers**, as masked completion
//! (hwnam831/neuralattentionmemory @972108f `NSPDatasetAE2(fib)`; docs/models.md, NAM tasks).
//!
//! For an example with `n` digits: `s2` has exactly `n` digits (uniform in [10ⁿ⁻¹, 10ⁿ − 1]);
//! `s1` has a uniform digit budget `k ∈ 1..=n` and value uniform in [1, 10ᵏ − 2]; `y = s1 + s2`
//! (n or n + 1 digits). Numbers are written little-endian without leading zeros:
//!
//! ```text
//!   input   pad… | delim s1 delim s2 delim  mask×|y|  EOS | pad…
//!   target  pad… | delim s1 delim s2 delim  y         EOS | pad…
//! ```
//!
//! e.g. 25 + 7 (n = 2) at shift 0: input `_ 7 _ 5 2 _ M M E`, target `_ 7 _ 5 2 _ 2 3 E`
//! (`_` delimiter, `M` mask, `E` EOS), then pads. The length is `3(D + 1) + 2` for a set whose
//! longest example has `D` digits; the content is shifted right by `u` leading pads, `u` uniform
//! in `0..slack` where `slack` is the number of free positions (0 if none) — exactly the code's
//! draw, which never uses the last placement. Numbers are handled digit by digit, so any digit
//! count works (no integer overflow).
//!
//! Input `tokens(16)`, target `Classes(16)` at every position; metric `seq_accuracy` (paper).
//! Splits and OD ranges: see [`super::nam`] — default `od = "paper"` (11..13, 14..16);
//! `od = "code"` gives the 972108f code's 11..14 and 15..18.

use rand::Rng;
use rand_chacha::ChaCha8Rng;

use super::define::task_kind;
use super::nam::{self, DELIM, EOS, MASK, NamTask, Rule};

task_kind! {
    AdditionKind = "addition",
    "addition (NAM's \"Fib\"): complete the masked little-endian digits of s1 + s2 (NAM §4.1)",
    options: &nam::OPTIONS_WITH_OD,
    builds: |o| NamTask { rule: Addition, config: o.parse()? },
}

#[derive(Clone, Copy, Debug)]
pub struct Addition;

impl Rule for Addition {
    const VOCAB: usize = 16;
    /// Echoing either number is never the sum: both are at least 1.
    const SHORTCUT: &'static str = "either number echoed";
    fn shortcut_right(&self, _: usize) -> f64 {
        0.0
    }

    fn seq_len(&self, max_digits: usize) -> usize {
        3 * (max_digits + 1) + 2
    }
    fn example(&self, rng: &mut ChaCha8Rng, n: usize, max_digits: usize, input: &mut [u32], target: &mut [u32]) {
        let k = rng.random_range(1..=n);
        // s1 uniform in [1, 10^k − 2]: k uniform digits, redrawn if all 0 or all 9.
        let mut s1 = nam::random_digits(rng, k);
        while s1.iter().all(|d| *d == 0) || s1.iter().all(|d| *d == 9) {
            s1 = nam::random_digits(rng, k);
        }
        while s1.last() == Some(&0) {
            s1.pop(); // little-endian: drop leading zeros
        }
        let mut s2 = nam::random_digits(rng, n);
        s2[n - 1] = rng.random_range(1..10);
        let y = add(&s1, &s2);

        let mut x_seq = vec![DELIM];
        x_seq.extend(&s1);
        x_seq.push(DELIM);
        x_seq.extend(&s2);
        x_seq.push(DELIM);
        let mut y_seq = x_seq.clone();
        x_seq.extend(std::iter::repeat_n(MASK, y.len()));
        y_seq.extend(&y);
        x_seq.push(EOS);
        y_seq.push(EOS);

        let slack = self.seq_len(max_digits) - x_seq.len();
        let shift = if slack > 0 { rng.random_range(0..slack) } else { 0 };
        input[shift..shift + x_seq.len()].copy_from_slice(&x_seq);
        target[shift..shift + y_seq.len()].copy_from_slice(&y_seq);
    }
}

/// Sum of two little-endian digit strings.
fn add(a: &[u32], b: &[u32]) -> Vec<u32> {
    let mut out = Vec::with_capacity(a.len().max(b.len()) + 1);
    let mut carry = 0;
    for i in 0..a.len().max(b.len()) {
        let s = a.get(i).unwrap_or(&0) + b.get(i).unwrap_or(&0) + carry;
        out.push(s % 10);
        carry = s / 10;
    }
    if carry > 0 {
        out.push(carry);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::nam::{PAD, testing};
    use super::super::prelude::*;
    use super::*;

    /// Splits an example into (s1, s2, masked answer in the input, answer in the target).
    fn parse(x: &[u32], y: &[u32]) -> (Vec<u32>, Vec<u32>, Vec<u32>, Vec<u32>) {
        let start = x.iter().position(|t| *t != PAD).unwrap();
        assert!(x[..start].iter().chain(&y[..start]).all(|t| *t == PAD), "leading pads");
        let end = x.iter().position(|t| *t == EOS).unwrap();
        assert_eq!(y[end], EOS);
        assert!(x[end + 1..].iter().chain(&y[end + 1..]).all(|t| *t == PAD), "trailing pads");
        let delims: Vec<usize> = (start..end).filter(|i| x[*i] == DELIM).collect();
        assert_eq!(delims.len(), 3);
        assert_eq!(delims[0], start);
        assert_eq!(&x[..delims[2] + 1], &y[..delims[2] + 1], "the question part is copied");
        (
            x[delims[0] + 1..delims[1]].to_vec(),
            x[delims[1] + 1..delims[2]].to_vec(),
            x[delims[2] + 1..end].to_vec(),
            y[delims[2] + 1..end].to_vec(),
        )
    }

    fn value(le: &[u32]) -> u128 {
        le.iter().rev().fold(0, |acc, d| acc * 10 + *d as u128)
    }

    #[test]
    fn adds_little_endian_digits() {
        assert_eq!(add(&[7], &[5, 2]), vec![2, 3]); // 7 + 25 = 32
        assert_eq!(add(&[9, 9], &[1]), vec![0, 0, 1]); // 99 + 1 = 100
    }

    #[test]
    fn targets_are_the_sums() {
        let task = AdditionKind.instantiate(&[]).unwrap();
        let data = task.data(1, &Device::Cpu).unwrap();
        for (i, split) in [Split::Validation, Split::Test(2)].into_iter().enumerate() {
            let examples = testing::split(data.as_ref(), split);
            assert_eq!(examples[0].0.len(), if i == 0 { 35 } else { 53 });
            for (x, y) in examples {
                let (s1, s2, masked, answer) = parse(&x, &y);
                assert!(masked.iter().all(|t| *t == MASK));
                assert_eq!(masked.len(), answer.len());
                assert!(answer.iter().chain(&s1).chain(&s2).all(|d| *d < 10));
                assert_ne!(s2.last(), Some(&0));
                assert_ne!(s1.last(), Some(&0), "no leading zeros");
                assert!(s1.len() <= s2.len());
                assert_eq!(value(&answer), value(&s1) + value(&s2));
            }
        }
    }

    #[test]
    fn shared_nam_checks() {
        testing::common_checks(&AdditionKind, |d| 3 * (d + 1) + 2, |x, y| parse(x, y).1.len());
    }

    #[test]
    fn code_od_ranges_are_available() {
        let mut o: Vec<Value> = AdditionKind.signature().iter().map(|s| s.default.value().unwrap()).collect();
        o[5] = Value::Str("code".into());
        let data = AdditionKind.instantiate(&o).unwrap().data(0, &Device::Cpu).unwrap();
        let hard = testing::split(data.as_ref(), Split::Test(2));
        let digits: Vec<usize> = hard.iter().map(|(x, y)| parse(x, y).1.len()).collect();
        assert_eq!((digits.iter().min(), digits.iter().max()), (Some(&15), Some(&18)));
        o[5] = Value::Str("book".into());
        assert_eq!(AdditionKind.instantiate(&o).err().unwrap().arg, Some("od"));
    }
}
