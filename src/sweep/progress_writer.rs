//! Writes a running trial's progress records on a thread of their own, so that training
//! never waits for the store: not for its own sessions, and not while another process (a
//! `memctl runs`, a second sweep) has its turn. Only the newest record waiting matters, so a
//! record handed over while an older one waits replaces it (coalescing).
//!
//! While nothing new comes (a long evaluation, a slow start-up), the thread writes the last
//! record again every [`HEARTBEAT`] with a fresh `updated_at`: a process on another machine
//! cannot be asked whether it is alive, so its heartbeat is what keeps other sweeps from
//! taking its trial over ([`crate::store::owner::REMOTE_SILENCE`]).

use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::store::{RunRecord, Store, cost, now};

/// How often a running trial's record is written when training reports nothing new: well
/// inside [`crate::store::owner::REMOTE_SILENCE`], so that a busy store can miss a few.
pub const HEARTBEAT: Duration = Duration::from_secs(60);

#[derive(Default)]
struct Queue {
    newest: Option<RunRecord>,
    closing: bool,
    /// Errors to report from the trial's thread (the reporter is not the writer's to use).
    errors: Vec<String>,
    /// Another sweep took the run over: nothing more of it is written.
    taken_over: bool,
}

type Shared = Arc<(Mutex<Queue>, Condvar)>;

pub struct ProgressWriter {
    shared: Shared,
    thread: Option<JoinHandle<()>>,
}

impl ProgressWriter {
    /// Starts the writer of the run whose `running` record, as the claim stored it, is
    /// `claimed`: its heartbeat starts now, before training reports anything (start-up, a
    /// resumed evaluation).
    pub fn start(store: Store, claimed: RunRecord) -> ProgressWriter {
        ProgressWriter::beating_every(store, claimed, HEARTBEAT)
    }

    /// [`ProgressWriter::start`] with another heartbeat (tests).
    fn beating_every(store: Store, claimed: RunRecord, heartbeat: Duration) -> ProgressWriter {
        let shared: Shared = Arc::default();
        let theirs = shared.clone();
        let thread = std::thread::Builder::new()
            .name("memctl-progress".into())
            .spawn(move || write_until_closed(&store, &theirs, claimed, heartbeat))
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

    /// Whether another sweep took the run over (it counted this process as gone): the trial's
    /// checkpoints and final record are then no longer its to write.
    pub fn taken_over(&self) -> bool {
        self.shared.0.lock().is_ok_and(|q| q.taken_over)
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

fn write_until_closed(store: &Store, shared: &Shared, claimed: RunRecord, heartbeat: Duration) {
    cost::mark_background_thread();
    let (queue, ready) = &**shared;
    // The record last handed over (at first the claim's), written again as the heartbeat.
    let mut last = claimed;
    let mut written_at = Instant::now();
    loop {
        let record = {
            let Ok(mut q) = queue.lock() else { return };
            while q.newest.is_none() && !q.closing {
                let due = heartbeat.saturating_sub(written_at.elapsed());
                if due.is_zero() {
                    break;
                }
                let Ok((woken, _)) = ready.wait_timeout(q, due) else { return };
                q = woken;
            }
            match (q.newest.take(), q.closing) {
                (Some(r), _) => r,
                (None, false) => beat(&last),
                (None, true) => return, // closing, nothing left
            }
        };
        written_at = Instant::now();
        // Progress is best effort: a store busy beyond its wait costs this update only.
        match store.put_while_running(&record) {
            Ok(true) => {}
            Ok(false) => {
                if let Ok(mut q) = queue.lock() {
                    q.taken_over = true;
                    q.errors.push(format!(
                        "run {}: another sweep took this trial over, counting this process as gone; this run's \
                         progress, checkpoints and result are no longer recorded",
                        record.id
                    ));
                }
                return discard_until_closed(shared);
            }
            Err(e) => {
                if let Ok(mut q) = queue.lock() {
                    q.errors.push(format!("run {}: progress not recorded: {e}", record.id));
                }
            }
        }
        last = record;
    }
}

/// Takes what the trial hands over, writing nothing, until it closes.
fn discard_until_closed(shared: &Shared) {
    let (queue, ready) = &**shared;
    let Ok(mut q) = queue.lock() else { return };
    while !q.closing {
        q.newest = None;
        let Ok(woken) = ready.wait(q) else { return };
        q = woken;
    }
}

/// `record` again, as written now.
fn beat(record: &RunRecord) -> RunRecord {
    let mut beat = record.clone();
    if let Some(p) = beat.progress.as_mut() {
        p.updated_at = now();
    }
    beat
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Status;
    use crate::store::tests::running;

    fn updated_at(store: &Store) -> f64 {
        store.get(1).unwrap().progress.unwrap().updated_at
    }

    /// Before training reports anything, the claimed record is written again with a fresh
    /// `updated_at` (what keeps another machine's sweep from taking the trial over during a
    /// long start-up or evaluation); after `finish`, never.
    #[test]
    fn a_trial_that_reports_nothing_still_beats() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let mut claimed = running(1, true);
        claimed.progress.as_mut().unwrap().updated_at = now() - 100.0;
        store.put(&claimed).unwrap();
        let sent = updated_at(&store);
        let writer = ProgressWriter::beating_every(store.clone(), claimed, Duration::from_millis(20));
        let deadline = Instant::now() + Duration::from_secs(30);
        while updated_at(&store) < sent + 99.0 {
            assert!(Instant::now() < deadline, "no heartbeat was written");
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(writer.finish().is_empty());
        let last = updated_at(&store);
        std::thread::sleep(Duration::from_millis(100));
        assert_eq!(updated_at(&store), last, "a write after finish");
    }

    /// A run another sweep took over is left as that sweep recorded it, and the trial is told.
    #[test]
    fn a_run_taken_over_is_not_marked_running_again() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let record = running(1, true);
        store.put(&RunRecord { status: Status::Interrupted, ..record.clone() }).unwrap();
        let writer = ProgressWriter::beating_every(store.clone(), record.clone(), Duration::from_millis(20));
        writer.send(record.clone());
        let deadline = Instant::now() + Duration::from_secs(30);
        while !writer.taken_over() {
            assert!(Instant::now() < deadline, "the writer never found the run taken over");
            std::thread::sleep(Duration::from_millis(10));
        }
        writer.send(record);
        let errors = writer.finish();
        assert_eq!(store.get(1).unwrap().status, Status::Interrupted);
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert!(errors[0].contains("another sweep took this trial over"), "{errors:?}");
    }
}
