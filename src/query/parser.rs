//! Filter text to [`Filter`]: the pest grammar in `grammar/query.pest`, then a walk over its
//! pairs. Syntax errors become located [`Diagnostic`]s in the caller's pseudo-file.

use std::collections::BTreeSet;

use pest::Parser;
use pest::error::{ErrorVariant, InputLocation};
use pest::iterators::Pair;

use super::ast::*;
use super::error_kind::QueryErrorKind;
use super::limits::MAX_NESTING;
use crate::diag::Diagnostic;
use crate::source::{FileId, Span, floor_char_boundary};

#[derive(pest_derive::Parser)]
#[grammar = "../grammar/query.pest"]
struct QueryParser;

/// Parses a filter; spans are byte offsets into `text` in `file`.
pub fn parse(file: FileId, text: &str) -> Result<Filter, Diagnostic> {
    check_nesting(file, text)?;
    pest::set_error_detail(true);
    let mut pairs = QueryParser::parse(Rule::query, text).map_err(|e| syntax_error(file, text, e))?;
    let b = Builder { file };
    let top = pairs.next().ok_or_else(|| b.bug(0))?;
    let disjunction = top.into_inner().next().ok_or_else(|| b.bug(0))?;
    b.disjunction(disjunction, 0)
}

/// Rejects bracket nesting deeper than [`MAX_NESTING`] before pest's recursive descent sees it
/// (a chain of `not`s is flat in the grammar and is counted while building the tree).
fn check_nesting(file: FileId, text: &str) -> Result<(), Diagnostic> {
    let mut depth = 0usize;
    let mut quote: Option<char> = None;
    for (i, c) in text.char_indices() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '"' | '\'') => quote = Some(c),
            (None, '(' | '[') => {
                depth += 1;
                if depth > MAX_NESTING {
                    return Err(too_deep(Span::new(file, i, i + 1)));
                }
            }
            (None, ')' | ']') => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    Ok(())
}

fn too_deep(span: Span) -> Diagnostic {
    QueryErrorKind::TooDeep.error().at(span, "too deep")
}

/// Builds the tree; every method takes `depth`, the brackets and `not`s around its part.
struct Builder {
    file: FileId,
}

impl Builder {
    fn span(&self, p: &Pair<Rule>) -> Span {
        Span::new(self.file, p.as_span().start(), p.as_span().end())
    }

    /// A parse tree the grammar rules out: a bug in memctl, reported instead of a panic.
    fn bug(&self, at: usize) -> Diagnostic {
        QueryErrorKind::Internal.error().at(Span::new(self.file, at, at), "here")
    }

    fn disjunction(&self, p: Pair<Rule>, depth: usize) -> Result<Filter, Diagnostic> {
        self.joined(p, depth, Rule::conjunction, Self::conjunction, Filter::Or)
    }

    fn conjunction(&self, p: Pair<Rule>, depth: usize) -> Result<Filter, Diagnostic> {
        self.joined(p, depth, Rule::negation, Self::negation, Filter::And)
    }

    /// The `part` children of `p` joined by `join` (a single part stands alone).
    fn joined(
        &self,
        p: Pair<Rule>,
        depth: usize,
        part: Rule,
        parse: fn(&Self, Pair<Rule>, usize) -> Result<Filter, Diagnostic>,
        join: fn(Vec<Filter>) -> Filter,
    ) -> Result<Filter, Diagnostic> {
        let mut parts = p
            .into_inner()
            .filter(|c| c.as_rule() == part)
            .map(|c| parse(self, c, depth))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(if parts.len() == 1 { parts.remove(0) } else { join(parts) })
    }

    fn negation(&self, p: Pair<Rule>, depth: usize) -> Result<Filter, Diagnostic> {
        let at = p.as_span().start();
        let mut nots = 0;
        let mut inner = None;
        for c in p.into_inner() {
            match c.as_rule() {
                Rule::kw_not => {
                    nots += 1;
                    if depth + nots > MAX_NESTING {
                        return Err(too_deep(self.span(&c)).hint("`not not x` is `x`: drop the `not`s in pairs"));
                    }
                }
                Rule::group => {
                    // The `(`: its nesting within brackets alone was checked before parsing.
                    let open = Span::new(self.file, c.as_span().start(), c.as_span().start() + 1);
                    if depth + nots + 1 > MAX_NESTING {
                        return Err(too_deep(open));
                    }
                    let d = c.into_inner().next().ok_or_else(|| self.bug(at))?;
                    inner = Some(self.disjunction(d, depth + nots + 1)?);
                }
                Rule::test => inner = Some(Filter::Test(self.test(c)?)),
                _ => return Err(self.bug(at)),
            }
        }
        let mut f = inner.ok_or_else(|| self.bug(at))?;
        for _ in 0..nots {
            f = Filter::Not(Box::new(f));
        }
        Ok(f)
    }

    fn test(&self, p: Pair<Rule>) -> Result<Test, Diagnostic> {
        let span = self.span(&p);
        let mut it = p.into_inner();
        let first = self.operand(it.next().ok_or_else(|| self.bug(span.start))?)?;
        let kind = match it.next() {
            None => TestKind::Truthy(first),
            Some(op) if op.as_rule() == Rule::cmp_op => {
                let op = match op.as_str() {
                    "==" => CmpOp::Eq,
                    "!=" => CmpOp::Ne,
                    "<" => CmpOp::Lt,
                    "<=" => CmpOp::Le,
                    ">" => CmpOp::Gt,
                    ">=" => CmpOp::Ge,
                    "~" => CmpOp::Glob,
                    _ => return Err(self.bug(span.start)),
                };
                let rhs = self.operand(it.next().ok_or_else(|| self.bug(span.start))?)?;
                TestKind::Compare(first, op, rhs)
            }
            Some(kw) => {
                let negated = kw.as_rule() == Rule::kw_not;
                if negated {
                    it.next().ok_or_else(|| self.bug(span.start))?;
                }
                let set = self.operand(it.next().ok_or_else(|| self.bug(span.start))?)?;
                TestKind::In { item: first, set, negated }
            }
        };
        Ok(Test { kind, span })
    }

    fn operand(&self, p: Pair<Rule>) -> Result<Operand, Diagnostic> {
        let span = self.span(&p);
        let kind = match p.as_rule() {
            Rule::field => OperandKind::Field(p.as_str().to_string()),
            Rule::list => {
                let mut items = vec![];
                for c in p.into_inner() {
                    let s = self.span(&c);
                    items.push((self.lit(c)?, s));
                }
                OperandKind::List(items)
            }
            _ => OperandKind::Lit(self.lit(p)?),
        };
        Ok(Operand { kind, span })
    }

    fn lit(&self, p: Pair<Rule>) -> Result<Lit, Diagnostic> {
        let span = self.span(&p);
        let s = p.as_str();
        Ok(match p.as_rule() {
            // A whole number stays exact (seeds past 2^53); one too large for that is a float.
            Rule::number if !s.contains(['.', 'e', 'E']) && s.parse::<i128>().is_ok() => {
                Lit::Int(s.parse::<i128>().unwrap_or_default())
            }
            Rule::number => match s.parse::<f64>() {
                Ok(x) if x.is_finite() => Lit::Num(x),
                _ => {
                    return Err(QueryErrorKind::OutOfRange { text: s.to_string() }
                        .error()
                        .at(span, "not a finite number"));
                }
            },
            Rule::string => Lit::Str(s[1..s.len() - 1].to_string()),
            Rule::boolean => Lit::Bool(s == "true"),
            Rule::date => {
                let (start, length) = parse_date(s).ok_or_else(|| {
                    QueryErrorKind::BadDate { text: s.to_string() }.error().at(span, "no such day or time")
                })?;
                Lit::Date(start, length)
            }
            _ => return Err(self.bug(span.start)),
        })
    }
}

/// `YYYY-MM-DD[THH:MM[:SS]]` (UTC) to Unix seconds; `None` for a day or time that does not exist.
pub fn parse_date(s: &str) -> Option<(f64, f64)> {
    // Digits where the form has them and its separators elsewhere: a quoted date is not
    // checked by the grammar (`'2026x12y01'`, `'+026-12-01'` are no dates).
    const FORM: &[u8] = b"dddd-dd-ddTdd:dd:dd";
    let fits =
        s.len() <= FORM.len() && s.bytes().zip(FORM).all(|(c, &f)| if f == b'd' { c.is_ascii_digit() } else { c == f });
    if !fits {
        return None;
    }
    let num = |r: std::ops::Range<usize>| s.get(r)?.parse::<i64>().ok();
    let (y, m, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (hh, mm, ss, length) = match s.len() {
        10 => (0, 0, 0, 86400.0),
        16 => (num(11..13)?, num(14..16)?, 0, 60.0),
        19 => (num(11..13)?, num(14..16)?, num(17..19)?, 1.0),
        _ => return None,
    };
    let leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    let month_days = [31, if leap { 29 } else { 28 }, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
    if !(1..=12).contains(&m) || d < 1 || d > month_days[(m - 1) as usize] || hh > 23 || mm > 59 || ss > 59 {
        return None;
    }
    Some(((days_from_civil(y, m, d) * 86400 + hh * 3600 + mm * 60 + ss) as f64, length))
}

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146097 + doe - 719468
}

/// What a rule is called in an error message.
fn rule_name(rule: Rule) -> &'static str {
    match rule {
        Rule::EOI => "end of the filter",
        Rule::kw_and | Rule::kw_or => "`and` or `or`",
        Rule::kw_not => "`not`",
        Rule::kw_in => "`in`",
        Rule::cmp_op => "a comparison (`==`, `!=`, `<`, `<=`, `>`, `>=`, `~`)",
        Rule::query | Rule::disjunction | Rule::conjunction | Rule::negation | Rule::group | Rule::test => {
            "a test such as `accuracy > 0.9`"
        }
        Rule::operand => "a field name or a value",
        Rule::scalar => "a value",
        Rule::list => "a list `[…]`",
        Rule::date => "a date",
        Rule::number => "a number",
        Rule::string => "a string",
        Rule::boolean => "`true` or `false`",
        Rule::field | Rule::name | Rule::keyword | Rule::ident_char => "a field name",
        Rule::WHITESPACE => "a blank",
    }
}

fn syntax_error(file: FileId, text: &str, err: pest::error::Error<Rule>) -> Diagnostic {
    let pos = match err.location {
        InputLocation::Pos(p) => p,
        InputLocation::Span((s, _)) => s,
    };
    let mut pos = floor_char_boundary(text, pos.min(text.len()));
    let mut expected: BTreeSet<&str> = BTreeSet::new();
    if let ErrorVariant::ParsingError { positives, .. } = &err.variant {
        for &r in positives {
            if r != Rule::WHITESPACE {
                expected.insert(rule_name(r));
            }
        }
    }
    if let Some(attempts) = err.parse_attempts() {
        let closing: BTreeSet<&str> = attempts
            .expected_tokens()
            .iter()
            .filter_map(|t| match t.to_string().trim() {
                ")" => Some("`)`"),
                "]" => Some("`]`"),
                "," => Some("`,`"),
                _ => None,
            })
            .collect();
        // pest places the error where the last atomic rule it tried began (a date, at the `2`
        // of `[1, 2`), though it read further and wanted a `,` or `]` there: that is the place.
        let further = attempts.max_position > pos && attempts.max_position <= text.len() && !closing.is_empty();
        if further {
            pos = floor_char_boundary(text, attempts.max_position);
            expected.clear();
        }
        if further || attempts.max_position == pos {
            expected.extend(closing);
        }
    }
    let rest = &text[pos..];
    let found: Option<String> = rest.chars().next().map(|first| {
        if first.is_alphanumeric() || first == '_' {
            rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').take(40).collect()
        } else if "=!<>~&|".contains(first) {
            rest.chars().take_while(|c| "=!<>~&|".contains(*c)).take(2).collect()
        } else {
            first.to_string()
        }
    });
    let label = match &found {
        Some(tok) => format!("unexpected `{tok}`"),
        None => "unexpected end of the filter".to_string(),
    };
    let end = pos + found.as_ref().map_or(0, |t| t.len());
    let list: Vec<&str> = expected.into_iter().collect();
    let expected_text = match list.len() {
        0 => "something else".to_string(),
        1 => list[0].to_string(),
        n => format!("{} or {}", list[..n - 1].join(", "), list[n - 1]),
    };
    let mut d = QueryErrorKind::Syntax { expected: expected_text }.error().at(Span::new(file, pos, end), label);
    let hint = match found.as_deref() {
        Some("=") => Some("compare with `==`"),
        Some("&&" | "&") => Some("combine tests with `and`"),
        Some("||" | "|") => Some("combine tests with `or`"),
        Some("!") => Some("negate a test with `not`"),
        Some("and" | "or" | "not" | "in" | "true" | "false") if list.contains(&"a field name") => {
            Some("this word is part of the filter language; quote it to mean the text")
        }
        None if list.contains(&"`)`") => Some("a `(` is not closed"),
        None if list.contains(&"`]`") => Some("a `[` is not closed"),
        _ => None,
    };
    if let Some(h) = hint {
        d = d.hint(h);
    }
    d
}
