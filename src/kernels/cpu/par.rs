//! How the training kernels use the hardware: batch-parallel loops over the current rayon
//! pool (the trial's thread budget) and element-wise loops compiled for AVX2 + FMA when the
//! CPU has them (the release build targets baseline x86-64, i.e. SSE2).

use std::cell::Cell;

use rayon::prelude::*;

thread_local! {
    /// Set while this thread runs one part of a batch split over the pool ([`serial`]).
    static SERIAL: Cell<bool> = const { Cell::new(false) };
}

/// Threads a kernel may split its work over: the current rayon pool's, or 1 inside
/// [`serial`].
pub fn threads() -> usize {
    if SERIAL.with(Cell::get) { 1 } else { rayon::current_num_threads() }
}

/// Runs `f` with the kernels' own parallelism off on this thread: for work that is already
/// split over the pool at a coarser grain (training splits the batch into one part per
/// thread, see `train::Stepper`), where splitting again only adds hand-offs.
pub fn serial<R>(f: impl FnOnce() -> R) -> R {
    let before = SERIAL.with(|s| s.replace(true));
    let out = f();
    SERIAL.with(|s| s.set(before));
    out
}

/// Below this many element-operations a loop runs on the calling thread: splitting costs
/// more than it saves.
const PAR_MIN_WORK: usize = 1 << 15;

/// Runs `f(first_example, chunk)` over `out` split into consecutive groups of whole examples
/// (`per_example` elements each), one group per pool thread when the pool has several and
/// `work` (element-operations in total) is large enough; otherwise one call with everything.
pub fn for_each_batch<T: Send>(
    out: &mut [T],
    per_example: usize,
    work: usize,
    f: impl Fn(usize, &mut [T]) + Sync + Send,
) {
    let batch = out.len().checked_div(per_example).unwrap_or(0);
    let threads = threads().min(batch);
    if threads <= 1 || work < PAR_MIN_WORK {
        f(0, out);
        return;
    }
    let per_group = batch.div_ceil(threads);
    out.par_chunks_mut(per_group * per_example).enumerate().for_each(|(g, chunk)| f(g * per_group, chunk));
}

/// How many consecutive examples one task takes when a loop over `batch` examples doing
/// `work` element-operations in total is split over the pool (all of them when it is not
/// worth splitting). For `par_chunks_mut(group · per_example)` over several buffers at once.
pub fn group_size(batch: usize, work: usize) -> usize {
    let threads = threads().min(batch);
    if threads <= 1 || work < PAR_MIN_WORK { batch.max(1) } else { batch.div_ceil(threads) }
}

/// Like [`for_each_batch`] over two outputs split alike.
pub fn for_each_batch2<T: Send, U: Send>(
    out: &mut [T],
    per_example: usize,
    out2: &mut [U],
    per_example2: usize,
    work: usize,
    f: impl Fn(usize, &mut [T], &mut [U]) + Sync + Send,
) {
    let batch = out.len().checked_div(per_example).unwrap_or(0);
    let threads = threads().min(batch);
    if threads <= 1 || work < PAR_MIN_WORK {
        f(0, out, out2);
        return;
    }
    let per_group = batch.div_ceil(threads);
    out.par_chunks_mut(per_group * per_example)
        .zip(out2.par_chunks_mut((per_group * per_example2).max(1)))
        .enumerate()
        .for_each(|(g, (a, b))| f(g * per_group, a, b));
}

/// Whether the CPU has AVX2 and FMA (the standard library caches the answer).
#[inline(always)]
pub fn has_avx2() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Runs `f` inside a function compiled with AVX2 and FMA when the CPU has them. Only code
/// the compiler inlines into it benefits (small closures do; for a whole loop nest, define
/// the kernel with [`multiversion!`]).
#[inline(always)]
pub fn simd<R>(f: impl FnOnce() -> R) -> R {
    #[cfg(target_arch = "x86_64")]
    {
        if has_avx2() {
            #[target_feature(enable = "avx2,fma")]
            #[inline]
            unsafe fn avx2<R>(f: impl FnOnce() -> R) -> R {
                f()
            }
            // SAFETY: the CPU supports AVX2 and FMA (checked just above).
            return unsafe { avx2(f) };
        }
    }
    f()
}

/// Defines a kernel function twice from one body — once compiled with AVX2 and FMA, once for
/// the baseline target — and calls the first when the CPU has them:
///
/// ```ignore
/// multiversion! {
///     /// Doc.
///     pub fn name[T: Real][T](x: &[T], y: &mut [T]) { ... }
/// }
/// ```
/// (generic parameters, then the arguments to instantiate them with). Write the body's loops
/// as `for` loops over indices or slice iterators, without closures (see `elementwise`). The release build
/// targets baseline x86-64 (SSE2); the element-wise loops of the training kernels run 2× to 4×
/// faster with 8-wide vectors, and `exp`/`tanh` vectorise only where inlined into such a body.
macro_rules! multiversion {
    ($(#[$meta:meta])* $vis:vis fn $name:ident [$($gen:tt)*] [$($inst:tt)*] ($($arg:ident : $ty:ty),* $(,)?) $(-> $ret:ty)? $body:block) => {
        $(#[$meta])*
        #[allow(clippy::too_many_arguments)]
        $vis fn $name<$($gen)*>($($arg: $ty),*) $(-> $ret)? {
            #[cfg(target_arch = "x86_64")]
            {
                #[target_feature(enable = "avx2,fma")]
                #[allow(clippy::too_many_arguments)]
                unsafe fn fast<$($gen)*>($($arg: $ty),*) $(-> $ret)? $body
                if $crate::kernels::cpu::par::has_avx2() {
                    // SAFETY: the CPU supports AVX2 and FMA (checked just above).
                    return unsafe { fast::<$($inst)*>($($arg),*) };
                }
            }
            #[inline(always)]
            #[allow(clippy::too_many_arguments)]
            fn plain<$($gen)*>($($arg: $ty),*) $(-> $ret)? $body
            plain::<$($inst)*>($($arg),*)
        }
    };
}
pub(crate) use multiversion;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batch_groups_cover_every_example_once() {
        for threads in [1, 2, 3] {
            let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
            pool.install(|| {
                let mut out = vec![0usize; 7 * 3];
                for_each_batch(&mut out, 3, usize::MAX, |first, chunk| {
                    for (i, ex) in chunk.chunks_mut(3).enumerate() {
                        ex.fill(first + i + 1);
                    }
                });
                let expected: Vec<usize> = (1..=7).flat_map(|e| [e; 3]).collect();
                assert_eq!(out, expected);
            });
        }
    }
}
