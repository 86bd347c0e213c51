//! Learning to Execute as the RMC authors generated it (RMC Table 1, Santoro et al. 2018):
//! DeepMind Sonnet 1's `sonnet/examples/learn_to_execute.py` (deepmind/sonnet @f100d0b,
//! "Add Learn to Execute example for Relational Memory Core", 2018-09-28), `generate_code` and
//! its `CodeOp`s. Its programs are expressions, not the LTE paper's Python
//! ([`super::lte_program`]).
//!
//! A program composes `nesting` operations, each drawn uniformly from the mode's. An
//! operation's first operand is the expression built so far, in parentheses (for the first
//! operation, a fresh number); its other operands are fresh numbers. Every number has exactly
//! `length` digits (uniform in `10^(length−1) ..= 10^length − 1`); the loop count `k` is
//! uniform in `1..=9` whatever the length. No spaces, no `print`, and the only variable is the
//! loop's `x`:
//!
//! | operation | code                        | value                   |
//! |-----------|-----------------------------|-------------------------|
//! | add       | `a+b`                       | a + b                   |
//! | subtract  | `a-b`                       | a − b                   |
//! | multiply  | `a*b`                       | a · b                   |
//! | if        | `aifb<celsed` (or with `>`) | a if b < c, else d      |
//! | for       | `x=afor[k]x+=b`             | a + k · b               |
//!
//! The answer is the value modulo `10^(length + 1)` as Python's `%` takes it (never negative),
//! in decimal, `length` the program's own (a curriculum may draw it below the target's): at
//! length 2, `(12-34)*56` is −1232, answered `768`, and
//! `x=(12if34<56else78)for[3]x+=90` is 12 + 3 · 90, answered `282`. Only the first operand is
//! ever an expression, so `if` compares fresh numbers, and every value can be kept modulo
//! `10^(length + 1)` as it is built.
//!
//! Modes (Sonnet's task types): `addition` (ADDITION: add), `control` (CONTROL: if, for),
//! `program` (ALL: all five); Sonnet's ALGEBRA (add, subtract, multiply) and ALG_CTRL (add,
//! subtract, if; the default of its RMC example script) have no mode here. `copy`, `reverse`
//! and `double` are one `length`-digit number (first digit not 0), copied, reversed or
//! written twice, as in the other grammar. Sonnet composes these `nesting` times too: at
//! nesting 2 the input is the number in parentheses, a reversal of a reversal is a copy and
//! double writes the number four times, so Table 1's Copy, Reverse and Double can only be the
//! single operation; `nesting` does not apply to them here.

use rand::Rng;
use rand_chacha::ChaCha8Rng;

use super::lte_program::{self, Example, Hardness, Mode};

/// Sonnet's operations.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    Add,
    Subtract,
    Multiply,
    If,
    For,
}

fn operations(mode: Mode) -> &'static [Op] {
    match mode {
        Mode::Addition => &[Op::Add],
        Mode::Control => &[Op::If, Op::For],
        Mode::Program => &[Op::Add, Op::Subtract, Op::Multiply, Op::If, Op::For],
        Mode::Copy | Mode::Reverse | Mode::Double => &[],
    }
}

/// An expression's code, bare (its parentheses are added where it becomes an operand), and
/// its value modulo the answer's modulus.
struct Expr {
    code: String,
    value: i128,
}

/// A program of `mode` at `hardness`, and its answer.
pub(super) fn example(rng: &mut ChaCha8Rng, mode: Mode, hardness: Hardness) -> Example {
    if mode.is_memorisation() {
        return lte_program::memorisation(rng, mode, hardness.length);
    }
    let length = hardness.length as u32;
    // `length ≤ Mode::max_length` (9): values below 10^10, their products within i128.
    let modulus = 10i128.pow(length + 1);
    let ops = operations(mode);
    let mut built: Option<Expr> = None;
    for _ in 0..hardness.nesting {
        let op = ops[rng.random_range(0..ops.len())];
        let first = match built.take() {
            Some(e) => Expr { code: format!("({})", e.code), value: e.value },
            None => number(rng, length),
        };
        let e = apply(rng, op, first, length);
        built = Some(Expr { value: e.value.rem_euclid(modulus), ..e });
    }
    let last = built.unwrap_or_else(|| number(rng, length));
    Example { program: last.code, answer: last.value.to_string() }
}

/// A number of exactly `length` digits.
fn number(rng: &mut ChaCha8Rng, length: u32) -> Expr {
    let value = rng.random_range(10i128.pow(length - 1)..10i128.pow(length));
    Expr { code: value.to_string(), value }
}

/// `op` with `first` as its first operand and fresh numbers for the others.
fn apply(rng: &mut ChaCha8Rng, op: Op, first: Expr, length: u32) -> Expr {
    let a = first;
    match op {
        Op::Add | Op::Subtract | Op::Multiply => {
            let b = number(rng, length);
            let (sign, value) = match op {
                Op::Add => ('+', a.value + b.value),
                Op::Subtract => ('-', a.value - b.value),
                _ => ('*', a.value * b.value),
            };
            Expr { code: format!("{}{sign}{}", a.code, b.code), value }
        }
        Op::If => {
            let (b, c, d) = (number(rng, length), number(rng, length), number(rng, length));
            let (cmp, holds) = if rng.random_bool(0.5) { ('<', b.value < c.value) } else { ('>', b.value > c.value) };
            let value = if holds { a.value } else { d.value };
            Expr { code: format!("{}if{}{cmp}{}else{}", a.code, b.code, c.code, d.code), value }
        }
        Op::For => {
            let b = number(rng, length);
            let k: i128 = rng.random_range(1..=9);
            Expr { code: format!("x={}for[{k}]x+={}", a.code, b.code), value: a.value + k * b.value }
        }
    }
}

#[cfg(test)]
pub(super) mod tests {
    use rand::SeedableRng;

    use super::*;

    /// An independent evaluator of Sonnet's programs, exact in `i128`: what a program computes,
    /// before the modulus.
    pub(crate) fn evaluate(program: &str) -> i128 {
        let mut p = Reader { text: program.as_bytes(), at: 0 };
        let v = p.body();
        assert_eq!(p.at, program.len(), "trailing text in {program:?}");
        v
    }

    /// The answer to a program whose numbers have `length` digits.
    pub(crate) fn answer(program: &str, length: usize) -> String {
        evaluate(program).rem_euclid(10i128.pow(length as u32 + 1)).to_string()
    }

    /// `body := "x=" atom "for[" digits "]x+=" atom
    ///        | atom [op atom | "if" atom cmp atom "else" atom]`,
    /// `atom := digits | "(" body ")"`.
    struct Reader<'t> {
        text: &'t [u8],
        at: usize,
    }

    impl Reader<'_> {
        fn eat(&mut self, word: &str) -> bool {
            let found = self.text[self.at..].starts_with(word.as_bytes());
            if found {
                self.at += word.len();
            }
            found
        }
        fn expect(&mut self, word: &str) {
            assert!(self.eat(word), "expected {word:?} at {} of {:?}", self.at, String::from_utf8_lossy(self.text));
        }
        fn digits(&mut self) -> i128 {
            let start = self.at;
            while self.text.get(self.at).is_some_and(u8::is_ascii_digit) {
                self.at += 1;
            }
            std::str::from_utf8(&self.text[start..self.at]).unwrap().parse().expect("a number")
        }
        fn atom(&mut self) -> i128 {
            if self.eat("(") {
                let v = self.body();
                self.expect(")");
                v
            } else {
                self.digits()
            }
        }
        fn body(&mut self) -> i128 {
            if self.eat("x=") {
                let mut x = self.atom();
                self.expect("for[");
                let k = self.digits();
                self.expect("]x+=");
                let b = self.atom();
                for _ in 0..k {
                    x += b;
                }
                return x;
            }
            let a = self.atom();
            if self.eat("+") {
                a + self.atom()
            } else if self.eat("-") {
                a - self.atom()
            } else if self.eat("*") {
                a * self.atom()
            } else if self.eat("if") {
                let b = self.atom();
                let less = if self.eat("<") {
                    true
                } else {
                    self.expect(">");
                    false
                };
                let c = self.atom();
                self.expect("else");
                let d = self.atom();
                if (less && b < c) || (!less && b > c) { a } else { d }
            } else {
                a
            }
        }
    }

    fn rng(seed: u64) -> ChaCha8Rng {
        ChaCha8Rng::seed_from_u64(seed)
    }

    /// The numbers of a program, the loop counts (in brackets) left out.
    pub(crate) fn numbers(program: &str) -> Vec<&str> {
        let mut out = vec![];
        let mut rest = program;
        while let Some(start) = rest.find(|c: char| c.is_ascii_digit()) {
            let len = rest[start..].find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len() - start);
            if !rest[..start].ends_with('[') {
                out.push(&rest[start..start + len]);
            }
            rest = &rest[start + len..];
        }
        out
    }

    #[test]
    fn the_evaluator_reads_hand_written_programs() {
        assert_eq!(evaluate("(12-34)*56"), -1232);
        assert_eq!(answer("(12-34)*56", 2), "768", "Python's %: never negative");
        assert_eq!(evaluate("x=(12if34<56else78)for[3]x+=90"), 282);
        assert_eq!(evaluate("(12if34>56else78)+1"), 79);
        assert_eq!(evaluate("x=5for[9]x+=7"), 68);
        assert_eq!(answer("(99+99)+99", 1), "97", "297 mod 100");
        assert_eq!(evaluate("12345"), 12345);
    }

    #[test]
    fn hand_checked_programs_of_each_mode() {
        // Seed 11's program of each mode, its answer worked out by hand.
        let at = |mode, length, nesting| example(&mut rng(11), mode, Hardness { length, nesting });
        // 57 + 55 = 112, + 29 = 141; below 10^3.
        let addition = at(Mode::Addition, 2, 2);
        assert_eq!((addition.program.as_str(), addition.answer.as_str()), ("(57+55)+29", "141"));
        // 55 > 80 fails: 57; then 98 < 15 fails: 20.
        let control = at(Mode::Control, 2, 2);
        assert_eq!((control.program.as_str(), control.answer.as_str()), ("(57if55>80else57)if98<15else20", "20"));
        // 57 − 55 = 2, − 29 = −27, then 4 × 66 added: 237.
        let program = at(Mode::Program, 2, 3);
        assert_eq!((program.program.as_str(), program.answer.as_str()), ("x=((57-55)-29)for[4]x+=66", "237"));
        // 5 − 5 − 2 = −2, and −2 mod 100 = 98.
        let negative = at(Mode::Program, 1, 2);
        assert_eq!((negative.program.as_str(), negative.answer.as_str()), ("(5-5)-2", "98"));
    }

    #[test]
    fn generated_programs_evaluate_to_their_answers() {
        let mut r = rng(1);
        for mode in [Mode::Addition, Mode::Control, Mode::Program] {
            for (length, nesting) in [(1, 1), (2, 2), (3, 3), (4, 4), (1, 6), (9, 1), (2, 10)] {
                // The exact values stay below 10^(length·(nesting + 1) + 2), within i128.
                for _ in 0..300 {
                    let e = example(&mut r, mode, Hardness { length, nesting });
                    assert_eq!(answer(&e.program, length), e.answer, "{mode:?} ({length}, {nesting}): {}", e.program);
                }
            }
        }
    }

    #[test]
    fn every_number_has_exactly_length_digits() {
        let mut r = rng(2);
        let (mut smallest, mut largest) = (i128::MAX, 0);
        for mode in Mode::NAMES.map(|n| serde_json::from_value::<Mode>(n.into()).unwrap()) {
            for _ in 0..500 {
                let e = example(&mut r, mode, Hardness { length: 3, nesting: 3 });
                for n in numbers(&e.program) {
                    assert_eq!(n.len(), 3, "{mode:?}: {}", e.program);
                    let v: i128 = n.parse().unwrap();
                    (smallest, largest) = (smallest.min(v), largest.max(v));
                }
            }
        }
        assert_eq!((smallest, largest), (100, 999), "the whole range of 3-digit numbers");
        let one = example(&mut r, Mode::Control, Hardness { length: 1, nesting: 1 });
        assert!(numbers(&one.program).iter().all(|n| n.len() == 1 && *n != "0"), "{}", one.program);
    }

    #[test]
    fn answers_are_taken_modulo_ten_to_the_length_plus_one() {
        let mut r = rng(3);
        let mut largest = 0;
        for _ in 0..2000 {
            let e = example(&mut r, Mode::Program, Hardness { length: 2, nesting: 3 });
            assert!(!e.answer.starts_with('-') && e.answer.len() <= 3, "{}: {}", e.program, e.answer);
            largest = largest.max(e.answer.parse::<i128>().unwrap());
        }
        assert!(largest > 900, "the whole range below 1000: {largest}");
    }

    #[test]
    fn each_mode_uses_its_operations_and_the_syntax() {
        let mut r = rng(4);
        let texts = |mode, r: &mut ChaCha8Rng| -> String {
            let programs: Vec<String> =
                (0..400).map(|_| example(r, mode, Hardness { length: 2, nesting: 2 }).program).collect();
            programs.join(" | ")
        };
        let program = texts(Mode::Program, &mut r);
        for needle in ["+", "-", "*", "if", "else", "<", ">", "x=", "for[", "]x+="] {
            assert!(program.contains(needle), "program writes {needle:?}");
        }
        let control = texts(Mode::Control, &mut r);
        assert!(control.contains("if") && control.contains("for["));
        assert!(!control.replace("x+=", "").contains(['+', '-', '*']), "control: no arithmetic but the loop's");
        let addition = texts(Mode::Addition, &mut r);
        assert!(!addition.contains(['-', '*', '=', 'x', 'i']), "addition: sums only");
        for program in program.split(" | ") {
            assert_eq!(program.matches('(').count(), 1, "nesting 2: the first operation, parenthesised: {program}");
            assert!(!program.contains(' ') && !program.contains("print"), "{program}");
        }
    }

    #[test]
    fn memorisation_is_the_other_grammars() {
        for mode in [Mode::Copy, Mode::Reverse, Mode::Double] {
            let hardness = Hardness { length: 6, nesting: 2 };
            let e = example(&mut rng(5), mode, hardness);
            assert_eq!(e, lte_program::example(&mut rng(5), mode, hardness));
            assert_eq!(e.program.len(), 6, "{mode:?}: no parentheses at nesting 2");
        }
    }

    #[test]
    fn the_same_seed_gives_the_same_programs() {
        let draw = |seed| -> Vec<Example> {
            let mut r = rng(seed);
            (0..50).map(|_| example(&mut r, Mode::Program, Hardness { length: 3, nesting: 2 })).collect()
        };
        assert_eq!(draw(6), draw(6));
        assert_ne!(draw(6), draw(7));
    }
}
