//! A row length known at compile time for narrow rows. A loop over rows of two or three
//! elements spends its time on the loop, not the arithmetic: PKM's m = 30 split into 10 or 15
//! machines has rows of 3 and 2, addressed tens of thousands of times a step. A kernel written
//! over a [`Width`] instead of a `usize` is compiled once per narrow width, where the inner
//! loops unroll, and once for every other width; [`by_width!`] picks the instance.

/// The length of a row: a constant for the narrow widths, a number for the rest.
pub trait Width: Copy {
    /// Whether the length is a compile-time constant (narrow rows).
    const FIXED: bool;
    fn get(self) -> usize;
}

/// A row of exactly `N` elements.
#[derive(Clone, Copy, Debug)]
pub struct Fixed<const N: usize>;

impl<const N: usize> Width for Fixed<N> {
    const FIXED: bool = true;
    #[inline(always)]
    fn get(self) -> usize {
        N
    }
}

/// A row whose length is only known at run time.
#[derive(Clone, Copy, Debug)]
pub struct Dynamic(pub usize);

impl Width for Dynamic {
    const FIXED: bool = false;
    #[inline(always)]
    fn get(self) -> usize {
        self.0
    }
}

/// The widest row given a compile-time instance.
pub const WIDEST_FIXED: usize = 8;

/// Evaluates `$body` with `$w` bound to a [`Width`] of length `$m`: a [`Fixed`] one up to
/// [`WIDEST_FIXED`], else [`Dynamic`]. `$body` is compiled once per arm.
macro_rules! by_width {
    ($m:expr, $w:ident => $body:expr) => {
        $crate::kernels::cpu::width::by_width!(@arms $m, $w, $body, 1 2 3 4 5 6 7 8)
    };
    (@arms $m:expr, $w:ident, $body:expr, $($n:literal)*) => {
        match $m {
            $($n => {
                let $w = $crate::kernels::cpu::width::Fixed::<$n>;
                $body
            })*
            m => {
                let $w = $crate::kernels::cpu::width::Dynamic(m);
                $body
            }
        }
    };
}
pub(crate) use by_width;

#[cfg(test)]
mod tests {
    use super::*;

    fn width_of<W: Width>(w: W) -> (usize, bool) {
        (w.get(), W::FIXED)
    }

    #[test]
    fn narrow_widths_are_fixed_and_wider_ones_dynamic() {
        for m in 1..=WIDEST_FIXED {
            assert_eq!(by_width!(m, w => width_of(w)), (m, true), "width {m}");
        }
        for m in [0, WIDEST_FIXED + 1, 30] {
            assert_eq!(by_width!(m, w => width_of(w)), (m, false), "width {m}");
        }
    }
}
