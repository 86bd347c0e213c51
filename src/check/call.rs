//! Binding a call's positional and named arguments to a signature.

use super::error_kind::CheckErrorKind;
use crate::diag::Diagnostic;
use crate::lang::ast::{Call, Expr};
use crate::signature::{ArgKind, ArgSpec, Default};
use crate::value::{Kind, Value};

/// The expression given for each signature slot (`None`: not given, default applies).
/// Errors: too many positional arguments, unknown or repeated names, positional after
/// named, missing required arguments.
pub fn bind<'e>(what: &str, signature: &[ArgSpec], call: &'e Call) -> Result<Vec<Option<&'e Expr>>, Diagnostic> {
    let mut slots: Vec<Option<&Expr>> = vec![None; signature.len()];
    let mut seen_named = false;
    let mut positional = 0;
    for arg in &call.args {
        match &arg.name {
            None => {
                if seen_named {
                    return Err(CheckErrorKind::PositionalAfterNamed
                        .error()
                        .at(arg.value.span, "positional")
                        .hint("put positional arguments first, or name this one"));
                }
                if positional >= signature.len() {
                    return Err(CheckErrorKind::TooManyArguments {
                        callee: what.to_string(),
                        takes: signature.len(),
                        signature: signature_list(signature),
                        given: call.args.iter().filter(|a| a.name.is_none()).count(),
                    }
                    .error()
                    .at(arg.value.span, "extra argument"));
                }
                slots[positional] = Some(&arg.value);
                positional += 1;
            }
            Some(name) => {
                seen_named = true;
                let Some(i) = signature.iter().position(|s| s.name == name.name) else {
                    let mut d = CheckErrorKind::NoSuchArgument { callee: what.to_string(), arg: name.name.clone() }
                        .error()
                        .at(name.span, "unknown argument")
                        .hint(format!("its arguments are: {}", signature_list(signature)));
                    if let Some(h) = crate::suggest::did_you_mean(&name.name, signature.iter().map(|s| s.name)) {
                        d = d.hint(h);
                    }
                    return Err(d);
                };
                if slots[i].is_some() {
                    return Err(CheckErrorKind::ArgumentTwice { arg: name.name.clone() }
                        .error()
                        .at(name.span, "again here"));
                }
                slots[i] = Some(&arg.value);
            }
        }
    }
    for (spec, slot) in signature.iter().zip(&slots) {
        if slot.is_none() && spec.default == Default::Required {
            return Err(CheckErrorKind::MissingArgument { callee: what.to_string(), arg: spec.name }
                .error()
                .at(call.span, format!("`{}` missing", spec.name))
                .hint(format!("its arguments are: {}", signature_list(signature))));
        }
    }
    Ok(slots)
}

/// `x, size, bias = true`
pub fn signature_list(signature: &[ArgSpec]) -> String {
    signature
        .iter()
        .map(|s| match (s.kind, s.default.value()) {
            (_, Some(v)) => format!("{} = {v}", s.name),
            (ArgKind::Tensor, None) if s.default == Default::Absent => format!("{}?", s.name),
            _ => s.name.to_string(),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Checks that an argument's value has the kind the signature asks for (ints widen to floats).
pub fn coerce(what: &str, spec: &ArgSpec, kind: Kind, value: Value, expr: &Expr) -> Result<Value, Diagnostic> {
    value.coerce(kind).ok_or_else(|| {
        CheckErrorKind::ArgumentKind { callee: what.to_string(), arg: spec.name, expected: kind, found: value.clone() }
            .error()
            .at(expr.span, format!("expected {}", kind.with_article()))
    })
}
