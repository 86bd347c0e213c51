//! Checking a parsed filter against the runs in the store, and resolving its field names.
//!
//! Errors are located in the filter text: a field no run has (with "did you mean"), a value of
//! the wrong kind (`d == "48"` where `d` is a number), an order on booleans, `in` with no list.

use std::collections::BTreeSet;

use super::ast::{CmpOp, Filter, Lit, Operand, OperandKind, TestKind};
use super::error_kind::QueryErrorKind;
use super::fields::{self, Field, Kind};
use crate::diag::Diagnostic;
use crate::source::Span;
use crate::store::RunSummary;
use crate::suggest::did_you_mean;

/// A checked filter, ready to evaluate.
#[derive(Clone, Debug, PartialEq)]
pub enum Query {
    Or(Vec<Query>),
    And(Vec<Query>),
    Not(Box<Query>),
    Truthy(Arg),
    Compare(Arg, CmpOp, Arg),
    In { item: Arg, set: Arg, negated: bool },
}

#[derive(Clone, Debug, PartialEq)]
pub enum Arg {
    Field(Field),
    Lit(Lit),
    List(Vec<Lit>),
}

const STATUSES: &[&str] = &["running", "done", "failed", "interrupted", "pruned"];

/// Checks `filter` against `runs` (the whole store: a name is unknown only if no run has it).
pub fn compile(filter: &Filter, runs: &[RunSummary]) -> Result<Query, Diagnostic> {
    let cx = Cx { runs, names: fields::names(runs) };
    cx.filter(filter)
}

struct Cx<'a> {
    runs: &'a [RunSummary],
    names: BTreeSet<String>,
}

/// An operand with what is known about it.
struct Checked {
    arg: Arg,
    /// Kinds the operand can have (a field: those seen in the store).
    kinds: BTreeSet<Kind>,
    span: Span,
    /// The field's name as written.
    name: Option<String>,
}

impl Cx<'_> {
    /// Recursive, as is [`Query::matches`]: the parser bounds the tree's depth
    /// ([`MAX_NESTING`](super::limits::MAX_NESTING)).
    fn filter(&self, f: &Filter) -> Result<Query, Diagnostic> {
        Ok(match f {
            Filter::Or(parts) => Query::Or(parts.iter().map(|p| self.filter(p)).collect::<Result<_, _>>()?),
            Filter::And(parts) => Query::And(parts.iter().map(|p| self.filter(p)).collect::<Result<_, _>>()?),
            Filter::Not(inner) => Query::Not(Box::new(self.filter(inner)?)),
            Filter::Test(t) => match &t.kind {
                TestKind::Truthy(o) => {
                    let c = self.operand(o, None)?;
                    if !c.kinds.contains(&Kind::Bool) {
                        let what = c.name.as_deref().map_or("this value".to_string(), |n| format!("`{n}`"));
                        let kind = c.kinds.iter().next().map_or("a value", |k| k.noun());
                        return Err(QueryErrorKind::NotATest { what, kind }.error().at(c.span, "not a test").hint(
                            format!(
                                "compare it, e.g. `{} == …`, or combine tests with `and` / `or`",
                                c.name.as_deref().unwrap_or("field")
                            ),
                        ));
                    }
                    Query::Truthy(c.arg)
                }
                TestKind::Compare(a, op, b) => {
                    let a = self.operand(a, None)?;
                    let b = self.operand(b, a.name.as_deref())?;
                    let (a, b) = self.compatible(a, *op, b)?;
                    Query::Compare(a.arg, *op, b.arg)
                }
                TestKind::In { item, set, negated } => {
                    let item = self.operand(item, None)?;
                    let spans: Vec<Span> = match &set.kind {
                        OperandKind::List(items) => items.iter().map(|(_, s)| *s).collect(),
                        _ => vec![],
                    };
                    let set = self.operand(set, item.name.as_deref())?;
                    let set = self.membership(&item, set, &spans)?;
                    Query::In { item: item.arg, set: set.arg, negated: *negated }
                }
            },
        })
    }

    /// Resolves an operand. `lhs` names the field on the other side (for the "quote it" hint
    /// when a bare word on the right is meant as text).
    fn operand(&self, o: &Operand, lhs: Option<&str>) -> Result<Checked, Diagnostic> {
        Ok(match &o.kind {
            OperandKind::Lit(l) => {
                Checked { arg: Arg::Lit(l.clone()), kinds: [lit_kind(l)].into(), span: o.span, name: None }
            }
            OperandKind::List(items) => Checked {
                arg: Arg::List(items.iter().map(|(l, _)| l.clone()).collect()),
                kinds: [Kind::List].into(),
                span: o.span,
                name: None,
            },
            OperandKind::Field(name) => {
                let Some(field) = Field::parse(name) else {
                    let ns = name.split('.').next().unwrap_or_default();
                    return Err(QueryErrorKind::UnknownNamespace { namespace: ns.to_string() }
                        .error()
                        .at(o.span, "not a field")
                        .hint("namespaces: `param.`, `task.`, `train.`, `metric.`"));
                };
                let mut kinds = fields::kinds(&field, self.runs);
                if kinds.is_empty() && self.runs.is_empty() {
                    // An empty store: anything goes (and nothing matches).
                    kinds = [Kind::Num, Kind::Str, Kind::Bool, Kind::Date, Kind::List].into();
                }
                if kinds.is_empty() {
                    let mut d =
                        QueryErrorKind::UnknownField { name: name.to_string() }.error().at(o.span, "unknown field");
                    if let Some(h) = did_you_mean(name, self.names.iter().map(String::as_str)) {
                        d = d.hint(h);
                    }
                    if let Some(lhs) = lhs {
                        d = d.hint(format!("to compare `{lhs}` with the text {name}, quote it: \"{name}\""));
                    } else if !name.contains('.') {
                        d = d.hint(
                            "fields: id, status, experiment, model, seed, tags, started, steps_to_converge, …, \
                             the model's parameters, task options, train settings and final metrics",
                        );
                    }
                    return Err(d);
                }
                Checked { arg: Arg::Field(field), kinds, span: o.span, name: Some(name.clone()) }
            }
        })
    }

    /// Checks that `a op b` can hold for some run; strings compared with dates become dates.
    fn compatible(&self, mut a: Checked, op: CmpOp, mut b: Checked) -> Result<(Checked, Checked), Diagnostic> {
        if op == CmpOp::Glob {
            for c in [&a, &b] {
                if !c.kinds.contains(&Kind::Str) {
                    return Err(QueryErrorKind::MatchNeedsStrings
                        .error()
                        .at(c.span, format!("{}, not a string", nouns(&c.kinds))));
                }
            }
        }
        // Field against literal: check (and convert) the literal.
        if let (Some(name), Arg::Lit(l)) = (a.name.clone(), &mut b.arg) {
            check_lit(&name, &a, l, b.span)?;
            b.kinds = [lit_kind(l)].into();
        } else if let (Arg::Lit(l), Some(name)) = (&mut a.arg, b.name.clone()) {
            check_lit(&name, &b, l, a.span)?;
            a.kinds = [lit_kind(l)].into();
        }
        let common: BTreeSet<Kind> =
            a.kinds.iter().copied().filter(|k| b.kinds.iter().any(|m| comparable(*k, *m))).collect();
        if common.is_empty() {
            let what = |c: &Checked| match (&c.name, &c.arg) {
                (Some(n), _) => format!("`{n}` ({})", nouns(&c.kinds)),
                (None, Arg::Lit(l)) => l.describe(),
                _ => "a list".to_string(),
            };
            return Err(QueryErrorKind::Incomparable { a: what(&a), b: what(&b) }
                .error()
                .at(b.span, nouns(&b.kinds))
                .also(a.span, nouns(&a.kinds)));
        }
        if op.is_ordering() && common.iter().all(|k| matches!(k, Kind::Bool | Kind::List)) {
            let c = if a.name.is_some() { &a } else { &b };
            return Err(QueryErrorKind::OrderingNeedsOrdered { op: op.symbol() }
                .error()
                .at(c.span, nouns(&c.kinds))
                .hint("compare booleans and lists with `==` or `!=`"));
        }
        Ok((a, b))
    }

    /// `item in set`: the set is a list literal, a list field (`tags`), or a string (substring).
    fn membership(&self, item: &Checked, mut set: Checked, spans: &[Span]) -> Result<Checked, Diagnostic> {
        match &mut set.arg {
            Arg::List(items) => {
                if let Some(name) = &item.name {
                    for (l, span) in items.iter_mut().zip(spans) {
                        check_lit(name, item, l, *span)?;
                    }
                }
            }
            _ if set.kinds.contains(&Kind::List) => {}
            _ if set.kinds.contains(&Kind::Str) && item.kinds.contains(&Kind::Str) => {}
            _ => {
                return Err(QueryErrorKind::InNeedsList
                    .error()
                    .at(set.span, format!("{}, not a list", nouns(&set.kinds)))
                    .hint("e.g. `d in [48, 96]` or `\"ablation\" in tags`"));
            }
        }
        Ok(set)
    }
}

/// Checks a literal compared with field `name`: dates parse, statuses exist, kinds match.
fn check_lit(name: &str, field: &Checked, lit: &mut Lit, span: Span) -> Result<(), Diagnostic> {
    if let Lit::Str(s) = &*lit {
        if field.kinds.contains(&Kind::Date) {
            match super::parser::parse_date(s) {
                Some((start, length)) => *lit = Lit::Date(start, length),
                None => {
                    return Err(QueryErrorKind::NotADate { field: name.to_string(), text: s.clone() }
                        .error()
                        .at(span, "not a date")
                        .hint("write a date as 2025-01-31 or 2025-01-31T14:05 (UTC)"));
                }
            }
            return Ok(());
        }
        if field.arg == Arg::Field(Field::Status) && !STATUSES.contains(&s.as_str()) {
            let mut d = QueryErrorKind::UnknownStatus { status: s.clone() }.error().at(span, "unknown status");
            d = match did_you_mean(s, STATUSES.iter().copied()) {
                Some(h) => d.hint(h),
                None => d.hint(format!(
                    "statuses: {}",
                    STATUSES.iter().map(|s| format!("\"{s}\"")).collect::<Vec<_>>().join(", ")
                )),
            };
            return Err(d);
        }
    }
    let k = lit_kind(lit);
    if field.kinds.iter().any(|f| comparable(*f, k)) {
        return Ok(());
    }
    let mut d =
        QueryErrorKind::LiteralKind { field: name.to_string(), kinds: nouns(&field.kinds), literal: lit.describe() }
            .error()
            .at(span, k.noun())
            .also(field.span, nouns(&field.kinds));
    d = match lit {
        Lit::Str(s) if s.parse::<f64>().is_ok() && field.kinds.contains(&Kind::Num) => {
            d.hint(format!("write the number without quotes: {s}"))
        }
        Lit::Str(s) if (s == "true" || s == "false") && field.kinds.contains(&Kind::Bool) => {
            d.hint(format!("write the boolean without quotes: {s}"))
        }
        Lit::Num(x) if field.kinds.contains(&Kind::Str) => d.hint(format!("quote the text: \"{x}\"")),
        Lit::Int(i) if field.kinds.contains(&Kind::Str) => d.hint(format!("quote the text: \"{i}\"")),
        Lit::Bool(b) if field.kinds.contains(&Kind::Str) => d.hint(format!("quote the text: \"{b}\"")),
        _ => d,
    };
    Err(d)
}

/// Kinds that can be compared: equal ones, and numbers with dates (Unix seconds).
fn comparable(a: Kind, b: Kind) -> bool {
    a == b || matches!((a, b), (Kind::Num, Kind::Date) | (Kind::Date, Kind::Num))
}

/// "a number", "a number or a string".
fn nouns(kinds: &BTreeSet<Kind>) -> String {
    let v: Vec<&str> = kinds.iter().map(|k| k.noun()).collect();
    if v.is_empty() { "missing".to_string() } else { v.join(" or ") }
}

fn lit_kind(l: &Lit) -> Kind {
    match l {
        Lit::Num(_) | Lit::Int(_) => Kind::Num,
        Lit::Str(_) => Kind::Str,
        Lit::Bool(_) => Kind::Bool,
        Lit::Date(..) => Kind::Date,
    }
}
