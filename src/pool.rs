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

/// Stack of each compute thread. candle's autograd walks the graph recursively (and a
/// tensor's graph is dropped recursively), one frame per op of the longest chain, so a
/// 2 000-step LSTM overflowed rayon's default 2 MiB and aborted the process. The size is
/// reserved address space; only the frames used take memory ([`compute_stack`]).
pub const COMPUTE_STACK: usize = 256 << 20;

/// rayon's (and Rust's) default stack, the least a compute thread gets.
const DEFAULT_STACK: usize = 2 << 20;

/// The stack of each of `threads` compute threads: [`COMPUTE_STACK`], unless the process's
/// address space is limited (`ulimit -v`, some clusters), where reserved stacks would crowd
/// out the tensors: then a sixteenth of the limit, shared by the threads.
pub fn compute_stack(threads: usize) -> usize {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit writes the struct it is given and nothing else.
    let limited = unsafe { libc::getrlimit(libc::RLIMIT_AS, &mut limit) } == 0 && limit.rlim_cur != libc::RLIM_INFINITY;
    if !limited {
        return COMPUTE_STACK;
    }
    (limit.rlim_cur as usize / 16 / threads.max(1)).clamp(DEFAULT_STACK, COMPUTE_STACK)
}

/// Why compute threads could not start: the OS refused a thread or its stack (`ulimit -u`,
/// `ulimit -v`).
#[derive(Debug, thiserror::Error)]
#[error("cannot start compute threads: {0}")]
pub struct PoolError(rayon::ThreadPoolBuildError);

/// Pools whose trial has ended.
static IDLE: Mutex<Vec<rayon::ThreadPool>> = Mutex::new(Vec::new());

/// Runs `f` on a pool of `threads` threads with flush-to-zero set on each (an idle one if
/// there is one, else a new one).
pub fn run_in_pool<R: Send>(threads: usize, f: impl FnOnce() -> R + Send) -> Result<R, PoolError> {
    let threads = threads.max(1);
    let pool = match take_idle(threads) {
        Some(pool) => pool,
        None => new_pool(threads)?,
    };
    let result = pool.install(f);
    // Not reached when `f` panics: that pool is dropped.
    IDLE.lock().unwrap_or_else(|e| e.into_inner()).push(pool);
    Ok(result)
}

/// Starts pools of `threads` compute threads until `pools` of them are idle, for the trials
/// to come. A sweep reserves its pools before any of its trials allocates: where the address
/// space is limited (`ulimit -v`), a trial that fills it would otherwise leave the next trial
/// unable to reserve its threads' stacks, and that trial would fail for another's memory.
pub fn reserve(pools: usize, threads: usize) -> Result<(), PoolError> {
    let threads = threads.max(1);
    let mut idle = IDLE.lock().unwrap_or_else(|e| e.into_inner());
    let have = idle.iter().filter(|p| p.current_num_threads() == threads).count();
    for _ in have..pools {
        idle.push(new_pool(threads)?);
    }
    Ok(())
}

fn new_pool(threads: usize) -> Result<rayon::ThreadPool, PoolError> {
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .stack_size(compute_stack(threads))
        .start_handler(|_| crate::ftz::enable())
        .build()
        .map_err(PoolError)
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

    #[test]
    fn reserved_pools_wait_idle_and_are_not_started_twice() {
        // Five threads: no other test asks for that many.
        let idle_of_five = || IDLE.lock().unwrap().iter().filter(|p| p.current_num_threads() == 5).count();
        reserve(2, 5).unwrap();
        assert_eq!(idle_of_five(), 2);
        reserve(2, 5).unwrap();
        assert_eq!(idle_of_five(), 2, "pools already idle count towards the reservation");
        // A trial takes a reserved pool and gives it back.
        let workers = run_in_pool(5, || rayon::broadcast(|_| std::thread::current().id())).unwrap();
        assert_eq!((workers.len(), idle_of_five()), (5, 2));
    }

    #[test]
    fn candle_autograd_through_a_long_chain_of_ops_fits_a_compute_thread() {
        use candle_core::{Device, Tensor, Var};
        // 100 000 ops deep (a recurrence of some 7 000 steps): far past rayon's default stack.
        let x = Var::new(&[1.0f32], &Device::Cpu).unwrap();
        let grad = run_in_pool(1, || {
            let mut y: Tensor = x.as_tensor().clone();
            for _ in 0..100_000 {
                y = (y * 1.0).unwrap();
            }
            let grads = y.sum_all().unwrap().backward().unwrap();
            grads.get(x.as_tensor()).unwrap().to_vec1::<f32>().unwrap()
        })
        .unwrap();
        assert_eq!(grad, vec![1.0]);
    }
}
