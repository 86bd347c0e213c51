//! The float types the CPU training kernels are written for (`f32` for training, `f64` for the
//! tests that compare them with candle's autograd), with vectorisable `exp`, `tanh` and
//! `sigmoid` for `f32`.
//!
//! The `f32` functions are branch-free polynomial approximations (Cephes' `expf` and `tanhf`,
//! within 2 ulp of the exact value) so that a loop over a slice compiles to SIMD code; libm's
//! `expf`/`tanhf` are scalar calls. The `f64` versions are the standard library's.

use std::ops::Neg;

use candle_core::{CpuStorage, WithDType};

/// A float element type of the CPU kernels (`max`/`min` come from candle's `VecOps`).
pub trait Real: WithDType + Neg<Output = Self> + Default + Copy + Send + Sync + 'static {
    fn exp(self) -> Self;
    fn tanh(self) -> Self;
    fn sqrt(self) -> Self;
    /// `ln(1 + x)`.
    fn ln_1p(self) -> Self;
    fn abs(self) -> Self;
    /// `1 / (1 + e^{−x})`.
    #[inline(always)]
    fn sigmoid(self) -> Self {
        Self::one() / (Self::one() + (-self).exp())
    }
    fn as_slice(s: &CpuStorage) -> Option<&[Self]>;
    fn as_mut_vec(s: &mut CpuStorage) -> Option<&mut Vec<Self>>;
}

/// `Real` for a float type: its storage variant, and its `exp` and `tanh` (the standard
/// library's for `f64`, the vectorisable approximations for `f32`); the rest is std's.
macro_rules! impl_real {
    ($t:ty, $variant:ident, exp: $exp:path, tanh: $tanh:path) => {
        impl Real for $t {
            #[inline(always)]
            fn exp(self) -> $t {
                $exp(self)
            }
            #[inline(always)]
            fn tanh(self) -> $t {
                $tanh(self)
            }
            #[inline(always)]
            fn sqrt(self) -> $t {
                <$t>::sqrt(self)
            }
            #[inline(always)]
            fn ln_1p(self) -> $t {
                <$t>::ln_1p(self)
            }
            #[inline(always)]
            fn abs(self) -> $t {
                <$t>::abs(self)
            }
            fn as_slice(s: &CpuStorage) -> Option<&[$t]> {
                if let CpuStorage::$variant(v) = s { Some(v) } else { None }
            }
            fn as_mut_vec(s: &mut CpuStorage) -> Option<&mut Vec<$t>> {
                if let CpuStorage::$variant(v) = s { Some(v) } else { None }
            }
        }
    };
}

impl_real!(f64, F64, exp: f64::exp, tanh: f64::tanh);
impl_real!(f32, F32, exp: exp_f32, tanh: tanh_f32);

/// `e^x` (Cephes `expf`): `x = n ln 2 + r`, `|r| ≤ ½ ln 2`, `e^r` by a degree-6 polynomial,
/// `2^n` built in the exponent bits. Inputs are clamped to `[−87.3, 88]` (results stay normal).
#[inline(always)]
#[allow(clippy::excessive_precision)]
pub fn exp_f32(x: f32) -> f32 {
    const LOG2E: f32 = std::f32::consts::LOG2_E;
    const LN2_HI: f32 = 0.693_359_4;
    const LN2_LO: f32 = -2.121_944_4e-4;
    // Round to nearest by the 1.5·2^23 trick (no rounding instruction needed).
    const SHIFTER: f32 = 12_582_912.0;
    let x = x.clamp(-87.3, 88.0);
    let shifted = x * LOG2E + SHIFTER;
    let n = shifted - SHIFTER;
    let r = x - n * LN2_HI - n * LN2_LO;
    let r2 = r * r;
    let p = ((((1.987_569_2e-4 * r + 1.398_199_9e-3) * r + 8.333_452e-3) * r + 4.166_579_6e-2) * r + 1.666_666_5e-1)
        * r
        + 5.000_000_1e-1;
    let er = p * r2 + r + 1.0;
    // `n` as an integer is in the low mantissa bits of `shifted` (read as bits, not with `as`,
    // whose saturating conversion does not vectorise); a NaN input stays NaN through `r`.
    let n_int = shifted.to_bits().wrapping_sub(SHIFTER.to_bits());
    let scale = f32::from_bits(n_int.wrapping_add(127) << 23);
    er * scale
}

/// `tanh x` (Cephes `tanhf`): an odd polynomial for `|x| < 0.625`, `1 − 2 / (e^{2|x|} + 1)`
/// with the sign of `x` above.
#[inline(always)]
#[allow(clippy::excessive_precision)]
pub fn tanh_f32(x: f32) -> f32 {
    let a = x.abs();
    let z = x * x;
    let small = ((((-5.704_988_7e-3 * z + 2.063_908_9e-2) * z - 5.373_971_6e-2) * z + 1.333_144_2e-1) * z
        - 3.333_328_2e-1)
        * z
        * x
        + x;
    let e = exp_f32(2.0 * a);
    let large = (1.0 - 2.0 / (e + 1.0)).copysign(x);
    if a < 0.625 { small } else { large }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ulps(a: f32, b: f32) -> f64 {
        ((a - b).abs() / (b.abs().max(f32::MIN_POSITIVE) * f32::EPSILON)) as f64
    }

    #[test]
    fn fast_exp_and_tanh_are_within_a_few_ulp() {
        let mut worst = (0.0f64, 0.0f64);
        let mut x = -20.0f32;
        while x < 20.0 {
            let e = exp_f32(x);
            let exact = (x as f64).exp() as f32;
            worst.0 = worst.0.max(ulps(e, exact));
            let t = tanh_f32(x);
            let exact = (x as f64).tanh() as f32;
            // Relative to the value, except near 0 where tanh x ≈ x.
            worst.1 = worst.1.max(ulps(t, exact));
            x += 0.000_731;
        }
        assert!(worst.0 <= 2.0, "exp: {} ulp", worst.0);
        assert!(worst.1 <= 3.0, "tanh: {} ulp", worst.1);
        assert_eq!(tanh_f32(0.0), 0.0);
        assert_eq!(tanh_f32(50.0), 1.0);
        assert_eq!(tanh_f32(-50.0), -1.0);
        assert!(exp_f32(-200.0) >= 0.0 && exp_f32(-200.0) < 1e-37);
        assert!(exp_f32(200.0).is_finite());
        assert!(exp_f32(f32::NAN).is_nan() && tanh_f32(f32::NAN).is_nan(), "a NaN stays NaN");
        // The extremes of the clamped range, where 2^n is built from its exponent bits.
        for x in [-87.3f32, -80.0, 80.0, 88.0] {
            assert!(ulps(exp_f32(x), (x as f64).exp() as f32) <= 2.0, "exp({x})");
        }
        assert!((0.0f32).sigmoid() == 0.5 && (100.0f32).sigmoid() == 1.0 && (-100.0f32).sigmoid() < 1e-37);
    }
}
