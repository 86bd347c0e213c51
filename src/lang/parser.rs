//! Text to [`File`](super::ast::File): the pest grammar in `grammar/mem.pest`, then a walk over its pairs.
//!
//! Conventions: `build_*` turns a pair into an AST node; everything the grammar guarantees is
//! taken with `presume`, which reports an internal error (a bug in memctl) instead of panicking.
//! Input limits that protect the stack (bracket nesting, expression depth) are checked before
//! and during the walk, so no input can overflow it.

use pest::Parser;
use pest::iterators::{Pair, Pairs};

use super::ast::*;
use super::error_kind::SpecErrorKind;
use super::limits::{MAX_EXPR_DEPTH, MAX_NESTING};
use super::syntax_error;
use crate::diag::Diagnostic;
use crate::source::{FileId, Span};

#[derive(pest_derive::Parser)]
#[grammar = "../grammar/mem.pest"]
pub(crate) struct MemParser;

/// Parses one file's text.
pub fn parse_file(file: FileId, text: &str) -> Result<File, Diagnostic> {
    check_nesting(file, text)?;
    pest::set_error_detail(true);
    let mut pairs = MemParser::parse(Rule::file, text).map_err(|e| syntax_error::convert(file, text, e))?;
    let b = Builder { file };
    let top = pairs.next().ok_or_else(|| b.bug("empty parse", 0))?;
    b.build_file(top)
}

/// Parses the expression that starts at byte `start` of `text` and runs to its end (the value
/// of a command-line override `key=value`); spans are offsets into `text`.
pub fn parse_expr_at(file: FileId, text: &str, start: usize) -> Result<Expr, Diagnostic> {
    let start = crate::source::floor_char_boundary(text, start.min(text.len()));
    check_nesting(file, text)?;
    pest::set_error_detail(true);
    let padded = format!("{}{}", " ".repeat(start), &text[start..]);
    let mut pairs = MemParser::parse(Rule::expr_only, &padded).map_err(|e| syntax_error::convert(file, &padded, e))?;
    let b = Builder { file };
    let top = pairs.next().ok_or_else(|| b.bug("empty parse", 0))?;
    let mut it = top.clone().into_inner();
    let e = b.presume(&mut it, &top)?;
    b.build_expr(e)
}

/// Rejects bracket nesting deeper than [`MAX_NESTING`] before pest's recursive descent sees it.
fn check_nesting(file: FileId, text: &str) -> Result<(), Diagnostic> {
    let mut depth = 0usize;
    for (i, b) in Brackets::new(text) {
        match b {
            b'(' | b'[' | b'{' => {
                depth += 1;
                if depth > MAX_NESTING {
                    return Err(SpecErrorKind::BracketsTooDeep
                        .error()
                        .at(Span::new(file, i, i + 1), "too deep")
                        .hint("split the expression with intermediate assignments"));
                }
            }
            _ => depth = depth.saturating_sub(1),
        }
    }
    Ok(())
}

/// The brackets `( ) [ ] { }` of a text with their byte offsets, skipping comments and strings
/// as the grammar does (an unclosed string ends at its line, an unclosed comment at the end).
pub(crate) struct Brackets<'a> {
    bytes: &'a [u8],
    i: usize,
}

impl<'a> Brackets<'a> {
    pub(crate) fn new(text: &'a str) -> Brackets<'a> {
        Brackets { bytes: text.as_bytes(), i: 0 }
    }
}

impl Iterator for Brackets<'_> {
    type Item = (usize, u8);

    fn next(&mut self) -> Option<(usize, u8)> {
        let bytes = self.bytes;
        while self.i < bytes.len() {
            let i = self.i;
            self.i += 1;
            match bytes[i] {
                b'/' if bytes.get(i + 1) == Some(&b'/') => {
                    while self.i < bytes.len() && bytes[self.i] != b'\n' {
                        self.i += 1;
                    }
                }
                b'/' if bytes.get(i + 1) == Some(&b'*') => {
                    self.i = i + 2;
                    while self.i < bytes.len() && !(bytes[self.i] == b'*' && bytes.get(self.i + 1) == Some(&b'/')) {
                        self.i += 1;
                    }
                    self.i = (self.i + 2).min(bytes.len());
                }
                b'"' => {
                    while self.i < bytes.len() && bytes[self.i] != b'"' && bytes[self.i] != b'\n' {
                        self.i += 1;
                    }
                    if self.i < bytes.len() && bytes[self.i] == b'"' {
                        self.i += 1;
                    }
                }
                b @ (b'(' | b'[' | b'{' | b')' | b']' | b'}') => return Some((i, b)),
                _ => {}
            }
        }
        None
    }
}

struct Builder {
    file: FileId,
}

type Res<T> = Result<T, Diagnostic>;

impl Builder {
    fn span(&self, p: &Pair<Rule>) -> Span {
        let s = p.as_span();
        Span::new(self.file, s.start(), s.end())
    }

    fn bug(&self, what: &str, at: usize) -> Diagnostic {
        SpecErrorKind::Internal { what: what.to_string() }
            .error()
            .at(Span::new(self.file, at, at), "while parsing here")
            .hint("this is a bug in memctl; please report it with this spec")
    }

    /// The next inner pair, which the grammar guarantees.
    fn presume<'a>(&self, it: &mut impl Iterator<Item = Pair<'a, Rule>>, parent: &Pair<Rule>) -> Res<Pair<'a, Rule>> {
        it.next().ok_or_else(|| self.bug(&format!("missing child of {:?}", parent.as_rule()), parent.as_span().start()))
    }

    /// The name after a construct's keyword (`task t = …`, `model m`, `state h = …`, `step x`,
    /// `experiment e`), and the children after the name.
    fn keyword_and_name<'a>(&self, p: &Pair<'a, Rule>) -> Res<(Ident, Pairs<'a, Rule>)> {
        let mut it = p.clone().into_inner();
        let _kw = it.next();
        let name = self.ident(self.presume(&mut it, p)?);
        Ok((name, it))
    }

    fn ident(&self, p: Pair<Rule>) -> Ident {
        Ident { name: p.as_str().to_string(), span: self.span(&p) }
    }

    fn build_file(&self, top: Pair<Rule>) -> Res<File> {
        let mut file = File::default();
        for item in top.into_inner() {
            match item.as_rule() {
                Rule::use_decl => {
                    let span = self.span(&item);
                    let mut it = item.into_inner();
                    let _kw = it.next();
                    let s = it.next().ok_or_else(|| self.bug("use without path", span.start))?;
                    file.uses.push(Use { path: unquote(s.as_str()), span });
                }
                Rule::model_def => file.models.push(self.build_model(item)?),
                Rule::task_def => {
                    let (name, mut it) = self.keyword_and_name(&item)?;
                    let call = self.build_call(self.presume(&mut it, &item)?)?;
                    file.tasks.push(TaskDef { name, call });
                }
                Rule::experiment_def => file.experiments.push(self.build_experiment(item)?),
                Rule::EOI => {}
                r => {
                    return Err(self.bug(&format!("unexpected item {r:?}"), item.as_span().start()));
                }
            }
        }
        Ok(file)
    }

    fn build_model(&self, p: Pair<Rule>) -> Res<Model> {
        let span = self.span(&p);
        let (name, it) = self.keyword_and_name(&p)?;
        let mut model = Model { name, params: vec![], states: vec![], step: None, extra_steps: vec![], span };
        for child in it {
            match child.as_rule() {
                Rule::param_list => {
                    for param in child.into_inner() {
                        model.params.push(self.build_param(param)?);
                    }
                }
                Rule::state_decl => {
                    let (name, mut it) = self.keyword_and_name(&child)?;
                    let init = self.build_expr(self.presume(&mut it, &child)?)?;
                    model.states.push(StateDecl { name, init });
                }
                Rule::step_def => {
                    let span = self.span(&child);
                    if model.step.is_some() {
                        model.extra_steps.push(span);
                        continue;
                    }
                    let (input, mut it) = self.keyword_and_name(&child)?;
                    let body = self.build_block(self.presume(&mut it, &child)?)?;
                    model.step = Some(Step { input, body, span });
                }
                r => {
                    return Err(self.bug(&format!("unexpected model item {r:?}"), child.as_span().start()));
                }
            }
        }
        Ok(model)
    }

    fn build_param(&self, p: Pair<Rule>) -> Res<Param> {
        let mut it = p.clone().into_inner();
        let name = self.ident(self.presume(&mut it, &p)?);
        let mut param = Param { name, ty: None, default: None };
        for child in it {
            match child.as_rule() {
                Rule::type_name => {
                    let ty = match child.as_str() {
                        "int" => TypeName::Int,
                        "float" => TypeName::Float,
                        "bool" => TypeName::Bool,
                        _ => TypeName::Str,
                    };
                    param.ty = Some((ty, self.span(&child)));
                }
                _ => param.default = Some(self.build_expr(child)?),
            }
        }
        Ok(param)
    }

    fn build_block(&self, p: Pair<Rule>) -> Res<Vec<Stmt>> {
        p.into_inner().map(|s| self.build_stmt(s)).collect()
    }

    fn build_stmt(&self, p: Pair<Rule>) -> Res<Stmt> {
        let span = self.span(&p);
        match p.as_rule() {
            Rule::assign => {
                let mut targets = vec![];
                let mut value = None;
                for child in p.into_inner() {
                    match child.as_rule() {
                        Rule::ident => targets.push(self.ident(child)),
                        _ => value = Some(self.build_expr(child)?),
                    }
                }
                let value = value.ok_or_else(|| self.bug("assignment without value", span.start))?;
                Ok(Stmt::Assign { targets, value })
            }
            Rule::out_stmt => {
                let mut it = p.clone().into_inner();
                let _kw = it.next();
                let value = self.build_expr(self.presume(&mut it, &p)?)?;
                // From `out` to the end of the value (the pair's span may end in blanks).
                let span = Span::new(self.file, span.start, value.span.end);
                Ok(Stmt::Out { value, span })
            }
            Rule::if_stmt => {
                let mut arms: Vec<IfArm> = vec![];
                let mut otherwise = vec![];
                let mut pending_cond: Option<Expr> = None;
                for child in p.into_inner() {
                    match child.as_rule() {
                        Rule::kw_if | Rule::kw_else => {}
                        Rule::block => {
                            let body = self.build_block(child)?;
                            match pending_cond.take() {
                                Some(cond) => arms.push(IfArm { cond, then: body }),
                                None => otherwise = body,
                            }
                        }
                        _ => pending_cond = Some(self.build_expr(child)?),
                    }
                }
                if arms.is_empty() {
                    return Err(self.bug("if without arms", span.start));
                }
                Ok(Stmt::If { arms, otherwise, span })
            }
            r => Err(self.bug(&format!("unexpected statement {r:?}"), span.start)),
        }
    }

    fn build_experiment(&self, p: Pair<Rule>) -> Res<Experiment> {
        let span = self.span(&p);
        let (name, it) = self.keyword_and_name(&p)?;
        let mut exp =
            Experiment { name, task: vec![], model: vec![], train: vec![], sweep: vec![], search: vec![], span };
        for entry in it {
            let rule = entry.as_rule();
            let mut inner = entry.clone().into_inner();
            let _kw = inner.next();
            match rule {
                Rule::exp_task => exp.task.push(self.build_target(&entry, inner)?),
                Rule::exp_model => exp.model.push(self.build_target(&entry, inner)?),
                Rule::train_block => exp.train.push(self.build_train_block(inner)?),
                Rule::sweep_block => exp.sweep.push(self.build_sweep_block(inner)?),
                Rule::search_block => exp.search.push(self.build_search_block(&entry, inner)?),
                r => {
                    return Err(self.bug(&format!("unexpected experiment entry {r:?}"), entry.as_span().start()));
                }
            }
        }
        Ok(exp)
    }

    /// An experiment's `task` or `model`: a call, or a bare name (a call without arguments).
    fn build_target(&self, entry: &Pair<Rule>, mut inner: Pairs<Rule>) -> Res<Call> {
        let target = self.presume(&mut inner, entry)?;
        Ok(match target.as_rule() {
            Rule::call => self.build_call(target)?,
            _ => {
                let callee = self.ident(target);
                Call { span: callee.span, callee, args: vec![], parens: false }
            }
        })
    }

    /// `train { key = value, … }`.
    fn build_train_block(&self, inner: Pairs<Rule>) -> Res<Vec<Setting>> {
        let mut settings = vec![];
        for s in inner {
            let mut kv = s.clone().into_inner();
            let key = self.ident(self.presume(&mut kv, &s)?);
            let value = self.build_expr(self.presume(&mut kv, &s)?)?;
            settings.push(Setting { key, value });
        }
        Ok(settings)
    }

    /// `sweep { … }`: axes, `zip { … }` groups and `random(…) { … }` groups.
    fn build_sweep_block(&self, inner: Pairs<Rule>) -> Res<Vec<SweepEntry>> {
        let mut entries = vec![];
        for e in inner {
            let span = self.span(&e);
            match e.as_rule() {
                Rule::sweep_axis => entries.push(SweepEntry::Axis(self.build_axis(e)?)),
                Rule::zip_group => {
                    let axes = e.into_inner().skip(1).map(|a| self.build_axis(a)).collect::<Res<_>>()?;
                    entries.push(SweepEntry::Zip { axes, span });
                }
                Rule::random_group => entries.push(self.build_random_group(e, span)?),
                r => return Err(self.bug(&format!("unexpected sweep entry {r:?}"), span.start)),
            }
        }
        Ok(entries)
    }

    /// `random(n, seed = s) { name ~ distribution(…), … }` in a sweep.
    fn build_random_group(&self, e: Pair<Rule>, span: Span) -> Res<SweepEntry> {
        let (mut args, mut draws) = (vec![], vec![]);
        for part in e.into_inner().skip(1) {
            if part.as_rule() == Rule::arg {
                let mut parts: Vec<Pair<Rule>> = part.into_inner().collect();
                let value = parts.pop().ok_or_else(|| self.bug("empty argument", span.start))?;
                let name = parts.pop().map(|n| self.ident(n));
                args.push(Arg { name, value: self.build_expr(value)? });
            } else {
                let mut it = part.clone().into_inner();
                let name = self.ident(self.presume(&mut it, &part)?);
                let dist = self.build_call(self.presume(&mut it, &part)?)?;
                draws.push(Draw { name, dist });
            }
        }
        Ok(SweepEntry::Random { args, draws, span })
    }

    /// `search { … }`: axes, draws and settings.
    fn build_search_block(&self, entry: &Pair<Rule>, inner: Pairs<Rule>) -> Res<SearchBlock> {
        let span = self.span(entry);
        let mut entries = vec![];
        for e in inner {
            let rule = e.as_rule();
            let mut parts = e.clone().into_inner();
            let name = self.ident(self.presume(&mut parts, &e)?);
            entries.push(match rule {
                Rule::sweep_axis => SearchEntry::Axis(self.build_axis(e)?),
                Rule::draw => SearchEntry::Draw(Draw { name, dist: self.build_call(self.presume(&mut parts, &e)?)? }),
                Rule::setting => {
                    SearchEntry::Setting(Setting { key: name, value: self.build_expr(self.presume(&mut parts, &e)?)? })
                }
                r => return Err(self.bug(&format!("unexpected search entry {r:?}"), span.start)),
            });
        }
        Ok(SearchBlock { entries, span })
    }

    fn build_axis(&self, p: Pair<Rule>) -> Res<SweepAxis> {
        let mut kv = p.clone().into_inner();
        let name = self.ident(self.presume(&mut kv, &p)?);
        let _in = kv.next();
        let values = self.build_expr(self.presume(&mut kv, &p)?)?;
        Ok(SweepAxis { name, values })
    }

    fn build_call(&self, p: Pair<Rule>) -> Res<Call> {
        self.build_call_d(p).map(|(c, _)| c)
    }

    /// A call and the depth of its tree (1 + its deepest argument).
    fn build_call_d(&self, p: Pair<Rule>) -> Res<(Call, usize)> {
        let span = self.span(&p);
        let mut it = p.clone().into_inner();
        let callee = self.ident(self.presume(&mut it, &p)?);
        let mut args = vec![];
        let mut depth = 1;
        for arg in it {
            let mut parts: Vec<Pair<Rule>> = arg.into_inner().collect();
            let value = parts.pop().ok_or_else(|| self.bug("empty argument", span.start))?;
            let name = parts.pop().map(|n| self.ident(n));
            let (value, d) = self.build_expr_d(value)?;
            depth = depth.max(d + 1);
            args.push(Arg { name, value });
        }
        if depth > MAX_EXPR_DEPTH {
            return Err(too_deep(span));
        }
        Ok((Call { callee, args, parens: true, span }, depth))
    }

    fn build_expr(&self, p: Pair<Rule>) -> Res<Expr> {
        self.build_expr_d(p).map(|(e, _)| e)
    }

    /// An expression and the depth of its tree. The depth of every tree is bounded by
    /// [`MAX_EXPR_DEPTH`], so that walking it later (checking, dropping) cannot exhaust the stack.
    /// Precedence climbing over the flat `prefix* primary (infix prefix* primary)*` sequence is
    /// iterative over chains, so only bracket nesting (bounded) recurses here.
    fn build_expr_d(&self, p: Pair<Rule>) -> Res<(Expr, usize)> {
        if p.as_rule() != Rule::expr {
            return self.build_primary(p);
        }
        // Operands (with their prefix operators) and the infix operators between them.
        let mut operands: Vec<(Expr, usize)> = vec![];
        let mut ops: Vec<(BinaryOp, Span)> = vec![];
        let mut prefixes: Vec<(UnaryOp, Span)> = vec![];
        for child in p.into_inner() {
            let span = self.span(&child);
            match child.as_rule() {
                Rule::op_neg => prefixes.push((UnaryOp::Neg, span)),
                Rule::op_not => prefixes.push((UnaryOp::Not, span)),
                rule => {
                    if let Some(op) = binary_op(rule) {
                        ops.push((op, span));
                        continue;
                    }
                    let (mut e, mut depth) = self.build_primary(child)?;
                    if depth + prefixes.len() > MAX_EXPR_DEPTH {
                        let start = prefixes.first().map_or(e.span, |(_, s)| *s);
                        return Err(too_deep(start.to(e.span)));
                    }
                    while let Some((op, s)) = prefixes.pop() {
                        e = Expr { span: s.to(e.span), kind: ExprKind::Unary(op, Box::new(e)) };
                        depth += 1;
                    }
                    operands.push((e, depth));
                }
            }
        }
        // Shunting-yard: all binary operators are left-associative.
        let mut out: Vec<(Expr, usize)> = vec![];
        let mut stack: Vec<BinaryOp> = vec![];
        let mut operands = operands.into_iter();
        let first = operands.next().ok_or_else(|| self.bug("expression without operand", 0))?;
        out.push(first);
        for ((op, _), rhs) in ops.into_iter().zip(operands) {
            while let Some(&top) = stack.last() {
                if precedence(top) >= precedence(op) {
                    stack.pop();
                    self.reduce(&mut out, top)?;
                } else {
                    break;
                }
            }
            stack.push(op);
            out.push(rhs);
        }
        while let Some(top) = stack.pop() {
            self.reduce(&mut out, top)?;
        }
        out.pop().ok_or_else(|| self.bug("empty expression", 0))
    }

    fn reduce(&self, out: &mut Vec<(Expr, usize)>, op: BinaryOp) -> Res<()> {
        let (rhs, dr) = out.pop().ok_or_else(|| self.bug("operator without right operand", 0))?;
        let (lhs, dl) = out.pop().ok_or_else(|| self.bug("operator without left operand", 0))?;
        let depth = dl.max(dr) + 1;
        let span = lhs.span.to(rhs.span);
        if depth > MAX_EXPR_DEPTH {
            return Err(too_deep(span));
        }
        out.push((Expr { span, kind: ExprKind::Binary(op, Box::new(lhs), Box::new(rhs)) }, depth));
        Ok(())
    }

    fn build_primary(&self, p: Pair<Rule>) -> Res<(Expr, usize)> {
        let span = self.span(&p);
        let (kind, depth) = match p.as_rule() {
            Rule::number => (
                parse_number(p.as_str()).ok_or_else(|| {
                    if p.as_str().contains(['.', 'e', 'E']) {
                        SpecErrorKind::NumberOutOfRange
                            .error()
                            .at(span, "too large for a 64-bit float")
                            .hint("floats go up to about 1.8e308")
                    } else {
                        SpecErrorKind::NumberOutOfRange
                            .error()
                            .at(span, "does not fit in a 64-bit integer")
                            .hint("write large values as floats, e.g. 1e20")
                    }
                })?,
                1,
            ),
            Rule::string => (ExprKind::Str(unquote(p.as_str())), 1),
            Rule::boolean => (ExprKind::Bool(p.as_str() == "true"), 1),
            Rule::ident => (ExprKind::Name(p.as_str().to_string()), 1),
            Rule::call => {
                let (c, d) = self.build_call_d(p)?;
                (ExprKind::Call(c), d)
            }
            Rule::list => {
                let mut items = vec![];
                let mut depth = 1;
                for e in p.into_inner() {
                    let (e, d) = self.build_expr_d(e)?;
                    depth = depth.max(d + 1);
                    items.push(e);
                }
                if depth > MAX_EXPR_DEPTH {
                    return Err(too_deep(span));
                }
                (ExprKind::List(items), depth)
            }
            Rule::paren => {
                let mut it = p.clone().into_inner();
                let (inner, d) = self.build_expr_d(self.presume(&mut it, &p)?)?;
                return Ok((Expr { span, kind: inner.kind }, d));
            }
            Rule::expr => return self.build_expr_d(p),
            r => return Err(self.bug(&format!("unexpected expression part {r:?}"), span.start)),
        };
        Ok((Expr { kind, span }, depth))
    }
}

fn too_deep(span: Span) -> Diagnostic {
    SpecErrorKind::ExpressionTooDeep
        .error()
        .at(span, "too deep")
        .hint("split the expression with intermediate assignments")
}

fn binary_op(rule: Rule) -> Option<BinaryOp> {
    Some(match rule {
        Rule::op_range => BinaryOp::Range,
        Rule::op_or => BinaryOp::Or,
        Rule::op_and => BinaryOp::And,
        Rule::op_eq => BinaryOp::Eq,
        Rule::op_ne => BinaryOp::Ne,
        Rule::op_le => BinaryOp::Le,
        Rule::op_ge => BinaryOp::Ge,
        Rule::op_lt => BinaryOp::Lt,
        Rule::op_gt => BinaryOp::Gt,
        Rule::op_add => BinaryOp::Add,
        Rule::op_sub => BinaryOp::Sub,
        Rule::op_mul => BinaryOp::Mul,
        Rule::op_div => BinaryOp::Div,
        Rule::op_hadamard => BinaryOp::Hadamard,
        Rule::op_outer => BinaryOp::Outer,
        Rule::op_matmul => BinaryOp::MatMul,
        _ => return None,
    })
}

/// Binding strength, loosest first.
fn precedence(op: BinaryOp) -> u8 {
    match op {
        BinaryOp::Range => 1,
        BinaryOp::Or => 2,
        BinaryOp::And => 3,
        BinaryOp::Eq | BinaryOp::Ne | BinaryOp::Le | BinaryOp::Ge | BinaryOp::Lt | BinaryOp::Gt => 4,
        BinaryOp::Add | BinaryOp::Sub => 5,
        BinaryOp::Mul | BinaryOp::Div | BinaryOp::Hadamard => 6,
        BinaryOp::Outer | BinaryOp::MatMul => 7,
    }
}

fn parse_number(s: &str) -> Option<ExprKind> {
    if s.contains(['.', 'e', 'E']) {
        s.parse::<f64>().ok().filter(|f| f.is_finite()).map(ExprKind::Float)
    } else {
        s.parse::<i64>().ok().map(ExprKind::Int)
    }
}

fn unquote(s: &str) -> String {
    s.trim_start_matches('"').trim_end_matches('"').to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lang::ast::{BinaryOp, ExprKind};

    const FILE: FileId = FileId(0);

    #[test]
    fn a_file_parses_into_its_parts() {
        let text = "task t = copy(width = 4)\n\
                    model m(d = 8, gates = true) {\n  state M = zeros(d, d)\n  step x { out linear(x, d) }\n}\n\
                    experiment e { task t  model m(d = 4)  train { steps = 10 }  sweep { seed in 1..2 } }\n";
        let file = parse_file(FILE, text).unwrap();
        assert_eq!((file.tasks.len(), file.models.len(), file.experiments.len()), (1, 1, 1));
        let m = &file.models[0];
        assert_eq!(m.name.name, "m");
        assert_eq!(m.params.iter().map(|p| p.name.name.as_str()).collect::<Vec<_>>(), ["d", "gates"]);
        assert_eq!(m.states[0].name.name, "M");
        assert_eq!(m.step.as_ref().unwrap().input.name, "x");
        let e = &file.experiments[0];
        assert_eq!((e.name.name.as_str(), e.train.len(), e.sweep.len()), ("e", 1, 1));
        // Spans point into the text.
        assert_eq!(&text[m.name.span.start..m.name.span.end], "m");
    }

    #[test]
    fn a_search_block_parses_into_draws_axes_and_settings() {
        let text = "experiment e { task t  model m\n  search {\n    lr ~ loguniform(1e-4, 1e-2)\n    d in [48, 96], seed in 1..3\n    trials = 40, sampler = tpe(seed = 1)\n    prune = asha(metric = val_accuracy, min_steps = 2000, keep = 1/3)\n  }\n}\n";
        let file = parse_file(FILE, text).unwrap();
        let search = &file.experiments[0].search;
        assert_eq!(search.len(), 1);
        let kinds: Vec<String> = search[0]
            .entries
            .iter()
            .map(|e| match e {
                SearchEntry::Axis(a) => format!("axis {}", a.name.name),
                SearchEntry::Draw(d) => format!("draw {} {}", d.name.name, d.dist.callee.name),
                SearchEntry::Setting(s) => format!("setting {}", s.key.name),
            })
            .collect();
        assert_eq!(
            kinds,
            ["draw lr loguniform", "axis d", "axis seed", "setting trials", "setting sampler", "setting prune"]
        );
        assert_eq!(&text[search[0].span.start..search[0].span.start + 6], "search");
    }

    #[test]
    fn products_bind_tighter_than_sums_and_sums_than_comparisons() {
        let e = parse_expr_at(FILE, "a + b * c >= d", 0).unwrap();
        let ExprKind::Binary(BinaryOp::Ge, lhs, _) = &e.kind else { panic!("{e:?}") };
        let ExprKind::Binary(BinaryOp::Add, _, rhs) = &lhs.kind else { panic!("{lhs:?}") };
        assert!(matches!(rhs.kind, ExprKind::Binary(BinaryOp::Mul, _, _)), "{rhs:?}");
    }

    #[test]
    fn an_expression_is_read_from_its_offset_in_the_file() {
        let e = parse_expr_at(FILE, "steps = 3\nx + 1", 10).unwrap();
        assert_eq!((e.span.start, e.span.end), (10, 15));
    }

    #[test]
    fn a_syntax_error_is_located_where_the_input_stops_making_sense() {
        let text = "model m() {\n  step x { out linear(x d) }\n}\n";
        let d = parse_file(FILE, text).unwrap_err();
        let at = d.primary.as_ref().expect("a located error").span.start;
        // At `d`, where the argument list needed a comma.
        assert_eq!(&text[at..at + 1], "d", "at {at}: {}", d.message);
    }
}
