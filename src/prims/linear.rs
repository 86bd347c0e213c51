//! `linear(x, size, bias = true)`: a dense layer `y = W x + b` on the last axis of `x`.
//!
//! Shapes: `x: [..., n]` → `[..., size]`. Parameters `weight: [size, n]`, `bias: [size]`,
//! initialised U(±1/√n) like PyTorch's `nn.Linear` (which the papers' code uses).

use candle_core::Tensor;

use super::backward::with_real;
use super::*;
use crate::kernels::dense::{Transposed, backward_slices, dense, forward_slices};
use crate::kernels::{real::Real, view};

pub struct Linear;

static SIGNATURE: [ArgSpec; 3] = [
    ArgSpec::tensor("x"),
    ArgSpec::value("size", Kind::Int, Default::Required),
    ArgSpec::value("bias", Kind::Bool, Default::Bool(true)),
];

impl Primitive for Linear {
    fn name(&self) -> &'static str {
        "linear"
    }
    fn summary(&self) -> &'static str {
        "dense layer y = W x + b on the last axis"
    }
    fn signature(&self) -> &'static [ArgSpec] {
        &SIGNATURE
    }
    fn instantiate(&self, args: &Args) -> Result<Instance, PrimError> {
        let x = args.shape("x")?;
        let Some((&fan_in, lead)) = x.split_last() else {
            return Err(PrimError::new("`x` must be a vector or larger, but is a scalar").on("x"));
        };
        let size = args.size("size")?;
        let bias = args.bool("bias")?;
        let mut params = ParamDecl::dense("", fan_in, size).to_vec();
        if !bias {
            params.pop();
        }
        let mut out = lead.to_vec();
        out.push(size);
        let rows: usize = lead.iter().product();
        let flops = (2 * fan_in * size * rows) as u64;
        Ok(Instance::new(LinearOp::default(), vec![Ty::Tensor(out)], params, flops))
    }
}

#[derive(Default)]
pub(crate) struct LinearOp {
    wt: Transposed,
}

impl Op for LinearOp {
    fn forward(&self, inputs: &[&Tensor], params: &[&Tensor]) -> candle_core::Result<Vec<Tensor>> {
        Ok(vec![dense(inputs[0], params[0], params.get(1).copied())?])
    }

    fn has_backward(&self) -> bool {
        true
    }

    fn forward_train(&self, inputs: &[&Tensor], params: &[&Tensor]) -> candle_core::Result<(Vec<Tensor>, Saved)> {
        with_real!(inputs[0].dtype(), T => Ok((vec![linear_forward::<T>(inputs[0], params, &self.wt)?], vec![])))
    }

    fn backward(&self, b: &Backward<'_>, param_grads: &mut [ParamGrad]) -> candle_core::Result<Vec<Option<Tensor>>> {
        with_real!(b.inputs[0].dtype(), T => Ok(vec![linear_backward::<T>(b, param_grads)?]))
    }
}

/// `x Wᵀ + b` over the last axis, as one GEMM.
pub(crate) fn linear_forward<T: Real>(x: &Tensor, params: &[&Tensor], wt: &Transposed) -> candle_core::Result<Tensor> {
    let (fan_out, fan_in) = params[0].dims2()?;
    let rows = x.elem_count() / fan_in.max(1);
    let wt = wt.of(params[0])?;
    let (xr, wr) = (view::Read::new(x)?, view::Read::new(&wt)?);
    let br = params.get(1).map(|b| view::Read::new(b)).transpose()?;
    let bias = br.as_ref().map(|b| b.slice::<T>()).transpose()?;
    let y = forward_slices(xr.slice::<T>()?, rows, wr.slice::<T>()?, bias, fan_in, fan_out);
    let mut dims = x.dims().to_vec();
    if let Some(last) = dims.last_mut() {
        *last = fan_out;
    }
    view::tensor(y, dims)
}

/// The input gradient (if needed) of [`linear_forward`]; adds the weight and bias gradients.
pub(crate) fn linear_backward<T: Real>(
    b: &Backward<'_>,
    param_grads: &mut [ParamGrad],
) -> candle_core::Result<Option<Tensor>> {
    let (fan_out, fan_in) = b.params[0].dims2()?;
    let x = &b.inputs[0];
    let rows = x.elem_count() / fan_in.max(1);
    let gy = b.grad_or_zeros(0)?;
    let (gyr, xr, wr) = (view::Read::new(&gy)?, view::Read::new(x)?, view::Read::new(&b.params[0])?);
    let (gw, rest) = param_grads.split_first_mut().expect("linear has a weight");
    let gb = match rest.first_mut() {
        Some(g) => Some(g.slice_mut::<T>(fan_out)?),
        None => None,
    };
    let gx = backward_slices(
        gyr.slice::<T>()?,
        xr.slice::<T>()?,
        rows,
        wr.slice::<T>()?,
        fan_in,
        fan_out,
        Some(gw.slice_mut::<T>(fan_out * fan_in)?),
        gb,
        b.needs[0],
    );
    gx.map(|g| view::tensor(g, x.dims())).transpose()
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;

    #[test]
    fn shapes() {
        assert_eq!(out_shapes("linear", &[("x", t(&[3, 5])), ("size", int(7))]), vec![vec![3, 7]]);
        assert_eq!(param_count("linear", &[("x", t(&[5])), ("size", int(7))]), 5 * 7 + 7);
        assert_eq!(param_count("linear", &[("x", t(&[5])), ("size", int(7)), ("bias", boolean(false))]), 35);
        assert!(error("linear", &[("x", t(&[])), ("size", int(7))]).contains("scalar"));
    }

    #[test]
    fn gradients_match_finite_differences() {
        grad_check("linear", &[("x", t(&[3, 5])), ("size", int(4))]);
    }

    #[test]
    fn manual_backward_matches_autograd() {
        manual_backward_check("linear", &[("x", t(&[3, 5])), ("size", int(4))]);
        manual_backward_check("linear", &[("x", t(&[5])), ("size", int(4)), ("bias", boolean(false))]);
        manual_backward_check("embed", &[("x", t(&[2])), ("size", int(3))]);
    }
}
