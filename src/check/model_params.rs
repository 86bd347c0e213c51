//! A model's parameter list: kinds, defaults (which may use earlier parameters), and the
//! values of one trial.

use std::collections::BTreeMap;

use super::consteval;
use super::error_kind::CheckErrorKind;
use crate::diag::Diagnostic;
use crate::lang::ast::{self, TypeName};
use crate::source::Span;
use crate::value::{Kind, Value};

/// Names every model reads from its task (`elaborate`): a parameter of that name would be
/// swept and recorded but never read.
pub const RESERVED: [&str; 2] = ["input_size", "output_size"];

pub struct ParamEntry<'a> {
    pub name: &'a str,
    pub span: Span,
    pub kind: Kind,
    pub default: Option<&'a ast::Expr>,
}

/// Checks a model's parameter list: unique names, a type or a default each, defaults of the
/// declared type.
pub fn table(model: &ast::Model) -> Result<Vec<ParamEntry<'_>>, Diagnostic> {
    let mut entries: Vec<ParamEntry> = vec![];
    let mut defaults: BTreeMap<String, Value> = BTreeMap::new();
    for p in &model.params {
        if let Some(prev) = entries.iter().find(|e| e.name == p.name.name) {
            return Err(CheckErrorKind::ParamDefinedTwice { name: p.name.name.clone() }
                .error()
                .at(p.name.span, "second definition")
                .also(prev.span, "first definition"));
        }
        if RESERVED.contains(&p.name.name.as_str()) {
            return Err(CheckErrorKind::ParamReserved { name: p.name.name.clone() }
                .error()
                .at(p.name.span, "set by the task")
                .hint(format!("every model reads `{}` as the task gives it: remove it here", p.name.name)));
        }
        let declared = p.ty.map(|(t, s)| (kind_of(t), s));
        let default_value = match &p.default {
            Some(e) => {
                let names: Vec<&str> = defaults.keys().map(String::as_str).collect();
                Some(consteval::eval(e, &|n| defaults.get(n).cloned(), &names)?)
            }
            None => None,
        };
        let kind = match (declared, &default_value) {
            (Some((k, _)), Some(v)) => {
                let coerced = v.coerce(k).ok_or_else(|| {
                    CheckErrorKind::ParamDefault { name: p.name.name.clone(), declared: k, found: v.clone() }
                        .error()
                        .at(p.default.as_ref().map_or(p.name.span, |e| e.span), format!("not {}", k.with_article()))
                })?;
                defaults.insert(p.name.name.clone(), coerced);
                k
            }
            (Some((k, _)), None) => k,
            (None, Some(v)) => {
                defaults.insert(p.name.name.clone(), v.clone());
                v.kind()
            }
            (None, None) => {
                return Err(CheckErrorKind::ParamUntyped { name: p.name.name.clone() }
                    .error()
                    .at(p.name.span, "type unknown")
                    .hint(format!("write `{0}: int` or `{0} = 32`", p.name.name)));
            }
        };
        entries.push(ParamEntry { name: &p.name.name, span: p.name.span, kind, default: p.default.as_ref() });
    }
    Ok(entries)
}

fn kind_of(t: TypeName) -> Kind {
    match t {
        TypeName::Int => Kind::Int,
        TypeName::Float => Kind::Float,
        TypeName::Bool => Kind::Bool,
        TypeName::Str => Kind::Str,
    }
}

/// Every parameter's value for one trial: `given` (overrides and sweeps, with where they were
/// written) over defaults. `used_at` locates "needs a value" errors.
pub fn resolve(
    model: &ast::Model,
    entries: &[ParamEntry],
    given: &BTreeMap<String, (Value, Span)>,
    used_at: Span,
) -> Result<BTreeMap<String, Value>, Diagnostic> {
    let mut values: BTreeMap<String, Value> = BTreeMap::new();
    for e in entries {
        let value = match given.get(e.name) {
            Some((v, span)) => v.coerce(e.kind).ok_or_else(|| {
                CheckErrorKind::ParamGiven {
                    name: e.name.to_string(),
                    model: model.name.name.clone(),
                    expected: e.kind,
                    found: v.clone(),
                }
                .error()
                .at(*span, format!("expected {}", e.kind.with_article()))
                .also(e.span, "declared here")
            })?,
            None => match e.default {
                Some(expr) => {
                    let names: Vec<&str> = values.keys().map(String::as_str).collect();
                    let v = consteval::eval(expr, &|n| values.get(n).cloned(), &names)?;
                    v.coerce(e.kind).ok_or_else(|| {
                        CheckErrorKind::ParamDefaultKind {
                            name: e.name.to_string(),
                            found: v.clone(),
                            expected: e.kind,
                        }
                        .error()
                        .at(expr.span, "here")
                    })?
                }
                None => {
                    return Err(CheckErrorKind::ParamMissing {
                        model: model.name.name.clone(),
                        name: e.name.to_string(),
                    }
                    .error()
                    .at(used_at, format!("`{}` not given", e.name))
                    .also(e.span, "declared without a default")
                    .hint(format!("write `model {}({} = …)` or sweep it", model.name.name, e.name)));
                }
            },
        };
        values.insert(e.name.to_string(), value);
    }
    Ok(values)
}
