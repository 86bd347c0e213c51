//! Plain slices of CPU tensors for the training kernels, without copies.
//!
//! `let g = Read::new(&t)?; let s: &[f32] = g.slice()?;` borrows `t`'s storage (a read lock
//! held by `g`); [`tensor`] wraps an owned `Vec` into a tensor without copying it. Inputs that
//! are not contiguous (broadcast views, transposes) are copied once by [`contiguous`].

use std::mem::MaybeUninit;

use candle_core::backend::BackendStorage;
use candle_core::{Device, Result, Shape, Storage, StorageRef, Tensor, bail};

use super::real::Real;

/// A read lock on a contiguous CPU tensor's storage.
pub struct Read<'a> {
    guard: StorageRef<'a>,
    start: usize,
    len: usize,
}

impl<'a> Read<'a> {
    /// Fails on a non-contiguous or non-CPU tensor.
    pub fn new(t: &'a Tensor) -> Result<Read<'a>> {
        let (guard, layout) = t.storage_and_layout();
        let Some((start, end)) = layout.contiguous_offsets() else {
            bail!(
                "kernel input must be contiguous, got a tensor of shape {:?} with strides {:?}",
                t.dims(),
                layout.stride()
            )
        };
        if !matches!(&*guard, Storage::Cpu(_)) {
            bail!("the training kernels run on the CPU only");
        }
        Ok(Read { guard, start, len: end - start })
    }

    /// The elements, row-major.
    pub fn slice<T: Real>(&self) -> Result<&[T]> {
        let Storage::Cpu(s) = &*self.guard else { bail!("the training kernels run on the CPU only") };
        match T::as_slice(s) {
            Some(v) => Ok(&v[self.start..self.start + self.len]),
            None => bail!("kernel input has dtype {:?}, expected {:?}", s.dtype(), T::DTYPE),
        }
    }
}

/// `t` itself if contiguous, else a contiguous copy.
pub fn contiguous(t: &Tensor) -> Result<Tensor> {
    t.contiguous()
}

/// Wraps `data` (row-major) as a CPU tensor of `shape`, without copying.
pub fn tensor<T: Real, S: Into<Shape>>(data: Vec<T>, shape: S) -> Result<Tensor> {
    Tensor::from_vec(data, shape, &Device::Cpu)
}

/// `n` elements written by `fill` into uninitialised storage: for a kernel output that is
/// overwritten whole (a new memory or tape, its gradient), skipping the zeroing pass that
/// `vec![0; n]` makes first (`memset` was ~6 % of a NAM step).
///
/// # Safety
/// `fill` must write every one of the `n` elements.
pub unsafe fn written<T>(n: usize, fill: impl FnOnce(&mut [MaybeUninit<T>])) -> Vec<T> {
    let mut v = Vec::with_capacity(n);
    fill(&mut v.spare_capacity_mut()[..n]);
    // SAFETY: the caller guarantees that `fill` initialised all `n` elements.
    unsafe { v.set_len(n) };
    v
}

/// A copy of a contiguous tensor's elements (for small tensors such as scalars).
pub fn values<T: Real>(t: &Tensor) -> Result<Vec<T>> {
    let t = contiguous(t)?;
    let r = Read::new(&t)?;
    Ok(r.slice::<T>()?.to_vec())
}

/// The one element of a single-element tensor (a learned scalar).
pub fn scalar<T: Real>(t: &Tensor) -> Result<T> {
    match values::<T>(t)?.as_slice() {
        [v] => Ok(*v),
        other => bail!("expected a single element, got {}", other.len()),
    }
}

/// Runs `f` on the slices of `t` (made contiguous first).
pub fn with_slice<T: Real, R>(t: &Tensor, f: impl FnOnce(&[T]) -> Result<R>) -> Result<R> {
    let t = contiguous(t)?;
    let r = Read::new(&t)?;
    f(r.slice::<T>()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_contiguous_views_and_rejects_strided_ones() -> Result<()> {
        let t = Tensor::arange(0f32, 6.0, &Device::Cpu)?.reshape((2, 3))?;
        let row = t.narrow(0, 1, 1)?; // contiguous, offset 3
        assert_eq!(Read::new(&row)?.slice::<f32>()?, &[3.0, 4.0, 5.0]);
        assert!(Read::new(&t.t()?).is_err());
        assert!(Read::new(&t)?.slice::<f64>().is_err());
        assert_eq!(with_slice::<f32, _>(&t.t()?, |s| Ok(s.to_vec()))?, vec![0.0, 3.0, 1.0, 4.0, 2.0, 5.0]);
        let back = tensor(vec![1.0f32, 2.0], (1, 2))?;
        assert_eq!(back.to_vec2::<f32>()?, vec![vec![1.0, 2.0]]);
        Ok(())
    }
}
