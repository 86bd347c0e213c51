//! What the store costs this process: the time spent in store sessions (waiting for another
//! process's turn included) and in saving checkpoints, split into the time in a trial's way
//! (claims, final records, checkpoints) and the time on background threads (progress writes,
//! see [`crate::sweep::progress_writer`]), which training does not wait for. A sweep's
//! overhead is the first over its trials' time (`cargo bench --bench store_concurrency`).

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

static IN_THE_WAY: AtomicU64 = AtomicU64::new(0);
static IN_BACKGROUND: AtomicU64 = AtomicU64::new(0);

thread_local! {
    static BACKGROUND_THREAD: Cell<bool> = const { Cell::new(false) };
}

/// Counts this thread's store time as background time from now on.
pub fn mark_background_thread() {
    BACKGROUND_THREAD.with(|b| b.set(true));
}

/// Runs `f`, adding its time to this process's store time.
pub fn timed<R>(f: impl FnOnce() -> R) -> R {
    let started = Instant::now();
    let r = f();
    let nanos = started.elapsed().as_nanos() as u64;
    let counter = if BACKGROUND_THREAD.with(Cell::get) { &IN_BACKGROUND } else { &IN_THE_WAY };
    counter.fetch_add(nanos, Ordering::Relaxed);
    r
}

/// Time this process has spent in the store so far (all threads together).
#[derive(Clone, Copy, Debug)]
pub struct Spent {
    /// On threads that wait for it: a trial's claim, final record and checkpoints.
    pub in_the_way: Duration,
    /// On background threads: progress records.
    pub in_background: Duration,
}

pub fn spent() -> Spent {
    Spent {
        in_the_way: Duration::from_nanos(IN_THE_WAY.load(Ordering::Relaxed)),
        in_background: Duration::from_nanos(IN_BACKGROUND.load(Ordering::Relaxed)),
    }
}
