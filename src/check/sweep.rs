//! Sweep blocks into groups of trial values: an axis (`d in [48, 96]`), a zip group (paired
//! lists), or a random group (`n` seeded draws). The trials of an experiment are the cartesian
//! product of its groups, the first group varying slowest.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::consteval;
use super::error_kind::CheckErrorKind;
use super::limits::MAX_DRAWS;
use super::search::Domain;
use crate::diag::Diagnostic;
use crate::lang::ast::{self, Ident, SweepEntry};
use crate::source::Span;
use crate::value::Value;

/// Columns (swept names) and rows (one value per column, with where it was written).
pub struct Group {
    pub names: Vec<Ident>,
    pub rows: Vec<Vec<(Value, Span)>>,
    /// A `zip` group, whose rows are pairings the spec chose.
    pub zipped: bool,
}

/// A command-line override `name=values`, parsed in its own pseudo-file.
#[derive(Clone, Debug)]
pub struct Override {
    pub name: Ident,
    pub values: ast::Expr,
}

/// Values of one axis: a list, a range, `linspace`/`logspace`, or a single value.
fn axis_values(ax: &ast::SweepAxis) -> Result<Vec<(Value, Span)>, Diagnostic> {
    let values = match consteval::eval(&ax.values, &|_| None, &[])? {
        Value::List(items) => items,
        v => vec![v],
    };
    if values.is_empty() {
        return Err(CheckErrorKind::EmptyAxis { name: ax.name.name.clone() }
            .error()
            .at(ax.values.span, "empty")
            .hint("an empty axis would give no trials"));
    }
    // Each value's own span when the axis is written as a list, so errors point at it.
    let spans: Vec<Span> = match &ax.values.kind {
        ast::ExprKind::List(items) if items.len() == values.len() => items.iter().map(|e| e.span).collect(),
        _ => vec![ax.values.span; values.len()],
    };
    Ok(values.into_iter().zip(spans).collect())
}

/// Adds `name` to the names swept so far, `seen`: a name swept twice is an error that points at
/// both places.
pub(super) fn note_swept<'a>(seen: &mut Vec<&'a Ident>, name: &'a Ident) -> Result<(), Diagnostic> {
    if let Some(prev) = seen.iter().find(|p| p.name == name.name) {
        return Err(CheckErrorKind::SweptTwice { name: name.name.clone() }
            .error()
            .at(name.span, "second time")
            .also(prev.span, "first time"));
    }
    seen.push(name);
    Ok(())
}

/// Groups of a sweep block, with overrides applied. An overridden name of a `zip` picks the
/// zip's rows with the values given (`gates=true` runs the rows where `gates` is true, each with
/// the values it is paired with): a zip's rows are pairings the spec chose (`d = 96` with its
/// own `max_time`), and replacing one column would pair values the spec never paired. Any other
/// overridden name leaves its group and becomes an axis of its own at the end.
pub fn groups(sweeps: &[Vec<SweepEntry>], overrides: &[Override]) -> Result<Vec<Group>, Diagnostic> {
    let mut groups = vec![];
    for entry in sweeps.iter().flatten() {
        groups.push(match entry {
            SweepEntry::Axis(ax) => Group {
                names: vec![ax.name.clone()],
                rows: axis_values(ax)?.into_iter().map(|v| vec![v]).collect(),
                zipped: false,
            },
            SweepEntry::Zip { axes, span } => zip(axes, *span)?,
            SweepEntry::Random { args, draws, span } => random(args, draws, *span)?,
        });
    }
    // A name in two groups would make trials contradict each other.
    let mut seen: Vec<&Ident> = vec![];
    for n in groups.iter().flat_map(|g| &g.names) {
        note_swept(&mut seen, n)?;
    }
    // Each zipped name's values as the spec writes them, before overrides pick rows.
    let written: Vec<(String, Vec<Value>)> = groups
        .iter()
        .filter(|g| g.zipped)
        .flat_map(|g| {
            g.names.iter().enumerate().map(|(c, n)| (n.name.clone(), g.rows.iter().map(|r| r[c].0.clone()).collect()))
        })
        .collect();
    for (i, o) in overrides.iter().enumerate() {
        let ax = ast::SweepAxis { name: o.name.clone(), values: o.values.clone() };
        let given = axis_values(&ax).map_err(|d| match (d.code, &o.values.kind) {
            // `act=tanh`: a word, where a string was meant.
            (Some("C014"), ast::ExprKind::Name(word)) => d.hint(format!(
                "a string is quoted, also on the command line: {0}=\"{word}\" (in a shell, '{0}=\"{word}\"')",
                o.name.name
            )),
            _ => d,
        })?;
        if let Some(g) = groups.iter_mut().find(|g| g.zipped && g.names.iter().any(|n| n.name == o.name.name)) {
            // Overrides of the zip's other names have picked its rows already.
            let in_the_spec = written.iter().find(|(n, _)| *n == o.name.name).map_or(&[][..], |(_, v)| v);
            let earlier: Vec<&str> = overrides[..i]
                .iter()
                .filter(|e| g.names.iter().any(|n| n.name == e.name.name))
                .map(|e| e.name.name.as_str())
                .collect();
            pick_zip_rows(g, o, &given, (&earlier, in_the_spec))?;
            continue;
        }
        for g in &mut groups {
            if let Some(col) = g.names.iter().position(|n| n.name == o.name.name) {
                g.names.remove(col);
                for row in &mut g.rows {
                    row.remove(col);
                }
            }
        }
        groups.retain(|g| !g.names.is_empty());
        groups.push(Group {
            names: vec![o.name.clone()],
            rows: given.into_iter().map(|v| vec![v]).collect(),
            zipped: false,
        });
    }
    Ok(groups)
}

/// Keeps the rows of zip group `g` whose value of the overridden name is one of `given`; a
/// value no row has is an error that lists the rows' values, and the overrides of the zip's
/// other names (`earlier`) that left only those rows when the spec's zip (`in_the_spec`, the
/// name's values there) has the value.
fn pick_zip_rows(
    g: &mut Group,
    o: &Override,
    given: &[(Value, Span)],
    (earlier, in_the_spec): (&[&str], &[Value]),
) -> Result<(), Diagnostic> {
    let col = g.names.iter().position(|n| n.name == o.name.name).expect("the group names the override");
    // 5200 picks the row written 5200.0: numbers compare by value.
    let same = |a: &Value, b: &Value| match (a.as_float(), b.as_float()) {
        (Some(x), Some(y)) => x == y,
        _ => a == b,
    };
    if let Some((missing, span)) = given.iter().find(|(v, _)| !g.rows.iter().any(|row| same(&row[col].0, v))) {
        let partners = g.names.iter().filter(|n| n.name != o.name.name).map(|n| n.name.clone()).collect();
        let mut d = CheckErrorKind::ZipOverrideValue {
            name: o.name.name.clone(),
            value: missing.to_string(),
            partners,
            values: g.rows.iter().map(|row| row[col].0.to_string()).collect(),
        }
        .error()
        .at(*span, "no row of the zip has this value")
        .also(g.names[col].span, "zipped here")
        .hint("an override of a zipped name picks the zip's rows; to pair other values, edit the zip");
        if !earlier.is_empty() && in_the_spec.iter().any(|v| same(v, missing)) {
            let names: Vec<String> = earlier.iter().map(|n| format!("`{n}`")).collect();
            d = d.hint(format!(
                "the override of {} on the command line left only these rows of the zip",
                names.join(", ")
            ));
        }
        return Err(d);
    }
    g.rows.retain(|row| given.iter().any(|(v, _)| same(&row[col].0, v)));
    Ok(())
}

fn zip(axes: &[ast::SweepAxis], span: Span) -> Result<Group, Diagnostic> {
    let Some(first) = axes.first() else {
        return Err(CheckErrorKind::EmptyZip
            .error()
            .at(span, "no axes")
            .hint("e.g. `zip { lr in [1e-3, 1e-4], batch in [32, 64] }`"));
    };
    let columns: Vec<Vec<(Value, Span)>> = axes.iter().map(axis_values).collect::<Result<_, _>>()?;
    let n = columns[0].len();
    for (ax, col) in axes.iter().zip(&columns) {
        if col.len() != n {
            return Err(CheckErrorKind::ZipLengths {
                name: ax.name.name.clone(),
                len: col.len(),
                first: first.name.name.clone(),
                first_len: n,
            }
            .error()
            .at(ax.values.span, format!("{} values", col.len()))
            .also(first.values.span, format!("{n} values")));
        }
    }
    let rows = (0..n).map(|i| columns.iter().map(|c| c[i].clone()).collect()).collect();
    Ok(Group { names: axes.iter().map(|a| a.name.clone()).collect(), rows, zipped: true })
}

fn random(args: &[ast::Arg], draws: &[ast::Draw], span: Span) -> Result<Group, Diagnostic> {
    let mut count = None;
    let mut seed = 0u64;
    for (i, a) in args.iter().enumerate() {
        let v = consteval::eval(&a.value, &|_| None, &[])?;
        match (a.name.as_ref().map(|n| n.name.as_str()), i, v.as_int()) {
            (None, 0, Some(n)) | (Some("n"), _, Some(n)) if (1..=MAX_DRAWS).contains(&n) => count = Some(n as usize),
            (Some("seed"), _, Some(s)) if s >= 0 => seed = s as u64,
            _ => {
                return Err(CheckErrorKind::RandomArguments
                    .error()
                    .at(a.value.span, "not valid here")
                    .hint("e.g. `random(8, seed = 1) { lr ~ loguniform(1e-4, 1e-2) }`"));
            }
        }
    }
    let Some(count) = count else {
        return Err(CheckErrorKind::RandomCount.error().at(span, "e.g. random(8)"));
    };
    if draws.is_empty() {
        return Err(CheckErrorKind::EmptyRandom
            .error()
            .at(span, "nothing to draw")
            .hint("e.g. `lr ~ loguniform(1e-4, 1e-2)`"));
    }
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut rows = vec![vec![]; count];
    for row in rows.iter_mut() {
        for d in draws {
            row.push((draw(d, &mut rng)?, d.dist.span));
        }
    }
    Ok(Group { names: draws.iter().map(|d| d.name.clone()).collect(), rows, zipped: false })
}

/// One value drawn from `name ~ dist(…)`.
fn draw(d: &ast::Draw, rng: &mut ChaCha8Rng) -> Result<Value, Diagnostic> {
    Ok(match super::search::distribution(d)? {
        Domain::Uniform { low, high } => Value::Float(rng.random_range(low..high)),
        Domain::LogUniform { low, high } => Value::Float(rng.random_range(low.ln()..high.ln()).exp()),
        Domain::IntUniform { low, high } => Value::Int(rng.random_range(low..=high)),
        Domain::Values(items) => items[rng.random_range(0..items.len())].clone(),
    })
}
