//! Matrix products on strided slices for the training kernels, through the `gemm` crate (the
//! kernels candle's own `matmul` uses): transposes are strides, not copies, and a product can
//! accumulate into its destination (`dst += a · b`), which the backward passes use to sum
//! parameter gradients over time steps in place.

use std::marker::PhantomData;
use std::mem::MaybeUninit;

use super::real::Real;

/// A read-only matrix in a slice: element `(i, j)` is `data[i·rs + j·cs]`.
#[derive(Clone, Copy)]
pub struct Mat<'a, T> {
    data: &'a [T],
    rows: usize,
    cols: usize,
    rs: usize,
    cs: usize,
}

impl<'a, T> Mat<'a, T> {
    /// Row-major `rows × cols` (the first `rows·cols` elements of `data`).
    pub fn new(data: &'a [T], rows: usize, cols: usize) -> Mat<'a, T> {
        Mat::strided(data, rows, cols, cols, 1)
    }

    pub fn strided(data: &'a [T], rows: usize, cols: usize, rs: usize, cs: usize) -> Mat<'a, T> {
        let m = Mat { data, rows, cols, rs, cs };
        assert!(
            m.fits(data.len()),
            "matrix {rows}×{cols} (strides {rs}, {cs}) does not fit in {} elements",
            data.len()
        );
        m
    }

    /// The transpose (a view).
    pub fn t(self) -> Mat<'a, T> {
        Mat { data: self.data, rows: self.cols, cols: self.rows, rs: self.cs, cs: self.rs }
    }

    pub fn rows(&self) -> usize {
        self.rows
    }

    pub fn cols(&self) -> usize {
        self.cols
    }

    fn fits(&self, len: usize) -> bool {
        self.rows == 0 || self.cols == 0 || (self.rows - 1) * self.rs + (self.cols - 1) * self.cs < len
    }
}

/// A mutable matrix in a slice, possibly of not yet initialised elements (a product
/// overwriting it writes every element; see [`matmul_new`]).
pub struct MatMut<'a, T> {
    data: *mut T,
    rows: usize,
    cols: usize,
    rs: usize,
    cs: usize,
    _borrow: PhantomData<&'a mut [T]>,
}

impl<'a, T> MatMut<'a, T> {
    /// Row-major `rows × cols`.
    pub fn new(data: &'a mut [T], rows: usize, cols: usize) -> MatMut<'a, T> {
        MatMut::strided(data, rows, cols, cols, 1)
    }

    pub fn strided(data: &'a mut [T], rows: usize, cols: usize, rs: usize, cs: usize) -> MatMut<'a, T> {
        MatMut::raw(data.as_mut_ptr(), data.len(), rows, cols, rs, cs)
    }

    /// Row-major `rows × cols` in memory not yet initialised: only a product that overwrites
    /// it (`accumulate = false`) may use it, and it then holds initialised values.
    pub fn uninit(data: &'a mut [MaybeUninit<T>], rows: usize, cols: usize) -> MatMut<'a, T> {
        MatMut::raw(data.as_mut_ptr().cast(), data.len(), rows, cols, cols, 1)
    }

    fn raw(data: *mut T, len: usize, rows: usize, cols: usize, rs: usize, cs: usize) -> MatMut<'a, T> {
        assert!(
            rows == 0 || cols == 0 || (rows - 1) * rs + (cols - 1) * cs < len,
            "matrix {rows}×{cols} (strides {rs}, {cs}) does not fit in {len} elements"
        );
        MatMut { data, rows, cols, rs, cs, _borrow: PhantomData }
    }
}

/// Whether a product may split over the current rayon pool.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Par {
    /// On the calling thread (the caller already parallelises, e.g. over the batch).
    Seq,
    /// Over the current pool when it has more than one thread and the product is large.
    Pool,
}

/// `dst = a · b`, or `dst += a · b` when `accumulate`.
pub fn matmul<T: Real>(dst: MatMut<'_, T>, a: Mat<'_, T>, b: Mat<'_, T>, accumulate: bool, par: Par) {
    assert!(
        a.rows == dst.rows && b.cols == dst.cols && a.cols == b.rows,
        "matmul shapes: {}×{} · {}×{} → {}×{}",
        a.rows,
        a.cols,
        b.rows,
        b.cols,
        dst.rows,
        dst.cols
    );
    let (m, n, k) = (dst.rows, dst.cols, a.cols);
    if m == 0 || n == 0 {
        return;
    }
    if k == 0 {
        if !accumulate {
            for i in 0..m {
                for j in 0..n {
                    // SAFETY: inside the view (checked in `MatMut::raw`); a plain write, as
                    // the element may not be initialised.
                    unsafe { dst.data.add(i * dst.rs + j * dst.cs).write(T::zero()) };
                }
            }
        }
        return;
    }
    let parallelism = match par {
        Par::Pool if super::par::threads() > 1 => gemm::Parallelism::Rayon(0),
        _ => gemm::Parallelism::None,
    };
    // SAFETY: the three views were checked to lie inside their slices (`Mat::strided`,
    // `MatMut::raw`), the shapes agree (asserted above), and `dst` is borrowed mutably so it
    // aliases neither operand. Without `accumulate`, gemm reads nothing from `dst` and
    // writes every element.
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            dst.data,
            dst.cs as isize,
            dst.rs as isize,
            accumulate,
            a.data.as_ptr(),
            a.cs as isize,
            a.rs as isize,
            b.data.as_ptr(),
            b.cs as isize,
            b.rs as isize,
            T::one(),
            T::one(),
            false,
            false,
            false,
            parallelism,
        )
    }
}

/// `a · b` into a new row-major `[a.rows, b.cols]` buffer, without zero-filling it first.
pub fn matmul_new<T: Real>(a: Mat<'_, T>, b: Mat<'_, T>, par: Par) -> Vec<T> {
    let (m, n) = (a.rows, b.cols);
    let mut out: Vec<T> = Vec::with_capacity(m * n);
    matmul(MatMut::uninit(&mut out.spare_capacity_mut()[..m * n], m, n), a, b, false, par);
    // SAFETY: the product (`accumulate = false`) wrote all m·n elements.
    unsafe { out.set_len(m * n) };
    out
}

/// A buffer of `n` elements filled by `fill`, which must write every element (e.g. products
/// into [`MatMut::uninit`] views of its chunks): no zero-filling first.
///
/// # Safety
/// `fill` must initialise all `n` elements.
pub unsafe fn filled<T>(n: usize, fill: impl FnOnce(&mut [MaybeUninit<T>])) -> Vec<T> {
    let mut out: Vec<T> = Vec::with_capacity(n);
    fill(&mut out.spare_capacity_mut()[..n]);
    // SAFETY: the caller guarantees `fill` initialised all n elements.
    unsafe { out.set_len(n) };
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn naive(a: &[f64], b: &[f64], m: usize, k: usize, n: usize) -> Vec<f64> {
        let mut c = vec![0.0; m * n];
        for i in 0..m {
            for j in 0..n {
                for l in 0..k {
                    c[i * n + j] += a[i * k + l] * b[l * n + j];
                }
            }
        }
        c
    }

    #[test]
    fn products_with_transposes_and_accumulation() {
        let (m, k, n) = (3, 4, 5);
        let a: Vec<f64> = (0..m * k).map(|i| (i as f64 * 0.37).sin()).collect();
        let b: Vec<f64> = (0..k * n).map(|i| (i as f64 * 0.91).cos()).collect();
        let expected = naive(&a, &b, m, k, n);
        let mut c = vec![0.0; m * n];
        matmul(MatMut::new(&mut c, m, n), Mat::new(&a, m, k), Mat::new(&b, k, n), false, Par::Seq);
        assert!(c.iter().zip(&expected).all(|(x, y)| (x - y).abs() < 1e-12));
        // aᵀ stored as [k, m]: the same product through a transposed view, accumulated twice.
        let at: Vec<f64> = (0..k * m).map(|i| a[(i % m) * k + i / m]).collect();
        let mut c2 = vec![0.0; m * n];
        for _ in 0..2 {
            matmul(MatMut::new(&mut c2, m, n), Mat::new(&at, k, m).t(), Mat::new(&b, k, n), true, Par::Pool);
        }
        assert!(c2.iter().zip(&expected).all(|(x, y)| (x - 2.0 * y).abs() < 1e-12));
        // Into a transposed destination: cᵀ = bᵀ aᵀ.
        let mut ct = vec![0.0; n * m];
        matmul(MatMut::strided(&mut ct, m, n, 1, m), Mat::new(&a, m, k), Mat::new(&b, k, n), false, Par::Seq);
        assert!((0..m * n).all(|i| (ct[(i % n) * m + i / n] - expected[i]).abs() < 1e-12));
        let c3 = matmul_new(Mat::new(&a, m, k), Mat::new(&b, k, n), Par::Seq);
        assert_eq!(c3, c);
    }
}
