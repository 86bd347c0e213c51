//! The Learning to Execute generator of `grammar = "zaremba"` (Zaremba & Sutskever 2014, §3;
//! their code wojciechz/learning_to_execute @04a1659, `data.lua` and `utils/operations.lua`):
//! Python programs over integers that one left-to-right pass evaluates, and what they print.
//! The modes, the difficulty ([`Hardness`]) and the examples defined here are shared with the
//! RMC authors' grammar, `grammar = "sonnet"` ([`super::lte_sonnet`]).
//!
//! A program is built by composing `nesting` operations. Each operation draws its operands;
//! the first operand it draws is the expression built so far (if any), put at a random operand
//! position, and the others are fresh numbers. The operations are the paper's and the code's:
//!
//! | operation | code                                 | value                 |
//! |-----------|--------------------------------------|-----------------------|
//! | pair      | `(a+b)` or `(a-b)`                   | a ± b                 |
//! | small mul | `(a*k)` or `(k*a)`                   | a · k                 |
//! | equality  | `a`                                  | a                     |
//! | vars      | line `v=a`; `(v+b)` or `(v-b)`       | a ± b                 |
//! | loop      | lines `v=a`, `for x in range(k):v+=b` (or `-=`); `v` | a ± k · b |
//! | if        | `(c if a>b else d)` or with `<`      | c or d                |
//!
//! Numbers are uniform in `1..=10^length` and the small ones (`k`) in `1..=4·length`, as the
//! code draws them; variables are distinct letters out of `a`–`j` (a random permutation per
//! program), `x` is the loop variable. The program is its lines, then `print(e)` of the last
//! expression, lines separated by a newline; the target is what Python prints.
//!
//! Modes, as RMC Table 1 (Santoro et al. 2018, §5.2) and the RMC authors' dataset (deepmind/
//! sonnet, `sonnet/examples/learn_to_execute.py`, [`super::lte_sonnet`]) name them:
//! - `program`: all six operations (the LTE paper's program class).
//! - `control`: `if` and `loop` only (Sonnet's CONTROL class: if-statements and for-loops).
//! - `addition`: `nesting` additions of numbers of exactly `length` digits, as the LTE paper's
//!   addition task (`print(a+b)` at nesting 1, both numbers the same length; Sonnet's ADDITION
//!   chains `nesting` of them, as here).
//! - `copy`, `reverse`, `double`: the input is a `length`-digit number, bare (Sonnet's memory
//!   tasks); the target is the number, its digits reversed, or the number written twice.
//!
//! Where this differs from the LTE code: lines end with a newline only (the code writes `v=a;`
//! and uses `#` for newline); the printed expression loses its outer parentheses, as Sonnet's
//! (`print(a+b)`, where the code writes `print((a+b))`); with the `mix` curriculum (see
//! [`Hardness`]) length and nesting are drawn once per program (the code draws the length
//! again for every number). No result is taken modulo anything (Sonnet's grammar keeps the
//! last `length + 1` digits); values are exact in `i128`.

use rand::Rng;
use rand::seq::SliceRandom;
use rand_chacha::ChaCha8Rng;

/// What the programs compute.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub(super) enum Mode {
    Addition,
    Control,
    Program,
    Copy,
    Reverse,
    Double,
}

impl Mode {
    /// The names in specs: the variants', lowercased (as they deserialize).
    pub(super) const NAMES: [&'static str; 6] = ["addition", "control", "program", "copy", "reverse", "double"];

    /// Copy, reverse and double: digit strings, no program.
    pub(super) fn is_memorisation(self) -> bool {
        matches!(self, Mode::Copy | Mode::Reverse | Mode::Double)
    }

    /// The largest `length` the mode allows: arithmetic stays within `i128` (and the
    /// programs short); a memorisation task is a digit string of any length.
    pub(super) fn max_length(self) -> usize {
        if self.is_memorisation() { 1000 } else { 9 }
    }

    fn operations(self) -> &'static [Op] {
        match self {
            Mode::Addition => &[Op::Add],
            Mode::Control => &[Op::If, Op::Loop],
            Mode::Program => &[Op::Pair, Op::SmallMul, Op::Equality, Op::Vars, Op::Loop, Op::If],
            Mode::Copy | Mode::Reverse | Mode::Double => &[],
        }
    }
}

/// Digits of the numbers and operations composed, for one program.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Deserialize)]
pub(super) struct Hardness {
    pub length: usize,
    pub nesting: usize,
}

impl Hardness {
    /// The LTE paper's "mix" curriculum: a length uniform in `1..=length` and a nesting
    /// uniform in `1..=nesting`.
    pub(super) fn mixed(self, rng: &mut ChaCha8Rng) -> Hardness {
        Hardness { length: rng.random_range(1..=self.length), nesting: rng.random_range(1..=self.nesting) }
    }
}

/// One example: the program's text and what it prints.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Example {
    pub program: String,
    pub answer: String,
}

/// A program of `mode` at `hardness`.
pub(super) fn example(rng: &mut ChaCha8Rng, mode: Mode, hardness: Hardness) -> Example {
    if mode.is_memorisation() {
        return memorisation(rng, mode, hardness.length);
    }
    let mut composer = Composer::new(rng, hardness.length, mode == Mode::Addition);
    for _ in 0..hardness.nesting {
        let op = mode.operations()[composer.rng.random_range(0..mode.operations().len())];
        let e = composer.apply(op);
        composer.stack = Some(e);
    }
    let last = composer.stack.take().expect("nesting ≥ 1 composes an expression");
    let mut program = String::new();
    for line in &composer.lines {
        program.push_str(line);
        program.push('\n');
    }
    program.push_str(&format!("print({})", strip_parentheses(&last.code)));
    Example { program, answer: last.value.to_string() }
}

/// A `length`-digit number (first digit not 0, as Sonnet's) and its copy, reversal or double.
pub(super) fn memorisation(rng: &mut ChaCha8Rng, mode: Mode, length: usize) -> Example {
    let digits: String = (0..length)
        .map(|i| char::from(b'0' + if i == 0 { rng.random_range(1..10u8) } else { rng.random_range(0..10u8) }))
        .collect();
    let answer = match mode {
        Mode::Reverse => digits.chars().rev().collect(),
        Mode::Double => format!("{digits}{digits}"),
        _ => digits.clone(),
    };
    Example { program: digits, answer }
}

/// `(e)` → `e` when the parentheses enclose the whole expression.
fn strip_parentheses(code: &str) -> &str {
    if !code.starts_with('(') {
        return code;
    }
    let mut depth = 0;
    for (i, c) in code.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth == 0 {
                    return if i == code.len() - 1 { &code[1..i] } else { code };
                }
            }
            _ => {}
        }
    }
    code
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    /// The addition mode's only operation: `(a+b)` of `length`-digit numbers.
    Add,
    Pair,
    SmallMul,
    Equality,
    Vars,
    Loop,
    If,
}

/// An expression and its value.
#[derive(Clone, Debug)]
struct Expr {
    code: String,
    value: i128,
}

/// The state of one program being built: its lines, the expression so far, unused variables.
struct Composer<'a> {
    rng: &'a mut ChaCha8Rng,
    length: usize,
    /// Numbers of exactly `length` digits (the addition task), else `1..=10^length`.
    exact_digits: bool,
    lines: Vec<String>,
    stack: Option<Expr>,
    variables: Vec<char>,
}

impl<'a> Composer<'a> {
    fn new(rng: &'a mut ChaCha8Rng, length: usize, exact_digits: bool) -> Composer<'a> {
        let mut variables: Vec<char> = ('a'..='j').collect();
        variables.shuffle(rng);
        Composer { rng, length, exact_digits, lines: vec![], stack: None, variables }
    }

    fn number(&mut self) -> Expr {
        let top = 10i128.pow(self.length as u32);
        let value =
            if self.exact_digits { self.rng.random_range(top / 10..top) } else { self.rng.random_range(1..=top) };
        Expr { code: value.to_string(), value }
    }

    /// `1..=4·length`: a multiplier or a loop count.
    fn small(&mut self) -> i128 {
        self.rng.random_range(1..=4 * self.length as i128)
    }

    fn coin(&mut self) -> bool {
        self.rng.random_bool(0.5)
    }

    /// `n` operands: the expression so far at a random position, fresh numbers elsewhere.
    fn operands(&mut self, n: usize) -> Vec<Expr> {
        let mut out: Vec<Expr> = (0..n).map(|_| self.number()).collect();
        if let Some(e) = self.stack.take() {
            let at = self.rng.random_range(0..n);
            out[at] = e;
        }
        out
    }

    fn variable(&mut self) -> char {
        self.variables.pop().expect("at most 10 variables per program (nesting ≤ 10)")
    }

    fn apply(&mut self, op: Op) -> Expr {
        match op {
            Op::Add => {
                let [a, b] = self.two();
                Expr { code: format!("({}+{})", a.code, b.code), value: a.value + b.value }
            }
            Op::Pair => {
                let [a, b] = self.two();
                if self.coin() {
                    Expr { code: format!("({}+{})", a.code, b.code), value: a.value + b.value }
                } else {
                    Expr { code: format!("({}-{})", a.code, b.code), value: a.value - b.value }
                }
            }
            Op::SmallMul => {
                let a = self.operands(1).remove(0);
                let k = self.small();
                let code = if self.coin() { format!("({}*{k})", a.code) } else { format!("({k}*{})", a.code) };
                Expr { code, value: a.value * k }
            }
            Op::Equality => self.operands(1).remove(0),
            Op::Vars => {
                let v = self.variable();
                let [a, b] = self.two();
                self.lines.push(format!("{v}={}", a.code));
                if self.coin() {
                    Expr { code: format!("({v}+{})", b.code), value: a.value + b.value }
                } else {
                    Expr { code: format!("({v}-{})", b.code), value: a.value - b.value }
                }
            }
            Op::Loop => {
                let v = self.variable();
                let [a, b] = self.two();
                let k = self.small();
                let (sign, value) =
                    if self.coin() { ('+', a.value + k * b.value) } else { ('-', a.value - k * b.value) };
                self.lines.push(format!("{v}={}", a.code));
                self.lines.push(format!("for x in range({k}):{v}{sign}={}", b.code));
                Expr { code: v.to_string(), value }
            }
            Op::If => {
                let [a, b, c, d] = <[Expr; 4]>::try_from(self.operands(4)).expect("four operands");
                let (cmp, holds) = if self.coin() { ('>', a.value > b.value) } else { ('<', a.value < b.value) };
                let value = if holds { c.value } else { d.value };
                Expr { code: format!("({} if {}{cmp}{} else {})", c.code, a.code, b.code, d.code), value }
            }
        }
    }

    fn two(&mut self) -> [Expr; 2] {
        <[Expr; 2]>::try_from(self.operands(2)).expect("two operands")
    }
}

#[cfg(test)]
pub(super) mod tests {
    use std::collections::HashMap;

    use rand::SeedableRng;

    use super::*;

    /// An independent evaluator for the generated Python subset: assignments, single-line
    /// for-loops, `print`; expressions with `+ - *`, parentheses, `A if B<C else D` (and `>`).
    /// Returns what the program prints.
    pub(crate) fn run_python(program: &str) -> String {
        let mut vars: HashMap<String, i128> = HashMap::new();
        let mut printed = None;
        for line in program.lines() {
            if let Some(inner) = line.strip_prefix("print(").and_then(|l| l.strip_suffix(')')) {
                printed = Some(eval(inner, &vars).to_string());
            } else if let Some(rest) = line.strip_prefix("for x in range(") {
                let (count, body) = rest.split_once("):").expect("for x in range(n):body");
                let count: i128 = count.parse().expect("loop count");
                let (target, op, expr) = if let Some((t, e)) = body.split_once("+=") {
                    (t, 1, e)
                } else {
                    let (t, e) = body.split_once("-=").expect("+= or -=");
                    (t, -1, e)
                };
                for _ in 0..count {
                    let v = eval(expr, &vars);
                    *vars.get_mut(target).expect("assigned before the loop") += op * v;
                }
            } else {
                let (name, expr) = line.split_once('=').expect("an assignment");
                let v = eval(expr, &vars);
                vars.insert(name.to_string(), v);
            }
        }
        printed.expect("a print statement")
    }

    fn eval(expr: &str, vars: &HashMap<String, i128>) -> i128 {
        let tokens = tokenize(expr);
        let mut p = Parser { tokens: &tokens, at: 0, vars };
        let v = p.conditional();
        assert_eq!(p.at, tokens.len(), "trailing tokens in {expr:?}");
        v
    }

    fn tokenize(s: &str) -> Vec<String> {
        let mut out: Vec<String> = vec![];
        let mut word = String::new();
        for c in s.chars() {
            if c.is_ascii_alphanumeric() {
                word.push(c);
                continue;
            }
            if !word.is_empty() {
                out.push(std::mem::take(&mut word));
            }
            if c != ' ' {
                out.push(c.to_string());
            }
        }
        if !word.is_empty() {
            out.push(word);
        }
        out
    }

    /// Python's precedence: conditional < comparison < `+ -` < `*` < atoms.
    struct Parser<'t> {
        tokens: &'t [String],
        at: usize,
        vars: &'t HashMap<String, i128>,
    }

    impl Parser<'_> {
        fn peek(&self) -> Option<&str> {
            self.tokens.get(self.at).map(String::as_str)
        }
        fn next(&mut self) -> &str {
            self.at += 1;
            &self.tokens[self.at - 1]
        }
        fn conditional(&mut self) -> i128 {
            let then = self.sum();
            if self.peek() != Some("if") {
                return then;
            }
            self.next();
            let left = self.sum();
            let cmp = self.next().to_string();
            let right = self.sum();
            assert_eq!(self.next(), "else");
            let otherwise = self.conditional();
            let holds = match cmp.as_str() {
                "<" => left < right,
                ">" => left > right,
                other => panic!("comparison {other}"),
            };
            if holds { then } else { otherwise }
        }
        fn sum(&mut self) -> i128 {
            let mut v = self.product();
            while let Some(op @ ("+" | "-")) = self.peek() {
                let plus = op == "+";
                self.next();
                let r = self.product();
                v = if plus { v + r } else { v - r };
            }
            v
        }
        fn product(&mut self) -> i128 {
            let mut v = self.atom();
            while self.peek() == Some("*") {
                self.next();
                v *= self.atom();
            }
            v
        }
        fn atom(&mut self) -> i128 {
            let t = self.next().to_string();
            if t == "(" {
                let v = self.conditional();
                assert_eq!(self.next(), ")");
                return v;
            }
            t.parse().unwrap_or_else(|_| *self.vars.get(&t).unwrap_or_else(|| panic!("unbound {t}")))
        }
    }

    fn rng(seed: u64) -> ChaCha8Rng {
        ChaCha8Rng::seed_from_u64(seed)
    }

    #[test]
    fn the_evaluator_reads_hand_written_programs() {
        // The LTE paper's example program (Fig. 1), in this generator's layout.
        let program = "j=8584\nfor x in range(8):j+=920\nb=(1500+j)\nprint(b+7567)";
        assert_eq!(run_python(program), "25011");
        assert_eq!(run_python("print((3 if 5<2 else (7-20))*4)"), "-52");
        assert_eq!(run_python("a=5\nfor x in range(3):a-=(2*a)\nprint(a)"), "-5", "the body re-reads a");
        assert_eq!(run_python("print(1+2*3-4)"), "3");
    }

    #[test]
    fn generated_programs_print_their_targets() {
        let mut r = rng(1);
        let mut lines = 0;
        for mode in [Mode::Addition, Mode::Control, Mode::Program] {
            for (length, nesting) in [(1, 1), (2, 3), (4, 2), (3, 6), (9, 4)] {
                for _ in 0..300 {
                    let e = example(&mut r, mode, Hardness { length, nesting });
                    assert_eq!(run_python(&e.program), e.answer, "{mode:?} ({length}, {nesting}):\n{}", e.program);
                    lines += e.program.lines().count();
                }
            }
        }
        assert!(lines > 4500, "programs with assignments and loops: {lines} lines");
    }

    #[test]
    fn each_mode_uses_its_operations() {
        let mut r = rng(2);
        let texts = |mode, r: &mut ChaCha8Rng| -> String {
            (0..400)
                .map(|_| example(r, mode, Hardness { length: 3, nesting: 3 }).program)
                .collect::<Vec<_>>()
                .join(" | ")
        };
        let program = texts(Mode::Program, &mut r);
        for needle in ["for x in range(", " if ", " else ", "*", "+", "-", "=", "<", ">"] {
            assert!(program.contains(needle), "program mode writes {needle:?}");
        }
        let control = texts(Mode::Control, &mut r);
        assert!(control.contains("for x in range(") && control.contains(" if "));
        assert!(!control.contains('*'), "control has no multiplication");
        let addition = texts(Mode::Addition, &mut r);
        assert!(!addition.contains(['-', '*', '=', '\n']), "addition: one print of sums");
    }

    #[test]
    fn addition_at_nesting_one_is_two_numbers_of_the_same_length() {
        let mut r = rng(3);
        for _ in 0..200 {
            let e = example(&mut r, Mode::Addition, Hardness { length: 4, nesting: 1 });
            let inner = e.program.strip_prefix("print(").and_then(|p| p.strip_suffix(')')).unwrap();
            let (a, b) = inner.split_once('+').unwrap();
            assert_eq!((a.len(), b.len()), (4, 4), "{inner}");
            assert_eq!(e.answer, (a.parse::<i64>().unwrap() + b.parse::<i64>().unwrap()).to_string());
        }
    }

    #[test]
    fn numbers_and_small_numbers_stay_in_their_ranges() {
        let mut r = rng(4);
        let (mut biggest, mut loops) = (0, vec![]);
        for _ in 0..2000 {
            let e = example(&mut r, Mode::Control, Hardness { length: 2, nesting: 1 });
            for word in e.program.split(|c: char| !c.is_ascii_digit()).filter(|w| !w.is_empty()) {
                biggest = biggest.max(word.parse::<i64>().unwrap());
            }
            if let Some(rest) = e.program.split("range(").nth(1) {
                loops.push(rest.split(')').next().unwrap().parse::<i64>().unwrap());
            }
        }
        assert_eq!(biggest, 100, "numbers in 1..=10^length");
        assert_eq!((loops.iter().min(), loops.iter().max()), (Some(&1), Some(&8)), "loop counts in 1..=4·length");
    }

    #[test]
    fn memorisation_by_hand() {
        let mut r = rng(5);
        let copy = example(&mut r, Mode::Copy, Hardness { length: 6, nesting: 2 });
        assert_eq!(copy.program.len(), 6);
        assert!(!copy.program.starts_with('0'));
        assert_eq!(copy.answer, copy.program);
        assert_eq!(memorisation(&mut rng(6), Mode::Reverse, 5).answer, {
            let p = memorisation(&mut rng(6), Mode::Copy, 5).program;
            p.chars().rev().collect::<String>()
        });
        let d = memorisation(&mut rng(7), Mode::Double, 3);
        assert_eq!(d.answer, format!("{0}{0}", d.program));
        // By hand: the same draw, three ways.
        let e = |mode| memorisation(&mut rng(8), mode, 4);
        let digits = e(Mode::Copy).program;
        assert_eq!(e(Mode::Reverse).answer, digits.chars().rev().collect::<String>());
        assert_eq!(e(Mode::Double).answer.len(), 8);
        assert_eq!(strip_parentheses("(a+b)"), "a+b");
        assert_eq!(strip_parentheses("(a+b)*(c)"), "(a+b)*(c)");
        assert_eq!(strip_parentheses("j"), "j");
    }

    #[test]
    fn the_mix_curriculum_draws_up_to_the_target() {
        let mut r = rng(9);
        let target = Hardness { length: 3, nesting: 2 };
        let mut seen: Vec<(usize, usize)> =
            (0..300).map(|_| target.mixed(&mut r)).map(|h| (h.length, h.nesting)).collect();
        seen.sort();
        seen.dedup();
        assert_eq!(seen, vec![(1, 1), (1, 2), (2, 1), (2, 2), (3, 1), (3, 2)]);
    }
}
