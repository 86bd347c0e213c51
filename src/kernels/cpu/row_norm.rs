//! Layer normalisation of every row of a row-major matrix on plain slices, forward and
//! backward, for the manual backward passes (`mhdpa`'s three per-row norms). Same formula as
//! `kernels::blocks::layer_norm` (PyTorch's): biased variance, eps [`EPS`].

use super::par::multiversion;
use super::real::Real;
use super::reduce::{dot, sum, sum_sq_dev};

/// PyTorch's default epsilon of layer normalisation.
pub const EPS: f64 = 1e-5;

multiversion! {
    /// Every row `x_r` (`width` wide) → `x̂_r = (x_r − mean) / σ_r` into `xhat`, `y = x̂ ⊙ w + b`
    /// into `y`, and `1/σ_r` into `rstd`.
    pub fn forward_rows[T: Real][T](x: &[T], width: usize, w: &[T], b: &[T], xhat: &mut [T], y: &mut [T], rstd: &mut [T]) {
        let (w, b) = (&w[..width], &b[..width]);
        let inv = T::one() / T::from_f64(width as f64);
        for r in 0..rstd.len() {
            let xs = &x[r * width..][..width];
            let (hs, ys) = (&mut xhat[r * width..][..width], &mut y[r * width..][..width]);
            let mean = sum(xs) * inv;
            let var = sum_sq_dev(xs, mean);
            let rs = T::one() / (var * inv + T::from_f64(EPS)).sqrt();
            for j in 0..width {
                let h = (xs[j] - mean) * rs;
                hs[j] = h;
                ys[j] = h * w[j] + b[j];
            }
            rstd[r] = rs;
        }
    }
}

multiversion! {
    /// The backward of [`forward_rows`]: from `gy = d loss / d y` writes
    /// `gx = (1/σ)(g − mean(g) − x̂ mean(g ⊙ x̂))` with `g = gy ⊙ w`, and adds `Σ_r gy ⊙ x̂` to
    /// `gw` and `Σ_r gy` to `gb`.
    pub fn backward_rows[T: Real][T](
        gy: &[T],
        xhat: &[T],
        rstd: &[T],
        width: usize,
        w: &[T],
        gx: &mut [T],
        gw: &mut [T],
        gb: &mut [T],
    ) {
        let (w, gw, gb) = (&w[..width], &mut gw[..width], &mut gb[..width]);
        let inv = T::one() / T::from_f64(width as f64);
        for r in 0..rstd.len() {
            let (gys, hs) = (&gy[r * width..][..width], &xhat[r * width..][..width]);
            let gxs = &mut gx[r * width..][..width];
            for j in 0..width {
                gw[j] += gys[j] * hs[j];
                gb[j] += gys[j];
                gxs[j] = gys[j] * w[j];
            }
            let (m1, m2, rs) = (sum(gxs) * inv, dot(gxs, hs) * inv, rstd[r]);
            for j in 0..width {
                gxs[j] = rs * (gxs[j] - m1 - hs[j] * m2);
            }
        }
    }
}
