//! Shared shape of the element-wise unary primitives (`sigmoid`, `tanh`, `relu`, ...):
//! any tensor in, same shape out, no parameters.

use crate::signature::Example;

/// Defines an element-wise primitive `$ty` named `$name` computing `$f(x)`; with
/// `$dydx`, the derivative as a function of the output `y` (with `T` the float type), it has
/// a manual backward: `d x = d y · dydx(y)` from the output the tape keeps. The file defines
/// `examples()`.
macro_rules! unary_elementwise {
    ($ty:ident, $name:literal, $summary:literal, $flops_per_elem:literal, $f:expr) => {
        $crate::prims::core::unary::unary_elementwise!(@define $ty, $name, $summary, $flops_per_elem, $f);
        impl $crate::prims::contract::Op for UnaryOp {
            $crate::prims::core::unary::unary_elementwise!(@forward $name, $f);
        }
    };
    ($ty:ident, $name:literal, $summary:literal, $flops_per_elem:literal, $f:expr, $dydx:expr) => {
        $crate::prims::core::unary::unary_elementwise!(@define $ty, $name, $summary, $flops_per_elem, $f);
        impl $crate::prims::contract::Op for UnaryOp {
            $crate::prims::core::unary::unary_elementwise!(@forward $name, $f);

            fn manual(&self) -> Option<&dyn $crate::prims::contract::TrainOp> {
                Some(self)
            }
        }

        /// The backward reads the output, which the tape keeps.
        impl $crate::prims::contract::SlicedBackward for UnaryOp {
            type Saved = ();

            fn forward_typed<T: $crate::kernels::cpu::real::Real>(
                &self,
                inputs: &[&candle_core::Tensor],
                params: &[&candle_core::Tensor],
            ) -> $crate::prims::contract::Forward<()> {
                use $crate::prims::contract::Op;
                let y = self.forward(inputs, params)?.remove(0);
                Ok((vec![y.contiguous()?], ()))
            }

            fn backward_typed<T: $crate::kernels::cpu::real::Real>(
                &self,
                b: &$crate::prims::contract::Backward<'_, ()>,
                _param_grads: &mut [$crate::prims::contract::ParamGrad],
            ) -> $crate::prims::contract::InputGrads {
                match &b.grads[0] {
                    Some(g) if b.needs[0] => Ok(vec![Some(manual_backward::<T>(&b.outputs[0], g)?)]),
                    _ => Ok(vec![None]),
                }
            }
        }

        fn manual_backward<T: $crate::kernels::cpu::real::Real>(
            y: &candle_core::Tensor,
            g: &candle_core::Tensor,
        ) -> candle_core::Result<candle_core::Tensor> {
            use $crate::kernels::cpu::view;
            let g = view::contiguous(g)?;
            let (yr, gr) = (view::Read::new(y)?, view::Read::new(&g)?);
            let dx: Vec<T> = yr.slice::<T>()?.iter().zip(gr.slice::<T>()?).map(|(&y, &g)| g * ($dydx)(y)).collect();
            view::tensor(dx, y.dims())
        }
    };
    (@define $ty:ident, $name:literal, $summary:literal, $flops_per_elem:literal, $f:expr) => {
        $crate::prims::contract::define::primitive! {
            $ty = $name, $summary,
            args: [tensor("x")],
        }

        fn configure(
            args: &$crate::signature::Args,
        ) -> Result<(UnaryOp, $crate::signature::Inferred), $crate::signature::PrimError> {
            let x = args.shape("x")?.clone();
            let flops = ($flops_per_elem * x.iter().product::<usize>()) as u64;
            Ok((UnaryOp, $crate::signature::Inferred::new(vec![$crate::ty::Ty::Tensor(x)], vec![], flops)))
        }

        struct UnaryOp;
    };
    (@forward $name:literal, $f:expr) => {
        fn forward(
            &self,
            inputs: &[&candle_core::Tensor],
            _params: &[&candle_core::Tensor],
        ) -> candle_core::Result<Vec<candle_core::Tensor>> {
            let [x] = $crate::prims::contract::op::inputs($name, inputs)?;
            let f: fn(&candle_core::Tensor) -> candle_core::Result<candle_core::Tensor> = $f;
            Ok(vec![f(x)?])
        }
    };
}

pub(crate) use unary_elementwise;

/// The examples of an element-wise primitive defined everywhere: a vector and a matrix.
pub(super) fn vector_and_matrix_examples() -> Vec<Example> {
    use crate::signature::example_args::*;
    vec![Example::new([("x", t(&[3]))]), Example::new([("x", t(&[2, 3]))])]
}
