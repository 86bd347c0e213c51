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

multiversion! {
    /// `f(x_ri, s_r)` for every element of `x`, a row of `x.len() / s.len()` elements per `s_r`:
    /// a number per example broadcast over the example.
    pub fn map_rows[T: Real, F: Fn(T, T) -> T][T, F](x: &[T], s: &[T], f: F) -> Vec<T> {
        let n = x.len() / s.len().max(1);
        let mut out = Vec::with_capacity(x.len());
        let spare = &mut out.spare_capacity_mut()[..n * s.len()];
        for r in 0..s.len() {
            let (row, o, sr) = (&x[r * n..][..n], &mut spare[r * n..][..n], s[r]);
            for j in 0..n {
                o[j].write(f(row[j], sr));
            }
        }
        // SAFETY: every element was written just above.
        unsafe { out.set_len(n * s.len()) };
        out
    }
}

multiversion! {
    /// `f(g_ri, x_ri, s_r)` for every element, rows as in [`map_rows`].
    pub fn map_rows2[T: Real, F: Fn(T, T, T) -> T][T, F](g: &[T], x: &[T], s: &[T], f: F) -> Vec<T> {
        let n = g.len() / s.len().max(1);
        let x = &x[..n * s.len()];
        let mut out = Vec::with_capacity(g.len());
        let spare = &mut out.spare_capacity_mut()[..n * s.len()];
        for r in 0..s.len() {
            let (gr, xr, o, sr) = (&g[r * n..][..n], &x[r * n..][..n], &mut spare[r * n..][..n], s[r]);
            for j in 0..n {
                o[j].write(f(gr[j], xr[j], sr));
            }
        }
        // SAFETY: every element was written just above.
        unsafe { out.set_len(n * s.len()) };
        out
    }
}

multiversion! {
    /// `Σ_i f(g_ri, x_ri, s_r)` for each row `r`, rows as in [`map_rows`].
    pub fn sum_rows2[T: Real, F: Fn(T, T, T) -> T][T, F](g: &[T], x: &[T], s: &[T], f: F) -> Vec<T> {
        const LANES: usize = 8;
        let n = g.len() / s.len().max(1);
        let mut sums = Vec::with_capacity(s.len());
        for r in 0..s.len() {
            let (gr, xr, sr) = (&g[r * n..][..n], &x[r * n..][..n], s[r]);
            let mut acc = [T::zero(); LANES];
            let whole = n - n % LANES;
            for start in (0..whole).step_by(LANES) {
                for k in 0..LANES {
                    acc[k] += f(gr[start + k], xr[start + k], sr);
                }
            }
            let mut total = T::zero();
            for j in whole..n {
                total += f(gr[j], xr[j], sr);
            }
            for v in acc {
                total += v;
            }
            sums.push(total);
        }
        sums
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
        // Three rows of seven against a number per row.
        let s = [1.0f32, 10.0, 100.0];
        assert_eq!(map_rows(&x, &s, |u, r| u * r)[8], 80.0);
        assert_eq!(map_rows2(&x, &y, &s, |g, u, r| g + u * r)[20], 20.0 + 4000.0);
        let sums = sum_rows2(&x, &y, &s, |g, u, r| g * u * r);
        let by_hand = |r: usize| (7 * r..7 * r + 7).map(|i| (i * i * 2) as f32).sum::<f32>() * s[r];
        assert_eq!(sums, vec![by_hand(0), by_hand(1), by_hand(2)]);
        assert_eq!(sum2(&x, &y, |u, v| u + v), 630.0);
        let mut acc = vec![1.0f32; 21];
        add_into(&mut acc, &x);
        assert_eq!(acc[20], 21.0);
    }
}
