//! Elaboration: a model plus concrete parameter values becomes a [`StepGraph`].
//!
//! The step body runs once, symbolically: values known before the model runs (parameters,
//! numbers) are computed; `if` picks its branch; every primitive call is checked against its
//! signature and shapes and becomes a node. Every error points at the spec.

use std::collections::{BTreeMap, HashMap};

use super::call;
use super::consteval;
use super::error_kind::CheckErrorKind;
use super::limits::MAX_STATE_AXIS;
use crate::diag::Diagnostic;
use crate::graph::{Init, Node, ParamSpec, Shape, ShapeDisplay, Source, StateInit, StateSpec, StepGraph, Ty};
use crate::lang::ast::{self, BinaryOp, Expr, ExprKind, Stmt, UnaryOp};
use crate::signature::{ArgKind, ArgVal, Args, Catalog, Default, Inferred, PrimError, Primitive};
use crate::source::Span;
use crate::value::Value;

/// Largest tensor (state, value or parameter) a model may have, in elements per example.
pub const MAX_ELEMENTS: usize = 1 << 28;

/// The number of elements of a shape, `None` if it overflows.
fn elements(shape: &[usize]) -> Option<usize> {
    shape.iter().try_fold(1usize, |acc, &n| acc.checked_mul(n))
}

/// Functions that create a state's initial value.
pub const STATE_INITS: &[&str] = &["zeros", "learned", "identity", "onehot"];

/// What the task feeds the step and scores.
pub struct TaskShape {
    pub input: Ty,
    pub output_size: usize,
    /// Task name, for messages.
    pub name: String,
}

/// Elaborates `model` with the given parameter values (every parameter bound).
pub fn elaborate(
    model: &ast::Model,
    params: &BTreeMap<String, Value>,
    task: &TaskShape,
    catalog: &'static dyn Catalog,
) -> Result<StepGraph, Diagnostic> {
    let Some(step) = &model.step else {
        return Err(CheckErrorKind::NoStep { model: model.name.name.clone() }
            .error()
            .at(model.name.span, "no step")
            .hint("add `step x { ... out ... }`: the computation run at every time step"));
    };
    let mut e = Elab {
        catalog,
        env: HashMap::new(),
        fixed: vec![],
        graph: StepGraph {
            model: model.name.name.clone(),
            input: task.input.clone(),
            states: vec![],
            nodes: vec![],
            next_states: vec![],
            output: Source::Input,
            output_shape: vec![],
            params: vec![],
        },
        paths: HashMap::new(),
        out: None,
    };
    for (name, v) in params {
        e.env.insert(name.clone(), Binding::Value(v.clone()));
        e.fixed.push(name.clone());
    }
    let input_size = match &task.input {
        Ty::Tokens(v) => *v,
        Ty::Tensor(s) => s.iter().product(),
    };
    for (name, v) in super::model_params::RESERVED.into_iter().zip([input_size, task.output_size]) {
        e.env.insert(name.into(), Binding::Value(Value::Int(v as i64)));
        e.fixed.push(name.into());
    }
    for st in &model.states {
        e.declare_state(st)?;
    }
    e.graph.next_states = (0..e.graph.states.len()).map(Source::State).collect();
    if e.env.contains_key(&step.input.name) {
        let what = if e.fixed.contains(&step.input.name) { "a parameter" } else { "a state" };
        return Err(CheckErrorKind::StepInputHides { input: step.input.name.clone(), what }
            .error()
            .at(step.input.span, format!("same name as {what}"))
            .hint("rename the step input, e.g. `step x`"));
    }
    e.env.insert(step.input.name.clone(), Binding::Tensor(Source::Input, task.input.clone()));
    e.block(&step.body)?;
    let Some((src, ty, span)) = e.out.take() else {
        return Err(CheckErrorKind::NoOut { model: model.name.name.clone() }
            .error()
            .at(Span::new(step.span.file, step.span.start, step.input.span.end), "no output")
            .hint("end the step with `out linear(h, output_size)`"));
    };
    let want = vec![task.output_size];
    if ty != Ty::Tensor(want.clone()) {
        return Err(CheckErrorKind::OutputShape {
            found: ty.clone(),
            task: task.name.to_string(),
            logits: want.clone(),
        }
        .error()
        .at(span, format!("shape {ty}"))
        .hint("end the step with `out linear(h, output_size)`"));
    }
    e.graph.output = src;
    e.graph.output_shape = want;
    Ok(e.graph)
}

#[derive(Clone)]
enum Binding {
    Value(Value),
    Tensor(Source, Ty),
}

/// An evaluated expression.
enum Ev {
    Value(Value),
    Tensor(Source, Ty),
    /// A primitive with several outputs (only valid on the right of `a, b = …`).
    Multi(Vec<(Source, Ty)>, &'static dyn Primitive),
}

struct Elab {
    /// The primitives calls may use.
    catalog: &'static dyn Catalog,
    env: HashMap<String, Binding>,
    /// Names that cannot be assigned: parameters and `input_size`/`output_size`.
    fixed: Vec<String>,
    graph: StepGraph,
    /// How many call sites use each path prefix (to number repeats).
    paths: HashMap<String, usize>,
    out: Option<(Source, Ty, Span)>,
}

type Res<T> = Result<T, Diagnostic>;

/// An error where a call's output or parameter would hold more than [`MAX_ELEMENTS`].
fn within_limits(prim: &dyn Primitive, inst: &Inferred, span: Span) -> Res<()> {
    let too_large = |s: &[usize]| elements(s).is_none_or(|n| n > MAX_ELEMENTS);
    for t in &inst.outputs {
        if let Ty::Tensor(s) = t
            && too_large(s)
        {
            return Err(CheckErrorKind::TensorTooLarge { prim: prim.name(), shape: s.clone() }
                .error()
                .at(span, "too large")
                .hint("check the sizes that reach this call"));
        }
    }
    for p in &inst.params {
        if too_large(&p.shape) {
            return Err(CheckErrorKind::ParameterTooLarge {
                prim: prim.name(),
                param: p.name.to_string(),
                shape: p.shape.clone(),
            }
            .error()
            .at(span, "too large")
            .hint("check the sizes that reach this call"));
        }
    }
    Ok(())
}

impl Elab {
    fn names(&self) -> Vec<&str> {
        self.env.keys().map(String::as_str).collect()
    }

    fn declare_state(&mut self, st: &ast::StateDecl) -> Res<()> {
        let name = &st.name.name;
        if self.env.contains_key(name) {
            let what = if self.fixed.contains(name) { "a parameter" } else { "another state" };
            return Err(CheckErrorKind::StateDefinedTwice { name: name.to_string() }
                .error()
                .at(st.name.span, format!("same name as {what}")));
        }
        let ExprKind::Call(c) = &st.init.kind else {
            return Err(state_init_error(st.init.span));
        };
        if !STATE_INITS.contains(&c.callee.name.as_str()) {
            let mut d = state_init_error(c.callee.span);
            if let Some(h) = crate::suggest::did_you_mean(&c.callee.name, STATE_INITS.iter().copied()) {
                d = d.hint(h);
            }
            return Err(d);
        }
        let mut dims: Shape = vec![];
        for arg in &c.args {
            if let Some(n) = &arg.name {
                return Err(CheckErrorKind::StateTakesOnlySizes { init: c.callee.name.clone() }
                    .error()
                    .at(n.span, "named argument")
                    .hint(format!("write e.g. `{}(d, d)`", c.callee.name)));
            }
            let names = self.names();
            let v = consteval::eval(&arg.value, &|n| self.value(n), &names)?;
            match v {
                Value::Int(i) if (1..=MAX_STATE_AXIS).contains(&i) => dims.push(i as usize),
                other => {
                    return Err(CheckErrorKind::StateSize { found: other }.error().at(arg.value.span, "not a size"));
                }
            }
        }
        if elements(&dims).is_none_or(|n| n > MAX_ELEMENTS) {
            return Err(CheckErrorKind::StateTooLarge { name: name.to_string(), dims: dims.clone() }
                .error()
                .at(st.init.span, "too large"));
        }
        let init = match c.callee.name.as_str() {
            "zeros" => StateInit::Zeros,
            "learned" => {
                // U(±1/√(Σ dims)): the authors' init of M^i_0 (1/√(2d)) and M^r_0 (1/√(2d + nq)).
                let bound = 1.0 / (dims.iter().sum::<usize>().max(1) as f64).sqrt();
                self.graph.params.push(ParamSpec {
                    name: format!("{name}.init"),
                    shape: dims.clone(),
                    init: Init::Uniform(bound),
                });
                StateInit::Learned(self.graph.params.len() - 1)
            }
            "identity" => {
                // identity(…, n, m): every trailing n×m block is the identity, zero-padded or cut
                // (RMC's initial memory is identity(slots, size); a PKM covariance identity(k, c, c)).
                let [.., rows, cols] = dims[..] else {
                    return Err(CheckErrorKind::IdentitySizes.error().at(c.span, "e.g. identity(slots, size)"));
                };
                let total: usize = dims.iter().product();
                StateInit::Fixed(
                    (0..total).map(|i| if (i % (rows * cols)) / cols == i % cols { 1.0 } else { 0.0 }).collect(),
                )
            }
            _ => {
                // onehot(…, L): every vector along the last axis is e_0 (a NAM-TM head at cell 0).
                let Some(&len) = dims.last() else {
                    return Err(CheckErrorKind::OnehotSize.error().at(c.span, "e.g. onehot(heads, L)"));
                };
                let total: usize = dims.iter().product();
                StateInit::Fixed((0..total).map(|i| if i % len == 0 { 1.0 } else { 0.0 }).collect())
            }
        };
        if dims.is_empty() {
            return Err(CheckErrorKind::NoSizes { init: c.callee.name.clone() }.error().at(c.span, "no sizes"));
        }
        let index = self.graph.states.len();
        self.graph.states.push(StateSpec { name: name.clone(), shape: dims.clone(), init, span: st.name.span });
        self.env.insert(name.clone(), Binding::Tensor(Source::State(index), Ty::Tensor(dims)));
        Ok(())
    }

    fn value(&self, name: &str) -> Option<Value> {
        match self.env.get(name) {
            Some(Binding::Value(v)) => Some(v.clone()),
            _ => None,
        }
    }

    fn block(&mut self, stmts: &[Stmt]) -> Res<()> {
        for s in stmts {
            self.stmt(s)?;
        }
        Ok(())
    }

    fn stmt(&mut self, s: &Stmt) -> Res<()> {
        match s {
            Stmt::If { arms, otherwise, .. } => {
                for arm in arms {
                    match self.eval(&arm.cond, "if")? {
                        Ev::Value(Value::Bool(true)) => return self.block(&arm.then),
                        Ev::Value(Value::Bool(false)) => {}
                        Ev::Value(v) => {
                            return Err(CheckErrorKind::IfNotBool { found: v }.error().at(arm.cond.span, "not a bool"));
                        }
                        _ => {
                            return Err(CheckErrorKind::IfNotKnown.error().at(arm.cond.span, "this is a tensor").hint(
                                "wire on parameters (`if gates { ... }`); for data-dependent choices use gates",
                            ));
                        }
                    }
                }
                self.block(otherwise)
            }
            Stmt::Out { value, span } => {
                if let Some((_, _, first)) = &self.out {
                    return Err(CheckErrorKind::TwoOuts
                        .error()
                        .at(*span, "second output")
                        .also(*first, "first output"));
                }
                match self.eval(value, "out")? {
                    Ev::Tensor(src, ty) => {
                        self.out = Some((src, ty, value.span));
                        Ok(())
                    }
                    Ev::Value(v) => {
                        Err(CheckErrorKind::OutNotTensor { found: v }.error().at(value.span, "not a tensor"))
                    }
                    Ev::Multi(_, p) => Err(multi_error(p, value.span)),
                }
            }
            Stmt::Assign { targets, value } => {
                let hint = targets.first().map_or("v", |t| t.name.as_str()).to_string();
                let ev = self.eval(value, &hint)?;
                let values: Vec<Binding> = match ev {
                    Ev::Multi(outs, prim) => {
                        if targets.len() != outs.len() {
                            return Err(CheckErrorKind::OutputCount {
                                prim: prim.name(),
                                outputs: prim.outputs(),
                                names: targets.len(),
                            }
                            .error()
                            .at(value.span, format!("{} values", outs.len()))
                            .hint(format!(
                                "write `{} = {}(…)`",
                                prim.outputs().join(", "),
                                prim.name()
                            )));
                        }
                        outs.into_iter().map(|(s, t)| Binding::Tensor(s, t)).collect()
                    }
                    Ev::Tensor(s, t) => vec![Binding::Tensor(s, t)],
                    Ev::Value(v) => vec![Binding::Value(v)],
                };
                if values.len() != targets.len() {
                    return Err(CheckErrorKind::OneValueManyNames { names: targets.len() }
                        .error()
                        .at(value.span, "one value")
                        .hint("`a, b = …` needs a primitive with several outputs, such as `lstmCell`"));
                }
                for (target, b) in targets.iter().zip(values) {
                    self.assign(target, b, value.span)?;
                }
                Ok(())
            }
        }
    }

    fn assign(&mut self, target: &ast::Ident, b: Binding, value_span: Span) -> Res<()> {
        let name = &target.name;
        if self.fixed.contains(name) {
            return Err(CheckErrorKind::AssignParameter { name: name.clone() }
                .error()
                .at(target.span, "a parameter")
                .hint("parameters are fixed for a trial; pick another name"));
        }
        if let Some(i) = self.graph.states.iter().position(|s| &s.name == name) {
            let want = &self.graph.states[i].shape;
            let Binding::Tensor(src, ty) = &b else {
                return Err(CheckErrorKind::StateNotTensor { name: name.clone() }
                    .error()
                    .at(value_span, "not a tensor"));
            };
            if ty != &Ty::Tensor(want.clone()) {
                return Err(CheckErrorKind::StateShape { name: name.clone(), shape: want.clone(), found: ty.clone() }
                    .error()
                    .at(value_span, format!("shape {ty}"))
                    .also(self.graph.states[i].span, format!("declared {} here", ShapeDisplay(want))));
            }
            self.graph.next_states[i] = *src;
        }
        self.env.insert(name.clone(), b);
        Ok(())
    }

    fn eval(&mut self, e: &Expr, hint: &str) -> Res<Ev> {
        match &e.kind {
            ExprKind::Int(i) => Ok(Ev::Value(Value::Int(*i))),
            ExprKind::Float(f) => Ok(Ev::Value(Value::Float(*f))),
            ExprKind::Bool(b) => Ok(Ev::Value(Value::Bool(*b))),
            ExprKind::Str(s) => Ok(Ev::Value(Value::Str(s.clone()))),
            ExprKind::Name(n) => match self.env.get(n) {
                Some(Binding::Value(v)) => Ok(Ev::Value(v.clone())),
                Some(Binding::Tensor(s, t)) => Ok(Ev::Tensor(*s, t.clone())),
                None => {
                    let mut d = consteval::unknown_name(n, e.span, &self.names());
                    if self.catalog.primitive(n).is_some() {
                        d = d.hint(format!("`{n}` is a primitive: call it, e.g. `{n}(x, …)`"));
                    }
                    Err(d)
                }
            },
            ExprKind::List(items) => {
                let mut values = vec![];
                for item in items {
                    match self.eval(item, hint)? {
                        Ev::Value(v) => values.push(v),
                        _ => {
                            return Err(CheckErrorKind::TensorInList.error().at(item.span, "a tensor"));
                        }
                    }
                }
                Ok(Ev::Value(Value::List(values)))
            }
            ExprKind::Unary(op, x) => match self.eval(x, hint)? {
                Ev::Value(v) => Ok(Ev::Value(consteval::unary(*op, v, e.span)?)),
                Ev::Tensor(s, t) if *op == UnaryOp::Neg => self.apply(
                    "affine",
                    vec![(ArgVal::Tensor(t), Some(s), x.span), value_arg(Value::Float(-1.0), e.span)],
                    e.span,
                    hint,
                ),
                Ev::Tensor(..) => Err(CheckErrorKind::NotOnTensor.error().at(x.span, "a tensor")),
                Ev::Multi(_, p) => Err(multi_error(p, x.span)),
            },
            ExprKind::Binary(op, a, b) => self.binary(*op, a, b, e.span, hint),
            ExprKind::Call(c) => self.call(c, hint),
        }
    }

    fn binary(&mut self, op: BinaryOp, a: &Expr, b: &Expr, span: Span, hint: &str) -> Res<Ev> {
        let ea = self.eval(a, hint).map_err(|d| consteval::equals_hint(d, op, a))?;
        let eb = self.eval(b, hint)?;
        let operand = |ev: Ev, s: Span| -> Res<Operand> {
            match ev {
                Ev::Value(v) => Ok(Operand::Value(v)),
                Ev::Tensor(src, ty) => Ok(Operand::Tensor(src, ty)),
                Ev::Multi(_, p) => Err(multi_error(p, s)),
            }
        };
        let (oa, ob) = (operand(ea, a.span)?, operand(eb, b.span)?);
        use BinaryOp::*;
        use Operand::{Tensor as T, Value as V};
        match (op, oa, ob) {
            (_, V(x), V(y)) => Ok(Ev::Value(consteval::binary(op, x, y, a.span, b.span)?)),
            (Add | Sub | Mul | Div | Hadamard, T(sa, ta), T(sb, tb)) => {
                let prim = match op {
                    Add => "add",
                    Sub => "sub",
                    Div => "div",
                    _ => "mul",
                };
                self.apply(
                    prim,
                    vec![(ArgVal::Tensor(ta), Some(sa), a.span), (ArgVal::Tensor(tb), Some(sb), b.span)],
                    span,
                    hint,
                )
            }
            (Outer | MatMul, T(sa, ta), T(sb, tb)) => {
                let prim = if op == Outer { "outer" } else { "matmul" };
                self.apply(
                    prim,
                    vec![(ArgVal::Tensor(ta), Some(sa), a.span), (ArgVal::Tensor(tb), Some(sb), b.span)],
                    span,
                    hint,
                )
            }
            (Add | Sub | Mul | Div | Hadamard, T(st, tt), V(v)) => {
                self.tensor_number(op, (st, tt, a.span), (v, b.span), false, span, hint)
            }
            (Add | Sub | Mul | Div | Hadamard, V(v), T(st, tt)) => {
                self.tensor_number(op, (st, tt, b.span), (v, a.span), true, span, hint)
            }
            (Outer | MatMul, _, _) => {
                Err(CheckErrorKind::OperatorNeedsTensors { op: op.symbol() }.error().at(span, "one side is a number"))
            }
            (Range, ..) => Err(CheckErrorKind::RangeInModel.error().at(span, "not allowed in a model")),
            _ => Err(CheckErrorKind::ParameterOperatorOnTensors { op: op.symbol() }
                .error()
                .at(span, "a tensor is involved")
                .hint("comparisons and `and`/`or` decide wiring before the model runs")),
        }
    }

    /// A tensor combined with a number becomes `affine(x, scale, shift)`.
    fn tensor_number(
        &mut self,
        op: BinaryOp,
        (src, ty, tspan): (Source, Ty, Span),
        (v, vspan): (Value, Span),
        value_left: bool,
        span: Span,
        hint: &str,
    ) -> Res<Ev> {
        let Some(c) = v.as_float() else {
            return Err(CheckErrorKind::TensorAndValue { op: op.symbol(), found: v.clone() }
                .error()
                .at(vspan, "not a number"));
        };
        let (scale, shift) = match (op, value_left) {
            (BinaryOp::Add, _) => (1.0, c),
            (BinaryOp::Sub, false) => (1.0, -c),
            (BinaryOp::Sub, true) => (-1.0, c),
            (BinaryOp::Div, false) => {
                if c == 0.0 {
                    return Err(CheckErrorKind::DivisionByZero.error().at(vspan, "this is 0"));
                }
                (1.0 / c, 0.0)
            }
            (BinaryOp::Div, true) => {
                return Err(CheckErrorKind::NumberOverTensor
                    .error()
                    .at(span, "number / tensor")
                    .hint("use `div(a, b)` with two tensors"));
            }
            _ => (c, 0.0),
        };
        let args = vec![
            (ArgVal::Tensor(ty), Some(src), tspan),
            value_arg(Value::Float(scale), span),
            value_arg(Value::Float(shift), span),
        ];
        self.apply("affine", args, span, hint)
    }

    fn call(&mut self, c: &ast::Call, hint: &str) -> Res<Ev> {
        let name = c.callee.name.as_str();
        let Some(prim) = self.catalog.primitive(name) else {
            if STATE_INITS.contains(&name) {
                return Err(CheckErrorKind::InitOutsideState { name: name.to_string() }
                    .error()
                    .at(c.callee.span, "not a primitive")
                    .hint(format!("declare `state S = {name}(…)` in the model, outside `step`")));
            }
            let mut d = CheckErrorKind::UnknownPrimitive { name: name.to_string() }
                .error()
                .at(c.callee.span, "not a primitive");
            if let Some(h) = crate::suggest::did_you_mean(name, self.catalog.primitive_names()) {
                d = d.hint(h);
            } else {
                d = d.hint("`memctl prims` lists the primitives");
            }
            return Err(d);
        };
        let what = format!("`{name}`");
        let slots = call::bind(&what, prim.signature(), c)?;
        let mut args = vec![];
        for (spec, slot) in prim.signature().iter().zip(slots) {
            match (spec.kind, slot) {
                (ArgKind::Tensor, Some(e)) => match self.eval(e, hint)? {
                    Ev::Tensor(s, t) => args.push((ArgVal::Tensor(t), Some(s), e.span)),
                    Ev::Value(v) => {
                        return Err(CheckErrorKind::ArgumentNotTensor {
                            callee: what.clone(),
                            arg: spec.name,
                            found: v,
                        }
                        .error()
                        .at(e.span, "expected a tensor"));
                    }
                    Ev::Multi(_, p) => return Err(multi_error(p, e.span)),
                },
                (ArgKind::Tensor, None) => args.push((ArgVal::Absent, None, c.span)),
                (ArgKind::Value(kind), Some(e)) => match self.eval(e, hint)? {
                    Ev::Value(v) => args.push((ArgVal::Value(call::coerce(&what, spec, kind, v, e)?), None, e.span)),
                    _ => {
                        return Err(CheckErrorKind::ArgumentNotKnown { callee: what.clone(), arg: spec.name }
                            .error()
                            .at(e.span, format!("expected {}", kind.with_article()))
                            .hint("pass a parameter or a number"));
                    }
                },
                (ArgKind::Value(_), None) => {
                    let v = spec.default.value().unwrap_or(Value::Bool(false));
                    debug_assert!(spec.default != Default::Required);
                    args.push((ArgVal::Value(v), None, c.span));
                }
            }
        }
        self.apply_prim(prim, args, c.span, hint)
    }

    fn apply(
        &mut self,
        name: &'static str,
        args: Vec<(ArgVal, Option<Source>, Span)>,
        span: Span,
        hint: &str,
    ) -> Res<Ev> {
        let prim = self.catalog.primitive(name).ok_or_else(|| {
            CheckErrorKind::Internal { what: format!("primitive `{name}` is not registered") }.error().at(span, "here")
        })?;
        let mut args = args;
        // Operators pass only leading arguments; fill the rest with defaults.
        for spec in &prim.signature()[args.len()..] {
            let v = match spec.default.value() {
                Some(v) => ArgVal::Value(v),
                None => ArgVal::Absent,
            };
            args.push((v, None, span));
        }
        self.apply_prim(prim, args, span, hint)
    }

    fn apply_prim(
        &mut self,
        prim: &'static dyn Primitive,
        args: Vec<(ArgVal, Option<Source>, Span)>,
        span: Span,
        hint: &str,
    ) -> Res<Ev> {
        let signature = prim.signature();
        let bound = Args { signature, values: args.iter().map(|(v, _, _)| v.clone()).collect() };
        // A primitive that panics on some shapes is a bug in memctl, not in the spec: it becomes
        // a located internal error rather than a crash.
        let inst = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| prim.infer(&bound)))
            .map_err(|_| {
                CheckErrorKind::PrimitivePanicked { prim: prim.name() }
                    .error()
                    .at(span, "while checking this call")
                    .hint("this is a bug in memctl; please report it with this spec")
            })?
            .map_err(|pe| self.prim_error(prim, pe, &args, span))?;
        within_limits(prim, &inst, span)?;
        let path = self.path(hint, prim.name());
        let mut param_ids = vec![];
        for decl in inst.params {
            self.graph.params.push(ParamSpec {
                name: format!("{path}.{}", decl.name),
                shape: decl.shape,
                init: decl.init,
            });
            param_ids.push(self.graph.params.len() - 1);
        }
        let options = signature
            .iter()
            .zip(&args)
            .filter_map(|(s, (v, _, _))| match v {
                ArgVal::Value(v) => Some(format!("{}={v}", s.name)),
                _ => None,
            })
            .collect::<Vec<_>>()
            .join(",");
        let index = self.graph.nodes.len();
        self.graph.nodes.push(Node {
            args: bound,
            inputs: args.iter().filter_map(|(_, s, _)| *s).collect(),
            params: param_ids,
            outputs: inst.outputs.clone(),
            prim: prim.name(),
            path,
            options,
            flops: inst.flops,
            saved: inst.saved,
            span,
        });
        let outs: Vec<(Source, Ty)> =
            inst.outputs.into_iter().enumerate().map(|(k, t)| (Source::Node(index, k), t)).collect();
        if outs.len() == 1 {
            let (s, t) = outs
                .into_iter()
                .next()
                .ok_or_else(|| CheckErrorKind::Internal { what: "no output".into() }.error().at(span, "here"))?;
            Ok(Ev::Tensor(s, t))
        } else {
            Ok(Ev::Multi(outs, prim))
        }
    }

    fn prim_error(
        &self,
        prim: &dyn Primitive,
        pe: PrimError,
        args: &[(ArgVal, Option<Source>, Span)],
        span: Span,
    ) -> Diagnostic {
        let at = pe
            .arg
            .and_then(|a| prim.signature().iter().position(|s| s.name == a))
            .and_then(|i| args.get(i))
            .map_or(span, |(_, _, s)| *s);
        let label =
            match pe.arg.and_then(|a| prim.signature().iter().position(|s| s.name == a)).and_then(|i| args.get(i)) {
                Some((ArgVal::Tensor(t), _, _)) => format!("shape {t}"),
                Some((ArgVal::Value(v), _, _)) => format!("{v}"),
                _ => format!("in `{}`", prim.name()),
            };
        let hint = pe.hint.as_ref().map(|h| h.to_string());
        let mut d = CheckErrorKind::Primitive { prim: prim.name(), error: pe }.error().at(at, label);
        if at != span {
            d = d.also(span, "in this call");
        }
        if let Some(h) = hint {
            d = d.hint(h);
        }
        d
    }

    /// `h.linear`, then `h.linear#2`, ...: stable, readable parameter prefixes.
    fn path(&mut self, hint: &str, prim: &str) -> String {
        let base = format!("{hint}.{prim}");
        let n = self.paths.entry(base.clone()).or_insert(0);
        *n += 1;
        if *n == 1 { base } else { format!("{base}#{n}") }
    }
}

enum Operand {
    Value(Value),
    Tensor(Source, Ty),
}

fn value_arg(v: Value, span: Span) -> (ArgVal, Option<Source>, Span) {
    (ArgVal::Value(v), None, span)
}

fn multi_error(p: &dyn Primitive, span: Span) -> Diagnostic {
    CheckErrorKind::MultiInExpression { prim: p.name(), outputs: p.outputs() }
        .error()
        .at(span, "several values")
        .hint(format!("assign them first: `{} = {}(…)`", p.outputs().join(", "), p.name()))
}

fn state_init_error(span: Span) -> Diagnostic {
    CheckErrorKind::StateInit
        .error()
        .at(span, "not a state initialiser")
        .hint("e.g. `state M = zeros(d, d)`; `learned(d, d)` makes the initial value a parameter")
}
