//! Waiting for a lock another process holds. A store's sessions hold it for milliseconds, so
//! the wait polls often at first and then backs off, until the store's wait has passed.

use std::time::{Duration, Instant};

const FIRST_PAUSE: Duration = Duration::from_micros(500);
const LONGEST_PAUSE: Duration = Duration::from_millis(25);

pub(super) struct LockBackoff {
    started: Instant,
    pause: Duration,
    wait: Duration,
}

impl LockBackoff {
    /// Starts the clock: `wait` counts from now.
    pub(super) fn new(wait: Duration) -> Self {
        LockBackoff { started: Instant::now(), pause: FIRST_PAUSE, wait }
    }

    /// Sleeps before the next try and says true, or says false once `wait` has passed.
    pub(super) fn pause(&mut self) -> bool {
        if self.started.elapsed() >= self.wait {
            return false;
        }
        std::thread::sleep(self.pause);
        self.pause = (self.pause * 2).min(LONGEST_PAUSE);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_backoff_gives_up_once_its_wait_has_passed_and_not_before() {
        // Long enough that a loaded machine's late wake-ups still leave room for several pauses.
        let mut backoff = LockBackoff::new(Duration::from_millis(200));
        let started = Instant::now();
        let mut tries = 0;
        while backoff.pause() {
            tries += 1;
        }
        assert!(started.elapsed() >= Duration::from_millis(200));
        // 0.5, 1, 2, … 25, 25 ms: it polls several times, not once.
        assert!(tries >= 3, "{tries} pauses");
        assert!(!LockBackoff::new(Duration::ZERO).pause());
    }
}
