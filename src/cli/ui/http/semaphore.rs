//! A counting semaphore: at most so many holders at once, the others waiting their turn.

use std::sync::{Condvar, Mutex, PoisonError};

pub struct Semaphore {
    free: Mutex<usize>,
    freed: Condvar,
}

/// A place held; given back when dropped (a panic unwinding through its holder included).
pub struct Permit<'a>(&'a Semaphore);

impl Semaphore {
    /// A semaphore of `places` places (at least one, so that holders cannot wait for ever).
    pub fn new(places: usize) -> Semaphore {
        Semaphore { free: Mutex::new(places.max(1)), freed: Condvar::new() }
    }

    /// A place, once one is free.
    pub fn acquire(&self) -> Permit<'_> {
        // The count is a plain number: a holder that panicked left it consistent.
        let mut free = self.free.lock().unwrap_or_else(PoisonError::into_inner);
        while *free == 0 {
            free = self.freed.wait(free).unwrap_or_else(PoisonError::into_inner);
        }
        *free -= 1;
        Permit(self)
    }
}

impl Drop for Permit<'_> {
    fn drop(&mut self) {
        *self.0.free.lock().unwrap_or_else(PoisonError::into_inner) += 1;
        self.0.freed.notify_one();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    /// Eight threads through a semaphore of two: never more than two inside at once, and all
    /// eight get in.
    #[test]
    fn no_more_than_its_places_hold_it_at_once() {
        let places = Semaphore::new(2);
        let (inside, most, done) = (AtomicUsize::new(0), AtomicUsize::new(0), AtomicUsize::new(0));
        std::thread::scope(|s| {
            for _ in 0..8 {
                s.spawn(|| {
                    let _permit = places.acquire();
                    let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                    most.fetch_max(now, Ordering::SeqCst);
                    std::thread::sleep(Duration::from_millis(20));
                    inside.fetch_sub(1, Ordering::SeqCst);
                    done.fetch_add(1, Ordering::SeqCst);
                });
            }
        });
        assert_eq!(most.load(Ordering::SeqCst), 2);
        assert_eq!(done.load(Ordering::SeqCst), 8);
    }
}
