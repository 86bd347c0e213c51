//! Compute thread pools: every trial (and benchmark) runs inside its own rayon pool, whose
//! threads set flush-to-zero first. candle's matrix products run on the current rayon pool,
//! so the pool's size is the trial's thread budget.

/// Runs `f` on a fresh pool of `threads` threads with flush-to-zero set on each.
pub fn run_in_pool<R: Send>(threads: usize, f: impl FnOnce() -> R + Send) -> Result<R, String> {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads.max(1))
        .start_handler(|_| crate::ftz::enable())
        .build()
        .map_err(|e| format!("cannot start compute threads: {e}"))?;
    Ok(pool.install(f))
}
