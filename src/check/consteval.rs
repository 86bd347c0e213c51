//! Evaluation of expressions whose value is known before anything runs: parameter defaults,
//! overrides, options, settings and sweep values.

use super::error_kind::CheckErrorKind;
use super::limits::MAX_RANGE;
use crate::diag::Diagnostic;
use crate::lang::ast::{BinaryOp, Expr, ExprKind, UnaryOp};
use crate::source::Span;
use crate::value::{Kind, Value};

/// Evaluates `expr`; `lookup` resolves names; `names` lists them for suggestions.
pub fn eval(expr: &Expr, lookup: &dyn Fn(&str) -> Option<Value>, names: &[&str]) -> Result<Value, Diagnostic> {
    match &expr.kind {
        ExprKind::Int(i) => Ok(Value::Int(*i)),
        ExprKind::Float(f) => Ok(Value::Float(*f)),
        ExprKind::Bool(b) => Ok(Value::Bool(*b)),
        ExprKind::Str(s) => Ok(Value::Str(s.clone())),
        ExprKind::Name(n) => lookup(n).ok_or_else(|| unknown_name(n, expr.span, names)),
        ExprKind::List(items) => {
            Ok(Value::List(items.iter().map(|e| eval(e, lookup, names)).collect::<Result<_, _>>()?))
        }
        ExprKind::Unary(op, x) => unary(*op, eval(x, lookup, names)?, expr.span),
        ExprKind::Binary(op, a, b) => {
            let x = eval(a, lookup, names).map_err(|d| equals_hint(d, *op, a))?;
            binary(*op, x, eval(b, lookup, names)?, a.span, b.span)
        }
        ExprKind::Call(c) if VALUE_FUNCTIONS.contains(&c.callee.name.as_str()) => spaced(c, lookup, names),
        ExprKind::Call(c) => Err(CheckErrorKind::CallNotAValue { callee: c.callee.name.clone() }
            .error()
            .at(c.span, "a call is not a value")
            .hint("primitives are called inside a model's `step`; here a number, bool, string or list is expected")),
    }
}

/// Functions that compute lists of values (for sweeps).
pub const VALUE_FUNCTIONS: &[&str] = &["linspace", "logspace"];

/// `linspace(a, b, n)`: `n` evenly spaced floats from `a` to `b` inclusive;
/// `logspace(a, b, n)`: `n` floats from `a` to `b` inclusive, evenly spaced in log scale.
fn spaced(
    c: &crate::lang::ast::Call,
    lookup: &dyn Fn(&str) -> Option<Value>,
    names: &[&str],
) -> Result<Value, Diagnostic> {
    let name = c.callee.name.as_str();
    let usage = || {
        CheckErrorKind::SpaceArguments { function: name.to_string() }
            .error()
            .at(c.span, "bad arguments")
            .hint(format!("e.g. `{name}(1e-4, 1e-2, 3)`"))
    };
    let [a, b, n] = &c.args[..] else { return Err(usage()) };
    if a.name.is_some() || b.name.is_some() || n.name.is_some() {
        return Err(usage());
    }
    let (Some(lo), Some(hi)) = (eval(&a.value, lookup, names)?.as_float(), eval(&b.value, lookup, names)?.as_float())
    else {
        return Err(usage());
    };
    let count = match eval(&n.value, lookup, names)? {
        Value::Int(k) if (1..=MAX_RANGE).contains(&k) => k as usize,
        v => {
            return Err(CheckErrorKind::SpaceCount { found: v }.error().at(n.value.span, "bad count"));
        }
    };
    if name == "logspace" && (lo <= 0.0 || hi <= 0.0) {
        return Err(CheckErrorKind::LogspaceBounds.error().at(c.span, "not positive"));
    }
    let at = |i: usize| -> f64 {
        let f = if count == 1 { 0.0 } else { i as f64 / (count - 1) as f64 };
        if name == "logspace" { (lo.ln() + f * (hi.ln() - lo.ln())).exp() } else { lo + f * (hi - lo) }
    };
    // Twelve significant digits: logspace(1e-3, 1e-1, 3) gives 0.1, not 0.10000000000000006.
    let round = |x: f64| format!("{x:.11e}").parse::<f64>().unwrap_or(x);
    Ok(Value::List((0..count).map(|i| Value::Float(round(at(i)))).collect()))
}

/// `pairs == 3` with an unknown `pairs` was probably meant as `pairs = 3`.
pub fn equals_hint(d: Diagnostic, op: BinaryOp, lhs: &Expr) -> Diagnostic {
    match (&lhs.kind, op) {
        (ExprKind::Name(n), BinaryOp::Eq) if d.message == format!("unknown name `{n}`") => {
            d.hint(format!("to give argument `{n}`, write `{n} = …` with a single `=`"))
        }
        _ => d,
    }
}

pub fn unknown_name(name: &str, span: Span, names: &[&str]) -> Diagnostic {
    let mut d = CheckErrorKind::UnknownName { name: name.to_string() }.error().at(span, "not defined here");
    if let Some(h) = crate::suggest::did_you_mean(name, names.iter().copied()) {
        d = d.hint(h);
    }
    d
}

pub fn unary(op: UnaryOp, v: Value, span: Span) -> Result<Value, Diagnostic> {
    match (op, &v) {
        (UnaryOp::Neg, Value::Int(i)) => i.checked_neg().map(Value::Int).ok_or_else(|| overflow(span)),
        (UnaryOp::Neg, Value::Float(f)) => Ok(Value::Float(-f)),
        (UnaryOp::Not, Value::Bool(b)) => Ok(Value::Bool(!b)),
        (UnaryOp::Neg, _) => Err(type_error("`-` needs a number", &v, span)),
        (UnaryOp::Not, _) => Err(type_error("`not` needs a bool", &v, span)),
    }
}

fn overflow(span: Span) -> Diagnostic {
    CheckErrorKind::IntegerOverflow.error().at(span, "the result does not fit in 64 bits")
}

fn type_error(what: &str, v: &Value, span: Span) -> Diagnostic {
    CheckErrorKind::WrongKind { needs: what.to_string(), found: v.clone() }
        .error()
        .at(span, format!("this is {}", v.kind().with_article()))
}

/// Applies a binary operator to two values.
pub fn binary(op: BinaryOp, a: Value, b: Value, sa: Span, sb: Span) -> Result<Value, Diagnostic> {
    use BinaryOp::*;
    let span = sa.to(sb);
    match op {
        Range => {
            let (Value::Int(lo), Value::Int(hi)) = (&a, &b) else {
                let (bad, s) = if a.kind() != Kind::Int { (&a, sa) } else { (&b, sb) };
                return Err(type_error("ranges `a..b` need integers", bad, s));
            };
            if hi < lo {
                return Err(CheckErrorKind::EmptyRange { lo: *lo, hi: *hi }
                    .error()
                    .at(span, "the end is before the start")
                    .hint("ranges include both ends: `1..3` is 1, 2, 3"));
            }
            if hi.checked_sub(*lo).is_none_or(|n| n >= MAX_RANGE) {
                return Err(CheckErrorKind::RangeTooLong { lo: *lo, hi: *hi }.error().at(span, "too long"));
            }
            Ok(Value::List((*lo..=*hi).map(Value::Int).collect()))
        }
        Or | And => match (&a, &b) {
            (Value::Bool(x), Value::Bool(y)) => Ok(Value::Bool(if op == Or { *x || *y } else { *x && *y })),
            _ => {
                let (bad, s) = if a.kind() != Kind::Bool { (&a, sa) } else { (&b, sb) };
                Err(type_error(&format!("`{}` needs bools", op.symbol()), bad, s))
            }
        },
        Eq | Ne => {
            let equal = match (a.as_float(), b.as_float()) {
                (Some(x), Some(y)) => x == y,
                _ if a.kind() == b.kind() => a == b,
                _ => {
                    return Err(CheckErrorKind::Incomparable { a: a.clone(), b: b.clone() }
                        .error()
                        .at(span, "different kinds"));
                }
            };
            Ok(Value::Bool(equal == (op == Eq)))
        }
        Lt | Le | Gt | Ge => {
            let (Some(x), Some(y)) = (a.as_float(), b.as_float()) else {
                let (bad, s) = if a.as_float().is_none() { (&a, sa) } else { (&b, sb) };
                return Err(type_error(&format!("`{}` compares numbers", op.symbol()), bad, s));
            };
            Ok(Value::Bool(match op {
                Lt => x < y,
                Le => x <= y,
                Gt => x > y,
                _ => x >= y,
            }))
        }
        Add | Sub | Mul | Div | Hadamard => arithmetic(op, &a, &b, sa, sb),
        Outer | MatMul => Err(CheckErrorKind::TensorOperatorOnNumbers { op: op.symbol() }
            .error()
            .at(span, "both sides are known before the model runs")),
    }
}

fn arithmetic(op: BinaryOp, a: &Value, b: &Value, sa: Span, sb: Span) -> Result<Value, Diagnostic> {
    let span = sa.to(sb);
    match (a, b) {
        (Value::Int(x), Value::Int(y)) => {
            let r = match op {
                BinaryOp::Add => x.checked_add(*y),
                BinaryOp::Sub => x.checked_sub(*y),
                BinaryOp::Mul | BinaryOp::Hadamard => x.checked_mul(*y),
                _ => {
                    if *y == 0 {
                        return Err(CheckErrorKind::DivisionByZero.error().at(sb, "this is 0"));
                    }
                    // `checked_rem` and `checked_div`: the smallest integer divided by -1 overflows.
                    if x.checked_rem(*y).is_some_and(|r| r != 0) {
                        return Err(CheckErrorKind::NotWhole { x: *x, y: *y }
                            .error()
                            .at(span, "integer division must be exact")
                            .hint("write a float (e.g. `1.0 * a / b`) for a fractional result"));
                    }
                    x.checked_div(*y)
                }
            };
            r.map(Value::Int).ok_or_else(|| overflow(span))
        }
        _ => {
            let (Some(x), Some(y)) = (a.as_float(), b.as_float()) else {
                let (bad, s) = if a.as_float().is_none() { (a, sa) } else { (b, sb) };
                return Err(type_error(&format!("`{}` needs numbers", op.symbol()), bad, s));
            };
            let r = match op {
                BinaryOp::Add => x + y,
                BinaryOp::Sub => x - y,
                BinaryOp::Mul | BinaryOp::Hadamard => x * y,
                _ => {
                    if y == 0.0 {
                        return Err(CheckErrorKind::DivisionByZero.error().at(sb, "this is 0"));
                    }
                    x / y
                }
            };
            Ok(Value::Float(r))
        }
    }
}
