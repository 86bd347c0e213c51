//! Which process runs a trial, and whether it still does.
//!
//! A `running` record names its process ([`ProcessIdentity`]: host, boot, pid, start time).
//! On the same machine and boot, the process is alive exactly when `/proc/PID` exists with the
//! same start time (a pid alone may have been reused) and is not a zombie (killed, not yet
//! reaped by its parent). A process on another machine cannot be
//! asked; its run is presumed dead when its heartbeat (`progress.updated_at`) is older than
//! [`REMOTE_SILENCE`].

use std::sync::OnceLock;

use super::record::{ProcessIdentity, RunRecord};

/// How long a run on another machine may go without a progress update before another sweep
/// takes its trial over. Running trials write about every [`super::PROGRESS_EVERY`] while
/// they step, and at least every `sweep::progress_writer::HEARTBEAT` (a minute) while they
/// evaluate or start up, so five minutes of silence leave room for a busy store.
pub const REMOTE_SILENCE: f64 = 5.0 * 60.0;

/// This process.
pub fn this_process() -> &'static ProcessIdentity {
    static ME: OnceLock<ProcessIdentity> = OnceLock::new();
    ME.get_or_init(|| {
        let pid = std::process::id();
        ProcessIdentity { hostname: hostname(), boot_id: boot_id(), pid, start_ticks: start_ticks(pid).unwrap_or(0) }
    })
}

pub fn hostname() -> String {
    std::fs::read_to_string("/etc/hostname")
        .or_else(|_| std::fs::read_to_string("/proc/sys/kernel/hostname"))
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".into())
}

fn boot_id() -> String {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id").map(|s| s.trim().to_string()).unwrap_or_default()
}

/// The start time of a running process: field 22 of `/proc/PID/stat` (after the parenthesised
/// command, which may hold spaces). None for a process that has exited: no entry, or one whose
/// state (field 3) is a zombie's (`Z`, killed but not yet reaped by its parent) or dead (`X`).
fn start_ticks(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let mut fields = stat[stat.rfind(')')? + 1..].split_whitespace();
    if matches!(fields.next()?, "Z" | "X") {
        return None;
    }
    fields.nth(18)?.parse().ok()
}

/// Whether the process that runs `record` is gone (`now`: Unix seconds).
pub fn is_gone(record: &RunRecord, now: f64) -> bool {
    let last_sign = record.progress.as_ref().map_or(record.started_at, |p| p.updated_at);
    gone(record.environment.process.as_ref(), last_sign, now)
}

/// [`is_gone`] for a run known by its process and last sign of life (a summary's).
pub fn is_gone_process(owner: Option<&ProcessIdentity>, last_sign: f64) -> bool {
    gone(owner, last_sign, super::record::now())
}

fn gone(owner: Option<&ProcessIdentity>, last_sign: f64, now: f64) -> bool {
    let Some(owner) = owner else {
        // A version 1 record: its process held the whole store, so whoever reads it now
        // outlived it.
        return true;
    };
    let me = this_process();
    if owner.hostname == me.hostname && owner.boot_id == me.boot_id && !me.boot_id.is_empty() {
        // This pid with another start time is a dead process's (a container's PID 1 after
        // a restart, a reused pid): only the start time tells them apart.
        if owner.pid == me.pid {
            return me.start_ticks != 0 && owner.start_ticks != me.start_ticks;
        }
        return start_ticks(owner.pid) != Some(owner.start_ticks);
    }
    now - last_sign > REMOTE_SILENCE
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_alive_and_a_dead_child_is_gone() {
        let me = this_process();
        assert!(me.start_ticks > 0 && !me.boot_id.is_empty(), "{me:?}");
        assert_eq!(start_ticks(me.pid), Some(me.start_ticks));
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        // Reaped: its pid has no /proc entry (or a reused one with another start time).
        let dead = ProcessIdentity { pid, start_ticks: 1, ..me.clone() };
        assert_ne!(start_ticks(dead.pid), Some(1));
    }

    /// A restarted container's process is PID 1 again, as the killed one was: the same pid
    /// with another start time is that dead process, not this one.
    #[test]
    fn this_pid_with_another_start_time_is_gone() {
        let me = this_process();
        assert!(!gone(Some(me), 0.0, 0.0), "this process is alive");
        let dead = ProcessIdentity { start_ticks: me.start_ticks - 1, ..me.clone() };
        assert!(gone(Some(&dead), 0.0, 0.0), "a dead process that had this pid");
    }

    /// A killed process its parent has not waited for yet stays in /proc as a zombie, with its
    /// start time: it runs nothing, so its trials are free.
    #[test]
    fn a_zombie_is_gone() {
        let me = this_process();
        let mut child = std::process::Command::new("sleep").arg("30").spawn().unwrap();
        let pid = child.id();
        let owner = ProcessIdentity { pid, start_ticks: start_ticks(pid).unwrap(), ..me.clone() };
        assert!(!gone(Some(&owner), 0.0, 0.0), "a running child is alive");
        child.kill().unwrap();
        let state = || std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !state().contains(") Z ") && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert!(state().contains(") Z "), "the child is a zombie until waited for: {}", state());
        assert!(gone(Some(&owner), 0.0, 0.0));
        child.wait().unwrap();
    }
}
