//! `task_kind!`: the declaration a task file starts with.
//!
//! A task file writes what is its own: the name used in `.mem` files, a one-line summary, its
//! options table ([`TaskOption`](super::options::TaskOption)s, from which the signature the
//! checker binds is derived) and a function that builds the configured task from the checked
//! option values:
//! - `builds: |o| <expression>,` in the declaration when building the task is one expression
//!   (`builds: |o| o.parse::<FreshTask<Copy>>()?,`);
//! - otherwise `fn instantiate(o: &Options) -> Result<Box<dyn Task>, PrimError>`, or, for a task that
//!   reads files (declared with `reads: "…"`, the line `memctl tasks` shows),
//!   `fn instantiate(o: &Options, dir: &Path) -> …`, where `dir` is the folder relative paths
//!   are resolved against (the spec file's, or the working directory). It typically reads
//!   every option at once into the task's struct, `let task: Copy = o.parse()?;`
//!   ([`Options::parse`](super::options::Options::parse)), then checks what relates options.
//!
//! The scores a model reaches without learning the task (chance, input-only shortcuts), which
//! results tables print beside the model's, are the configured task's
//! ([`Task::trivial_levels`](super::Task::trivial_levels)): computed from its checked options.
//!
//! A generated task with fixed held-out sets declares their default sizes with
//! `held_out: (validation, test),`: the options `validation` and `test`
//! ([`HeldOut`](super::held_out::HeldOut)) follow its own.
//!
//! The macro derives the unit struct, its options table (`Kind::options()`) and its
//! [`TaskKind`](super::TaskKind).
//!
//! ```ignore
//! task_kind! {
//!     CopyKind = "copy", "copy: read L random bit vectors, then write them back",
//!     options: &OPTIONS,
//!     held_out: (1000, 2000),
//!     builds: |o| o.parse::<FreshTask<Copy>>()?,
//! }
//! ```

macro_rules! task_kind {
    (
        $ty:ident = $name:literal, $summary:literal,
        options: $options:expr,
        $(held_out: ($validation:expr, $test:expr),)?
        $(reads: $reads:literal,)?
        $(builds: |$o:ident| $build:expr,)?
    ) => {
        pub struct $ty;

        impl $ty {
            /// The task's options: its own, then the held-out set sizes where it has them.
            fn options() -> &'static [$crate::tasks::options::TaskOption] {
                static TABLE: std::sync::LazyLock<Vec<$crate::tasks::options::TaskOption>> =
                    std::sync::LazyLock::new(|| {
                        $options
                            .iter()
                            .copied()
                            $(.chain($crate::tasks::held_out::HeldOut::options($validation, $test)))?
                            .collect()
                    });
                &TABLE
            }
        }

        impl $crate::tasks::contract::TaskKind for $ty {
            fn name(&self) -> &'static str {
                $name
            }
            fn summary(&self) -> &'static str {
                $summary
            }
            fn signature(&self) -> &'static [$crate::signature::ArgSpec] {
                static SIGNATURE: std::sync::LazyLock<Vec<$crate::signature::ArgSpec>> =
                    std::sync::LazyLock::new(|| $crate::tasks::options::signature($ty::options()));
                &SIGNATURE
            }
            fn instantiate(
                &self,
                options: &[$crate::value::Value],
            ) -> Result<Box<dyn $crate::tasks::contract::Task>, $crate::signature::PrimError> {
                self.instantiate_in(options, std::path::Path::new(""))
            }
            fn instantiate_in(
                &self,
                options: &[$crate::value::Value],
                dir: &std::path::Path,
            ) -> Result<Box<dyn $crate::tasks::contract::Task>, $crate::signature::PrimError> {
                let options = $crate::tasks::options::Options::new($ty::options(), options);
                $crate::tasks::define::task_kind!(@instantiate options, dir $(, reads $reads)? $(, builds |$o| $build)?)
            }
            fn accepted(&self) -> Vec<String> {
                $ty::options().iter().map(|o| o.accepted()).collect()
            }
            fn in_identity(&self, option: &str, value: &$crate::value::Value) -> bool {
                $crate::tasks::options::in_identity($ty::options(), option, value)
            }
            $(fn reads(&self) -> Option<&'static str> {
                Some($reads)
            })?
        }
    };
    (@instantiate $options:ident, $dir:ident) => {{
        let _ = $dir;
        instantiate(&$options)
    }};
    (@instantiate $options:ident, $dir:ident, reads $reads:literal) => {
        instantiate(&$options, $dir)
    };
    (@instantiate $options:ident, $dir:ident, builds |$o:ident| $build:expr) => {{
        let _ = $dir;
        let $o = &$options;
        Ok(Box::new($build))
    }};
}

pub(crate) use task_kind;
