//! Writes a running trial's progress records on a thread of their own, so that training
//! never waits for the store: not for its own sessions, and not while another process (a
//! `memctl runs`, a second sweep) has its turn. Only the newest record waiting matters, so a
//! record handed over while an older one waits replaces it (coalescing).

use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;

use crate::store::{RunRecord, Store, cost};

#[derive(Default)]
struct Queue {
    newest: Option<RunRecord>,
    closing: bool,
    /// Errors to report from the trial's thread (the reporter is not the writer's to use).
    errors: Vec<String>,
}

type Shared = Arc<(Mutex<Queue>, Condvar)>;

pub struct ProgressWriter {
    shared: Shared,
    thread: Option<JoinHandle<()>>,
}

impl ProgressWriter {
    pub fn start(store: Store) -> ProgressWriter {
        let shared: Shared = Arc::default();
        let theirs = shared.clone();
        let thread = std::thread::Builder::new()
            .name("memctl-progress".into())
            .spawn(move || write_until_closed(&store, &theirs))
            .ok();
        ProgressWriter { shared, thread }
    }

    /// Hands `record` over to be written; replaces one still waiting.
    pub fn send(&self, record: RunRecord) {
        let (queue, ready) = &*self.shared;
        if let Ok(mut q) = queue.lock() {
            q.newest = Some(record);
            ready.notify_one();
        }
    }

    /// Errors since the last call.
    pub fn errors(&self) -> Vec<String> {
        self.shared.0.lock().map(|mut q| std::mem::take(&mut q.errors)).unwrap_or_default()
    }

    /// Writes the record still waiting, if any, and stops the thread: after this returns no
    /// progress write can land on top of the trial's final record. Returns the last errors.
    pub fn finish(mut self) -> Vec<String> {
        self.close();
        self.errors()
    }

    fn close(&mut self) {
        if let Ok(mut q) = self.shared.0.lock() {
            q.closing = true;
            self.shared.1.notify_one();
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for ProgressWriter {
    fn drop(&mut self) {
        self.close();
    }
}

fn write_until_closed(store: &Store, shared: &Shared) {
    cost::mark_background_thread();
    let (queue, ready) = &**shared;
    loop {
        let record = {
            let Ok(mut q) = queue.lock() else { return };
            while q.newest.is_none() && !q.closing {
                let Ok(woken) = ready.wait(q) else { return };
                q = woken;
            }
            match q.newest.take() {
                Some(r) => r,
                None => return, // closing, nothing left
            }
        };
        // Progress is best effort: a store busy beyond its wait costs this update only.
        if let Err(e) = store.put(&record)
            && let Ok(mut q) = queue.lock()
        {
            q.errors.push(format!("run {}: progress not recorded: {e}", record.id));
        }
    }
}
