//! Property tests: random bytes, random soups of the grammar's tokens, and small mutations of
//! valid specs. Parsing and checking must end in success or in errors that each point inside
//! the file and render; never in a panic.

use memctl::check;
use memctl::diag::Diagnostic;
use memctl::lang;
use memctl::source::SourceMap;
use proptest::prelude::*;

/// A self-contained spec (its models inline: the mutations work on one file's text).
const SMALL: &str = include_str!("../../specs/examples/assoc_small.mem");

/// A valid spec using most of the grammar: typed parameters, defaults from other parameters,
/// `if`/`else if`/`else`, multiple assignment, operators, inline tasks, train settings, sweeps
/// over lists and ranges.
const RICH: &str = r#"// rich: every construct once
task assoc = assocRetrieval(pairs = 3, train = 64, validation = 16, test = 16)

model net(d: int = 8, half = d / 2, gates: bool = true, mode: str = "lstm", scale: float = 0.5) {
  state M = learned(d, d)
  state c = zeros(d)
  state h = zeros(d);
  step token {
    x = embed(token, d)
    if mode == "lstm" and not (d < 4) {
      c, h = lstmCell(c, h, x)
    } else if gates or d >= 16 {
      h = tanh(linear(x, d) * scale + 1)
    } else {
      h = sigmoid(-x)
    }
    a = linear(h, d)
    M = itemWrite(M, a, gated = gates)
    y = relu(h ⊙ h) + h / 2 - scale * h
    out linear(y, output_size, bias = true)
  }
}

experiment rich {
  task assocRetrieval(pairs = 2, train = 32, validation = 8, test = 8)
  model net(d = 8)
  train { optimizer = rmsprop(lr = 1e-3, momentum = 0.9), batch = 4
          steps = 2, eval_every = 1, clip_norm = 1.5, stop_when = loss <= 0.1 }
  sweep { seed in 1..2, gates in [true, false] }
}

experiment named { task assoc; model net }
"#;

/// Parses and checks `text`; on errors, checks that each is located in its file and renders.
fn parse_and_check(text: &str) -> Result<(), TestCaseError> {
    match lang::parse_str("spec.mem", text) {
        Err(e) => all_located(&e.sources, &e.diagnostics.0),
        Ok(spec) => match check::check(&spec, &memctl::prims::Primitives) {
            Err(ds) => all_located(&spec.sources, &ds.0),
            Ok(_) => Ok(()),
        },
    }
}

fn all_located(sources: &SourceMap, diagnostics: &[Diagnostic]) -> Result<(), TestCaseError> {
    prop_assert!(!diagnostics.is_empty(), "an error without diagnostics");
    for d in diagnostics {
        let Some(primary) = &d.primary else {
            return Err(TestCaseError::fail(format!("`{}` has no location", d.message)));
        };
        let len = sources.get(primary.span.file).text.len();
        prop_assert!(primary.span.start <= primary.span.end, "`{}`: reversed span", d.message);
        prop_assert!(primary.span.end <= len, "`{}`: span {:?} past the end ({len})", d.message, primary.span);
        for label in &d.secondary {
            prop_assert!(label.span.end <= sources.get(label.span.file).text.len(), "`{}`: secondary span", d.message);
        }
        prop_assert!(d.location(sources).is_some());
        let rendered = d.render(sources, false);
        // Check errors name their kind's code (`error[C014]: …`).
        let title = d.code.map_or("error: ".to_string(), |c| format!("error[{c}]: "));
        prop_assert!(rendered.starts_with(&title), "{rendered}");
        prop_assert!(rendered.len() < 10_000, "`{}` renders to {} bytes", d.message, rendered.len());
        // Syntax errors read as words: no pest rule names (`kw_if`, `op_add`, `EOI`).
        if d.message.starts_with("syntax error") {
            prop_assert!(!d.message.contains('_') && !d.message.contains("EOI"), "{}", d.message);
        }
    }
    Ok(())
}

/// The vocabulary of token soups: every keyword, typical names, numbers, operators, brackets,
/// strings (closed and not), comments (closed and not) and blanks.
const VOCABULARY: &[&str] = &[
    // keywords and types
    "model",
    "task",
    "experiment",
    "use",
    "state",
    "step",
    "if",
    "else",
    "out",
    "in",
    "train",
    "sweep",
    "true",
    "false",
    "and",
    "or",
    "not",
    "int",
    "float",
    "bool",
    "str",
    // names: variables, primitives, state initialisers, tasks, settings, metrics
    "x",
    "d",
    "e",
    "h",
    "c",
    "M",
    "Mr",
    "m",
    "t",
    "ex",
    "_a1",
    "token",
    "output_size",
    "input_size",
    "linear",
    "embed",
    "itemWrite",
    "relRead",
    "samRead",
    "lstmCell",
    "mlp",
    "scalar",
    "transfer",
    "distill",
    "zeros",
    "learned",
    "identity",
    "assocRetrieval",
    "pairs",
    "seed",
    "lr",
    "steps",
    "batch",
    "optimizer",
    "adam",
    "stop_when",
    "accuracy",
    "loss",
    "gated",
    "nq",
    // numbers
    "0",
    "1",
    "2",
    "8",
    "16",
    "-1",
    "1.5",
    "1e-3",
    "3.",
    "1e400",
    "99999999999999999999",
    "9223372036854775807",
    // operators and punctuation
    "+",
    "-",
    "*",
    "/",
    "⊙",
    "⊗",
    "@",
    "==",
    "!=",
    "<=",
    ">=",
    "<",
    ">",
    "..",
    "=",
    ",",
    ";",
    ":",
    ".",
    // brackets
    "(",
    ")",
    "[",
    "]",
    "{",
    "}",
    // strings, comments, junk
    "\"a\"",
    "\"lstm\"",
    "\"",
    "// note\n",
    "/* c */",
    "/*",
    "*/",
    "é",
    "∘",
    "\0",
    "$",
    "#",
];

const SEPARATORS: &[&str] = &[" ", " ", " ", "\n", "", "\t", "\r\n"];

fn token_soup() -> impl Strategy<Value = String> {
    prop::collection::vec((prop::sample::select(VOCABULARY), prop::sample::select(SEPARATORS)), 0..120)
        .prop_map(|tokens| tokens.into_iter().flat_map(|(t, s)| [t, s]).collect())
}

/// A crude lexer for mutations: words, numbers, strings, comments, and single symbols, with
/// the blanks between them kept as separate pieces.
fn pieces(text: &str) -> Vec<String> {
    let mut out = vec![];
    let chars: Vec<char> = text.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let start = i;
        if c.is_whitespace() {
            while i < chars.len() && chars[i].is_whitespace() {
                i += 1;
            }
        } else if c.is_alphanumeric() || c == '_' {
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_' || chars[i] == '.') {
                i += 1;
            }
        } else if c == '/' && chars.get(i + 1) == Some(&'/') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '"' {
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                i += 1;
            }
            i = (i + 1).min(chars.len());
        } else {
            i += 1;
        }
        out.push(chars[start..i].iter().collect());
    }
    out
}

#[derive(Debug, Clone)]
enum Mutation {
    Delete(usize),
    Insert(usize, &'static str),
    Swap(usize, usize),
    Duplicate(usize),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        any::<usize>().prop_map(Mutation::Delete),
        (any::<usize>(), prop::sample::select(VOCABULARY)).prop_map(|(i, t)| Mutation::Insert(i, t)),
        (any::<usize>(), any::<usize>()).prop_map(|(i, j)| Mutation::Swap(i, j)),
        any::<usize>().prop_map(Mutation::Duplicate),
    ]
}

fn mutate(text: &str, mutations: &[Mutation]) -> String {
    let mut p = pieces(text);
    for m in mutations {
        let n = p.len().max(1);
        match *m {
            Mutation::Delete(i) if !p.is_empty() => {
                p.remove(i % n);
            }
            Mutation::Insert(i, t) => p.insert(i % (p.len() + 1), format!(" {t} ")),
            Mutation::Swap(i, j) if !p.is_empty() => p.swap(i % n, j % n),
            Mutation::Duplicate(i) if !p.is_empty() => {
                let t = p[i % n].clone();
                p.insert(i % n, t);
            }
            _ => {}
        }
    }
    p.concat()
}

#[test]
fn the_seed_specs_check() {
    for (name, text) in [("assoc_small", SMALL), ("rich", RICH)] {
        let spec = lang::parse_str("spec.mem", text).unwrap_or_else(|e| panic!("{name}: {}", e.render(false)));
        if let Err(d) = check::check(&spec, &memctl::prims::Primitives) {
            panic!("{name}: {}", d.render(&spec.sources, false));
        }
        // The lexer used for mutations loses nothing.
        assert_eq!(pieces(text).concat(), text);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1000, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn random_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..600)) {
        parse_and_check(&String::from_utf8_lossy(&bytes))?;
    }

    #[test]
    fn random_text_never_panics(text in "\\PC{0,300}") {
        parse_and_check(&text)?;
    }

    #[test]
    fn token_soups_never_panic(text in token_soup()) {
        parse_and_check(&text)?;
    }

    #[test]
    fn token_soups_inside_a_step_never_panic(text in token_soup()) {
        let spec = format!(
            "task t = assocRetrieval(pairs = 2)\nmodel m(d = 8, g = true) {{ state M = zeros(d, d)\n \
             step x {{ e = embed(x, 8)\n{text}\n out linear(e, output_size) }} }}\n\
             experiment ex {{ task t  model m }}\n"
        );
        parse_and_check(&spec)?;
    }

    #[test]
    fn mutated_small_spec_never_panics(mutations in prop::collection::vec(mutation(), 1..4)) {
        parse_and_check(&mutate(SMALL, &mutations))?;
    }

    #[test]
    fn mutated_rich_spec_never_panics(mutations in prop::collection::vec(mutation(), 1..4)) {
        parse_and_check(&mutate(RICH, &mutations))?;
    }
}
