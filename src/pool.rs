//! Compute thread pools: every trial (and benchmark) runs inside a rayon pool of its own,
//! whose threads set flush-to-zero first. candle's matrix products run on the current rayon
//! pool, so the pool's size is the trial's thread budget.
//!
//! A pool outlives its trial: when the trial ends it waits for the next one. Libraries keep
//! state per thread (CUDA's per-thread stream, candle's cache of small uploads, memctl's
//! per-thread CUDA device, see `device::open`), and a thread that ends tears that state down
//! while other trials' threads are in the middle of their steps; one crash of a 4-trial GPU
//! sweep pointed there. Reused threads also skip starting and stopping threads per trial.

use std::sync::Mutex;

/// Pools whose trial has ended.
static IDLE: Mutex<Vec<rayon::ThreadPool>> = Mutex::new(Vec::new());

/// Runs `f` on a pool of `threads` threads with flush-to-zero set on each (an idle one if
/// there is one, else a new one).
pub fn run_in_pool<R: Send>(threads: usize, f: impl FnOnce() -> R + Send) -> Result<R, String> {
    let threads = threads.max(1);
    let pool = match take_idle(threads) {
        Some(pool) => pool,
        None => rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .start_handler(|_| crate::ftz::enable())
            .build()
            .map_err(|e| format!("cannot start compute threads: {e}"))?,
    };
    let result = pool.install(f);
    // Not reached when `f` panics: that pool is dropped.
    IDLE.lock().unwrap_or_else(|e| e.into_inner()).push(pool);
    Ok(result)
}

fn take_idle(threads: usize) -> Option<rayon::ThreadPool> {
    let mut idle = IDLE.lock().unwrap_or_else(|e| e.into_inner());
    let i = idle.iter().position(|p| p.current_num_threads() == threads)?;
    Some(idle.swap_remove(i))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pool_is_sized_as_asked_and_its_threads_serve_the_next_trial() {
        // Seven threads: no other test asks for that many, so the idle pool stays ours.
        let workers = run_in_pool(7, || rayon::broadcast(|_| std::thread::current().id())).unwrap();
        assert_eq!(workers.len(), 7);
        let next = run_in_pool(7, || std::thread::current().id()).unwrap();
        assert!(workers.contains(&next), "the second trial ran on a new thread");
        assert_eq!(run_in_pool(2, rayon::current_num_threads).unwrap(), 2);
    }
}
