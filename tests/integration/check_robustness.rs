//! Hostile input: whatever the bytes, parsing and checking end in success or in located
//! errors, never in a panic or a stack overflow. Every test runs on a 2 MiB stack (the default
//! for test threads, set explicitly so that `RUST_MIN_STACK` cannot hide an overflow), and
//! long lines must not make the rendered diagnostics long.

use std::io::Write;
use std::path::Path;

use memctl::check;
use memctl::diag::Diagnostic;
use memctl::lang::{self, limits};
use memctl::source::SourceMap;

const STACK: usize = 2 << 20;

/// Runs `f` on a thread with a 2 MiB stack.
fn on_small_stack<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::Builder::new().stack_size(STACK).spawn(f).expect("spawn").join().expect("no panic")
}

/// The errors of a spec (none if it checks), after asserting that each is located inside its
/// file and renders to a short text.
fn errors(text: &str) -> Vec<Diagnostic> {
    match lang::parse_str("spec.mem", text) {
        Err(e) => located(&e.sources, e.diagnostics.0),
        Ok(spec) => match check::check(&spec, &memctl::prims::Primitives) {
            Err(ds) => located(&spec.sources, ds.0),
            Ok(_) => vec![],
        },
    }
}

fn located(sources: &SourceMap, diagnostics: Vec<Diagnostic>) -> Vec<Diagnostic> {
    assert!(!diagnostics.is_empty(), "an error without diagnostics");
    for d in &diagnostics {
        let primary = d.primary.as_ref().unwrap_or_else(|| panic!("`{}` has no location", d.message));
        let len = sources.get(primary.span.file).text.len();
        assert!(
            primary.span.start <= primary.span.end && primary.span.end <= len,
            "`{}`: span out of the file",
            d.message
        );
        let rendered = d.render(sources, false);
        assert!(rendered.len() < 4000, "`{}` renders to {} bytes", d.message, rendered.len());
    }
    diagnostics
}

/// The message of the only (first) error.
fn error(text: &str) -> String {
    errors(text).first().map(|d| d.message.clone()).unwrap_or_else(|| "no error".into())
}

/// A valid spec around one line of a step body.
fn step_line(line: &str) -> String {
    format!(
        "task t = assocRetrieval(pairs = 2)\nmodel m(d = 8, g = true) {{\n  step x {{\n    e = embed(x, 16)\n    \
         {line}\n    out linear(e, output_size)\n  }}\n}}\nexperiment ex {{ task t  model m }}\n"
    )
}

#[test]
fn empty_file_and_only_comments_check() {
    on_small_stack(|| {
        assert!(errors("").is_empty());
        assert!(errors("   \n\t\r\n").is_empty());
        assert!(errors("// nothing here\n/* nor\n here */ // really").is_empty());
    });
}

#[test]
fn invalid_utf8_is_a_located_error() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("junk.mem");
    let mut bytes = b"model m(d = 8) {}\n// caf".to_vec();
    bytes.extend([0xff, 0xfe, 0x00, 0xc3, 0x28, 0x80, 0x81]);
    bytes.extend(b"\nmore");
    std::fs::File::create(&path).and_then(|mut f| f.write_all(&bytes)).expect("write");
    let e = lang::load(&path).expect_err("an error");
    let d = &e.diagnostics.0[0];
    assert_eq!(d.message, "spec files must be UTF-8 text");
    let location = d.location(&e.sources).expect("located");
    assert!(location.ends_with("junk.mem:2:7"), "{location}");
    assert!(e.render(false).len() < 4000);
}

#[test]
fn a_byte_order_mark_is_not_text_and_an_endless_or_huge_file_is_refused_unread() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("bom.mem");
    std::fs::write(&path, b"\xEF\xBB\xBFmodel m(d = 8) {}\n").expect("write");
    lang::load(&path).unwrap_or_else(|e| panic!("{}", e.render(false)));

    // Read as a spec by mistake: a device without end, a file past the limit, each `use`d too.
    let big = dir.path().join("big.mem");
    std::fs::write(&big, format!("// {}\n", "x".repeat(limits::MAX_SPEC_BYTES as usize))).expect("write");
    for target in [Path::new("/dev/zero"), big.as_path()] {
        let e = lang::load(target).expect_err("refused");
        assert!(e.render(false).contains("error[S010]"), "{}", e.render(false));
        assert!(e.render(false).contains("is larger than 4 MiB"), "{}", e.render(false));
        let user = dir.path().join("user.mem");
        std::fs::write(&user, format!("use \"{}\"\n", target.display())).expect("write");
        let e = lang::load(&user).expect_err("refused");
        let d = &e.diagnostics.0[0];
        assert!(d.message.contains("larger than 4 MiB"), "{}", d.message);
        assert!(d.location(&e.sources).expect("located").ends_with("user.mem:1:1"), "{}", e.render(false));
    }
}

#[test]
fn binary_junk_and_nul_bytes_are_located_errors() {
    on_small_stack(|| {
        // Pseudo-random bytes made valid UTF-8: control characters, NULs, symbols, letters.
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let junk: String = (0..20_000)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                char::from_u32((x % 0x3000) as u32).unwrap_or('\u{fffd}')
            })
            .collect();
        assert!(error(&junk).starts_with("syntax error"));
        assert_eq!(error("\0\0\0"), "syntax error: expected `model`, `task`, `experiment` or `use`");
        assert!(error("model m(d = 8) {\0}").starts_with("syntax error"));
        // Inside comments and strings anything goes.
        assert!(errors("// \0 \u{1} \u{7f}\n/* \0 */").is_empty());
    });
}

#[test]
fn deep_brackets_are_refused_before_the_parser_recurses() {
    on_small_stack(|| {
        let too_deep = format!("brackets nested more than {} levels deep", limits::MAX_NESTING);
        for (open, close) in [('(', ')'), ('[', ']'), ('{', '}')] {
            let n = 100_000;
            let text = format!("model m(d = {}1{}) {{}}", open.to_string().repeat(n), close.to_string().repeat(n));
            assert_eq!(error(&text), too_deep);
            // Unclosed, at the top level and inside a step.
            assert_eq!(error(&open.to_string().repeat(n)), too_deep);
            assert_eq!(error(&step_line(&format!("h = {}", open.to_string().repeat(n)))), too_deep);
        }
        // Brackets in comments and strings do not count.
        let commented = format!(
            "// {}\n/* {} */\ntask t = assocRetrieval(name = \"{}\")",
            "(".repeat(1000),
            "[".repeat(1000),
            "{".repeat(1000)
        );
        assert!(!error(&commented).contains("nested"));
    });
}

#[test]
fn nesting_at_the_limit_parses_and_checks_on_a_small_stack() {
    on_small_stack(|| {
        let n = limits::MAX_NESTING - 2;
        // Parentheses, lists and calls, each nested as deep as allowed within `model m(...)`.
        let parens = format!("{}8{}", "(".repeat(n), ")".repeat(n));
        let spec = |d: &str| {
            format!(
                "task t = assocRetrieval(pairs = 2)\n\
                 model m(d = {d}) {{ step x {{ out linear(embed(x, 16), output_size) }} }}\n\
                 experiment ex {{ task t  model m }}"
            )
        };
        assert!(errors(&spec(&parens)).is_empty());
        let lists = format!("{}8{}", "[".repeat(n), "]".repeat(n));
        // `d` is a list here, unused by the step: the spec checks.
        assert!(errors(&spec(&lists)).is_empty());
        // Nested primitive calls inside a step.
        let calls = format!("h = {}e{}", "relu(".repeat(n - 4), ")".repeat(n - 4));
        assert!(errors(&step_line(&calls)).is_empty());
        // Nested `if` blocks.
        let ifs = format!("{} h = e {}", "if g { ".repeat(n - 4), "} ".repeat(n - 4));
        assert!(errors(&step_line(&ifs)).is_empty());
    });
}

#[test]
fn a_10_mb_line_gives_a_short_located_error() {
    on_small_stack(|| {
        let long = "a".repeat(10 << 20);
        // The error at the end of the line, at its start, and after a 10 MB comment line.
        let cases = [
            (step_line(&format!("h = {long} $")), "5:10485770"),
            (format!("$ {long}"), "1:1"),
            (format!("// {long}\nmodel m(d = 8) {{ step x {{ h = $ }} }}"), "2:31"),
            (format!("task t = assocRetrieval(name = \"{long})"), "1:32"),
        ];
        for (text, at) in cases {
            let (d, sources) = match lang::parse_str("spec.mem", &text) {
                Err(e) => (e.diagnostics.0[0].clone(), e.sources),
                Ok(_) => panic!("parsed"),
            };
            assert_eq!(d.location(&sources).as_deref(), Some(format!("spec.mem:{at}").as_str()));
            let rendered = d.render(&sources, false);
            assert!(rendered.len() < 2000, "the diagnostic is {} bytes long:\n{rendered}", rendered.len());
        }
    });
}

#[test]
fn checker_errors_in_huge_lines_and_spans_render_short() {
    on_small_stack(|| {
        // A shape error and its declaration, 2 MB apart on one line.
        let pad = " ".repeat(2 << 20);
        let text = format!(
            "task t = assocRetrieval(pairs = 2) model m(d = 8) {{ state M = zeros(d, d) step x {{ e = embed(x, 16)\
             {pad} M = linear(e, 3) {pad} out linear(e, output_size) }} }} experiment ex {{ task t  model m }}"
        );
        let ds = errors(&text);
        assert_eq!(ds[0].message, "state `M` has shape [8, 8], but is assigned a value of shape [3]");
        assert_eq!(ds[0].secondary.len(), 1);
        // A call spanning 20 000 lines.
        let call = format!("h = linear({}e)", "\n".repeat(20_000));
        assert_eq!(error(&step_line(&call)), "`linear` needs argument `size`");
    });
}

#[test]
fn absurd_sizes_are_located_errors() {
    on_small_stack(|| {
        assert_eq!(
            error(&step_line("a = linear(e, 16777216)  b = a ⊗ a")),
            "`outer` would give a tensor of shape [16777216, 16777216]: more than 2^28 elements per example"
        );
        assert_eq!(
            error(&step_line("b = mlp(e, [16777216, 16777216])")),
            "`mlp` would have a parameter `layer1.weight` of shape [16777216, 16777216]: more than 2^28 elements"
        );
        // Whatever a primitive makes of extreme sizes, the checker answers with located errors.
        for line in [
            "a = linear(e, 16384)  c = samRead(a ⊗ a, nq = 16777216)",
            "a = linear(e, 16384)  c = (a ⊗ a) @ (a ⊗ a)",
            "a = linear(e, 16384)  c = layerNorm(a ⊗ a)  s = softmax(a ⊗ a)",
            "a = linear(e, 16777216)  c = lstmCell(a, a, a)",
            "M2 = linear(e, 16384) ⊗ linear(e, 16384)  M2 = itemWrite(M2, linear(e, 16384))",
        ] {
            let _ = errors(&step_line(line));
        }
    });
}

#[test]
fn long_operator_and_prefix_chains_are_bounded() {
    on_small_stack(|| {
        let too_deep =
            format!("expression more than {} levels deep (each operator of a chain is one)", limits::MAX_EXPR_DEPTH);
        let plus = format!("h = e{}", " + e".repeat(100_000));
        assert_eq!(error(&step_line(&plus)), too_deep);
        let not = format!("model m(g = {}true) {{}}", "not ".repeat(100_000));
        assert_eq!(error(&not), too_deep);
        let neg = format!("model m(d = {}1) {{}}", "- ".repeat(100_000));
        assert_eq!(error(&neg), too_deep);
        // Depth counts across brackets: `((((1) + 1 + 1 + 1 + 1 + 1) + 1 ...` 50 levels deep.
        let nested = format!("model m(d = {}1{}) {{}}", "(".repeat(50), ") + 1 + 1 + 1 + 1 + 1".repeat(50));
        assert_eq!(error(&nested), too_deep);
        // Below the limit, chains check (and their trees drop) on the small stack.
        let sum = format!("h = e{}", " + e".repeat(150));
        assert!(errors(&step_line(&sum)).is_empty());
        let nots = format!("if {}g {{ h = e }}", "not not ".repeat(90));
        assert!(errors(&step_line(&nots)).is_empty());
    });
}

#[test]
fn long_else_if_chains_check() {
    on_small_stack(|| {
        let n = 10_000;
        let chain = format!("if d == 0 {{ h = e }}{} else {{ h = e }}", " else if d == 1 { h = e }".repeat(n));
        assert!(errors(&step_line(&chain)).is_empty());
        // An error in the last arm is still found and located.
        let bad =
            format!("if d == 0 {{ h = e }}{} else if d == 8 {{ h = nope }}", " else if d == 1 { h = e }".repeat(n));
        assert_eq!(error(&step_line(&bad)), "unknown name `nope`");
    });
}

#[test]
fn many_statements_and_items_check() {
    on_small_stack(|| {
        let body = "h = e\n    ".repeat(20_000);
        assert!(errors(&step_line(&body)).is_empty());
        let tasks: String = (0..5_000).map(|i| format!("task t{i} = assocRetrieval(pairs = 2)\n")).collect();
        assert!(errors(&tasks).is_empty());
    });
}

#[test]
fn odd_but_valid_text_checks() {
    on_small_stack(|| {
        // CRLF line ends, tabs, semicolons, trailing commas, comments everywhere.
        let text = "task t = assocRetrieval(pairs = 2,)\r\nmodel m(d = 8,) {\r\n\
                    \tstep x { /* in */ e = embed(x, 16); // c\r\n\tout linear(e, output_size,); }\r\n}\r\n\
                    experiment ex { task t  model m  train { steps = 5, } }\r\n";
        assert!(errors(text).is_empty(), "{:?}", errors(text));
    });
}

#[test]
fn huge_numbers_and_ranges_are_errors() {
    on_small_stack(|| {
        assert_eq!(error("model m(d = 1e999999999) {}"), "number out of range");
        assert_eq!(error("model m(d = 99999999999999999999999999) {}"), "number out of range");
        let wide = "task t = assocRetrieval(pairs = 2)\n\
                    model m(d = 8) { step x { out linear(embed(x, 16), output_size) } }\n\
                    experiment ex { task t  model m  sweep { seed in -9223372036854775807..9223372036854775807 } }";
        assert_eq!(error(wide), "range -9223372036854775807..9223372036854775807 has more than 100000 values");
        assert_eq!(error(&step_line("h = linear(e, 9223372036854775807 * 2)")), "integer overflow");
        assert_eq!(error(&step_line("h = linear(e, (-9223372036854775807 - 1) / -1)")), "integer overflow");
        let draws = |dist: &str| {
            format!(
                "task t = assocRetrieval(pairs = 2)
                 model m(d = 8) {{ step x {{ out linear(embed(x, 16), output_size) }} }}
                 experiment ex {{ task t  model m  sweep {{ random(3) {{ lr ~ {dist} }} }} }}"
            )
        };
        let not_finite = "the bounds, and the span between them, must be finite floats";
        assert_eq!(error(&draws("uniform(-1e308, 1e308)")), format!("`uniform`: {not_finite}"));
        assert_eq!(error(&draws("loguniform(1e-3, 1e309)")), "number out of range");
    });
}

#[test]
fn use_cycles_and_missing_files_are_handled() {
    let dir = tempfile::tempdir().expect("temp dir");
    let a = dir.path().join("a.mem");
    let b = dir.path().join("b.mem");
    std::fs::write(&a, "use \"b.mem\"\ntask t = assocRetrieval(pairs = 2)\n").expect("write");
    std::fs::write(&b, "use \"a.mem\"\nuse \"missing.mem\"\n").expect("write");
    let e = lang::load(&a).expect_err("an error");
    let d = &e.diagnostics.0[0];
    assert_eq!(
        d.message,
        "cannot read `missing.mem`: no such file"
            .replace("missing.mem", &dir.path().join("missing.mem").display().to_string())
    );
    assert!(d.location(&e.sources).is_some_and(|l| l.ends_with("b.mem:2:1")));
}
