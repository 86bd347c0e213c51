//! pest's parse errors, reworded for people: rule names become words ("a name", "an
//! expression"), the expected tokens are listed once, and the span points at what was found.

use std::collections::BTreeSet;

use pest::error::{ErrorVariant, InputLocation};

use super::parser::Rule;
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
        Rule::exp_entry => "`task`, `model`, `train` or `sweep`",
        Rule::exp_task | Rule::kw_task => "`task`",
        Rule::exp_model | Rule::kw_model => "`model`",
        Rule::train_block | Rule::kw_train => "`train`",
        Rule::sweep_block | Rule::kw_sweep => "`sweep`",
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

/// Converts a pest error into a located diagnostic.
pub fn convert(file: FileId, text: &str, err: pest::error::Error<Rule>) -> Diagnostic {
    let pos = match err.location {
        InputLocation::Pos(p) => p,
        InputLocation::Span((s, _)) => s,
    };
    let pos = floor_char_boundary(text, pos.min(text.len()));
    let mut expected: BTreeSet<String> = BTreeSet::new();
    if let ErrorVariant::ParsingError { positives, .. } = &err.variant {
        for &r in positives {
            if r != Rule::WHITESPACE && r != Rule::COMMENT {
                expected.insert(rule_name(r).to_string());
            }
        }
    }
    if let Some(attempts) = err.parse_attempts().filter(|a| a.max_position == pos) {
        add_literal_tokens(attempts.expected_tokens().iter().map(|t| t.to_string()), &mut expected);
    }
    let found = found_token(text, pos);
    let label = match &found {
        Some(tok) => format!("unexpected `{tok}`"),
        None => "unexpected end of file".to_string(),
    };
    let end = pos + found.as_ref().map_or(0, |t| t.len());
    let mut d = Diagnostic::error(format!("syntax error: expected {}", join_or(&expected)))
        .at(Span::new(file, pos, end), label);
    if let Some(hint) = hint_for(found.as_deref(), &expected) {
        d = d.hint(hint);
    }
    d
}

/// Literal tokens (`=`, `{`, `,` ...) pest tried at the error position. Words and operators
/// already appear through their rules.
fn add_literal_tokens(tokens: impl Iterator<Item = String>, expected: &mut BTreeSet<String>) {
    for token in tokens {
        let t = token.trim();
        if !t.is_empty() && !t.chars().next().is_some_and(|c| c.is_alphanumeric()) && !is_operator(t) {
            expected.insert(format!("`{t}`"));
        }
    }
}

/// Tokens already covered by a rule's word, or never worth suggesting (comment openers).
fn is_operator(t: &str) -> bool {
    matches!(
        t,
        ".." | "=="
            | "!="
            | "<="
            | ">="
            | "<"
            | ">"
            | "+"
            | "-"
            | "*"
            | "/"
            | "⊙"
            | "⊗"
            | "@"
            | "\""
            | "//"
            | "/*"
            | "_"
    )
}

/// The token at `pos`: a word, or a single symbol character. At most 40 characters.
fn found_token(text: &str, pos: usize) -> Option<String> {
    let rest = &text[pos..];
    let first = rest.chars().next()?;
    let tok: String = if first.is_alphanumeric() || first == '_' {
        rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').take(40).collect()
    } else {
        first.to_string()
    };
    Some(tok)
}

fn join_or(items: &BTreeSet<String>) -> String {
    let v: Vec<&str> = items.iter().map(String::as_str).collect();
    match v.len() {
        0 => "something else".to_string(),
        1 => v[0].to_string(),
        n => format!("{} or {}", v[..n - 1].join(", "), v[n - 1]),
    }
}

fn hint_for(found: Option<&str>, expected: &BTreeSet<String>) -> Option<String> {
    let expects = |s: &str| expected.iter().any(|e| e == s);
    match found {
        None if expects("`}`") => Some("a `{` is not closed".to_string()),
        None if expects("`)`") => Some("a `(` is not closed".to_string()),
        None if expects("`]`") => Some("a `[` is not closed".to_string()),
        Some(k @ ("if" | "else" | "out" | "state" | "step" | "true" | "false" | "and" | "or" | "not" | "in"))
            if expects("a name") =>
        {
            Some(format!("`{k}` is a keyword and cannot be used as a name"))
        }
        Some("=") if expects("a statement") => Some("the left side of `=` must be a name".to_string()),
        Some(c) if c.chars().next().is_some_and(|c| !c.is_ascii() && c != '⊗' && c != '⊙') => {
            Some("only ASCII names, numbers and the operators ⊗ ⊙ are allowed outside comments and strings".to_string())
        }
        _ => None,
    }
}
