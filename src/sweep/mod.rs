//! Running trials: claim each in the store (so that no trial runs twice, whichever process
//! reaches it), train it inside its own thread pool (flush-to-zero on every thread) with its
//! progress and checkpoints going to the store as it trains, and record how it ended.

pub mod identity;
pub mod live;
pub mod memory_budget;
pub mod packs;
pub mod placement;
pub mod probe;
pub mod progress_writer;
pub mod search;
pub mod study_from_runs;

use std::panic::AssertUnwindSafe;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use sha2::{Digest, Sha256};

use crate::check::Trial;
use crate::device::DeviceError;
use crate::pool::PoolError;
use crate::store::{Claim, Environment, Progress, Rerun, RunRecord, Status, Store, StoreError, StoredConfig, now};
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

#[derive(Clone)]
pub struct Options {
    /// Re-run trials that are already done (and failed ones).
    pub force: bool,
    /// Re-run trials whose latest run failed (by default they are reported and skipped).
    pub retry_failed: bool,
    /// Re-run trials whose latest run a search's pruner stopped early: a comparison at the
    /// full budget (`memctl ablate`) cannot use them.
    pub retry_pruned: bool,
    /// Trials run at once.
    pub jobs: usize,
    /// Compute threads per trial.
    pub threads: usize,
    /// Overrides every trial's `device` setting. A sweep spread over several GPUs (`cuda:all`)
    /// trains each pack on the GPU its memory reservation took ([`Options::placed`]).
    pub device: Option<String>,
    /// Tries a trial whose process died before its first step in a process of its own before
    /// running it again ([`probe`]); without one, such a trial simply runs again.
    pub prober: Option<std::sync::Arc<dyn probe::Prober>>,
    /// Keeps the trials running at once within their device's memory, and places packs on the
    /// GPUs of a spread sweep.
    pub memory: std::sync::Arc<memory_budget::MemoryBudget>,
    /// Which trials train together as one program ([`packs`]).
    pub pack: packs::Packing,
}

impl Options {
    /// One trial at a time on one thread, on each trial's own device, nothing re-run and no
    /// memory limit: how a benchmark or a test drives a sweep.
    pub fn one_at_a_time() -> Options {
        Options {
            force: false,
            retry_failed: false,
            retry_pruned: false,
            jobs: 1,
            threads: 1,
            device: None,
            prober: None,
            memory: Default::default(),
            pack: packs::Packing::Off,
        }
    }

    /// These options for a pack whose memory reservation placed it on a GPU of a spread sweep
    /// (the same options where it did not).
    pub fn placed(&self, reservation: &memory_budget::Reservation<'_>) -> Options {
        match reservation.device() {
            Some(gpu) => Options { device: Some(gpu.to_string()), ..self.clone() },
            None => self.clone(),
        }
    }
}

/// What happened to one trial.
#[derive(Debug, Clone, PartialEq)]
pub enum TrialResult {
    /// Not run: its latest run has this status (done, or failed without `--retry-failed`).
    Skipped {
        run_id: u64,
        status: Status,
    },
    Finished(Box<RunRecord>),
    /// Not started because the sweep was cancelled.
    NotStarted,
}

/// What the store says about a trial before a sweep: whether it will run (for `--dry-run`
/// and the count of trials to run; the decision itself is [`Store::claim`]'s, made when the
/// trial's turn comes).
#[derive(Debug, Clone, PartialEq)]
pub enum Plan {
    New,
    Done(u64),
    /// Failed before; skipped unless `--retry-failed`.
    Failed(u64),
    /// Interrupted before; runs again, from its checkpoint.
    Interrupted(u64),
    /// Running in another live process.
    Running(u64),
    /// Stopped by a search's pruner; never run again (unless `--force`).
    Pruned(u64),
}

impl Plan {
    /// Each trial's plan, read in one store session (a session per trial takes minutes for a
    /// sweep of thousands of trials).
    pub fn of_all(store: &Store, trials: &[Trial]) -> Result<Vec<Plan>, StoreError> {
        let keys: Vec<String> = trials.iter().map(identity::trial_key).collect();
        Ok(store.latest_summaries(&keys)?.iter().map(|l| Plan::of_latest(l.as_ref())).collect())
    }

    /// The plan of a trial whose latest run, as seen now, is `latest`.
    fn of_latest(latest: Option<&crate::store::RunSummary>) -> Plan {
        match latest {
            None => Plan::New,
            Some(r) => match r.status {
                Status::Done => Plan::Done(r.id),
                Status::Failed => Plan::Failed(r.id),
                Status::Interrupted => Plan::Interrupted(r.id),
                Status::Running => Plan::Running(r.id),
                Status::Pruned => Plan::Pruned(r.id),
            },
        }
    }

    /// Whether the trial runs under these options.
    pub fn runs(&self, opts: &Options) -> bool {
        match self {
            Plan::New | Plan::Interrupted(_) => true,
            Plan::Done(_) => opts.force,
            Plan::Pruned(_) => opts.force || opts.retry_pruned,
            Plan::Failed(_) => opts.force || opts.retry_failed,
            Plan::Running(_) => false,
        }
    }
}

/// Totals of a sweep.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Summary {
    pub ran: usize,
    pub done_before: usize,
    pub failed_before: usize,
    pub failed: usize,
    pub interrupted: usize,
    pub not_started: usize,
    /// Running in another process when this sweep reached them.
    pub elsewhere: usize,
    /// Stopped early by a search's pruner.
    pub pruned: usize,
}

/// Why a sweep stopped before its trials were done.
#[derive(Debug, thiserror::Error)]
pub enum SweepError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("cannot start {workers} worker threads for the sweep's trials: {source}; try fewer `--jobs`")]
    Threads { workers: usize, source: rayon::ThreadPoolBuildError },
    #[error("{reason} ({pools} pools of {threads} for the sweep's trials); try fewer `--jobs` or `--threads`")]
    ComputeThreads { pools: usize, threads: usize, reason: PoolError },
    #[error(
        "the search `{experiment}` has a trial running in another process (run {run}); `--force` would \
         start the search afresh under it: let that sweep end, or stop it, first"
    )]
    SearchRunningElsewhere { experiment: String, run: u64 },
}

/// Why a trial did not train at all (its record says so, as `failed`). A trial that starts
/// and then fails (a non-finite loss, a device error mid-step) ends in its [`train::Outcome`].
#[derive(Debug, thiserror::Error)]
pub enum TrialError {
    #[error(transparent)]
    ComputeThreads(#[from] PoolError),
    #[error(transparent)]
    Device(#[from] DeviceError),
    /// A primitive (or candle) panicked: a bug in memctl, kept from stopping the sweep.
    #[error("internal error (panic) while training: {0}")]
    Panic(String),
}

/// Runs `trials` in packs (`opts.pack`, [`packs::plan`]) with `opts.jobs` packs at a time
/// (rayon workers taking packs in order), each in its own pool of `opts.threads` compute
/// threads, as their device's memory allows (`opts.memory`). Stops starting packs once
/// `cancel` is set, or once the store fails.
pub fn run_all(
    store: &Store,
    spec: &SpecSource,
    trials: &[Trial],
    opts: &Options,
    reporter: &dyn Reporter,
    cancel: &AtomicBool,
) -> Result<Summary, SweepError> {
    use std::sync::atomic::AtomicUsize;
    let next = AtomicUsize::new(0);
    let results: Results = Mutex::new(vec![]);
    let store_failed = AtomicBool::new(false);
    let runs: Vec<bool> = Plan::of_all(store, trials)?.iter().map(|p| p.runs(opts)).collect();
    let planned = packs::plan(trials, opts, &runs);
    let workers = opts.jobs.clamp(1, planned.len().max(1));
    let pool = worker_pool(workers, opts.threads)?;
    pool.scope(|scope| {
        for _ in 0..workers {
            scope.spawn(|_| {
                loop {
                    let k = next.fetch_add(1, Ordering::SeqCst);
                    let Some(pack) = planned.get(k) else { break };
                    let r = if cancel.load(Ordering::SeqCst) || store_failed.load(Ordering::SeqCst) {
                        pack.iter().map(|_| Ok(TrialResult::NotStarted)).collect()
                    } else {
                        let keys: Vec<String> = pack.iter().map(|&i| identity::trial_key(&trials[i])).collect();
                        let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
                        let first = &trials[pack[0]];
                        let waits = |w| reporter.trial_waits_for_memory(pack[0], first, w);
                        match opts.memory.reserve_pack(&keys, cancel, waits) {
                            // Held until the pack ends.
                            Some(memory) => {
                                packs::run_pack(store, spec, pack, trials, &opts.placed(&memory), reporter, cancel)
                            }
                            None => pack.iter().map(|_| Ok(TrialResult::NotStarted)).collect(),
                        }
                    };
                    if gather(&results, r, &store_failed) {
                        break;
                    }
                }
            });
        }
    });
    tally(results.into_inner().unwrap_or_default())
}

/// What a sweep's workers gather as each trial or pack ends.
type Results = Mutex<Vec<Result<TrialResult, StoreError>>>;

/// Adds a worker's results to `results`; `true`, with `store_failed` set, when one is a store
/// error (a full disk, ...): that stops this worker, the others start nothing more and finish
/// what they run.
fn gather(results: &Results, r: Vec<Result<TrialResult, StoreError>>, store_failed: &AtomicBool) -> bool {
    let stop = r.iter().any(Result::is_err);
    if let Ok(mut v) = results.lock() {
        v.extend(r);
    }
    if stop {
        store_failed.store(true, Ordering::SeqCst);
    }
    stop
}

/// A sweep's totals from its trials' results; the first store error, if any.
fn tally(results: Vec<Result<TrialResult, StoreError>>) -> Result<Summary, SweepError> {
    let mut summary = Summary::default();
    for r in results {
        match r? {
            TrialResult::Skipped { status: Status::Failed, .. } => summary.failed_before += 1,
            TrialResult::Skipped { status: Status::Running, .. } => summary.elsewhere += 1,
            TrialResult::Skipped { .. } => summary.done_before += 1,
            TrialResult::NotStarted => summary.not_started += 1,
            TrialResult::Finished(rec) => {
                summary.ran += 1;
                match rec.status {
                    Status::Failed => summary.failed += 1,
                    Status::Interrupted => summary.interrupted += 1,
                    Status::Pruned => summary.pruned += 1,
                    _ => {}
                }
            }
        }
    }
    Ok(summary)
}

/// The pool of `workers` threads that take a sweep's trials (or packs) in turn, after starting
/// every worker's `threads` compute threads, before any trial allocates (`pool::reserve`).
pub fn worker_pool(workers: usize, threads: usize) -> Result<rayon::ThreadPool, SweepError> {
    crate::pool::reserve(workers, threads).map_err(|reason| SweepError::ComputeThreads {
        pools: workers,
        threads,
        reason,
    })?;
    rayon::ThreadPoolBuilder::new()
        .num_threads(workers)
        .build()
        .map_err(|source| SweepError::Threads { workers, source })
}

/// Progress reporting for a sweep. A reporter says where its warnings go; every other event
/// it may leave alone.
pub trait Reporter: Sync {
    /// An observer for one trial's training progress; `resumed_from` is the step its
    /// checkpoint resumes it from. By default one that observes nothing.
    fn trial_started(
        &self,
        _index: usize,
        _trial: &Trial,
        _run_id: u64,
        _resumed_from: Option<u64>,
    ) -> Box<dyn Observer + '_> {
        Box::new(train::Silent)
    }
    /// Not run: its latest run (`run_id`, recorded as experiment `recorded_as`'s where settled)
    /// is done, or failed (without `--retry-failed`), or running in another process.
    fn trial_skipped(&self, _index: usize, _trial: &Trial, _run_id: u64, _status: Status, _recorded_as: Option<&str>) {}
    /// Ended (done, failed, pruned or interrupted) and recorded as `record`.
    fn trial_finished(&self, _index: usize, _record: &RunRecord) {}
    /// Not started yet: it fits in its device's memory alone, not beside the trials running.
    fn trial_waits_for_memory(&self, _index: usize, _trial: &Trial, _waiting: placement::Waiting) {}
    /// Something went wrong that does not stop the trial (a checkpoint that could not be saved).
    fn warning(&self, message: &str);
}

/// A reporter for tests: a warning fails the test.
#[cfg(test)]
pub(crate) struct Quiet;

#[cfg(test)]
impl Reporter for Quiet {
    fn warning(&self, message: &str) {
        panic!("unexpected warning: {message}");
    }
}

/// A reporter for tests that keeps the warnings it is given.
#[cfg(test)]
#[derive(Default)]
pub(crate) struct Warnings(pub Mutex<Vec<String>>);

#[cfg(test)]
impl Reporter for Warnings {
    fn warning(&self, message: &str) {
        self.0.lock().unwrap().push(message.to_string());
    }
}

/// Runs one trial (unless it is settled, or running elsewhere) and records it, asking `judge`
/// (a search's pruner), if any, after every evaluation whether the trial goes on; a trial it
/// stops is recorded `pruned`, with the decision.
#[allow(clippy::too_many_arguments)]
pub fn run_trial(
    store: &Store,
    spec: &SpecSource,
    index: usize,
    trial: &Trial,
    opts: &Options,
    reporter: &dyn Reporter,
    cancel: &AtomicBool,
    judge: Option<&dyn live::Judge>,
) -> Result<TrialResult, StoreError> {
    let Claimed { mut record, key, resume, .. } = match claim(store, spec, index, trial, opts, reporter)? {
        Ok(claimed) => claimed,
        Err(result) => return Ok(result),
    };
    let resumed_from = record.progress.as_ref().and_then(|p| p.resumed_from);
    let observer = reporter.trial_started(index, trial, record.id, resumed_from);
    let live = live::Live::new(
        Some(store),
        store.checkpoints(),
        record.clone(),
        key.clone(),
        observer.as_ref(),
        reporter,
        resume,
    )
    .judged_by(judge);
    let threads = record.environment.threads;
    train_into_record(&mut record, trial, threads, &live, cancel);
    if record.status == Status::Pruned {
        record.pruned = judge.and_then(|j| j.pruned());
    }
    record.progress = live.progress();
    drop(live);
    drop(observer);
    settle(store, index, trial, record, &key, reporter)
}

/// A trial this process claimed in the store, about to train.
pub struct Claimed {
    pub record: RunRecord,
    pub key: String,
    /// The checkpoint it resumes from.
    pub resume: Option<crate::train::checkpoint::TrainState>,
}

/// Claims `trial` in the store: `Err` with what happened instead when it does not train here
/// (settled, running elsewhere, or crashed in its probe).
pub fn claim(
    store: &Store,
    spec: &SpecSource,
    index: usize,
    trial: &Trial,
    opts: &Options,
    reporter: &dyn Reporter,
) -> Result<Result<Claimed, TrialResult>, StoreError> {
    let key = identity::trial_key(trial);
    let rerun = Rerun { done: opts.force, failed: opts.retry_failed, pruned: opts.retry_pruned };
    let mut threads_before = None;
    let make = |id, prev: Option<&RunRecord>| {
        threads_before = prev.map(|p| p.environment.threads);
        new_record(id, trial, spec, opts)
    };
    let (mut record, took_over) = match store.claim(&key, rerun, make)? {
        Claim::Run { record, took_over } => (*record, took_over),
        Claim::Settled { run_id, status, experiment } => {
            reporter.trial_skipped(index, trial, run_id, status, Some(&experiment));
            return Ok(Err(TrialResult::Skipped { run_id, status }));
        }
        Claim::RunningElsewhere { run_id, .. } => {
            reporter.trial_skipped(index, trial, run_id, Status::Running, None);
            return Ok(Err(TrialResult::Skipped { run_id, status: Status::Running }));
        }
    };
    if let Some(crashed) = probe_if_suspected(&mut record, trial, opts, reporter) {
        store.put(&crashed)?;
        reporter.trial_finished(index, &crashed);
        return Ok(Err(TrialResult::Finished(Box::new(crashed))));
    }
    // A trial taken over from an interrupted run resumes from its checkpoint; one run again on
    // purpose (`--force`, `--retry-failed`) starts afresh.
    let resume = match took_over {
        Some(_) => live::load_checkpoint(&store.checkpoints(), &key, trial.config.train.steps, reporter),
        None => {
            if let Err(e) = store.remove_checkpoint(&key) {
                reporter.warning(&e.to_string());
            }
            None
        }
    };
    if let (Some(state), Some(p)) = (&resume, record.progress.as_mut()) {
        p.resumed_from = Some(state.step as u64);
        p.checkpoint_step = Some(state.step as u64);
    }
    if let (Some(_), Some(threads)) = (&resume, threads_before) {
        record.environment.threads = resumed_threads(threads, opts.threads);
    }
    Ok(Ok(Claimed { record, key, resume }))
}

/// The compute threads of a trial resumed from a checkpoint: those it started with (`before`),
/// as the CPU tape splits a batch into one part per thread and sums the parts in order, so that
/// it continues bit for bit; `planned` where this machine has fewer cores than that.
fn resumed_threads(before: usize, planned: usize) -> usize {
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    if (1..=cores).contains(&before) { before } else { planned }
}

/// Stores a trial's finished record, drops its checkpoint once it is done (unless the spec
/// keeps it), and reports it. A run another sweep took over while it trained (counting this
/// process as gone) is left as that sweep recorded it, with its checkpoint: that sweep runs
/// the trial now.
pub fn settle(
    store: &Store,
    index: usize,
    trial: &Trial,
    record: RunRecord,
    key: &str,
    reporter: &dyn Reporter,
) -> Result<TrialResult, StoreError> {
    if !store.put_while_running(&record)? {
        reporter.warning(&format!(
            "run {}: another sweep took this trial over while it trained here (it counted this process as \
             gone); this process's attempt, to step {}, is not recorded",
            record.id, record.steps_run
        ));
        return Ok(TrialResult::Skipped { run_id: record.id, status: Status::Interrupted });
    }
    if record.status == Status::Done
        && !trial.config.train.keep_checkpoint
        && let Err(e) = store.remove_checkpoint(key)
    {
        reporter.warning(&e.to_string());
    }
    reporter.trial_finished(index, &record);
    Ok(TrialResult::Finished(Box::new(record)))
}

/// A trial whose process died before its first step is probed in a process of its own first
/// ([`probe`]); returns its record, failed, if the probe crashed.
fn probe_if_suspected(
    record: &mut RunRecord,
    trial: &Trial,
    opts: &Options,
    reporter: &dyn Reporter,
) -> Option<RunRecord> {
    let deaths = record.progress.as_ref().map_or(0, |p| p.deaths);
    let prober = opts.prober.as_ref().filter(|_| deaths > 0)?;
    match prober.probe(trial) {
        probe::Probe::Clean => None,
        probe::Probe::Inconclusive(why) => {
            reporter
                .warning(&format!("run {}: could not probe it in a process of its own ({why}); running it", record.id));
            None
        }
        probe::Probe::Crashed(why) => {
            let mut failed = record.clone();
            let reason = format!(
                "its process died before its first training step, and {why}; `memctl check` shows \
                 its memory estimate; `memctl sweep --retry-failed` runs it again"
            );
            failed.status = Status::Failed;
            failed.stop_reason = reason.clone();
            failed.error = Some(reason);
            failed.ended_at = Some(now());
            Some(failed)
        }
    }
}

/// A `running` record for a trial about to start.
pub fn new_record(id: u64, trial: &Trial, spec: &SpecSource, opts: &Options) -> RunRecord {
    let mut config = trial.config.clone();
    if let Some(d) = &opts.device {
        config.train.device = d.clone();
    }
    let progress = Progress {
        steps_total: config.train.steps as u64,
        updated_at: now(),
        resumed_from: None,
        checkpoint_step: None,
        max_time: config.train.max_time,
        deaths: 0,
    };
    RunRecord {
        record_version: crate::store::record::RECORD_VERSION,
        id,
        trial_key: identity::trial_key(trial),
        status: Status::Running,
        environment: environment(opts.threads, &config.train.device),
        config: StoredConfig::of(&config),
        spec_path: spec.path.clone(),
        spec_text: spec.text.clone(),
        spec_hash: spec.hash(),
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
        progress: Some(progress),
        pruned: None,
    }
}

/// Trains the trial (resuming from and saving checkpoints through `live`) and completes its
/// record (status, curves, metrics, timings).
pub fn train_into_record(
    record: &mut RunRecord,
    trial: &Trial,
    threads: usize,
    live: &live::Live<'_>,
    cancel: &AtomicBool,
) {
    let device = record.config.train_str("device").unwrap_or("cpu").to_string();
    let outcome = execute(trial, &device, threads, live, cancel);
    complete_record(record, outcome);
}

/// Completes a trial's record from how its training went (status, curves, metrics, timings).
pub fn complete_record(record: &mut RunRecord, outcome: Result<train::Outcome, TrialError>) {
    // From the record's start (its claim in the store), as a running run's wall time is
    // counted (`Live`, `RunSummary::as_seen`): the time shown while it trains and after agree,
    // and equal `ended_at - started_at`.
    let ended = now();
    record.wall_seconds = (ended - record.started_at).max(0.0);
    record.ended_at = Some(ended);
    match outcome {
        Ok(o) => {
            record.status = match &o.ending {
                Ending::Done => Status::Done,
                Ending::Failed(_) => Status::Failed,
                Ending::Interrupted => Status::Interrupted,
                Ending::Pruned => Status::Pruned,
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
        Err(e) => {
            let reason = e.to_string();
            record.status = Status::Failed;
            record.stop_reason = reason.clone();
            record.error = Some(reason);
        }
    }
}

/// Trains inside a fresh pool of `threads` threads with flush-to-zero; a panic in a primitive
/// or a device that does not open becomes a [`TrialError`].
fn execute(
    trial: &Trial,
    device: &str,
    threads: usize,
    live: &live::Live<'_>,
    cancel: &AtomicBool,
) -> Result<train::Outcome, TrialError> {
    let result = crate::pool::run_in_pool(threads, || {
        // Opened on the thread that trains: a CUDA device's work goes to this thread's stream.
        let device = crate::device::open(device)?;
        let autograd = train::Autograd::default_for(&device);
        Ok::<_, TrialError>(std::panic::catch_unwind(AssertUnwindSafe(|| {
            train::train_resumable(trial, &device, autograd, live, cancel, live)
        })))
    })??;
    result.map_err(|panic| TrialError::Panic(train::panic_message(panic.as_ref())))
}

fn environment(threads: usize, device: &str) -> Environment {
    Environment {
        hostname: crate::store::owner::hostname(),
        os: std::env::consts::OS.into(),
        arch: std::env::consts::ARCH.into(),
        cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
        threads,
        device: device.into(),
        processor: crate::device::processor(device),
        memctl_version: env!("CARGO_PKG_VERSION").into(),
        commit: crate::build_info::commit(),
        features: if cfg!(feature = "cuda") { vec!["cuda".into()] } else { vec![] },
        pid: std::process::id(),
        process: Some(crate::store::owner::this_process().clone()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A run another sweep took over while it trained here (counting this process as gone)
    /// keeps the record that sweep wrote: this process's result is reported, not stored.
    #[test]
    fn a_run_taken_over_while_it_trained_keeps_the_record_the_other_sweep_wrote() {
        let program = crate::check::checked_text(crate::check::test_specs::SIX_STEPS_OF_TINY_LSTM);
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let record = crate::store::tests::running(1, true);
        store.put(&RunRecord { status: Status::Interrupted, ..record.clone() }).unwrap();
        let warnings = Warnings::default();
        let done = RunRecord { status: Status::Done, steps_run: 6, ..record };
        let result = settle(&store, 0, &program.experiments[0].trials[0], done, "t", &warnings).unwrap();
        assert!(matches!(result, TrialResult::Skipped { run_id: 1, status: Status::Interrupted }));
        assert_eq!(store.get(1).unwrap().status, Status::Interrupted);
        let warnings = warnings.0.into_inner().unwrap();
        assert!(warnings.len() == 1 && warnings[0].contains("took this trial over while it trained"), "{warnings:?}");
    }
}
