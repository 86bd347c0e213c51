//! Talking to Slurm: `sbatch` to submit a job array, `squeue` to see what is still queued or
//! running. (memctl uses Slurm's own tools; it does not schedule anything itself.)

use std::path::Path;
use std::process::Command;

/// Options passed to `sbatch`.
#[derive(Clone, Debug)]
pub struct SlurmOptions {
    pub partition: Option<String>,
    pub time: Option<String>,
    pub cpus_per_task: usize,
    /// At most this many array tasks at once (`--array=0-N%K`).
    pub array_parallelism: Option<usize>,
    /// Seconds before the time limit at which Slurm warns the worker (`--signal=B:USR1@N`):
    /// it checkpoints its trial and requeues itself, and the requeued task resumes.
    pub grace_seconds: u32,
    /// Extra `sbatch` arguments, verbatim.
    pub extra: Vec<String>,
}

/// Time the worker gets, before its time limit, to save a checkpoint and requeue itself.
pub const DEFAULT_GRACE_SECONDS: u32 = 120;

#[derive(Debug, thiserror::Error)]
pub enum SlurmError {
    #[error("cannot run `{0}`: {1} (is Slurm installed and on PATH?)")]
    Spawn(&'static str, std::io::Error),
    #[error("`{0}` failed: {1}")]
    Failed(&'static str, String),
}

/// Submits `count` array tasks, each running `memctl worker --manifest M --index $SLURM_ARRAY_TASK_ID`;
/// returns the job id.
pub fn submit(
    memctl: &Path,
    manifest: &Path,
    logs: &Path,
    count: usize,
    name: &str,
    opts: &SlurmOptions,
) -> Result<String, SlurmError> {
    let mut array = format!("0-{}", count.saturating_sub(1));
    if let Some(k) = opts.array_parallelism {
        array.push_str(&format!("%{k}"));
    }
    let wrap = format!(
        "exec {} worker --manifest {} --index $SLURM_ARRAY_TASK_ID",
        shell_quote(&memctl.display().to_string()),
        shell_quote(&manifest.display().to_string())
    );
    let mut cmd = Command::new("sbatch");
    cmd.arg("--parsable")
        .arg(format!("--array={array}"))
        .arg(format!("--job-name={name}"))
        .arg(format!("--cpus-per-task={}", opts.cpus_per_task.max(1)))
        .arg(format!("--output={}", logs.join("%A_%a.log").display()))
        // `B:` signals the batch shell, which `exec` made the worker itself.
        .arg(format!("--signal=B:USR1@{}", opts.grace_seconds))
        .arg("--requeue")
        // A requeued task appends to its log instead of overwriting the first attempt's.
        .arg("--open-mode=append");
    if let Some(p) = &opts.partition {
        cmd.arg(format!("--partition={p}"));
    }
    if let Some(t) = &opts.time {
        cmd.arg(format!("--time={t}"));
    }
    cmd.args(&opts.extra).arg("--wrap").arg(wrap);
    let out = cmd.output().map_err(|e| SlurmError::Spawn("sbatch", e))?;
    if !out.status.success() {
        return Err(SlurmError::Failed("sbatch", String::from_utf8_lossy(&out.stderr).trim().to_string()));
    }
    // `--parsable` prints `jobid` or `jobid;cluster`.
    let text = String::from_utf8_lossy(&out.stdout);
    Ok(text.trim().split(';').next().unwrap_or("").to_string())
}

/// Puts this array task back in the queue (`scontrol requeue`); Slurm ends the running
/// process, so this is the worker's last act.
pub fn requeue_this_task() -> Result<(), SlurmError> {
    let var = |name: &str| {
        std::env::var(name)
            .map_err(|_| SlurmError::Failed("scontrol requeue", format!("${name} is not set: not a Slurm array task")))
    };
    let task = format!("{}_{}", var("SLURM_ARRAY_JOB_ID")?, var("SLURM_ARRAY_TASK_ID")?);
    let out =
        Command::new("scontrol").args(["requeue", &task]).output().map_err(|e| SlurmError::Spawn("scontrol", e))?;
    if !out.status.success() {
        return Err(SlurmError::Failed("scontrol requeue", String::from_utf8_lossy(&out.stderr).trim().to_string()));
    }
    Ok(())
}

/// Array tasks of `job` still known to `squeue`: (task index, state), e.g. (3, "RUNNING").
pub fn queued_tasks(job: &str) -> Result<Vec<(usize, String)>, SlurmError> {
    let out = Command::new("squeue")
        .args(["-h", "-r", "-j", job, "-o", "%K %T"])
        .output()
        .map_err(|e| SlurmError::Spawn("squeue", e))?;
    if !out.status.success() {
        let why = String::from_utf8_lossy(&out.stderr).trim().to_string();
        // squeue refuses a job that has left the queue entirely: nothing of it is queued. Any
        // other failure (the controller out of reach) says nothing about the queue.
        return if left_the_queue(&why) { Ok(vec![]) } else { Err(SlurmError::Failed("squeue", why)) };
    }
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let mut it = l.split_whitespace();
            let idx = it.next()?.parse().ok()?;
            Some((idx, it.next()?.to_string()))
        })
        .collect())
}

/// Whether `squeue`'s error says the job is unknown to it (it ended and was purged).
fn left_the_queue(stderr: &str) -> bool {
    stderr.contains("Invalid job id")
}

fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}
