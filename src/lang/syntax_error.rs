//! pest's parse errors, reworded for people: rule names become words ("a name", "an
//! expression"), the expected tokens are listed once and briefly, and the span points at what
//! was found.
//!
//! Where: pest reports the furthest position a *rule* was tried; when a literal token (`=`,
//! `*/`) was tried further on, that is where the text went wrong. What was expected there is
//! computed by parsing the text up to that point again: the parse then fails at its end, and
//! everything it tried there is exactly what may come next.

use std::collections::BTreeSet;

use pest::Parser;
use pest::error::{ErrorVariant, InputLocation};

use super::error_kind::SpecErrorKind;
use super::parser::{Brackets, MemParser, Rule};
use crate::diag::Diagnostic;
use crate::source::{FileId, Span, floor_char_boundary};

/// What a rule is called in an error message.
pub fn rule_name(rule: Rule) -> &'static str {
    match rule {
        Rule::EOI => "end of file",
        Rule::file | Rule::item | Rule::use_decl | Rule::model_def | Rule::task_def | Rule::experiment_def => {
            "`model`, `task`, `experiment` or `use`"
        }
        Rule::param_list => "`(`",
        Rule::param => "a parameter",
        Rule::type_name => "a type (`int`, `float`, `bool` or `str`)",
        Rule::model_item => "`state` or `step`",
        Rule::state_decl | Rule::kw_state => "`state`",
        Rule::step_def | Rule::kw_step => "`step`",
        Rule::block => "`{`",
        Rule::stmt | Rule::if_stmt | Rule::out_stmt | Rule::assign => "a statement",
        Rule::exp_entry => "`task`, `model`, `train`, `sweep` or `search`",
        Rule::exp_task | Rule::kw_task => "`task`",
        Rule::exp_model | Rule::kw_model => "`model`",
        Rule::train_block | Rule::kw_train => "`train`",
        Rule::sweep_block | Rule::kw_sweep => "`sweep`",
        Rule::search_block | Rule::kw_search => "`search`",
        Rule::search_entry => "a search entry (`name ~ distribution(…)`, `name in [values]` or `setting = value`)",
        Rule::setting => "a setting `name = value`",
        Rule::sweep_axis | Rule::sweep_entry => "a sweep axis `name in [values]`",
        Rule::zip_group | Rule::kw_zip => "`zip`",
        Rule::random_group | Rule::kw_random => "`random`",
        Rule::draw => "a draw `name ~ distribution(…)`",
        Rule::expr_only => "an expression",
        Rule::expr | Rule::primary | Rule::prefix | Rule::call | Rule::list | Rule::paren => "an expression",
        Rule::arg => "an argument",
        Rule::number => "a number",
        Rule::string => "a string",
        // `lang::version`'s rules, which accept any text (never in an error).
        Rule::tokens | Rule::token | Rule::word | Rule::symbol => "a token",
        Rule::boolean => "`true` or `false`",
        Rule::ident | Rule::keyword | Rule::ident_char => "a name",
        Rule::kw_if => "`if`",
        Rule::kw_else => "`else`",
        Rule::kw_out => "`out`",
        Rule::kw_in => "`in`",
        Rule::kw_use => "`use`",
        Rule::kw_experiment => "`experiment`",
        Rule::infix
        | Rule::op_range
        | Rule::op_or
        | Rule::op_and
        | Rule::op_eq
        | Rule::op_ne
        | Rule::op_le
        | Rule::op_ge
        | Rule::op_lt
        | Rule::op_gt
        | Rule::op_add
        | Rule::op_sub
        | Rule::op_mul
        | Rule::op_div
        | Rule::op_hadamard
        | Rule::op_outer
        | Rule::op_matmul => "an operator",
        Rule::op_neg | Rule::op_not => "an expression",
        Rule::WHITESPACE | Rule::COMMENT => "a blank",
    }
}

/// Words that cannot be names.
const KEYWORDS: &[&str] = &["if", "else", "out", "state", "step", "true", "false", "and", "or", "not", "in"];

/// Converts a pest error into a located diagnostic.
pub fn convert(file: FileId, text: &str, err: pest::error::Error<Rule>) -> Diagnostic {
    let located = match err.location {
        InputLocation::Pos(p) => p,
        InputLocation::Span((s, _)) => s,
    };
    let attempts = Attempts::of(&err);
    let mut pos = located;
    if let Some(a) = &attempts
        && a.max_position > pos
        && a.tokens.iter().any(|t| literal(t).is_some())
    {
        pos = a.max_position;
    }
    let pos = floor_char_boundary(text, pos.min(text.len()));
    if let Some(d) = unclosed(file, text, pos) {
        return d;
    }

    let raw = expected_at(text, pos).unwrap_or_else(|| {
        let positives = match &err.variant {
            ErrorVariant::ParsingError { positives, .. } if located == pos => positives.clone(),
            _ => vec![],
        };
        expected_from(&positives, attempts.as_ref(), pos)
    });
    let expected = collapse(&raw);

    let found = found_token(text, pos);
    let label = match &found {
        Some(tok) if tok.chars().all(|c| c.is_control()) => {
            format!("unexpected control character U+{:04X}", tok.chars().next().map_or(0, u32::from))
        }
        Some(tok) => format!("unexpected `{tok}`"),
        None => "unexpected end of file".to_string(),
    };
    let end = pos + found.as_ref().map_or(0, |t| t.len());
    let mut d = SpecErrorKind::Syntax { expected: join_or(&expected) }.error().at(Span::new(file, pos, end), label);
    match unclosed_bracket(text, pos, &raw, found.as_deref()) {
        Some((open, what)) => {
            d = d.also(Span::new(file, open, open + 1), format!("this `{what}` is not closed"));
        }
        None => {
            if let Some(hint) = hint_for(text, pos, found.as_deref(), &raw) {
                d = d.hint(hint);
            }
        }
    }
    d
}

/// Texts longer than this are not parsed a second time for an error message: the first parse's
/// own account of what it expected is used (a little less complete, but free).
const MAX_REPARSE: usize = 1 << 20;

/// Everything the grammar allows at `pos`: the rules and literal tokens tried when the text up
/// to `pos` is parsed alone (`None` if that parse does not fail exactly there).
fn expected_at(text: &str, pos: usize) -> Option<BTreeSet<String>> {
    if pos > MAX_REPARSE {
        return None;
    }
    let err = MemParser::parse(Rule::file, &text[..pos]).err()?;
    let located = match err.location {
        InputLocation::Pos(p) => p,
        InputLocation::Span((s, _)) => s,
    };
    let positives = match &err.variant {
        ErrorVariant::ParsingError { positives, .. } if located == pos => positives.clone(),
        _ => vec![],
    };
    let set = expected_from(&positives, Attempts::of(&err).as_ref(), pos);
    (!set.is_empty()).then_some(set)
}

/// The literal tokens pest tried at the furthest position it reached.
struct Attempts {
    max_position: usize,
    /// As pest displays them: the literal itself, `a..z` for a range, `BUILTIN_RULE`.
    tokens: Vec<String>,
}

impl Attempts {
    fn of(err: &pest::error::Error<Rule>) -> Option<Attempts> {
        err.parse_attempts().map(|a| Attempts {
            max_position: a.max_position,
            tokens: a.expected_tokens().iter().map(|t| t.to_string()).collect(),
        })
    }
}

fn expected_from(positives: &[Rule], attempts: Option<&Attempts>, pos: usize) -> BTreeSet<String> {
    let mut expected: BTreeSet<String> = BTreeSet::new();
    for &r in positives {
        if r != Rule::WHITESPACE && r != Rule::COMMENT {
            expected.insert(rule_name(r).to_string());
        }
    }
    if let Some(a) = attempts.filter(|a| a.max_position == pos) {
        for t in &a.tokens {
            if let Some(l) = literal(t) {
                expected.insert(l);
            }
        }
    }
    expected
}

/// A literal token worth naming on its own: punctuation such as `=`, `{`, `,` or `*/`. Words,
/// operators, blanks and the pieces of names, numbers, strings and comments are left out: they
/// appear through their rules ("a name", "an operator"), or not at all.
/// Ranges (`a..z`) and built-in rules start with a letter or digit and are left out too.
fn literal(token: &str) -> Option<String> {
    let t = token.trim();
    let skip = t.is_empty()
        || t.starts_with(|c: char| c.is_alphanumeric())
        || matches!(t, "_" | "\"" | "." | ";" | "//" | "/*")
        || is_operator(t);
    (!skip).then(|| format!("`{t}`"))
}

fn is_operator(t: &str) -> bool {
    matches!(t, ".." | "==" | "!=" | "<=" | ">=" | "<" | ">" | "+" | "-" | "*" | "/" | "⊙" | "⊗" | "@")
}

/// Shortens the list: "an expression" stands for the names, numbers, brackets and prefix
/// operators that start one; "a statement" for `if`, `out` and a name in a block.
fn collapse(raw: &BTreeSet<String>) -> BTreeSet<String> {
    let mut set = raw.clone();
    let has = |s: &BTreeSet<String>, x: &str| s.contains(x);
    if has(&set, "an argument") {
        set.remove("an expression");
    }
    if has(&set, "an expression") || has(&set, "an argument") {
        for x in ["a name", "a number", "a string", "`true` or `false`", "`(`", "`[`", "`-`"] {
            set.remove(x);
        }
    }
    if has(&set, "an operator") {
        // After an operand: `(` would make it a call, which "an operator" does not suggest.
        set.remove("`(`");
    }
    if has(&set, "`if`") && has(&set, "`out`") {
        for x in ["`if`", "`out`", "a name"] {
            set.remove(x);
        }
        set.insert("a statement".to_string());
    }
    if has(&set, "`model`, `task`, `experiment` or `use`") {
        for x in ["`model`", "`task`", "`experiment`", "`use`"] {
            set.remove(x);
        }
    }
    if has(&set, "`task`, `model`, `train` or `sweep`") {
        for x in ["`model`", "`task`", "`train`", "`sweep`"] {
            set.remove(x);
        }
    }
    if has(&set, "`state` or `step`") {
        for x in ["`state`", "`step`"] {
            set.remove(x);
        }
    }
    if has(&set, "`*/`") {
        set.retain(|x| x == "`*/`");
    }
    set
}

/// An unclosed string or block comment at `pos`, reported as such.
fn unclosed(file: FileId, text: &str, pos: usize) -> Option<Diagnostic> {
    let rest = &text[pos..];
    if rest.starts_with('"') {
        let line = rest.split('\n').next().unwrap_or(rest);
        if !line[1..].contains('"') {
            return Some(
                SpecErrorKind::UnclosedString
                    .error()
                    .at(Span::new(file, pos, pos + 1), "this string is not closed on its line")
                    .hint("strings start and end with `\"` on the same line"),
            );
        }
    }
    // A `/*` with no `*/` after it: pest fails at the end of the text, or at the `/*` itself.
    let comment_start = if rest.starts_with("/*") && !rest.contains("*/") {
        Some(pos)
    } else if pos == text.len() {
        open_comment(text)
    } else {
        None
    };
    comment_start.map(|at| {
        SpecErrorKind::UnclosedComment
            .error()
            .at(Span::new(file, at, at + 2), "this comment is not closed")
            .hint("block comments end with `*/`")
    })
}

/// The start of a `/*` comment that runs to the end of the text, outside strings and `//` comments.
fn open_comment(text: &str) -> Option<usize> {
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'/' if bytes.get(i + 1) == Some(&b'/') => {
                while i < bytes.len() && bytes[i] != b'\n' {
                    i += 1;
                }
            }
            b'/' if bytes.get(i + 1) == Some(&b'*') => match text[i + 2..].find("*/") {
                Some(k) => i += 2 + k + 1,
                None => return Some(i),
            },
            b'"' => {
                i += 1;
                while i < bytes.len() && bytes[i] != b'"' && bytes[i] != b'\n' {
                    i += 1;
                }
            }
            _ => {}
        }
        i += 1;
    }
    None
}

/// The opening bracket left unclosed at `pos`, when a closing one is expected there but the
/// text ends or closes another bracket.
fn unclosed_bracket(text: &str, pos: usize, raw: &BTreeSet<String>, found: Option<&str>) -> Option<(usize, char)> {
    let mut stack: Vec<(usize, u8)> = vec![];
    for (i, b) in Brackets::new(&text[..pos]) {
        match b {
            b'(' | b'[' | b'{' => stack.push((i, b)),
            _ => {
                stack.pop();
            }
        }
    }
    let &(open, b) = stack.last()?;
    let (open_c, close) = match b {
        b'(' => ('(', "`)`"),
        b'[' => ('[', "`]`"),
        _ => ('{', "`}`"),
    };
    let closes_other = matches!(found, None | Some(")" | "]" | "}")) && found != Some(&close[1..2]);
    (raw.contains(close) && closes_other).then_some((open, open_c))
}

/// The token at `pos`: a word, a number, or a single character. At most 40 characters.
fn found_token(text: &str, pos: usize) -> Option<String> {
    let rest = &text[pos..];
    let first = rest.chars().next()?;
    let word = |c: char| c.is_alphanumeric() || c == '_';
    let mut tok: String =
        if word(first) { rest.chars().take_while(|c| word(*c)).take(40).collect() } else { first.to_string() };
    // `0.1`: the digits after a decimal point belong to the number.
    if first.is_ascii_digit() && tok.len() < 40 {
        let after = &rest[tok.len()..];
        if after.starts_with('.') && after[1..].starts_with(|c: char| c.is_ascii_digit()) {
            tok.push('.');
            tok.extend(after[1..].chars().take_while(|c| word(*c)).take(40 - tok.len()));
        }
    }
    Some(tok)
}

/// Whether every bracket before `pos` is closed.
fn brackets_balanced(text: &str, pos: usize) -> bool {
    let mut depth = 0usize;
    for (_, b) in Brackets::new(&text[..pos]) {
        match b {
            b'(' | b'[' | b'{' => depth += 1,
            _ => depth = depth.saturating_sub(1),
        }
    }
    depth == 0
}

fn join_or(items: &BTreeSet<String>) -> String {
    let v: Vec<&str> = items.iter().map(String::as_str).collect();
    match v.len() {
        0 => "something else".to_string(),
        1 => v[0].to_string(),
        n => format!("{} or {}", v[..n - 1].join(", "), v[n - 1]),
    }
}

fn hint_for(text: &str, pos: usize, found: Option<&str>, raw: &BTreeSet<String>) -> Option<String> {
    let expects = |s: &str| raw.contains(s);
    let before = text[..pos].trim_end();
    let previous_word: &str = {
        let start = before
            .char_indices()
            .rev()
            .find(|(_, c)| !(c.is_alphanumeric() || *c == '_'))
            .map_or(0, |(i, c)| i + c.len_utf8());
        &before[start..]
    };
    match found {
        None if expects("`}`") => Some("a `{` is not closed".to_string()),
        None if expects("`)`") => Some("a `(` is not closed".to_string()),
        None if expects("`]`") => Some("a `[` is not closed".to_string()),
        Some("else") if !expects("`else`") => Some("`else` must follow the `}` of an `if` block".to_string()),
        Some(c @ (")" | "]" | "}")) if brackets_balanced(text, pos) => {
            let open = match c {
                ")" => "(",
                "]" => "[",
                _ => "{",
            };
            Some(format!("this `{c}` has no matching `{open}`"))
        }
        Some(k) if KEYWORDS.contains(&k) && expects("a name") => {
            Some(format!("`{k}` is a keyword and cannot be used as a name"))
        }
        Some("=") if previous_word == "state" => Some("a state is declared as `state NAME = zeros(…)`".to_string()),
        Some("=") if KEYWORDS.contains(&previous_word) => {
            Some(format!("`{previous_word}` is a keyword and cannot be used as a name"))
        }
        Some("=") if expects("a statement") || expects("`if`") => {
            Some("the left side of `=` must be a name".to_string())
        }
        Some(".") if before.ends_with(|c: char| c.is_ascii_digit()) && pos == before.len() => {
            Some("write numbers as `1.5`, `0.5` or `1e-3`".to_string())
        }
        Some(".") => {
            Some("`.` appears only in numbers (`1.5`) and ranges (`1..3`); names cannot contain it".to_string())
        }
        Some(w) if w.starts_with(|c: char| c.is_alphabetic()) && closest_word(w, raw).is_some() => {
            closest_word(w, raw).map(|k| format!("did you mean `{k}`?"))
        }
        Some(c) if c.chars().all(char::is_control) => {
            Some("remove it: outside strings and comments only printable text is allowed".to_string())
        }
        Some(c) if c.chars().next().is_some_and(|c| !c.is_ascii() && c != '⊗' && c != '⊙') => {
            Some("outside comments and strings only ASCII is allowed, and the operators ⊗ ⊙".to_string())
        }
        _ => None,
    }
}

/// The keyword among the expected ones (`state`, `in` ...) that `word` is probably a typo of.
fn closest_word<'a>(word: &str, raw: &'a BTreeSet<String>) -> Option<&'a str> {
    let keywords = raw
        .iter()
        .filter_map(|e| e.strip_prefix('`')?.strip_suffix('`'))
        .filter(|k| k.chars().all(|c| c.is_ascii_alphabetic()));
    crate::suggest::closest(word, keywords).filter(|k| *k != word)
}
