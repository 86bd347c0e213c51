//! Evaluating a checked filter on one run.
//!
//! A test on a field the run does not have is false, and so is a comparison between values of
//! different kinds; `not` turns either into true. Numbers compare numerically (ints and floats
//! alike), strings in byte order, dates by time; booleans and lists only with `==` and `!=`.

use std::cmp::Ordering;

use super::ast::{CmpOp, Lit};
use super::compile::{Arg, Query};
use super::fields::Val;
use crate::store::RunSummary;

impl Query {
    pub fn matches(&self, s: &RunSummary) -> bool {
        match self {
            Query::Or(parts) => parts.iter().any(|p| p.matches(s)),
            Query::And(parts) => parts.iter().all(|p| p.matches(s)),
            Query::Not(inner) => !inner.matches(s),
            Query::Truthy(a) => matches!(value(a, s), Some(Val::Bool(true))),
            Query::Compare(a, op, b) => match (value(a, s), value(b, s)) {
                (Some(x), Some(y)) => compare(&x, *op, &y),
                _ => false,
            },
            Query::In { item, set, negated } => {
                let found = match (value(item, s), value(set, s)) {
                    (Some(x), Some(Val::List(items))) => items.iter().any(|y| compare(&x, CmpOp::Eq, y)),
                    (Some(Val::Str(x)), Some(Val::Str(y))) => y.contains(x),
                    _ => return false,
                };
                found != *negated
            }
        }
    }
}

fn value<'a>(a: &'a Arg, s: &'a RunSummary) -> Option<Val<'a>> {
    match a {
        Arg::Field(f) => f.get(s),
        Arg::Lit(l) => Some(lit(l)),
        Arg::List(items) => Some(Val::List(items.iter().map(lit).collect())),
    }
}

fn lit(l: &Lit) -> Val<'_> {
    match l {
        Lit::Num(x) => Val::Num(*x),
        Lit::Int(i) => Val::Int(*i),
        Lit::Str(s) => Val::Str(s),
        Lit::Bool(b) => Val::Bool(*b),
        Lit::Date(start, length) => Val::Period(*start, start + length),
    }
}

/// `a op b`; false when the kinds cannot be compared. NaN compares as unequal to every
/// number, itself included, so that `x != y` is always `not x == y`.
pub fn compare(a: &Val, op: CmpOp, b: &Val) -> bool {
    // A time (or a number of Unix seconds) against a period (`started <= 2025-01-31`): all of
    // the period counts as one time. Two periods compare by their starts.
    match (a, b) {
        (Val::Period(..), Val::Period(..)) => {}
        (Val::Num(_) | Val::Int(_) | Val::Date(_), &Val::Period(start, end)) => {
            let t = a.as_f64().unwrap_or_default();
            return match op {
                CmpOp::Eq => (start..end).contains(&t),
                CmpOp::Ne => !(start..end).contains(&t),
                CmpOp::Lt => t < start,
                CmpOp::Le => t < end,
                CmpOp::Gt => t >= end,
                CmpOp::Ge => t >= start,
                CmpOp::Glob => false,
            };
        }
        (Val::Period(..), Val::Num(_) | Val::Int(_) | Val::Date(_)) => return compare(b, op.flipped(), a),
        _ => {}
    }
    let ord = match (a, b) {
        (Val::Int(x), Val::Int(y)) => Some(x.cmp(y)),
        (
            Val::Num(_) | Val::Int(_) | Val::Date(_) | Val::Period(..),
            Val::Num(_) | Val::Int(_) | Val::Date(_) | Val::Period(..),
        ) => match a.as_f64().partial_cmp(&b.as_f64()) {
            Some(ord) => Some(ord),
            None => return op == CmpOp::Ne,
        },
        (Val::Str(x), Val::Str(y)) => {
            if op == CmpOp::Glob {
                return glob(y, x);
            }
            Some(x.cmp(y))
        }
        (Val::Bool(_), Val::Bool(_)) | (Val::List(_), Val::List(_)) => {
            return match op {
                CmpOp::Eq => list_eq(a, b),
                CmpOp::Ne => !list_eq(a, b),
                _ => false,
            };
        }
        _ => None,
    };
    let Some(ord) = ord else { return false };
    match op {
        CmpOp::Eq => ord == Ordering::Equal,
        CmpOp::Ne => ord != Ordering::Equal,
        CmpOp::Lt => ord == Ordering::Less,
        CmpOp::Le => ord != Ordering::Greater,
        CmpOp::Gt => ord == Ordering::Greater,
        CmpOp::Ge => ord != Ordering::Less,
        CmpOp::Glob => false,
    }
}

/// Equality of booleans and lists (element by element); other kinds go through [`compare`].
fn list_eq(a: &Val, b: &Val) -> bool {
    match (a, b) {
        (Val::Bool(x), Val::Bool(y)) => x == y,
        (Val::List(x), Val::List(y)) => x.len() == y.len() && x.iter().zip(y).all(|(p, q)| list_eq(p, q)),
        (Val::List(_) | Val::Bool(_), _) | (_, Val::List(_) | Val::Bool(_)) => false,
        _ => compare(a, CmpOp::Eq, b),
    }
}

/// `*` matches any run of characters, `?` one character; everything else itself.
pub fn glob(pattern: &str, text: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    // Iterative matching with one backtrack point (the last `*`).
    let (mut i, mut j) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while j < t.len() {
        if i < p.len() && (p[i] == '?' || p[i] == t[j]) {
            i += 1;
            j += 1;
        } else if i < p.len() && p[i] == '*' {
            star = Some((i, j));
            i += 1;
        } else if let Some((si, sj)) = star {
            i = si + 1;
            j = sj + 1;
            star = Some((si, sj + 1));
        } else {
            return false;
        }
    }
    while i < p.len() && p[i] == '*' {
        i += 1;
    }
    i == p.len()
}
