//! Palindrome — the NAM paper's "Palin" (§4.1, Table 1): write a digit string reversed, as
//! masked completion (hwnam831/neuralattentionmemory @972108f `StringDataset('palin')`;
//! docs/models.md, NAM tasks).
//!
//! An example with `n` digits (uniform 0–9 each):
//!
//! ```text
//!   input   pad… | delim  d1 … dn  delim  mask × n    EOS | pad…
//!   target  pad… | delim  d1 … dn  delim  dn … d1     EOS | pad…
//! ```
//!
//! e.g. `3 1 4` in a set with D = 3 (length 9, a single placement): input `_ 3 1 4 _ M M M E`,
//! target `_ 3 1 4 _ 4 1 3 E` (`_` delimiter, `M` mask, `E` EOS). **This is the paper's version** (inputs masked, targets the
//! reversed digits). The 972108f code swaps the two in the answer region — the reversed digits
//! are in the *input* and the mask token is the *target* — so the model only has to echo a mask;
//! treat the paper's Palin numbers with caution.
//!
//! Length `2(D + 1) + 1` for a set whose longest example has `D` digits; the opening delimiter
//! sits at `pos − 1` with `pos` uniform in `1..=L − 2n − 2` (every placement, as the code).
//!
//! Input `tokens(16)`, target `Classes(16)` at every position; metric `seq_accuracy` (paper).
//! Splits and OD ranges: see [`super::nam`] — default `od = "paper"` (11..13, 14..16);
//! `od = "code"` gives the 972108f code's 11..14 and 15..18.

use rand::Rng;
use rand_chacha::ChaCha8Rng;

use super::define::task_kind;
use super::nam::{self, DELIM, EOS, MASK, NamTask, Rule};

task_kind! {
    PalindromeKind = "palindrome",
    "palindrome (NAM's \"Palin\"): complete the masked reversal of a digit string (NAM §4.1, paper version)",
    options: &nam::OPTIONS_WITH_OD,
    builds: |o| NamTask { rule: Palindrome, config: o.parse()? },
}

#[derive(Clone, Copy, Debug)]
pub struct Palindrome;

impl Rule for Palindrome {
    const VOCAB: usize = 16;
    /// The digits copied in their own order instead of reversed are right when the string is a
    /// palindrome: its first ⌊n/2⌋ uniform digits fix the rest, so for 10^−⌊n/2⌋ of the examples.
    const SHORTCUT: &'static str = "the digits copied unreversed";
    fn shortcut_right(&self, n: usize) -> f64 {
        0.1f64.powi((n / 2) as i32)
    }

    fn seq_len(&self, max_digits: usize) -> usize {
        2 * (max_digits + 1) + 1
    }
    fn example(&self, rng: &mut ChaCha8Rng, n: usize, max_digits: usize, input: &mut [u32], target: &mut [u32]) {
        let digits = nam::random_digits(rng, n);
        let pos = rng.random_range(1..=self.seq_len(max_digits) - 2 * n - 2);
        for seq in [&mut *input, &mut *target] {
            seq[pos - 1] = DELIM;
            seq[pos..pos + n].copy_from_slice(&digits);
            seq[pos + n] = DELIM;
            seq[pos + 2 * n + 1] = EOS;
        }
        let answer = pos + n + 1;
        input[answer..answer + n].fill(MASK);
        for (t, d) in target[answer..answer + n].iter_mut().zip(digits.iter().rev()) {
            *t = *d;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::nam::{PAD, testing};
    use super::super::prelude::*;
    use super::*;

    /// (digits, masked region of the input, answer region of the target).
    fn parse(x: &[u32], y: &[u32]) -> (Vec<u32>, Vec<u32>, Vec<u32>) {
        let open = x.iter().position(|t| *t == DELIM).unwrap();
        let close = open + 1 + x[open + 1..].iter().position(|t| *t == DELIM).unwrap();
        let n = close - open - 1;
        let eos = close + n + 1;
        assert_eq!((x[eos], y[eos]), (EOS, EOS));
        assert!(x[..open].iter().chain(&x[eos + 1..]).all(|t| *t == PAD));
        assert_eq!(&x[..=close], &y[..=close], "the question part is copied");
        assert_eq!(&x[eos..], &y[eos..]);
        (x[open + 1..close].to_vec(), x[close + 1..eos].to_vec(), y[close + 1..eos].to_vec())
    }

    #[test]
    fn targets_are_the_reversed_digits_and_inputs_are_masked() {
        let data = PalindromeKind.instantiate(&[]).unwrap().data(2, &Device::Cpu).unwrap();
        let mut offsets = vec![];
        for (x, y) in testing::split(data.as_ref(), Split::Validation) {
            assert_eq!(x.len(), 23);
            let (digits, masked, answer) = parse(&x, &y);
            assert!(digits.iter().all(|d| *d < 10));
            assert!(masked.iter().all(|t| *t == MASK), "paper version: the input is masked");
            let reversed: Vec<u32> = digits.iter().rev().copied().collect();
            assert_eq!(answer, reversed, "paper version: the target is the reversed digits");
            offsets.push(x.iter().position(|t| *t == DELIM).unwrap());
        }
        offsets.sort();
        offsets.dedup();
        assert!(offsets.len() > 3, "random placement: {offsets:?}");
    }

    #[test]
    fn layout_with_a_single_placement() {
        let mut rng = <ChaCha8Rng as rand::SeedableRng>::seed_from_u64(0);
        let (mut x, mut y) = (vec![PAD; 9], vec![PAD; 9]);
        Palindrome.example(&mut rng, 3, 3, &mut x, &mut y);
        // L = 9, n = 3: the only placement is pos = 1.
        let (digits, masked, answer) = parse(&x, &y);
        assert_eq!(x[0], DELIM);
        assert_eq!(masked, vec![MASK; 3]);
        assert_eq!(answer, digits.iter().rev().copied().collect::<Vec<_>>());
    }

    #[test]
    fn shared_nam_checks() {
        testing::common_checks(&PalindromeKind, |d| 2 * (d + 1) + 1, |x, y| parse(x, y).0.len());
    }
}
