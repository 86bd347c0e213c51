//! Cholesky factorisation and solves of small symmetric positive definite systems, in f64 over
//! row-major slices: the CPU side of `cuda::kanerva::spd_solve` and of the Kanerva machines'
//! manual backward (`kanerva_manual`).

use super::par::multiversion;

multiversion! {
    /// Writes the lower Cholesky factor of `a` into `l` (its upper triangle zeroed); `false` if
    /// `a` is not positive definite.
    ///
    /// Right-looking, a column at a time: once column `j` is scaled, it is subtracted from the
    /// trailing rows, each row's update an independent `axpy`. The row-by-row form (each entry
    /// a dot product of the row so far, then a division) is a chain of dependent operations:
    /// PKM factors thousands of 30 × 30 matrices a training step, where that chain, not the
    /// arithmetic, set the time. Column `j` is kept contiguous in row `j`'s upper part (`Lᵀ`)
    /// while it is used, and the upper triangle is cleared at the end.
    pub(crate) fn cholesky_into[][](a: &[f64], n: usize, l: &mut [f64]) -> bool {
        let l = &mut l[..n * n];
        for i in 0..n {
            l[i * n..i * n + i + 1].copy_from_slice(&a[i * n..i * n + i + 1]);
        }
        for j in 0..n {
            let d = l[j * n + j];
            if d <= 0.0 || !d.is_finite() {
                return false;
            }
            let djj = d.sqrt();
            l[j * n + j] = djj;
            let inv = 1.0 / djj;
            for i in j + 1..n {
                let v = l[i * n + j] * inv;
                l[i * n + j] = v;
                l[j * n + i] = v;
            }
            let (head, tail) = l.split_at_mut((j + 1) * n);
            let col = &head[j * n..];
            for (off, row) in tail.chunks_exact_mut(n).enumerate() {
                let i = j + 1 + off;
                axpy(-row[j], &col[j + 1..=i], &mut row[j + 1..=i]);
            }
        }
        for j in 0..n {
            l[j * n + j + 1..(j + 1) * n].fill(0.0);
        }
        true
    }
}

multiversion! {
    /// Overwrites the `n × r` row-major `y` with `(L Lᵀ)⁻¹ y`.
    pub(crate) fn cholesky_solve_in_place[][](l: &[f64], n: usize, y: &mut [f64], r: usize) {
        if r == 1 {
            return solve_one(l, n, y);
        }
        // Forward: L z = y, row by row over all right-hand sides at once.
        for i in 0..n {
            let (done, rest) = y.split_at_mut(i * r);
            let row = &mut rest[..r];
            for j in 0..i {
                axpy(-l[i * n + j], &done[j * r..(j + 1) * r], row);
            }
            let inv = 1.0 / l[i * n + i];
            row.iter_mut().for_each(|v| *v *= inv);
        }
        // Backward: Lᵀ x = z.
        for i in (0..n).rev() {
            let (head, tail) = y.split_at_mut((i + 1) * r);
            let row = &mut head[i * r..];
            for j in i + 1..n {
                axpy(-l[j * n + i], &tail[(j - i - 1) * r..(j - i) * r], row);
            }
            let inv = 1.0 / l[i * n + i];
            row.iter_mut().for_each(|v| *v *= inv);
        }
    }
}

/// [`cholesky_solve_in_place`] for one right-hand side, reading `L` by rows only: the forward
/// substitution as dot products, the backward one as `axpy`s (one row of `L` each).
#[inline(always)]
fn solve_one(l: &[f64], n: usize, y: &mut [f64]) {
    for i in 0..n {
        y[i] = (y[i] - dot(&l[i * n..i * n + i], &y[..i])) / l[i * n + i];
    }
    for i in (0..n).rev() {
        y[i] /= l[i * n + i];
        let (head, yi) = (i, y[i]);
        axpy(-yi, &l[i * n..i * n + head], &mut y[..head]);
    }
}

/// Dot product with four independent accumulators (lets the compiler vectorise).
#[inline(always)]
fn dot(a: &[f64], b: &[f64]) -> f64 {
    let mut acc = [0.0; 4];
    let (ca, cb) = (a.chunks_exact(4), b.chunks_exact(4));
    let tail: f64 = ca.remainder().iter().zip(cb.remainder()).map(|(x, y)| x * y).sum();
    for (x, y) in ca.zip(cb) {
        for k in 0..4 {
            acc[k] += x[k] * y[k];
        }
    }
    acc[0] + acc[1] + acc[2] + acc[3] + tail
}

/// `y += alpha · x`.
#[inline(always)]
fn axpy(alpha: f64, x: &[f64], y: &mut [f64]) {
    for (yv, xv) in y.iter_mut().zip(x) {
        *yv += alpha * xv;
    }
}

/// The lower Cholesky factor `L` (row-major, upper triangle zero) of the SPD matrix `a`
/// (only its lower triangle is read), or `None` if `a` is not positive definite (tests use it
/// to check positive definiteness).
#[cfg(test)]
pub(crate) fn cholesky(a: &[f64], n: usize) -> Option<Vec<f64>> {
    let mut l = vec![0.0; n * n];
    cholesky_into(a, n, &mut l).then_some(l)
}
