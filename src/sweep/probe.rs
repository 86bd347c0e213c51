//! Probing a trial whose process died before its first training step.
//!
//! A dead process does not say why it died. The trial may have killed it (an allocation too
//! big for the machine, the kernel's out-of-memory killer, a crash in a kernel), or the sweep
//! may have been killed from outside while the trial was starting (`kill -9`, a node going
//! down, a preempted job), which says nothing about the trial. Counting deaths cannot tell the
//! two apart: twenty quick `kill -9`s of a sweep would fail an innocent trial. So a trial
//! found dead before its first step is not judged from the record; before it runs again in the
//! sweep's process, a child process builds it and takes one training step, and the sweep
//! watches how that child ends. A child killed by a signal is a crash observed, and fails the
//! trial with the signal and the child's last words; a child that survives (or stops with an
//! ordinary error, which the run itself then records) clears the trial to run. The child dies
//! with the sweep (`PR_SET_PDEATHSIG`), so killing a sweep mid-probe leaves the trial as it
//! was: interrupted, probed again next time, never failed.

use std::path::PathBuf;
use std::process::{Command, Stdio};

use crate::check::Trial;

use super::identity;

/// How a probe ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Probe {
    /// The child built the trial and took its step, or stopped with an ordinary error that
    /// running the trial will record: run it.
    Clean,
    /// The child was killed by a signal: why, in words.
    Crashed(String),
    /// The probe could not be made (the executable or the spec is gone): why. The trial runs
    /// in the sweep's process as if it had not been suspected.
    Inconclusive(String),
}

/// Something that can probe a trial in a process of its own.
pub trait Prober: Send + Sync {
    fn probe(&self, trial: &Trial) -> Probe;
}

/// Probes by running `memctl probe` on the spec the sweep loaded.
pub struct ChildProber {
    pub exe: PathBuf,
    pub spec_path: PathBuf,
    pub experiment: Option<String>,
    pub overrides: Vec<String>,
    pub threads: usize,
    pub device: Option<String>,
}

/// Exit code of `memctl probe` when it could not rebuild the trial (not the trial's fault).
pub const EXIT_NO_TRIAL: i32 = 3;

impl ChildProber {
    /// A prober for trials loaded from `spec_path` (with `overrides`), run by this executable.
    pub fn for_this_exe(
        spec_path: PathBuf,
        experiment: Option<String>,
        overrides: Vec<String>,
        threads: usize,
        device: Option<String>,
    ) -> Option<ChildProber> {
        let exe = std::env::current_exe().ok()?;
        Some(ChildProber { exe, spec_path, experiment, overrides, threads, device })
    }

    fn command(&self, trial: &Trial) -> Command {
        let mut c = Command::new(&self.exe);
        c.arg("probe").arg(&self.spec_path).arg("--trial").arg(identity::trial_key(trial));
        c.arg("--threads").arg(self.threads.to_string());
        if let Some(e) = &self.experiment {
            c.arg("--experiment").arg(e);
        }
        for o in &self.overrides {
            c.arg("--set").arg(o);
        }
        if let Some(d) = &self.device {
            c.arg("--device").arg(d);
        }
        // No backtrace: the last line the child prints is then its reason.
        c.env("RUST_BACKTRACE", "0").stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::piped());
        die_with_parent(&mut c);
        c
    }
}

impl Prober for ChildProber {
    fn probe(&self, trial: &Trial) -> Probe {
        let out = match self.command(trial).output() {
            Ok(out) => out,
            Err(e) => return Probe::Inconclusive(format!("cannot start {}: {e}", self.exe.display())),
        };
        let stderr = String::from_utf8_lossy(&out.stderr);
        judge(out.status, last_words(&stderr))
    }
}

/// The child's last line that says something: not a backtrace, not Rust's closing `note:`.
fn last_words(stderr: &str) -> Option<&str> {
    stderr.lines().rev().map(str::trim_end).find(|l| {
        !(l.trim().is_empty() || l.starts_with(' ') || l.starts_with("note: ") || l.starts_with("stack backtrace"))
    })
}

/// What a probe's exit status says about the trial.
fn judge(status: std::process::ExitStatus, last_words: Option<&str>) -> Probe {
    use std::os::unix::process::ExitStatusExt;
    if let Some(signal) = status.signal() {
        let said = last_words.map(|w| format!(" after printing “{w}”")).unwrap_or_default();
        return Probe::Crashed(format!("a process running only its first step was then {}{said}", signal_name(signal)));
    }
    match status.code() {
        Some(EXIT_NO_TRIAL) => {
            Probe::Inconclusive(last_words.unwrap_or("the probe could not rebuild the trial").into())
        }
        _ => Probe::Clean,
    }
}

/// A signal in words, with its usual cause in a training process.
fn signal_name(signal: i32) -> String {
    match signal {
        libc::SIGKILL => "killed (SIGKILL: the kernel's out-of-memory killer, or kill -9)".into(),
        libc::SIGABRT => "aborted (SIGABRT: an allocation that failed, or an internal abort)".into(),
        libc::SIGSEGV => "stopped by a segmentation fault (SIGSEGV: a stack overflow or a crash)".into(),
        libc::SIGBUS => "stopped by a bus error (SIGBUS)".into(),
        libc::SIGILL => "stopped by an illegal instruction (SIGILL: built for another CPU?)".into(),
        libc::SIGFPE => "stopped by an arithmetic exception (SIGFPE)".into(),
        s => format!("stopped by signal {s}"),
    }
}

/// The child is killed when the thread that started it ends, so that a sweep killed while
/// probing leaves no probe behind (the thread waits for the child, so it cannot end first).
fn die_with_parent(c: &mut Command) {
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::process::CommandExt;
        let parent = std::process::id() as libc::pid_t;
        // SAFETY: prctl, getppid and _exit are async-signal-safe and touch no memory of the
        // parent.
        unsafe {
            c.pre_exec(move || {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                // The parent died before the request took effect.
                if libc::getppid() != parent {
                    libc::_exit(EXIT_NO_TRIAL);
                }
                Ok(())
            });
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = c;
}

#[cfg(test)]
mod tests {
    use std::os::unix::process::ExitStatusExt;
    use std::process::ExitStatus;

    use super::*;

    #[test]
    fn a_signal_is_a_crash_and_an_exit_code_is_not() {
        let aborted = judge(ExitStatus::from_raw(libc::SIGABRT), Some("memory allocation of 800000000 bytes failed"));
        let Probe::Crashed(why) = aborted else { panic!("{aborted:?}") };
        assert!(why.contains("SIGABRT") && why.contains("memory allocation of 800000000 bytes failed"), "{why}");
        // Exit statuses are encoded as code << 8.
        assert_eq!(judge(ExitStatus::from_raw(0), None), Probe::Clean);
        assert_eq!(judge(ExitStatus::from_raw(1 << 8), Some("loss is NaN")), Probe::Clean);
        assert_eq!(judge(ExitStatus::from_raw(101 << 8), Some("panicked")), Probe::Clean);
        let stderr = "memory allocation of 800000000 bytes failed\nnote: run with `RUST_BACKTRACE=1` …\n";
        assert_eq!(last_words(stderr), Some("memory allocation of 800000000 bytes failed"));
        let gone = judge(ExitStatus::from_raw(EXIT_NO_TRIAL << 8), Some("no trial t"));
        assert_eq!(gone, Probe::Inconclusive("no trial t".into()));
    }
}
