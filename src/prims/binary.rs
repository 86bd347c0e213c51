//! Shared shape of the element-wise binary primitives (`add`, `sub`, `mul`, `div`): per-example
//! shapes broadcast like NumPy, the batch axis stays first (see `kernels::broadcast`).
//! The operators `+ - * ⊙ /` between tensors are these primitives.

/// Defines a broadcasting binary primitive `$ty` named `$name` computing `$f(a, b)`.
macro_rules! binary_broadcast {
    ($ty:ident, $name:literal, $summary:literal, $f:expr) => {
        pub struct $ty;

        static SIGNATURE: [$crate::prims::ArgSpec; 2] =
            [$crate::prims::ArgSpec::tensor("a"), $crate::prims::ArgSpec::tensor("b")];

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
                use $crate::graph::ShapeDisplay;
                let (a, b) = (args.shape("a")?, args.shape("b")?);
                let out = $crate::kernels::broadcast::broadcast_shape(a, b).ok_or_else(|| {
                    $crate::prims::PrimError::new(format!(
                        "shapes {} and {} do not broadcast",
                        ShapeDisplay(a),
                        ShapeDisplay(b)
                    ))
                    .on("b")
                    .hint("trailing dimensions must be equal or 1")
                })?;
                let flops = out.iter().product::<usize>() as u64;
                Ok($crate::prims::Instance::new(BinaryOp, vec![$crate::graph::Ty::Tensor(out)], vec![], flops))
            }
        }

        struct BinaryOp;

        impl $crate::prims::Op for BinaryOp {
            fn forward(
                &self,
                inputs: &[&candle_core::Tensor],
                _params: &[&candle_core::Tensor],
            ) -> candle_core::Result<Vec<candle_core::Tensor>> {
                let (a, b) = $crate::kernels::broadcast::align(inputs[0], inputs[1])?;
                let f: fn(&candle_core::Tensor, &candle_core::Tensor) -> candle_core::Result<candle_core::Tensor> = $f;
                Ok(vec![f(&a, &b)?])
            }
        }
    };
}

pub(crate) use binary_broadcast;
