//! `memctl doctor --check`'s check of the reductions themselves: sums of the shapes memctl's
//! gradients produce, on a device, against sums in f64 on the CPU.
//!
//! The model checks (`device_check`) cover reductions only at their small sizes. The vendored
//! candle-core's split sums (vendor/README.md) change how a sum with few outputs runs on CUDA
//! only from 4 096 elements per output, and how a reduction to fewer than 16 384 short sums
//! runs; these shapes reach both, contiguous and strided, one with no split (an odd length), one
//! split into only 8 parts, sums of only 8 elements, and sums of 1 to 3 elements (which stay on
//! the one-thread-per-output kernel: candle's block kernel gets sums of one element wrong).

use candle_core::{DType, Device, Result, Tensor};

/// Each case: the input's shape, the axes summed (kept as axes of one), whether the input is
/// read transposed (its last two axes swapped, a strided view).
pub(super) const CASES: &[(&[usize], &[usize], bool)] = &[
    (&[4096], &[0], false),
    (&[4097], &[0], false),
    (&[32, 96, 96], &[0, 1, 2], false),
    (&[32, 8, 96, 96], &[0, 1, 2, 3], false),
    (&[32, 96, 2, 96], &[0, 1, 3], false),
    (&[32, 96, 96], &[0, 1, 2], true),
    (&[32, 256], &[0], false),
    // Few parts and short sums: blocks smaller than a warp would sum to zero (vendor/README.md).
    (&[12288], &[0], false),
    (&[8, 300], &[0], false),
    (&[3072, 96], &[1], false),
    (&[64, 96], &[0], true),
    // Sums of 1, 2 and 3 contiguous elements into a few outputs: candle's `fast_sum_f32` gets
    // those of one element wrong (vendor/README.md), so they must stay on the one-thread kernel.
    (&[37, 1], &[1], false),
    (&[37, 2], &[1], false),
    (&[37, 3], &[1], false),
    (&[5, 1, 7], &[1], false),
];

/// The largest difference over every case and output, relative to the sum of the summed
/// values' magnitudes (the scale of a sum's rounding), and how many cases ran.
pub fn check(device: &Device) -> Result<(f64, usize)> {
    let mut worst = 0f64;
    for (case, &(shape, axes, transposed)) in CASES.iter().enumerate() {
        let values = pseudo_random(shape.iter().product(), case as u64 + 1);
        let host = Tensor::from_vec(values, shape, &Device::Cpu)?;
        let host = if transposed { host.t()? } else { host };
        let on_device = host.to_device(device)?.sum_keepdim(axes)?.to_dtype(DType::F64)?.to_device(&Device::Cpu)?;
        let exact = host.to_dtype(DType::F64)?;
        let reference = exact.sum_keepdim(axes)?;
        let scale = exact.abs()?.sum_keepdim(axes)?;
        let difference = on_device.sub(&reference)?.abs()?.div(&scale)?.max_all()?.to_scalar::<f64>()?;
        worst = if difference.is_nan() { f64::NAN } else { worst.max(difference) };
    }
    Ok((worst, CASES.len()))
}

/// `n` values in [−1, 1) from a 64-bit linear congruential generator (Knuth's MMIX constants):
/// the same on every machine, with no dependence on candle's random generators.
pub(crate) fn pseudo_random(n: usize, seed: u64) -> Vec<f32> {
    let mut state = seed;
    (0..n)
        .map(|_| {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((state >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_values_fill_their_range_and_differ_by_seed() {
        let (a, b) = (pseudo_random(1000, 1), pseudo_random(1000, 2));
        assert!(a.iter().all(|v| (-1.0..1.0).contains(v)));
        assert!(a.iter().any(|&v| v < -0.9) && a.iter().any(|&v| v > 0.9));
        assert_ne!(a, b);
    }
}
