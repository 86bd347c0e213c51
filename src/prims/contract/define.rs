//! `primitive!`: the declaration a primitive file starts with.
//!
//! A primitive file writes only what is its own: the name used in `.mem` files, a one-line
//! summary, the arguments, calls that fit (the registry's gradient tests run on them) and one
//! function, `configure(args) -> Result<(Config, Inferred), PrimError>`, which checks one call
//! and returns what the op needs (its configuration) with the call's shape inference.
//!
//! The example calls are written in the declaration, `examples: [[("x", t(&[2, 3]))], …]`
//! (one bracket per call, arguments built with `crate::signature::example_args`), or, where
//! they are computed, by a file function `examples() -> Vec<Example>`.
//!
//! The macro derives the rest: the unit struct, [`Primitive`](crate::signature::Primitive) for the
//! checker (`infer` is `configure` without the configuration) and [`Lower`](super::Lower)
//! for the compiler (the op built from that same configuration, so what the checker accepted
//! and what runs cannot disagree). The arguments are written with the short constructors of
//! `crate::signature::arg` (`tensor("M")`, `int("heads")`, `float_or("lambda", 0.35)`).
//! Options, each at most once and in this order:
//! - `outputs: ["c", "h"]` names several outputs (the default is one, `out`);
//! - `op: |config| SomeOp { .. }` builds the op from the configuration (by default the
//!   configuration is the op);
//! - `passes_gradients: false` for a primitive whose purpose is to block gradients.
//!
//! ```ignore
//! primitive! {
//!     Concat = "concat", "concatenation [a : b] along the last axis",
//!     args: [tensor("a"), tensor("b")],
//!     examples: [[("a", t(&[2, 3])), ("b", t(&[4]))]],
//! }
//! ```

macro_rules! primitive {
    (
        $ty:ident = $name:literal, $summary:literal,
        args: [$($arg:expr),* $(,)?],
        $(examples: [$([$($example:expr),* $(,)?]),+ $(,)?],)?
        $(outputs: [$($output:literal),+ $(,)?],)?
        $(op: $op:expr,)?
        $(passes_gradients: $passes:literal,)?
    ) => {
        pub struct $ty;

        impl $crate::signature::Primitive for $ty {
            fn name(&self) -> &'static str {
                $name
            }
            fn summary(&self) -> &'static str {
                $summary
            }
            fn signature(&self) -> &'static [$crate::signature::ArgSpec] {
                #[allow(unused_imports)]
                use $crate::signature::arg::*;
                static SIGNATURE: &[$crate::signature::ArgSpec] = &[$($arg),*];
                SIGNATURE
            }
            $(fn outputs(&self) -> &'static [&'static str] {
                &[$($output),+]
            })?
            fn infer(&self, args: &$crate::signature::Args) -> Result<$crate::signature::Inferred, $crate::signature::PrimError> {
                configure(args).map(|(_, inferred)| inferred)
            }
            fn examples(&self) -> Vec<$crate::signature::Example> {
                $crate::prims::contract::define::primitive!(@examples $($([$($example),*]),+)?)
            }
            $(fn passes_gradients(&self) -> bool {
                $passes
            })?
        }

        impl $crate::prims::contract::Lower for $ty {
            fn lower(
                &self,
                args: &$crate::signature::Args,
            ) -> Result<std::sync::Arc<dyn $crate::prims::contract::Op>, $crate::signature::PrimError> {
                let (config, _) = configure(args)?;
                Ok(std::sync::Arc::new($crate::prims::contract::define::primitive!(@op config $(, $op)?)))
            }
        }
    };
    (@examples) => {
        examples()
    };
    (@examples $([$($example:expr),*]),+) => {{
        use $crate::signature::example_args::*;
        vec![$($crate::signature::Example::new([$($example),*])),+]
    }};
    (@op $config:ident) => {
        $config
    };
    (@op $config:ident, $op:expr) => {
        ($op)($config)
    };
}

pub(crate) use primitive;
