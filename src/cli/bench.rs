//! `memctl bench FILE [EXPERIMENT]`: time the training step of an experiment's first trial, or
//! of a pack of its seeds (`--pack N`).

use std::path::PathBuf;

use crate::bench;
use crate::cli::{context::Context, load, sweep};
use crate::train::Autograd;

/// Time the training step of an experiment's first trial (compiled from its spec), on one
/// fixed batch: median and min ms per step, FLOPs, GFLOP/s against the sgemm peak, peak memory.
#[derive(clap::Args)]
pub struct Args {
    /// Spec file.
    file: PathBuf,
    /// An experiment name (optional), then `KEY=VALUES` overrides (first value of each is used).
    #[arg(value_name = "EXPERIMENT|KEY=VALUES")]
    rest: Vec<String>,
    /// Timed steps.
    #[arg(long, default_value_t = 20, value_parser = crate::cli::counts::at_least_one)]
    iters: usize,
    /// Time one step of this many trials trained as a pack, as `sweep --pack` trains them:
    /// the experiment's first trial with seeds `seed`, `seed + 1`, …, each on its own batch.
    #[arg(long, default_value_t = 1, value_parser = crate::cli::counts::at_least_one)]
    pack: usize,
    /// Untimed steps first.
    #[arg(long, default_value_t = 3)]
    warmup: usize,
    /// Compute threads (default: all cores).
    #[arg(long, value_parser = crate::cli::counts::thread_count)]
    threads: Option<usize>,
    /// Device: cpu, cuda or cuda:N.
    #[arg(long, default_value = "cpu")]
    device: String,
    /// Also write the first step (parameters, batch, loss, gradient norms) as JSON here.
    #[arg(long)]
    dump: Option<PathBuf>,
    /// How gradients are computed: `tape` (memctl's reverse mode with fused manual backward
    /// passes, the default on the CPU) or `candle` (candle's autograd, the reference).
    #[arg(long)]
    autograd: Option<String>,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
    /// Also time this many evaluation passes over the validation split, as training runs
    /// them at each `eval_every` (its batch size and `eval_size`), after one untimed pass.
    #[arg(long, value_name = "PASSES", value_parser = crate::cli::counts::at_least_one)]
    eval: Option<usize>,
}

pub fn run(args: Args, ctx: &Context) -> anyhow::Result<i32> {
    let (experiment, overrides) = load::split_overrides(&args.rest);
    let Ok((_, program)) = load::load_checked_with(&args.file, experiment.as_deref(), &overrides, ctx) else {
        return Ok(2);
    };
    let trials = load::select(&program, experiment.as_deref(), &args.file)?;
    let Some(trial) = trials.first() else { anyhow::bail!("{} has no experiment to benchmark", args.file.display()) };
    let device = crate::device::open(&args.device)?;
    let threads = sweep::threads(args.threads);
    let autograd = autograd(args.autograd.as_deref(), &device)?;
    if let Some(path) = &args.dump {
        super::output::writable(path, &[&args.file])?;
        let d = crate::pool::run_in_pool(threads, || bench::dump::first_step_with(trial, &device, autograd))??;
        super::output::write(path, serde_json::to_vec(&d)?, &[&args.file])?;
    }
    let (report, peak, eval) = crate::pool::run_in_pool(threads, || -> candle_core::Result<_> {
        let r = bench::time_steps(trial, &device, autograd, threads, args.pack, args.warmup, args.iters)?;
        let eval = args.eval.map(|passes| bench::time_evaluation(trial, &device, autograd, passes)).transpose()?;
        Ok((r, bench::sgemm_peak_gflops(&device)?, eval))
    })??;
    if args.json {
        let json =
            serde_json::json!({ "report": report, "sgemm_peak_gflops": peak, "eval": eval, "config": trial.config });
        println!("{json}");
        return Ok(0);
    }
    print_steps(trial, &report, peak);
    if let Some(e) = &eval {
        print_evaluation(e, &report, trial.config.train.batch);
        if !device.is_cpu() {
            eprintln!("evaluations: {}", e.mode);
        }
    }
    if !device.is_cpu() {
        eprintln!("steps: {}", report.step_mode);
    }
    Ok(0)
}

/// `--autograd` on `device`: the device's default, or what was asked where it runs there.
fn autograd(asked: Option<&str>, device: &candle_core::Device) -> anyhow::Result<Autograd> {
    Ok(match asked {
        None => Autograd::default_for(device),
        Some("tape") if device.is_cpu() => Autograd::Tape,
        Some("tape") => anyhow::bail!("--autograd tape runs on the CPU only"),
        Some("candle") => Autograd::Candle,
        Some(other) => anyhow::bail!("--autograd must be `tape` or `candle`, not `{other}`"),
    })
}

/// The step's line: `memctl_bench model=… KEY=VALUE … median_ms=…`, one `key=value` a figure.
fn print_steps(trial: &crate::check::Trial, report: &bench::Report, peak: f64) {
    let mut values: Vec<String> = trial
        .config
        .params
        .iter()
        .filter(|(_, v)| !matches!(v, crate::value::Value::List(_)))
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    values.push(format!("batch={}", trial.config.train.batch));
    println!(
        "memctl_bench model={} {} pack={} median_ms={:.2} trial_steps_per_s={:.1} min_ms={:.2} median_cpu_ms={:.2} params={} threads={} flops_per_step={:.3e} gflops={:.2} sgemm_peak_gflops={:.1} roofline={:.1}% peak_rss_mb={:.0} first_step_ms={:.0} cuda_graph={}",
        trial.config.model,
        values.join(" "),
        report.pack,
        report.median_ms,
        report.pack as f64 * 1e3 / report.median_ms,
        report.min_ms,
        report.median_cpu_ms,
        report.params,
        report.threads,
        report.flops_per_train_step,
        report.gflops,
        peak,
        100.0 * report.gflops / peak,
        report.peak_rss_mb,
        report.first_step_ms,
        if report.cuda_graph { "yes" } else { "no" }
    );
}

/// The evaluation's line, per 1000 sequences beside a training step's (forward and backward),
/// so that a slow evaluation shows against what training does with the same sequences.
fn print_evaluation(e: &bench::EvalReport, report: &bench::Report, batch: usize) {
    let batch = batch as f64;
    println!(
        "memctl_bench_eval median_ms={:.1} passes={} sequences={} eval_batch={} eval_ms_per_1k_sequences={:.1} train_ms_per_1k_sequences={:.1}",
        e.median_ms,
        e.passes,
        e.sequences,
        e.batch,
        e.median_ms * 1000.0 / e.sequences.max(1) as f64,
        report.median_ms * 1000.0 / batch
    );
}
