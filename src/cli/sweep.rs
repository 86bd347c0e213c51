//! `memctl sweep FILE [EXPERIMENT] [KEY=VALUES...]`: run every trial of the experiments,
//! skipping trials already done in the store, several at a time.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::check::{SearchPlan, Trial};
use crate::cli::{context::Context, counts, load, progress::Progress, slurm_submit};
use crate::store::Store;
use crate::sweep::packs::Packing;
use crate::sweep::probe::ChildProber;
use crate::sweep::search::Search;
use crate::sweep::{self, Options, Plan, SpecSource};

/// Run every trial of a spec's experiments (or of one), skipping trials already done.
///
/// `KEY=VALUES` overrides a sweep axis or a parameter from the command line, in the spec's own
/// syntax: `gates=false`, `d=48,96`, `seed=1..5`, `lr=logspace(1e-4, 1e-2, 3)`.
#[derive(clap::Args)]
pub struct Args {
    /// Spec file.
    file: PathBuf,
    /// An experiment name (optional), then `KEY=VALUES` overrides.
    #[arg(value_name = "EXPERIMENT|KEY=VALUES")]
    rest: Vec<String>,
    /// Re-run trials that are already done.
    #[arg(long)]
    force: bool,
    /// Re-run trials whose latest run failed.
    #[arg(long)]
    retry_failed: bool,
    /// Show which trials would run and which are already done; run nothing.
    #[arg(long)]
    dry_run: bool,
    #[command(flatten)]
    parallel: Parallelism,
    /// Device for every trial: cpu, cuda or cuda:N (overrides the spec's `device`); or
    /// `cuda:all` or a list such as `cuda:0,2`, to place each pack on the GPU with the most
    /// memory free.
    #[arg(long)]
    device: Option<String>,
    /// Print only errors and the closing count: no progress bars, no line per evaluation or
    /// trial, no table of the sweep's runs.
    #[arg(long, short)]
    quiet: bool,
    /// Where trials run: here, or as a Slurm job array (see `memctl sync`, `memctl status`).
    #[arg(long, default_value = "local")]
    executor: Executor,
    /// Slurm: directory on the shared file system for manifests, results and logs.
    #[arg(long, env = "MEMCTL_SHARED_DIR", default_value = "slurm")]
    shared_dir: PathBuf,
    /// Slurm: partition to submit to.
    #[arg(long)]
    partition: Option<String>,
    /// Slurm: time limit per array task (e.g. `2:00:00`).
    #[arg(long)]
    time: Option<String>,
    /// Slurm: seconds before the time limit at which a worker checkpoints its trial and
    /// requeues itself (the requeued task resumes from the checkpoint).
    #[arg(long, default_value_t = crate::slurm::scheduler::DEFAULT_GRACE_SECONDS)]
    grace: u32,
    /// Slurm: CPUs per array task (also the trial's compute threads).
    #[arg(long, default_value_t = 1)]
    cpus_per_task: usize,
    /// Slurm: at most this many array tasks at once.
    #[arg(long)]
    array_parallelism: Option<usize>,
    /// Slurm: the memctl executable the compute nodes run (default: this one).
    #[arg(long)]
    memctl: Option<PathBuf>,
    /// Slurm: extra `sbatch` argument (repeatable), e.g. `--sbatch-arg=--account=lab`.
    #[arg(long = "sbatch-arg")]
    sbatch_args: Vec<String>,
}

#[derive(Clone, Copy, PartialEq, clap::ValueEnum)]
enum Executor {
    Local,
    Slurm,
}

pub fn run(args: Args, ctx: &Context) -> anyhow::Result<i32> {
    let (experiment, overrides) = load::split_overrides(&args.rest);
    let recorder = crate::slurm::manifest::Recorder::default();
    let Ok((spec, program)) = load::load_checked_from(&args.file, &recorder, experiment.as_deref(), &overrides, ctx)
    else {
        return Ok(2);
    };
    let mut trials = load::select(&program, experiment.as_deref(), &args.file)?;
    // Experiments with a `search` choose their trials as they run; their trials stand for them
    // only in the memory estimate, and they run as searches.
    let searches: Vec<(&str, &SearchPlan)> = program
        .experiments
        .iter()
        .filter(|e| experiment.as_deref().is_none_or(|name| name == e.name))
        .filter_map(|e| Some((e.name.as_str(), e.search.as_deref()?)))
        .collect();
    let spread = match &args.device {
        Some(d) => crate::device::spread::parse(d)?,
        None => None,
    };
    let selection = Selection { experiment, overrides, searches };
    if args.executor == Executor::Slurm {
        trials.retain(|t| !selection.is_searched(t));
        return submit_to_slurm(&args, ctx, &selection, &trials, spread.is_some(), &recorder);
    }
    // Every device named, on the command line or in the spec, opens before anything is claimed.
    match (&spread, &args.device) {
        (Some(gpus), _) => gpus.iter().try_for_each(|g| crate::device::open(&g.to_string()).map(|_| ()))?,
        (None, Some(d)) => _ = crate::device::open(d)?,
        (None, None) => {
            let named: std::collections::BTreeSet<&str> =
                trials.iter().map(|t| t.config.train.device.as_str()).collect();
            named.into_iter().try_for_each(|d| crate::device::open(d).map(|_| ()))?
        }
    }
    let Some(memory) = crate::cli::memory::budget(&spec, &program, &trials, args.device.as_deref(), ctx) else {
        return Ok(2);
    };
    let memory = match &spread {
        Some(gpus) => memory.spread_over(gpus.clone()),
        None => memory,
    };
    trials.retain(|t| !selection.is_searched(t));
    let source = load::spec_source(&args.file, &spec);
    run_locally(&args, ctx, selection, &trials, spread, memory.into(), &source)
}

/// What a sweep command selected besides its trials: the experiment named (if any), the
/// overrides, and the selected experiments that run a `search`.
struct Selection<'p> {
    experiment: Option<String>,
    overrides: Vec<String>,
    searches: Vec<(&'p str, &'p SearchPlan)>,
}

impl Selection<'_> {
    /// Whether `trial` belongs to a search (which chooses its trials as it runs).
    fn is_searched(&self, trial: &Trial) -> bool {
        self.searches.iter().any(|(name, _)| *name == trial.config.experiment)
    }
}

/// Submits the trials (searches excluded) as a Slurm job array, and each search as workers
/// that share its study; the sweep's exit code.
fn submit_to_slurm(
    args: &Args,
    ctx: &Context,
    selection: &Selection<'_>,
    trials: &[Trial],
    spread: bool,
    recorder: &crate::slurm::manifest::Recorder,
) -> anyhow::Result<i32> {
    if let Some(d) = args.device.as_deref().filter(|_| spread) {
        anyhow::bail!(
            "`--device {d}` spreads a local sweep over several GPUs; on Slurm each array task trains on the \
             GPU Slurm gives it: `--device cuda --sbatch-arg=--gpus-per-task=1`"
        );
    }
    if !selection.searches.is_empty() && args.force {
        anyhow::bail!(
            "`--force` re-runs a search's trials only with the local executor; on Slurm, its workers run what is not settled"
        );
    }
    let store = Store::open(&ctx.store)?;
    let opts = Options {
        force: args.force,
        retry_failed: args.retry_failed,
        threads: args.cpus_per_task.max(1),
        device: args.device.clone(),
        pack: args.parallel.packing(),
        ..Options::one_at_a_time()
    };
    let shared = std::path::absolute(&args.shared_dir)?;
    let memctl = match &args.memctl {
        // Absolute: Slurm may start the task in another folder (`--sbatch-arg=--chdir=…`).
        Some(p) => std::path::absolute(p)?,
        None => std::env::current_exe()?,
    };
    let submission = |experiment| slurm_submit::Submission {
        spec_path: &args.file,
        experiment,
        overrides: &selection.overrides,
        shared: shared.clone(),
        memctl: memctl.clone(),
        slurm: crate::slurm::scheduler::SlurmOptions {
            partition: args.partition.clone(),
            time: args.time.clone(),
            cpus_per_task: args.cpus_per_task,
            grace_seconds: args.grace,
            array_parallelism: args.array_parallelism,
            extra: args.sbatch_args.clone(),
        },
        dry_run: args.dry_run,
    };
    let mut code = 0;
    if !trials.is_empty() || selection.searches.is_empty() {
        code = slurm_submit::submit(&store, trials, recorder, &opts, submission(selection.experiment.as_deref()))?;
    }
    for (name, plan) in &selection.searches {
        let search = Search::new(&store, plan, name);
        // By default one worker per seed: a configuration's seeds run side by side, and each
        // next configuration is proposed from the results before it.
        let workers = args.parallel.jobs.unwrap_or(search.seeds());
        let sub = submission(Some(name));
        code = code.max(slurm_submit::submit_search(&store, &search, recorder, &opts, workers, sub)?);
    }
    Ok(code)
}

/// Runs (or, with `--dry-run`, shows) the trials (searches excluded) and the searches here,
/// within `memory`; the sweep's exit code.
fn run_locally(
    args: &Args,
    ctx: &Context,
    selection: Selection<'_>,
    trials: &[Trial],
    spread: Option<Vec<crate::device::DeviceSpec>>,
    memory: Arc<crate::sweep::memory_budget::MemoryBudget>,
    source: &SpecSource,
) -> anyhow::Result<i32> {
    let store = Store::open(&ctx.store)?;
    let searches: Vec<Search> = selection.searches.iter().map(|(name, plan)| Search::new(&store, plan, name)).collect();
    let plans = Plan::of_all(&store, trials)?;
    let mut opts = Options {
        force: args.force,
        retry_failed: args.retry_failed,
        device: args.device.clone(),
        memory,
        pack: args.parallel.packing(),
        ..Options::one_at_a_time()
    };
    // What runs at once is a pack (a trial alone is a pack of one): one pack of 16 trials takes
    // every core, as one trial alone would.
    let runs: Vec<bool> = plans.iter().map(|p| p.runs(&opts)).collect();
    let packs_to_run = sweep::packs::plan(trials, &opts, &runs).iter().filter(|p| runs[p[0]]).count();
    let to_run = packs_to_run + searches.iter().map(Search::trial_count).sum::<usize>();
    let gpus = spread.as_ref().map_or_else(|| usize::from(on_gpu(args.device.as_deref(), trials)), Vec::len);
    (opts.jobs, opts.threads) = args.parallel.budget(to_run, gpus);
    // A trial that crashed its process is probed alone on the first GPU of a spread sweep.
    let probe_device = match &spread {
        Some(gpus) => gpus.first().map(|g| g.to_string()),
        None => args.device.clone(),
    };
    let Selection { experiment, overrides, .. } = selection;
    opts.prober = ChildProber::for_this_exe(args.file.clone(), experiment, overrides, opts.threads, probe_device)
        .map(|p| Arc::new(p) as _);
    if args.dry_run {
        if let Some(gpus) = &spread {
            let names: Vec<String> = gpus.iter().map(|g| g.to_string()).collect();
            println!(
                "packs spread over {}: each starts on the GPU where it leaves the most memory free",
                names.join(", ")
            );
        }
        if !trials.is_empty() || searches.is_empty() {
            print_plan(trials, &plans, &opts);
        }
        for s in &searches {
            print_search_plan(&store, s, &opts)?;
        }
        return Ok(0);
    }
    let mut code = 0;
    if !trials.is_empty() || searches.is_empty() {
        code = execute(&store, source, trials, &opts, args.quiet)?;
        if !args.quiet {
            super::sweep_table::print(&store, trials)?;
        }
    }
    for s in &searches {
        code = code.max(execute_search(s, source, &opts, args.quiet)?);
        if !args.quiet {
            eprintln!("`memctl search-report {} {}` shows what it found", args.file.display(), s.experiment());
        }
    }
    Ok(code)
}

/// What a search would do: its configurations so far and how many it may add.
fn print_search_plan(store: &Store, s: &Search, opts: &Options) -> anyhow::Result<()> {
    let study = store.study(s.key(), s.experiment())?;
    println!(
        "search {}: {} of {} configurations proposed so far, each with {} seed{}; up to {} trials",
        s.experiment(),
        study.configs.len(),
        s.configurations(),
        s.seeds(),
        if s.seeds() == 1 { "" } else { "s" },
        s.trial_count()
    );
    print_search_packs(s, opts, &mut std::io::stdout());
    Ok(())
}

/// How a search packs its trials, when it does: up to `--pack N` seeds of one configuration.
fn print_search_packs(s: &Search, opts: &Options, out: &mut dyn std::io::Write) {
    let n = s.pack_size(opts).min(s.seeds());
    if n > 1 {
        let _ =
            writeln!(out, "search {}: up to {n} seeds of a configuration train together as one pack", s.experiment());
    }
}

/// Runs a search; the exit code is 1 if any trial failed or was interrupted.
pub fn execute_search(s: &Search, source: &SpecSource, opts: &Options, quiet: bool) -> anyhow::Result<i32> {
    stop_on_signals();
    if !quiet {
        print_search_packs(s, opts, &mut std::io::stderr());
    }
    let progress = Progress::new(s.trial_count(), quiet);
    let r = s.run(source, opts, &progress, &CANCEL)?;
    progress.finish();
    let mut line = format!(
        "search {}: {} trial{} run ({} pruned), {} already settled, {} failed",
        s.experiment(),
        r.ran,
        if r.ran == 1 { "" } else { "s" },
        r.pruned,
        r.done_before,
        r.failed + r.failed_before
    );
    if r.interrupted + r.not_started > 0 {
        line.push_str(&format!(", {} interrupted, {} not started", r.interrupted, r.not_started));
    }
    eprintln!("{line}");
    Ok(if r.failed > 0 || r.interrupted > 0 || r.not_started > 0 { 1 } else { 0 })
}

/// How many trials run at once, and on how many compute threads each (`sweep`, `ablate`).
#[derive(clap::Args)]
pub struct Parallelism {
    /// Trials (or packs) at once (default: one per core, at most the number of packs, a trial
    /// alone being a pack of one; on a GPU, at most 4). For a search that `sweep --executor
    /// slurm` submits: its workers (default: one per seed).
    #[arg(long, short, value_parser = counts::thread_count)]
    jobs: Option<usize>,
    /// Compute threads per trial or pack (default: cores / jobs).
    #[arg(long, value_parser = counts::thread_count)]
    threads: Option<usize>,
    /// Train trials of one model and shapes together as one program: `auto` (where it pays: on
    /// a GPU, trials of small steps, up to 16 to a pack and a pack at least for each GPU of a
    /// spread sweep; on the CPU, none), `off`, or a pack size. A packed trial draws the data and
    /// initial weights it would alone and is recorded on its own; on the CPU its losses are
    /// those alone on one thread bit for bit, on a GPU the pack's products round differently
    /// and its curve drifts as a run on another device would.
    #[arg(long, default_value = "auto", value_parser = parse_packing)]
    pack: Packing,
}

fn parse_packing(s: &str) -> Result<Packing, crate::sweep::packs::PackingError> {
    s.parse()
}

impl Parallelism {
    /// How the trials pack (`--pack`).
    pub fn packing(&self) -> Packing {
        self.pack
    }

    /// Packs at once and threads per pack for `packs` packs (a trial alone being a pack of
    /// one) on `gpus` GPUs (0: the CPU): never more than the cores unless asked. Trials on a GPU share it: a few at once keep it
    /// busy while each waits for its own steps ([`GPU_JOBS`] per GPU).
    pub fn budget(&self, packs: usize, gpus: usize) -> (usize, usize) {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let default_jobs = if gpus > 0 { (GPU_JOBS * gpus).min(cores) } else { cores };
        let jobs = self.jobs.unwrap_or_else(|| default_jobs.min(packs.max(1))).max(1);
        let threads = self.threads.unwrap_or_else(|| (cores / jobs).max(1)).max(1);
        if jobs * threads > cores {
            eprintln!("note: {jobs} jobs × {threads} threads exceeds the {cores} cores; trials will compete for them");
        }
        (jobs, threads)
    }
}

/// Trials at once on one GPU when `--jobs` is not given. Each trial replays its step from a
/// CUDA graph on its own stream; beyond a few streams the GPU's queue is full and more
/// trials only wait longer (docs/performance.md, "Sweeps on one GPU").
pub const GPU_JOBS: usize = 4;

/// Whether the trials run on a GPU: the `--device` flag, or else any trial's spec setting.
pub fn on_gpu(device_flag: Option<&str>, trials: &[Trial]) -> bool {
    match device_flag {
        Some(d) => d != "cpu",
        None => trials.iter().any(|t| t.config.train.device != "cpu"),
    }
}

fn print_plan(trials: &[Trial], plans: &[Plan], opts: &Options) {
    let mut runs = 0;
    for (i, (t, p)) in trials.iter().zip(plans).enumerate() {
        let runs_now = p.runs(opts);
        runs += usize::from(runs_now);
        let status = match p {
            Plan::New => "new".to_string(),
            Plan::Done(id) => format!("done (run {id})"),
            Plan::Failed(id) => format!("failed (run {id})"),
            Plan::Interrupted(id) => format!("interrupted (run {id})"),
            Plan::Running(id) => format!("running elsewhere (run {id})"),
            Plan::Pruned(id) => format!("pruned (run {id})"),
        };
        println!(
            "{:>4}  {:<4} {:<22} {} {} {}",
            i + 1,
            if runs_now { "run" } else { "skip" },
            status,
            t.config.experiment,
            t.config.model,
            crate::value::assignments(&t.config.swept)
        );
    }
    let runs_now: Vec<bool> = plans.iter().map(|p| p.runs(opts)).collect();
    let packs: Vec<Vec<usize>> =
        sweep::packs::plan(trials, opts, &runs_now).into_iter().filter(|p| runs_now[p[0]]).collect();
    let packed: Vec<String> = packs
        .iter()
        .filter(|p| p.len() > 1)
        .map(|p| format!("[{}]", p.iter().map(|i| (i + 1).to_string()).collect::<Vec<_>>().join(" ")))
        .collect();
    let at_a_time = format!("{} at a time, {} threads each", opts.jobs, opts.threads);
    if packed.is_empty() {
        println!("{runs} of {} trials would run ({at_a_time})", trials.len());
    } else {
        println!("packs (trials trained together as one program): {}", packed.join(" "));
        println!("{runs} of {} trials would run in {} packs ({at_a_time})", trials.len(), packs.len());
    }
}

/// Ctrl-C (SIGINT), SIGTERM or SIGHUP stops the sweep: running trials save a checkpoint and
/// end `interrupted`, no new trial starts. A second signal quits at once.
static CANCEL: AtomicBool = AtomicBool::new(false);

/// When the first stopping signal came.
static FIRST_SIGNAL: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();

/// A signal this soon after the first is the same stop, not a second one: `timeout` sends its
/// signal to the process and then to its process group, so one stop arrives twice within
/// microseconds.
const SAME_STOP: std::time::Duration = std::time::Duration::from_millis(500);

/// Installs the handler that sets [`CANCEL`] (once per process; later calls keep it).
fn stop_on_signals() {
    // A signal the process started with ignored stays ignored: `nohup` ignores SIGHUP so that
    // closing the terminal leaves the sweep running.
    let ignored: Vec<libc::c_int> = [libc::SIGTERM, libc::SIGHUP].into_iter().filter(|&s| is_ignored(s)).collect();
    let installed = ctrlc::set_handler(|| {
        let first = *FIRST_SIGNAL.get_or_init(std::time::Instant::now);
        if CANCEL.swap(true, Ordering::SeqCst) {
            if first.elapsed() < SAME_STOP {
                return;
            }
            eprintln!("\nstopping now");
            std::process::exit(130);
        }
        eprintln!(
            "\nstopping: running trials will save a checkpoint and be recorded as interrupted \
             (Ctrl-C again to quit at once)"
        );
    });
    if installed.is_ok() {
        for signal in ignored {
            // SAFETY: sets a disposition the process started with; no handler runs.
            unsafe { libc::signal(signal, libc::SIG_IGN) };
        }
    }
}

fn is_ignored(signal: libc::c_int) -> bool {
    // SAFETY: with no new action, sigaction only reads the current one into `current`.
    unsafe {
        let mut current: libc::sigaction = std::mem::zeroed();
        libc::sigaction(signal, std::ptr::null(), &mut current) == 0 && current.sa_sigaction == libc::SIG_IGN
    }
}

/// Runs trials; the exit code is 1 if any failed or was interrupted.
pub fn execute(
    store: &Store,
    source: &SpecSource,
    trials: &[Trial],
    opts: &Options,
    quiet: bool,
) -> anyhow::Result<i32> {
    stop_on_signals();
    let progress = Progress::new(trials.len(), quiet);
    let s = sweep::run_all(store, source, trials, opts, &progress, &CANCEL)?;
    progress.finish();
    let mut line = format!(
        "{} trial{} run, {} already done, {} failed",
        s.ran,
        if s.ran == 1 { "" } else { "s" },
        s.done_before,
        s.failed
    );
    if s.failed_before > 0 {
        line.push_str(&format!(", {} failed before (skipped; --retry-failed re-runs them)", s.failed_before));
    }
    if s.elsewhere > 0 {
        line.push_str(&format!(", {} running in another process", s.elsewhere));
    }
    if s.interrupted + s.not_started > 0 {
        line.push_str(&format!(", {} interrupted, {} not started", s.interrupted, s.not_started));
    }
    eprintln!("{line}");
    Ok(if s.failed > 0 || s.interrupted > 0 || s.not_started > 0 { 1 } else { 0 })
}

/// Compute threads per trial for a single trial: the flag, or every core.
pub fn threads(flag: Option<usize>) -> usize {
    flag.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get())).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gpu_sweep_runs_a_few_trials_at_once_and_a_cpu_sweep_one_per_core() {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let default = Parallelism { jobs: None, threads: None, pack: Packing::Auto };
        assert_eq!(default.budget(16, 1).0, GPU_JOBS.min(cores));
        assert_eq!(default.budget(64, 2).0, (2 * GPU_JOBS).min(cores));
        assert_eq!(default.budget(16, 0).0, cores.min(16));
        assert_eq!(default.budget(1, 1).0, 1);
        let asked = Parallelism { jobs: Some(8), threads: Some(1), pack: Packing::Auto };
        assert_eq!(asked.budget(16, 1), (8, 1));
    }
}
