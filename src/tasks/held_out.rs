//! The sizes of a generated task's fixed held-out sets: the options `validation` and `test`
//! (examples in the validation set and in each test set), declared with the `task_kind!` item
//! `held_out: (validation, test),` (their defaults), which appends them to the task's options;
//! a task's options struct reads them as `#[serde(flatten)] held_out: HeldOut`.

use super::options::TaskOption;

/// Examples in the validation set and in each test set.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Deserialize)]
pub(super) struct HeldOut {
    pub validation: usize,
    pub test: usize,
}

impl HeldOut {
    /// The two options, with these defaults.
    pub(super) const fn options(validation: i64, test: i64) -> [TaskOption; 2] {
        [TaskOption::int("validation", validation, 1, 10_000_000), TaskOption::int("test", test, 1, 10_000_000)]
    }
}
