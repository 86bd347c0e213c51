//! Element-wise maps and sums over slices, compiled for AVX2 + FMA when the CPU has them
//! (see [`multiversion!`](super::par::multiversion)): the building blocks of the simple
//! manual backward passes (binary operations, activations, clipping).
//!
//! Inside a multiversioned body, loops are plain `for` loops, not iterator adaptors with
//! closures: a closure defined there inherits the AVX2 target features, and the (baseline)
//! adaptor code calling it then cannot inline it — one call per element (measured 5×
//! slower). Closures passed in by the caller (`f`) are baseline code and inline fine.

use super::par::multiversion;
use super::real::Real;

multiversion! {
    /// `f(x_i)` for every element.
    pub fn map1[T: Real, F: Fn(T) -> T][T, F](x: &[T], f: F) -> Vec<T> {
        let mut out = Vec::with_capacity(x.len());
        let spare = &mut out.spare_capacity_mut()[..x.len()];
        for i in 0..x.len() {
            spare[i].write(f(x[i]));
        }
        // SAFETY: every element was written just above.
        unsafe { out.set_len(x.len()) };
        out
    }
}

multiversion! {
    /// `f(x_i, y_i)` for every element (`x` and `y` of the same length).
    pub fn map2[T: Real, F: Fn(T, T) -> T][T, F](x: &[T], y: &[T], f: F) -> Vec<T> {
        let y = &y[..x.len()];
        let mut out = Vec::with_capacity(x.len());
        let spare = &mut out.spare_capacity_mut()[..x.len()];
        for i in 0..x.len() {
            spare[i].write(f(x[i], y[i]));
        }
        // SAFETY: every element was written just above.
        unsafe { out.set_len(x.len()) };
        out
    }
}

multiversion! {
    /// `f(x_i, y_i, z_i)` for every element (all of the same length).
    pub fn map3[T: Real, F: Fn(T, T, T) -> T][T, F](x: &[T], y: &[T], z: &[T], f: F) -> Vec<T> {
        let (y, z) = (&y[..x.len()], &z[..x.len()]);
        let mut out = Vec::with_capacity(x.len());
        let spare = &mut out.spare_capacity_mut()[..x.len()];
        for i in 0..x.len() {
            spare[i].write(f(x[i], y[i], z[i]));
        }
        // SAFETY: every element was written just above.
        unsafe { out.set_len(x.len()) };
        out
    }
}

multiversion! {
    /// `Σ_i f(x_i)`.
    pub fn sum1[T: Real, F: Fn(T) -> T][T, F](x: &[T], f: F) -> T {
        // Eight partial sums per block of 512 (so that the loop vectorises; float addition is
        // not associative), block totals in f64 (long sums of small terms of both signs, such
        // as a scalar's gradient over a whole memory, stay accurate).
        let mut total = 0.0f64;
        for block in x.chunks(512) {
            let mut acc = [T::zero(); 8];
            let chunks = block.chunks_exact(8);
            let rest = chunks.remainder();
            for c in chunks {
                for k in 0..8 {
                    acc[k] += f(c[k]);
                }
            }
            for &u in rest {
                acc[0] += f(u);
            }
            for v in acc {
                total += v.to_f64();
            }
        }
        T::from_f64(total)
    }
}

multiversion! {
    /// `Σ_i f(x_i, y_i)` (`x` and `y` of the same length), summed as [`sum1`].
    pub fn sum2[T: Real, F: Fn(T, T) -> T][T, F](x: &[T], y: &[T], f: F) -> T {
        let y = &y[..x.len()];
        let mut total = 0.0f64;
        for (bx, by) in x.chunks(512).zip(y.chunks(512)) {
            let mut acc = [T::zero(); 8];
            let (cx, cy) = (bx.chunks_exact(8), by.chunks_exact(8));
            let (rx, ry) = (cx.remainder(), cy.remainder());
            for (a, b) in cx.zip(cy) {
                for k in 0..8 {
                    acc[k] += f(a[k], b[k]);
                }
            }
            for (&u, &v) in rx.iter().zip(ry) {
                acc[0] += f(u, v);
            }
            for v in acc {
                total += v.to_f64();
            }
        }
        T::from_f64(total)
    }
}

multiversion! {
    /// `acc_i += x_i`.
    pub fn add_into[T: Real][T](acc: &mut [T], x: &[T]) {
        let x = &x[..acc.len()];
        for (a, &v) in acc.iter_mut().zip(x) {
            *a += v;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_and_sums() {
        let x: Vec<f32> = (0..21).map(|i| i as f32).collect();
        let y: Vec<f32> = (0..21).map(|i| (i * 2) as f32).collect();
        assert_eq!(map1(&x, |u| u + 1.0)[20], 21.0);
        assert_eq!(map2(&x, &y, |u, v| u * v)[3], 18.0);
        assert_eq!(map3(&x, &y, &x, |u, v, w| u + v + w)[2], 8.0);
        assert_eq!(sum1(&x, |u| u), 210.0);
        assert_eq!(sum2(&x, &y, |u, v| u + v), 630.0);
        let mut acc = vec![1.0f32; 21];
        add_into(&mut acc, &x);
        assert_eq!(acc[20], 21.0);
    }
}
