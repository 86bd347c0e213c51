//! Manual backward passes: an op's own reverse mode, used by training on the CPU (see
//! `compile::tape`, which drives them over the time steps of a training run).
//!
//! An op opts in by implementing [`ManualBackward`] and returning itself from
//! [`Op::manual`]. Its `forward_train` returns the outputs and a typed
//! `Saved` value — the intermediate results its `backward` needs, as named fields — and
//! `backward` gets the gradients of the loss with respect to the outputs and returns those
//! with respect to the inputs, adding the parameters' gradients into their [`ParamGrad`]
//! accumulators (summed over time steps in place). Ops without one fall back to candle's
//! autograd, node by node. One formulation per primitive: a device that gets its own kernels
//! implements the same `forward_train`/`backward` contract.

use std::any::Any;

use candle_core::backend::BackendStorage;
use candle_core::{CpuStorage, DType, Result, Shape, Tensor, bail};

use super::op::Op;
use crate::kernels::cpu::dense::backward_slices;
use crate::kernels::cpu::gemm::{Mat, MatMut, Par, matmul};
use crate::kernels::cpu::{real::Real, view};
use crate::signature::{Dense, Slot};

/// Calls `$body` with `$T` bound to the element type of `$dtype` (f32 or f64).
macro_rules! with_real {
    ($dtype:expr, $T:ident => $body:expr) => {
        match $dtype {
            candle_core::DType::F32 => {
                type $T = f32;
                $body
            }
            candle_core::DType::F64 => {
                type $T = f64;
                $body
            }
            other => candle_core::bail!("the training kernels support f32 and f64, got {other:?}"),
        }
    };
}
pub(crate) use with_real;

/// What a training forward returns: the outputs and the values its backward keeps.
pub type Forward<S> = Result<(Vec<Tensor>, S)>;

/// What a backward returns: the gradient of each tensor input, `None` where it is not needed.
pub type InputGrads = Result<Vec<Option<Tensor>>>;

/// Everything one node's backward at one time step can use.
pub struct Backward<'a, S: ?Sized = SavedAny> {
    /// The tensor inputs as the forward saw them (contiguous).
    pub inputs: &'a [Tensor],
    pub params: &'a [&'a Tensor],
    pub outputs: &'a [Tensor],
    /// What the op's training forward kept.
    pub saved: &'a S,
    /// `d loss / d output_k`, `None` where the output does not reach the loss.
    pub grads: &'a [Option<Tensor>],
    /// Which inputs need a gradient (the others may be returned as `None`).
    pub needs: &'a [bool],
}

impl<S: ?Sized> Backward<'_, S> {
    /// The gradient of output `k`, zeros where it does not reach the loss.
    pub fn grad_or_zeros(&self, k: usize) -> Result<Tensor> {
        match &self.grads[k] {
            Some(g) => view::contiguous(g),
            None => self.outputs[k].zeros_like(),
        }
    }

    /// The tensor inputs, exactly `N` of them (the op's arity; another count is a bug in memctl).
    pub fn inputs_of<const N: usize>(&self) -> Result<[&Tensor; N]> {
        let all = <&[Tensor; N]>::try_from(self.inputs).map_err(|_| {
            candle_core::Error::Msg(format!(
                "internal: a backward expects {N} tensor inputs, got {}",
                self.inputs.len()
            ))
        })?;
        Ok(all.each_ref())
    }

    /// The inputs' gradients from their elements, in input order (`None` where not computed):
    /// each shaped like its input, and kept only where it is needed.
    pub fn input_grads<T: Real>(&self, grads: impl IntoIterator<Item = Option<Vec<T>>>) -> InputGrads {
        let per_input = grads.into_iter().zip(self.inputs).zip(self.needs);
        per_input.map(|((g, x), &need)| g.filter(|_| need).map(|g| view::tensor(g, x.dims())).transpose()).collect()
    }

    /// The backward of `layer`, a dense layer among the call's parameters (`x: [rows, fan_in]`
    /// → `gy: [rows, fan_out]`): adds its weight's and bias's gradients into `param_grads` and
    /// returns `gx = gy w` when `want_x`.
    pub fn dense_backward<T: Real>(
        &self,
        layer: Dense,
        gy: &[T],
        x: &[T],
        want_x: bool,
        param_grads: &mut [ParamGrad],
    ) -> Result<Option<Vec<T>>> {
        let w = layer.weight.of(self.params);
        let (fan_out, fan_in) = w.dims2()?;
        let rows = x.len() / fan_in.max(1);
        let (gw, gb) = Slot::pair_mut(layer.weight, layer.bias, param_grads);
        let (gw, gb) = (gw.slice_mut::<T>(fan_out * fan_in)?, gb.slice_mut::<T>(fan_out)?);
        view::with_slice::<T, _>(w, |w| {
            Ok(backward_slices(gy, x, rows, w, fan_in, fan_out, Some(gw), Some(gb), want_x))
        })
    }

    /// The same backward with other saved values (a fused op handing on to a part).
    pub fn with_saved<'b, T: ?Sized>(&self, saved: &'b T) -> Backward<'b, T>
    where
        Self: 'b,
    {
        Backward {
            inputs: self.inputs,
            params: self.params,
            outputs: self.outputs,
            saved,
            grads: self.grads,
            needs: self.needs,
        }
    }
}

/// An op's own reverse mode.
pub trait ManualBackward: Op {
    /// What the training forward keeps for the backward.
    type Saved: Send + Sync + 'static;

    /// The forward of a training run: outputs equal to [`Op::forward`]'s (inputs are
    /// contiguous, f32 or f64) and the values [`ManualBackward::backward`] needs.
    fn forward_train(&self, inputs: &[&Tensor], params: &[&Tensor]) -> Forward<Self::Saved>;

    /// The gradients of the loss with respect to the inputs (`None` where not needed), given
    /// those with respect to the outputs; adds the parameters' gradients into `param_grads`
    /// (one per parameter of the call, in declared order).
    fn backward(&self, b: &Backward<'_, Self::Saved>, param_grads: &mut [ParamGrad]) -> InputGrads;
}

/// Implements [`ManualBackward`] for an op whose backward needs nothing but its inputs and the
/// output gradients: the training forward is [`Op::forward`] and saves nothing. The body gets
/// the op as `$op` and the [`Backward`] as `$b`, and adds any parameter gradients into
/// `$param_grads`.
///
/// ```ignore
/// backward_from_inputs!(AffineOp, |op, b, _param_grads| {
///     Ok(vec![b.grads[0].as_ref().map(|g| g * op.scale).transpose()?])
/// });
/// ```
macro_rules! backward_from_inputs {
    ($ty:ty, |$op:ident, $b:ident, $param_grads:ident| $body:block) => {
        impl $crate::prims::contract::ManualBackward for $ty {
            type Saved = ();

            fn forward_train(
                &self,
                inputs: &[&candle_core::Tensor],
                params: &[&candle_core::Tensor],
            ) -> $crate::prims::contract::Forward<()> {
                Ok(($crate::prims::contract::Op::forward(self, inputs, params)?, ()))
            }

            fn backward(
                &self,
                $b: &$crate::prims::contract::Backward<'_, ()>,
                $param_grads: &mut [$crate::prims::contract::ParamGrad],
            ) -> $crate::prims::contract::InputGrads {
                let $op = self;
                $body
            }
        }
    };
}
pub(crate) use backward_from_inputs;

/// The training forward of an op whose backward needs nothing but its inputs and outputs.
pub fn forward_saving_nothing(op: &dyn Op, inputs: &[&Tensor], params: &[&Tensor]) -> Forward<()> {
    Ok((op.forward(inputs, params)?, ()))
}

/// A [`ManualBackward`]'s saved values with their type erased, as the tape keeps them.
pub type SavedAny = Box<dyn Any + Send + Sync>;

/// [`ManualBackward`] in the form the tape calls (its `Saved` type erased).
pub trait TrainOp: Send + Sync {
    fn forward_train(&self, inputs: &[&Tensor], params: &[&Tensor]) -> Forward<SavedAny>;
    fn backward(&self, b: &Backward<'_, SavedAny>, param_grads: &mut [ParamGrad]) -> InputGrads;
}

impl<M: ManualBackward> TrainOp for M {
    fn forward_train(&self, inputs: &[&Tensor], params: &[&Tensor]) -> Forward<SavedAny> {
        let (outs, saved) = ManualBackward::forward_train(self, inputs, params)?;
        Ok((outs, Box::new(saved)))
    }

    fn backward(&self, b: &Backward<'_, SavedAny>, param_grads: &mut [ParamGrad]) -> InputGrads {
        let Some(saved) = b.saved.downcast_ref::<M::Saved>() else {
            bail!("internal: a manual backward received another op's saved values")
        };
        ManualBackward::backward(self, &b.with_saved(saved), param_grads)
    }
}

/// The backward of `op` by candle's autograd on its `forward` (for the rare shapes a manual
/// backward does not cover): recomputes the forward on `Var` copies of the inputs and
/// parameters and differentiates `Σ_k ⟨out_k, grad_k⟩`.
pub fn via_autograd<S: ?Sized>(op: &dyn Op, b: &Backward<'_, S>, param_grads: &mut [ParamGrad]) -> InputGrads {
    use candle_core::Var;
    let in_vars: Vec<Option<Var>> = b
        .inputs
        .iter()
        .zip(b.needs)
        .map(|(t, &n)| if n && t.dtype().is_float() { Var::from_tensor(t).map(Some) } else { Ok(None) })
        .collect::<Result<_>>()?;
    let p_vars: Vec<Var> = b.params.iter().map(|t| Var::from_tensor(t)).collect::<Result<_>>()?;
    let ins: Vec<&Tensor> =
        b.inputs.iter().zip(&in_vars).map(|(t, v)| v.as_ref().map_or(t, |v| v.as_tensor())).collect();
    let ps: Vec<&Tensor> = p_vars.iter().map(|v| v.as_tensor()).collect();
    let outs = op.forward(&ins, &ps)?;
    let mut dot: Option<Tensor> = None;
    for (o, g) in outs.iter().zip(b.grads) {
        if let Some(g) = g {
            let term = (o * g)?.sum_all()?;
            dot = Some(match dot {
                Some(d) => (d + term)?,
                None => term,
            });
        }
    }
    let Some(dot) = dot else { return Ok(vec![None; b.inputs.len()]) };
    let store = dot.backward()?;
    for (pg, v) in param_grads.iter_mut().zip(&p_vars) {
        if let Some(g) = store.get(v.as_tensor()) {
            pg.add(g)?;
        }
    }
    Ok(in_vars.iter().map(|v| v.as_ref().and_then(|v| store.get(v.as_tensor())).map(Tensor::detach)).collect())
}

/// A parameter's gradient, summed in place over every use (nodes and time steps). Empty until
/// the first contribution, as a parameter that never reaches the loss has no gradient.
#[derive(Default)]
pub struct ParamGrad {
    sum: Option<CpuStorage>,
    deferred: Option<Deferred>,
}

/// Contributions `a · b` (or `aᵀ · b`) with the same `b`, a weight that stays fixed for the
/// whole run: their `a`s are summed as they come and multiplied by `b` once, when the gradient
/// is read. One product instead of one per time step (see [`ParamGrad::deferred_product`]).
struct Deferred {
    a: CpuStorage,
    rows: usize,
    cols: usize,
    b: Tensor,
    transpose_a: bool,
}

impl ParamGrad {
    /// The accumulator as a slice of `n` elements (zeros on first use).
    pub fn slice_mut<T: Real>(&mut self, n: usize) -> Result<&mut [T]> {
        self.flush::<T>()?;
        slice_of(self.sum.get_or_insert_with(|| T::to_cpu_storage_owned(vec![T::zero(); n])), n)
    }

    /// The `a` (`[rows, cols]`, zeros at first) of a contribution `a · b` to this gradient, or
    /// `aᵀ · b` with `transpose_a`, to add into. `b` must stay the same tensor for the whole
    /// run (a weight): contributions with the same `b` share one `a`, and the product is taken
    /// once, when the gradient is read. Another `b` first takes the pending product.
    pub fn deferred_product<T: Real>(
        &mut self,
        b: &Tensor,
        rows: usize,
        cols: usize,
        transpose_a: bool,
    ) -> Result<&mut [T]> {
        let same = |d: &Deferred| d.b.id() == b.id() && (d.rows, d.cols, d.transpose_a) == (rows, cols, transpose_a);
        if !self.deferred.as_ref().is_some_and(same) {
            self.flush::<T>()?;
            let a = T::to_cpu_storage_owned(vec![T::zero(); rows * cols]);
            self.deferred = Some(Deferred { a, rows, cols, b: b.clone(), transpose_a });
        }
        let Some(d) = self.deferred.as_mut() else { unreachable!("set above") };
        slice_of(&mut d.a, rows * cols)
    }

    /// Adds the pending deferred product into the sum.
    fn flush<T: Real>(&mut self) -> Result<()> {
        let Some(Deferred { mut a, rows, cols, b, transpose_a }) = self.deferred.take() else { return Ok(()) };
        let a = slice_of::<T>(&mut a, rows * cols)?;
        let (a, out_rows, inner) = match transpose_a {
            true => (Mat::new(a, rows, cols).t(), cols, rows),
            false => (Mat::new(a, rows, cols), rows, cols),
        };
        let (n, m) = b.dims2()?;
        if inner != n {
            bail!("a deferred product's factors do not fit: a is {rows}×{cols}, b {n}×{m}");
        }
        let b = view::contiguous(&b)?;
        let sum = self.sum.get_or_insert_with(|| T::to_cpu_storage_owned(vec![T::zero(); out_rows * m]));
        let sum = slice_of::<T>(sum, out_rows * m)?;
        view::with_slice::<T, _>(&b, |b| {
            matmul(MatMut::new(sum, out_rows, m), a, Mat::new(b, n, m), true, Par::Pool);
            Ok(())
        })
    }

    /// Adds `g` (any shape with the parameter's number of elements).
    pub fn add(&mut self, g: &Tensor) -> Result<()> {
        with_real!(g.dtype(), T => self.add_typed::<T>(g))
    }

    fn add_typed<T: Real>(&mut self, g: &Tensor) -> Result<()> {
        let n = g.elem_count();
        view::with_slice::<T, _>(g, |src| {
            let dst = self.slice_mut::<T>(n)?;
            for (d, s) in dst.iter_mut().zip(src) {
                *d += *s;
            }
            Ok(())
        })
    }

    /// Adds `g` summed over its leading (batch) axis: `g` is `[B, ...]` for a parameter of
    /// `...` elements (e.g. a learned initial state broadcast over the batch).
    pub fn add_batch_sum(&mut self, g: &Tensor) -> Result<()> {
        with_real!(g.dtype(), T => self.add_batch_sum_typed::<T>(g))
    }

    fn add_batch_sum_typed<T: Real>(&mut self, g: &Tensor) -> Result<()> {
        let batch = g.dim(0)?;
        let n = g.elem_count() / batch.max(1);
        view::with_slice::<T, _>(g, |src| {
            let dst = self.slice_mut::<T>(n)?;
            for ex in src.chunks_exact(n.max(1)) {
                for (d, s) in dst.iter_mut().zip(ex) {
                    *d += *s;
                }
            }
            Ok(())
        })
    }

    /// The summed gradient as a tensor of `shape`, or `None` if nothing was added.
    pub fn into_tensor(mut self, shape: impl Into<Shape>) -> Result<Option<Tensor>> {
        match self.deferred.as_ref().map(|d| d.a.dtype()) {
            Some(DType::F32) => self.flush::<f32>()?,
            Some(DType::F64) => self.flush::<f64>()?,
            _ => {}
        }
        let Some(storage) = self.sum else { return Ok(None) };
        let shape = shape.into();
        Ok(Some(match storage {
            CpuStorage::F32(v) => view::tensor(v, shape)?,
            CpuStorage::F64(v) => view::tensor(v, shape)?,
            other => bail!("parameter gradient of dtype {:?}", other.dtype()),
        }))
    }
}

/// `storage` as a slice of `n` elements of `T`.
fn slice_of<T: Real>(storage: &mut CpuStorage, n: usize) -> Result<&mut [T]> {
    let dtype = storage.dtype();
    match T::as_mut_vec(storage) {
        Some(v) if v.len() == n => Ok(v.as_mut_slice()),
        Some(v) => bail!("parameter gradient has {} elements, a contribution has {n}", v.len()),
        None => bail!("parameter gradient has dtype {dtype:?}, a contribution {:?}", T::DTYPE),
    }
}

/// A manual backward written on plain slices of one element type, for operands that share the
/// batch size: the common shape (any op with one tensor input has it). Implementing it gives [`ManualBackward`],
/// which dispatches on the element type (f32 or f64) and, when an operand is shared by the
/// batch (batch axis 1), runs the plain forward and differentiates it with candle's autograd
/// ([`via_autograd`]) instead.
pub trait SlicedBackward: Op {
    /// What the training forward keeps for the backward.
    type Saved: Send + Sync + 'static;

    /// The outputs and saved values, all operands of one batch size and contiguous.
    fn forward_typed<T: Real>(&self, inputs: &[&Tensor], params: &[&Tensor]) -> Forward<Self::Saved>;

    /// The inputs' gradients, from the typed values in `b.saved`; adds the parameters'.
    fn backward_typed<T: Real>(&self, b: &Backward<'_, Self::Saved>, param_grads: &mut [ParamGrad]) -> InputGrads;
}

impl<S: SlicedBackward> ManualBackward for S {
    /// `None` when the operands' batch sizes differ.
    type Saved = Option<S::Saved>;

    fn forward_train(&self, inputs: &[&Tensor], params: &[&Tensor]) -> Forward<Self::Saved> {
        let batch = inputs.first().map(|t| t.dim(0)).transpose()?;
        if inputs.iter().any(|t| t.dim(0).ok() != batch) {
            let outs = self.forward(inputs, params)?;
            return Ok((outs.iter().map(|o| o.contiguous()).collect::<Result<_>>()?, None));
        }
        let dtype = inputs.first().map_or(DType::F32, |t| t.dtype());
        with_real!(dtype, T => {
            let (outs, saved) = self.forward_typed::<T>(inputs, params)?;
            Ok((outs, Some(saved)))
        })
    }

    fn backward(&self, b: &Backward<'_, Self::Saved>, param_grads: &mut [ParamGrad]) -> InputGrads {
        let Some(saved) = b.saved else {
            return via_autograd(self, b, param_grads);
        };
        let dtype = b.inputs.first().map_or(DType::F32, |t| t.dtype());
        with_real!(dtype, T => self.backward_typed::<T>(&b.with_saved(saved), param_grads))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::Device;

    #[test]
    fn gradients_accumulate_in_place_and_stay_empty_when_unused() -> Result<()> {
        let mut g = ParamGrad::default();
        g.add(&Tensor::new(&[1.0f32, 2.0], &Device::Cpu)?)?;
        g.add(&Tensor::new(&[[0.5f32], [0.25]], &Device::Cpu)?)?;
        g.add_batch_sum(&Tensor::new(&[[1.0f32, 1.0], [2.0, 2.0]], &Device::Cpu)?)?;
        assert_eq!(g.into_tensor(2)?.unwrap().to_vec1::<f32>()?, vec![4.5, 5.25]);
        assert!(ParamGrad::default().into_tensor(2)?.is_none());
        let mut wrong = ParamGrad::default();
        wrong.add(&Tensor::new(&[1.0f32], &Device::Cpu)?)?;
        assert!(wrong.add(&Tensor::new(&[1.0f64], &Device::Cpu)?).is_err());
        Ok(())
    }
}
