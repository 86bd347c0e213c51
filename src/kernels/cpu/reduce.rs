//! Sums of products written so that they vectorise: a float sum in one accumulator is a chain
//! of dependent adds the compiler may not reorder (one FMA per 4 cycles); sixteen independent
//! accumulators become two or four SIMD registers. Inlined into the multiversioned kernels
//! that call them, so they run with those kernels' target features.

use super::real::Real;

const LANES: usize = 16;

/// The accumulators' total, summed as a tree (`LANES / 2` lanes added to the others, then a
/// quarter, …): log₂ LANES vector adds. Folded left to right it was fifteen dependent scalar
/// adds, which for NAM's rows of 32 cost more than the products (a third of `tapeWrite`'s
/// backward).
#[inline(always)]
fn sum_lanes<T: Real>(mut acc: [T; LANES]) -> T {
    let mut half = LANES / 2;
    while half > 0 {
        for k in 0..half {
            acc[k] += acc[k + half];
        }
        half /= 2;
    }
    acc[0]
}

/// `Σ_i a_i b_i` (over the shorter of the two).
#[inline(always)]
pub fn dot<T: Real>(a: &[T], b: &[T]) -> T {
    let n = a.len().min(b.len());
    let (a, b) = (&a[..n], &b[..n]);
    if n < LANES {
        // No whole block: the lanes would only be zeroed and summed (PKM's machines of two
        // columns take thousands of dot products of length 2 a step).
        return a.iter().zip(b).fold(T::zero(), |s, (&x, &y)| s + x * y);
    }
    let mut acc = [T::zero(); LANES];
    let (ca, cb) = (a.chunks_exact(LANES), b.chunks_exact(LANES));
    let tail = ca.remainder().iter().zip(cb.remainder()).fold(T::zero(), |s, (&x, &y)| s + x * y);
    for (x, y) in ca.zip(cb) {
        for k in 0..LANES {
            acc[k] += x[k] * y[k];
        }
    }
    tail + sum_lanes(acc)
}

/// `Σ_i (a_i b_i + c_i d_i)` (over the shortest of the four): two dot products with one
/// final sum of the lanes.
#[inline(always)]
pub fn dot2<T: Real>(a: &[T], b: &[T], c: &[T], d: &[T]) -> T {
    let n = a.len().min(b.len()).min(c.len()).min(d.len());
    let (a, b, c, d) = (&a[..n], &b[..n], &c[..n], &d[..n]);
    if n < LANES {
        return (0..n).fold(T::zero(), |s, i| s + a[i] * b[i] + c[i] * d[i]);
    }
    let mut acc = [T::zero(); LANES];
    let whole = n - n % LANES;
    for start in (0..whole).step_by(LANES) {
        let (x, y, z, w) = (&a[start..][..LANES], &b[start..][..LANES], &c[start..][..LANES], &d[start..][..LANES]);
        for k in 0..LANES {
            acc[k] += x[k] * y[k] + z[k] * w[k];
        }
    }
    let tail = (whole..n).fold(T::zero(), |s, i| s + a[i] * b[i] + c[i] * d[i]);
    tail + sum_lanes(acc)
}

/// `Σ_i a_i`.
#[inline(always)]
pub fn sum<T: Real>(a: &[T]) -> T {
    let mut acc = [T::zero(); LANES];
    let chunks = a.chunks_exact(LANES);
    let tail = chunks.remainder().iter().fold(T::zero(), |s, &x| s + x);
    for x in chunks {
        for k in 0..LANES {
            acc[k] += x[k];
        }
    }
    tail + sum_lanes(acc)
}

/// `Σ_i (a_i − c)²`.
#[inline(always)]
pub fn sum_sq_dev<T: Real>(a: &[T], c: T) -> T {
    let mut acc = [T::zero(); LANES];
    let chunks = a.chunks_exact(LANES);
    let tail = chunks.remainder().iter().fold(T::zero(), |s, &x| s + (x - c) * (x - c));
    for x in chunks {
        for k in 0..LANES {
            acc[k] += (x[k] - c) * (x[k] - c);
        }
    }
    tail + sum_lanes(acc)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_cover_every_element_whatever_the_length() {
        for n in [0, 1, 2, 15, 16, 17, 40] {
            let a: Vec<f64> = (0..n).map(|i| i as f64).collect();
            let b: Vec<f64> = (0..n + 3).map(|i| 2.0 - i as f64 * 0.5).collect();
            let want: f64 = (0..n).map(|i| a[i] * b[i]).sum();
            assert!((dot(&a, &b) - want).abs() < 1e-9, "n = {n}");
            assert!((dot2(&a, &b, &b, &a) - 2.0 * want).abs() < 1e-9, "n = {n}");
            let (total, mean) = (a.iter().sum::<f64>(), 0.5 * n as f64);
            assert!((sum(&a) - total).abs() < 1e-9, "n = {n}");
            let dev: f64 = a.iter().map(|x| (x - mean) * (x - mean)).sum();
            assert!((sum_sq_dev(&a, mean) - dev).abs() < 1e-9, "n = {n}");
        }
    }
}
