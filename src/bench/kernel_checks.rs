//! The checks of the kernels themselves that `memctl doctor --check` runs after the models':
//! the reductions at sizes the small models do not reach, the optimisers' updates with a clamp
//! that binds, and the Kanerva machines' solves. Each gives the largest relative difference
//! from its reference and how many cases ran; it passes within `device_check::TOLERANCE`.

use candle_core::{Device, Result};

use super::{optim_check, solve_check, sums_check};

/// One check: its name in the report, what its cases are, how many there are, and the check.
pub struct KernelCheck {
    pub name: &'static str,
    pub cases_are: &'static str,
    pub cases: usize,
    pub run: fn(&Device) -> Result<(f64, usize)>,
}

/// Every kernel check, in the report's order.
pub const KERNEL_CHECKS: [KernelCheck; 3] = [
    KernelCheck { name: "sums", cases_are: "shapes", cases: sums_check::CASES.len(), run: sums_check::check },
    KernelCheck { name: "updates", cases_are: "optimisers", cases: optim_check::CASES.len(), run: optim_check::check },
    KernelCheck { name: "solves", cases_are: "shapes", cases: solve_check::CASES.len(), run: solve_check::check },
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::device_check::TOLERANCE;

    #[test]
    fn the_cpu_passes_every_kernel_check_with_all_its_cases() -> Result<()> {
        for check in &KERNEL_CHECKS {
            let (worst, cases) = (check.run)(&Device::Cpu)?;
            assert_eq!(cases, check.cases, "{}", check.name);
            assert!(worst <= TOLERANCE, "{}: largest relative difference {worst}", check.name);
        }
        Ok(())
    }
}
