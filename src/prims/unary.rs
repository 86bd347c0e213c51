//! Shared shape of the element-wise unary primitives (`sigmoid`, `tanh`, `relu`, ...):
//! any tensor in, same shape out, no parameters.

/// Defines an element-wise primitive `$ty` named `$name` computing `$f(x)`.
macro_rules! unary_elementwise {
    ($ty:ident, $name:literal, $summary:literal, $flops_per_elem:literal, $f:expr) => {
        pub struct $ty;

        static SIGNATURE: [$crate::prims::ArgSpec; 1] = [$crate::prims::ArgSpec::tensor("x")];

        impl $crate::prims::Primitive for $ty {
            fn name(&self) -> &'static str {
                $name
            }
            fn summary(&self) -> &'static str {
                $summary
            }
            fn signature(&self) -> &'static [$crate::prims::ArgSpec] {
                &SIGNATURE
            }
            fn instantiate(
                &self,
                args: &$crate::prims::Args,
            ) -> Result<$crate::prims::Instance, $crate::prims::PrimError> {
                let x = args.shape("x")?.clone();
                let flops = ($flops_per_elem * x.iter().product::<usize>()) as u64;
                Ok($crate::prims::Instance::new(UnaryOp, vec![$crate::graph::Ty::Tensor(x)], vec![], flops))
            }
        }

        struct UnaryOp;

        impl $crate::prims::Op for UnaryOp {
            fn forward(
                &self,
                inputs: &[&candle_core::Tensor],
                _params: &[&candle_core::Tensor],
            ) -> candle_core::Result<Vec<candle_core::Tensor>> {
                let f: fn(&candle_core::Tensor) -> candle_core::Result<candle_core::Tensor> = $f;
                Ok(vec![f(inputs[0])?])
            }
        }
    };
}

pub(crate) use unary_elementwise;
