//! Running trials: skip those already done, record each run in the store before and after,
//! train each inside its own thread pool (flush-to-zero on every thread).

pub mod identity;

use std::panic::AssertUnwindSafe;
use std::sync::atomic::AtomicBool;
use std::time::{SystemTime, UNIX_EPOCH};

use sha2::{Digest, Sha256};

use crate::check::Trial;
use crate::store::{Environment, RunRecord, Status, Store, StoreError};
use crate::train::{self, Ending, Observer};

/// The spec a sweep comes from, as stored with each run.
pub struct SpecSource {
    pub path: String,
    pub text: String,
}

impl SpecSource {
    pub fn hash(&self) -> String {
        Sha256::digest(self.text.as_bytes()).iter().map(|b| format!("{b:02x}")).collect()
    }
}

pub struct Options {
    /// Re-run trials that are already done.
    pub force: bool,
    /// Compute threads per trial.
    pub threads: usize,
    /// Overrides every trial's `device` setting.
    pub device: Option<String>,
}

/// What happened to one trial.
#[derive(Debug, Clone, PartialEq)]
pub enum TrialResult {
    Skipped { run_id: u64 },
    Finished(Box<RunRecord>),
}

/// Progress reporting for a sweep.
pub trait Reporter: Sync {
    /// An observer for one trial's training progress.
    fn trial_started(&self, index: usize, trial: &Trial, run_id: u64) -> Box<dyn Observer + '_>;
    fn trial_skipped(&self, index: usize, trial: &Trial, run_id: u64);
    fn trial_finished(&self, index: usize, record: &RunRecord);
}

/// Runs one trial (unless done and not forced) and records it.
pub fn run_trial(
    store: &Store,
    spec: &SpecSource,
    index: usize,
    trial: &Trial,
    opts: &Options,
    reporter: &dyn Reporter,
    cancel: &AtomicBool,
) -> Result<TrialResult, StoreError> {
    let key = identity::trial_key(trial);
    if !opts.force {
        if let Some(prev) = store.latest_of_trial(&key)? {
            if prev.status == Status::Done {
                reporter.trial_skipped(index, trial, prev.id);
                return Ok(TrialResult::Skipped { run_id: prev.id });
            }
        }
    }
    let mut config = trial.config.clone();
    if let Some(d) = &opts.device {
        config.train.device = d.clone();
    }
    let id = store.next_id()?;
    let mut record = RunRecord {
        id,
        trial_key: key,
        status: Status::Running,
        config: config.clone(),
        spec_path: spec.path.clone(),
        spec_text: spec.text.clone(),
        spec_hash: spec.hash(),
        environment: environment(opts.threads, &config.train.device),
        started_at: now(),
        ended_at: None,
        curves: Default::default(),
        final_metrics: Default::default(),
        steps_run: 0,
        steps_to_converge: None,
        epochs_to_converge: None,
        stop_reason: String::new(),
        param_count: trial.graph.param_count() as u64,
        flops_per_step: trial.graph.flops_per_step(),
        wall_seconds: 0.0,
        train_seconds: 0.0,
        eval_seconds: 0.0,
        error: None,
        tags: vec![],
    };
    store.put(&record)?;
    let observer = reporter.trial_started(index, trial, id);
    let started = std::time::Instant::now();
    let outcome = execute(trial, &config.train.device, opts.threads, observer.as_ref(), cancel);
    drop(observer);
    record.wall_seconds = started.elapsed().as_secs_f64();
    record.ended_at = Some(now());
    match outcome {
        Ok(o) => {
            record.status = match &o.ending {
                Ending::Done => Status::Done,
                Ending::Failed(_) => Status::Failed,
                Ending::Interrupted => Status::Interrupted,
            };
            if let Ending::Failed(reason) = &o.ending {
                record.error = Some(reason.clone());
            }
            record.curves = o.curves;
            record.final_metrics = o.final_metrics;
            record.steps_run = o.steps_run as u64;
            record.steps_to_converge = o.converged.as_ref().map(|c| c.step as u64);
            record.epochs_to_converge = o.converged.and_then(|c| c.epoch);
            record.stop_reason = o.stop_reason;
            record.train_seconds = o.train_seconds;
            record.eval_seconds = o.eval_seconds;
        }
        Err(reason) => {
            record.status = Status::Failed;
            record.stop_reason = reason.clone();
            record.error = Some(reason);
        }
    }
    store.put(&record)?;
    reporter.trial_finished(index, &record);
    Ok(TrialResult::Finished(Box::new(record)))
}

/// Trains inside a fresh pool of `threads` threads with flush-to-zero; a panic in a primitive
/// or a device error becomes an error message.
fn execute(
    trial: &Trial,
    device: &str,
    threads: usize,
    observer: &dyn Observer,
    cancel: &AtomicBool,
) -> Result<train::Outcome, String> {
    let device = crate::device::open(device).map_err(|e| e.to_string())?;
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads.max(1))
        .start_handler(|_| crate::ftz::enable())
        .build()
        .map_err(|e| format!("cannot start compute threads: {e}"))?;
    let result =
        pool.install(|| std::panic::catch_unwind(AssertUnwindSafe(|| train::train(trial, &device, observer, cancel))));
    result.map_err(|panic| {
        let msg = panic
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown panic".into());
        format!("internal error (panic) while training: {msg}")
    })
}

fn now() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64())
}

fn environment(threads: usize, device: &str) -> Environment {
    Environment {
        hostname: std::fs::read_to_string("/etc/hostname")
            .map(|s| s.trim().to_string())
            .unwrap_or_else(|_| "unknown".into()),
        os: std::env::consts::OS.into(),
        arch: std::env::consts::ARCH.into(),
        cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
        threads,
        device: device.into(),
        memctl_version: env!("CARGO_PKG_VERSION").into(),
        features: if cfg!(feature = "cuda") { vec!["cuda".into()] } else { vec![] },
        pid: std::process::id(),
    }
}
