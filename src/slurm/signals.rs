//! The signals a worker answers. Slurm sends `USR1` `--grace` seconds before the time limit
//! (`sbatch --signal=B:USR1@N`), and `TERM` on `scancel` or preemption (`KILL` follows after
//! the cluster's KillWait). Either one stops the trial at its next step, or at its evaluation's
//! next batch, where it saves its checkpoint; after `USR1` the worker also requeues its own array task, which resumes there.

use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};

static STOP: AtomicBool = AtomicBool::new(false);
static RECEIVED: AtomicI32 = AtomicI32::new(0);

extern "C" fn on_signal(signal: libc::c_int) {
    // Only atomic stores: nothing else is safe inside a signal handler.
    RECEIVED.store(signal, Ordering::SeqCst);
    STOP.store(true, Ordering::SeqCst);
}

/// Installs the handlers; returns the flag training polls between steps and evaluation batches.
pub fn install() -> &'static AtomicBool {
    for signal in [libc::SIGUSR1, libc::SIGTERM] {
        // SAFETY: `on_signal` only stores atomics; `action` is fully initialised before use.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
            action.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(signal, &action, std::ptr::null_mut());
        }
    }
    &STOP
}

/// Whether Slurm warned that the time limit is near (as opposed to cancelling the task).
pub fn time_limit_near() -> bool {
    RECEIVED.load(Ordering::SeqCst) == libc::SIGUSR1
}
