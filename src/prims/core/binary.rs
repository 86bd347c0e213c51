//! Shared shape of the element-wise binary primitives (`add`, `sub`, `mul`, `div`): per-example
//! shapes broadcast like NumPy, the batch axis stays first (see `kernels::cpu::broadcast`).
//! The operators `+ - * ⊙ /` between tensors are these primitives.

//!
//! Training runs them with a manual backward ([`train_forward`], [`train_backward`]): plain
//! loops when both operands have the output's shape, one is a single number (STM's `α · M`)
//! or one is a number per example (PKM's gates), candle's broadcasting operations otherwise;
//! broadcast gradients are summed back to each operand's shape.

use candle_core::{Result, Tensor};

use crate::kernels::cpu::elementwise::{map_rows, map_rows2, map1, map2, map3, sum_rows2, sum1, sum2};
use crate::kernels::cpu::{broadcast::align, real::Real, view};
use crate::prims::contract::backward::with_real;
use crate::prims::contract::{Backward, InputGrads};

/// Which operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Add,
    Sub,
    Mul,
    Div,
}

impl Kind {
    #[inline(always)]
    fn apply<T: Real>(self, a: T, b: T) -> T {
        match self {
            Kind::Add => a + b,
            Kind::Sub => a - b,
            Kind::Mul => a * b,
            Kind::Div => a / b,
        }
    }

    fn candle(self, a: &Tensor, b: &Tensor) -> Result<Tensor> {
        match self {
            Kind::Add => a.broadcast_add(b),
            Kind::Sub => a.broadcast_sub(b),
            Kind::Mul => a.broadcast_mul(b),
            Kind::Div => a.broadcast_div(b),
        }
    }
}

/// `a ∘ b` broadcast (batch axis first), contiguous.
pub(crate) fn train_forward(kind: Kind, a: &Tensor, b: &Tensor) -> Result<Tensor> {
    let (a2, b2) = align(a, b)?;
    let same = a.dims() == b.dims();
    if !(same || a.elem_count() == 1 || b.elem_count() == 1) {
        if let Some(rows) = PerRow::of(&a2, &b2) {
            return with_real!(a.dtype(), T => match kind {
                Kind::Add => rows.forward::<T, ADD>(a, b),
                Kind::Sub => rows.forward::<T, SUB>(a, b),
                Kind::Mul => rows.forward::<T, MUL>(a, b),
                Kind::Div => rows.forward::<T, DIV>(a, b),
            });
        }
        return kind.candle(&a2, &b2)?.contiguous();
    }
    let dims = if a.elem_count() >= b.elem_count() { a2.dims().to_vec() } else { b2.dims().to_vec() };
    with_real!(a.dtype(), T => match kind {
        Kind::Add => simple_forward::<T, ADD>(a, b, same, dims),
        Kind::Sub => simple_forward::<T, SUB>(a, b, same, dims),
        Kind::Mul => simple_forward::<T, MUL>(a, b, same, dims),
        Kind::Div => simple_forward::<T, DIV>(a, b, same, dims),
    })
}

fn simple_forward<T: Real, const K: u8>(a: &Tensor, b: &Tensor, same: bool, dims: Vec<usize>) -> Result<Tensor> {
    let kind = const { kind_of(K) };
    {
        let (ar, br) = (view::Read::new(a)?, view::Read::new(b)?);
        let (x, y) = (ar.slice::<T>()?, br.slice::<T>()?);
        let out: Vec<T> = if same {
            map2(x, y, |u, v| kind.apply(u, v))
        } else if y.len() == 1 {
            let v = y[0];
            map1(x, |u| kind.apply(u, v))
        } else {
            let u = x[0];
            map1(y, |v| kind.apply(u, v))
        };
        view::tensor(out, dims)
    }
}

/// The gradients of `a ∘ b` with respect to `a` and `b` (where needed), each summed back to
/// its operand's shape.
pub(crate) fn train_backward<S>(kind: Kind, bw: &Backward<'_, S>) -> InputGrads {
    let [a, b] = bw.inputs_of()?;
    let g = bw.grad_or_zeros(0)?;
    let simple = a.dims() == b.dims() || a.elem_count() == 1 || b.elem_count() == 1;
    if !simple {
        let (a2, b2) = align(a, b)?;
        if let Some(rows) = PerRow::of(&a2, &b2) {
            return with_real!(a.dtype(), T => match kind {
                Kind::Add => rows.backward::<T, ADD>(a, b, &g, bw.needs),
                Kind::Sub => rows.backward::<T, SUB>(a, b, &g, bw.needs),
                Kind::Mul => rows.backward::<T, MUL>(a, b, &g, bw.needs),
                Kind::Div => rows.backward::<T, DIV>(a, b, &g, bw.needs),
            });
        }
        return general_backward(kind, a, b, &g, bw.needs);
    }
    with_real!(a.dtype(), T => match kind {
        Kind::Add => simple_backward::<T, ADD>(a, b, &g, bw.needs),
        Kind::Sub => simple_backward::<T, SUB>(a, b, &g, bw.needs),
        Kind::Mul => simple_backward::<T, MUL>(a, b, &g, bw.needs),
        Kind::Div => simple_backward::<T, DIV>(a, b, &g, bw.needs),
    })
}

// The operation as a constant, so that the per-element loops are specialised (and vectorise).
const ADD: u8 = 0;
const SUB: u8 = 1;
const MUL: u8 = 2;
const DIV: u8 = 3;

const fn kind_of(k: u8) -> Kind {
    match k {
        ADD => Kind::Add,
        SUB => Kind::Sub,
        MUL => Kind::Mul,
        _ => Kind::Div,
    }
}

/// `d out / d a` at one element `(a, b)`.
#[inline(always)]
fn d_a<T: Real>(kind: Kind, _x: T, y: T) -> T {
    match kind {
        Kind::Add | Kind::Sub => T::one(),
        Kind::Mul => y,
        Kind::Div => T::one() / y,
    }
}

/// `d out / d b` at one element `(a, b)`.
#[inline(always)]
fn d_b<T: Real>(kind: Kind, x: T, y: T) -> T {
    match kind {
        Kind::Add => T::one(),
        Kind::Sub => -T::one(),
        Kind::Mul => x,
        Kind::Div => -x / (y * y),
    }
}

/// One operand a number per example against the other's whole example (`[B, 1, …]` against
/// `[B, n…]` once aligned): a gate `w` of per-example shape `[1]` times a state, as PKM's
/// gated writes `R + w ⊙ (R' − R)`. One pass per output and gradient, without candle's
/// strided broadcast.
#[derive(Clone, Copy)]
struct PerRow {
    /// Whether `a` is the per-row number (else `b`).
    a_small: bool,
}

impl PerRow {
    fn of(a2: &Tensor, b2: &Tensor) -> Option<PerRow> {
        let (da, db) = (a2.dims(), b2.dims());
        if da.len() != db.len() || da.is_empty() || da[0] != db[0] {
            return None;
        }
        let unit = |d: &[usize]| d[1..].iter().all(|&x| x == 1);
        match (unit(da), unit(db)) {
            (true, false) => Some(PerRow { a_small: true }),
            (false, true) => Some(PerRow { a_small: false }),
            _ => None,
        }
    }

    /// `(a, b)` from an element `e` of the whole operand and its row's number `s`.
    #[inline(always)]
    fn pair<T: Real>(self, e: T, s: T) -> (T, T) {
        if self.a_small { (s, e) } else { (e, s) }
    }

    /// The whole operand's and the per-row number's values.
    fn split<'a, T: Real>(self, x: &'a [T], y: &'a [T]) -> (&'a [T], &'a [T]) {
        if self.a_small { (y, x) } else { (x, y) }
    }

    fn forward<T: Real, const K: u8>(self, a: &Tensor, b: &Tensor) -> Result<Tensor> {
        let kind = const { kind_of(K) };
        let (ar, br) = (view::Read::new(a)?, view::Read::new(b)?);
        let (whole, rows) = self.split(ar.slice::<T>()?, br.slice::<T>()?);
        // `move`: captured by value, the flags are plain constants of the loop (by reference,
        // each element reloads them, and the loop does not vectorise).
        let out = map_rows(whole, rows, move |e, s| {
            let (u, v) = self.pair(e, s);
            kind.apply(u, v)
        });
        view::tensor(out, if self.a_small { b.dims() } else { a.dims() })
    }

    fn backward<T: Real, const K: u8>(self, a: &Tensor, b: &Tensor, g: &Tensor, needs: &[bool]) -> InputGrads {
        let kind = const { kind_of(K) };
        let (ar, br, gr) = (view::Read::new(a)?, view::Read::new(b)?, view::Read::new(g)?);
        let (whole, rows) = self.split(ar.slice::<T>()?, br.slice::<T>()?);
        let gs = gr.slice::<T>()?;
        let grad = |is_a: bool| -> Result<Tensor> {
            let term = move |gv: T, e: T, s: T| {
                let (u, v) = self.pair(e, s);
                gv * if is_a { d_a(kind, u, v) } else { d_b(kind, u, v) }
            };
            let t = if is_a { a } else { b };
            // The per-row number's gradient is its row's sum.
            let out =
                if is_a == self.a_small { sum_rows2(gs, whole, rows, term) } else { map_rows2(gs, whole, rows, term) };
            view::tensor(out, t.dims())
        };
        Ok(vec![if needs[0] { Some(grad(true)?) } else { None }, if needs[1] { Some(grad(false)?) } else { None }])
    }
}

/// Both operands of the output's shape, or one a single number: one pass per gradient.
fn simple_backward<T: Real, const K: u8>(a: &Tensor, b: &Tensor, g: &Tensor, needs: &[bool]) -> InputGrads {
    let kind = const { kind_of(K) };
    let (ar, br, gr) = (view::Read::new(a)?, view::Read::new(b)?, view::Read::new(g)?);
    let (x, y, gs) = (ar.slice::<T>()?, br.slice::<T>()?, gr.slice::<T>()?);
    let n = gs.len();
    let (da, db) = (move |x: T, y: T| d_a(kind, x, y), move |x: T, y: T| d_b(kind, x, y));
    let grad = |is_a: bool| -> Result<Tensor> {
        let t = if is_a { a } else { b };
        let identity = matches!(kind, Kind::Add) || (matches!(kind, Kind::Sub) && is_a);
        if t.elem_count() == 1 && n != 1 {
            // A broadcast single number: the sum over every element.
            let (x0, y0) = (x[0], y[0]);
            let sum = match (is_a, x.len() == 1, y.len() == 1) {
                _ if identity => sum1(gs, |g| g),
                (true, _, true) => sum1(gs, |g| g * da(x0, y0)),
                (true, _, false) => sum2(gs, y, |g, yv| g * da(x0, yv)),
                (false, true, _) => sum1(gs, |g| g * db(x0, y0)),
                (false, false, _) => sum2(gs, x, |g, xv| g * db(xv, y0)),
            };
            view::tensor(vec![sum], t.dims())
        } else if identity {
            Ok(g.clone()) // d out / d operand = 1: the gradient itself, no copy
        } else {
            let (x0, y0) = (x[0], y[0]);
            let out: Vec<T> = match (x.len() == 1, y.len() == 1) {
                (true, _) if is_a => map2(gs, y, |g, yv| g * da(x0, yv)),
                (_, true) if is_a => map2(gs, x, |g, xv| g * da(xv, y0)),
                _ if is_a => map3(gs, x, y, |g, xv, yv| g * da(xv, yv)),
                (true, _) => map2(gs, y, |g, yv| g * db(x0, yv)),
                (_, true) => map2(gs, x, |g, xv| g * db(xv, y0)),
                _ => map3(gs, x, y, |g, xv, yv| g * db(xv, yv)),
            };
            view::tensor(out, t.dims())
        }
    };
    Ok(vec![if needs[0] { Some(grad(true)?) } else { None }, if needs[1] { Some(grad(false)?) } else { None }])
}

/// Any broadcast, with candle's operations.
fn general_backward(kind: Kind, a: &Tensor, b: &Tensor, g: &Tensor, needs: &[bool]) -> InputGrads {
    let (a2, b2) = align(a, b)?;
    let ga = match kind {
        Kind::Add | Kind::Sub => g.clone(),
        Kind::Mul => g.broadcast_mul(&b2)?,
        Kind::Div => g.broadcast_div(&b2)?,
    };
    let gb = match kind {
        Kind::Add => g.clone(),
        Kind::Sub => g.neg()?,
        Kind::Mul => g.broadcast_mul(&a2)?,
        Kind::Div => g.broadcast_mul(&a2)?.broadcast_div(&b2.sqr()?)?.neg()?,
    };
    Ok(vec![
        if needs[0] { Some(sum_to(&ga, &a2)?.reshape(a.dims())?.contiguous()?) } else { None },
        if needs[1] { Some(sum_to(&gb, &b2)?.reshape(b.dims())?.contiguous()?) } else { None },
    ])
}

/// `g` summed over the axes along which `like` (of the same rank) was broadcast.
fn sum_to(g: &Tensor, like: &Tensor) -> Result<Tensor> {
    let mut g = g.clone();
    for (axis, (&dl, &dg)) in like.dims().iter().zip(g.dims().to_vec().iter()).enumerate() {
        if dl == 1 && dg != 1 {
            g = g.sum_keepdim(axis)?;
        }
    }
    Ok(g)
}

/// Defines a broadcasting binary primitive `$ty` named `$name` computing `$f(a, b)`
/// (`$kind` names the operation for the manual backward). The file defines `examples()`.
macro_rules! binary_broadcast {
    ($ty:ident, $name:literal, $summary:literal, $kind:ident, $f:expr) => {
        $crate::prims::contract::define::primitive! {
            $ty = $name, $summary,
            args: [tensor("a"), tensor("b")],
        }

        fn configure(
            args: &$crate::signature::Args,
        ) -> Result<(BinaryOp, $crate::signature::Inferred), $crate::signature::PrimError> {
            Ok((BinaryOp, $crate::prims::core::binary::infer(args)?))
        }

        struct BinaryOp;

        impl $crate::prims::contract::Op for BinaryOp {
            fn forward(
                &self,
                inputs: &[&candle_core::Tensor],
                _params: &[&candle_core::Tensor],
            ) -> candle_core::Result<Vec<candle_core::Tensor>> {
                let [a, b] = $crate::prims::contract::op::inputs($name, inputs)?;
                let (a, b) = $crate::kernels::cpu::broadcast::align(a, b)?;
                let f: fn(&candle_core::Tensor, &candle_core::Tensor) -> candle_core::Result<candle_core::Tensor> = $f;
                Ok(vec![f(&a, &b)?])
            }

            fn manual(&self) -> Option<&dyn $crate::prims::contract::TrainOp> {
                Some(self)
            }
        }

        impl $crate::prims::contract::ManualBackward for BinaryOp {
            type Saved = ();

            fn forward_train(
                &self,
                inputs: &[&candle_core::Tensor],
                _params: &[&candle_core::Tensor],
            ) -> $crate::prims::contract::Forward<()> {
                let [a, b] = $crate::prims::contract::op::inputs($name, inputs)?;
                Ok((
                    vec![$crate::prims::core::binary::train_forward($crate::prims::core::binary::Kind::$kind, a, b)?],
                    (),
                ))
            }

            fn backward(
                &self,
                b: &$crate::prims::contract::Backward<'_, ()>,
                _param_grads: &mut [$crate::prims::contract::ParamGrad],
            ) -> $crate::prims::contract::InputGrads {
                $crate::prims::core::binary::train_backward($crate::prims::core::binary::Kind::$kind, b)
            }
        }
    };
}

pub(crate) use binary_broadcast;

/// The shape inference every binary primitive shares: NumPy broadcasting.
pub(crate) fn infer(
    args: &crate::signature::Args,
) -> std::result::Result<crate::signature::Inferred, crate::signature::PrimError> {
    use crate::signature::{Combine, Hint, Inferred, PrimError, PrimErrorKind};
    use crate::ty::Ty;
    let (a, b) = (args.shape("a")?, args.shape("b")?);
    let out = crate::kernels::cpu::broadcast::broadcast_shape(a, b).ok_or_else(|| {
        PrimError::new(PrimErrorKind::Incompatible { a: a.clone(), b: b.clone(), how: Combine::Broadcast })
            .on("b")
            .hint(Hint::BroadcastRule)
    })?;
    let flops = out.iter().product::<usize>() as u64;
    Ok(Inferred::new(vec![Ty::Tensor(out)], vec![], flops))
}
