//! `memctl doctor`: what this build can do here — features, devices, threads, store.

use crate::cli::context::Context;

/// Show the build's features, the devices it can use, thread settings and the store.
#[derive(clap::Args)]
pub struct Args {
    /// Also train one small model of each family on `--device` and on the CPU, and print the
    /// largest relative difference of losses and gradient norms (fails above 1e-4).
    #[arg(long)]
    check: bool,
    /// The device `--check` tries: cpu, cuda or cuda:N (default: cuda in a CUDA build, else
    /// cpu, which compares candle's autograd with memctl's own gradients).
    #[arg(long)]
    device: Option<String>,
    /// Training steps per model in `--check`.
    #[arg(long, default_value_t = 6, value_parser = crate::cli::counts::at_least_one)]
    steps: usize,
}

pub fn run(args: Args, ctx: &Context) -> anyhow::Result<i32> {
    println!("memctl {}", env!("CARGO_PKG_VERSION"));
    let features: Vec<&str> =
        [("cuda", cfg!(feature = "cuda"))].iter().filter(|(_, on)| *on).map(|(n, _)| *n).collect();
    println!("features: {}", if features.is_empty() { "none (CPU only)".to_string() } else { features.join(", ") });
    println!("devices:");
    println!("  cpu: {} cores available, {}", cores(), cpu_model());
    let mut code = 0;
    match crate::device::open("cuda") {
        Ok(device) => match crate::device::try_device(&device) {
            // TF32 products on a GPU differ from the CPU's in the third decimal at most.
            Ok(t) if t.max_difference < 0.05 => {
                let free = crate::train::memory::available_on("cuda")
                    .map(|b| format!("; {} free", crate::report::numbers::bytes(b)))
                    .unwrap_or_default();
                println!(
                    "  cuda:0: works (a 256×256 product agrees with the CPU's to {:.1e}; first launch {:.0} ms, {}){free}",
                    t.max_difference,
                    t.seconds * 1e3,
                    module_loads()
                );
            }
            Ok(t) => {
                println!("  cuda:0: opens, but computes wrong results (off by {:.2} from the CPU's)", t.max_difference);
                code = 1;
            }
            Err(e) => {
                println!(
                    "  cuda:0: opens, but cannot compute: {e}\n    (kernels built by a CUDA toolkit newer than the driver do not \
                     load: build with the driver's toolkit version)"
                );
                code = 1;
            }
        },
        Err(e) => println!("  cuda: {e}"),
    }
    println!("cuda switches (MEMCTL_CUDA=name,-name; 0: all off, 1: every kernel and change on):");
    for line in cuda_switches() {
        println!("  {line}");
    }
    println!("threads:");
    for var in ["CANDLE_NUM_THREADS", "RAYON_NUM_THREADS"] {
        println!("  {var}={}", std::env::var(var).unwrap_or_else(|_| "(unset)".into()));
    }
    println!("  each trial computes on its own pool of --threads threads (default: cores / jobs);");
    println!("  flush-to-zero and denormals-are-zero are set on every compute thread");
    println!("store: {}", ctx.store.display());
    if args.check {
        let default = if cfg!(feature = "cuda") { "cuda" } else { "cpu" };
        code = code.max(device_check(args.device.as_deref().unwrap_or(default), args.steps)?);
    }
    Ok(code)
}

/// `--check`: one line per model family; exit status 1 if any differs beyond the tolerance.
fn device_check(device_name: &str, steps: usize) -> anyhow::Result<i32> {
    use crate::bench::device_check;
    let device = crate::device::open(device_name)?;
    let trials = device_check::trials().map_err(anyhow::Error::msg)?;
    println!(
        "check: {device_name} against the CPU, f32, largest relative difference (tolerance {:.0e}):",
        device_check::TOLERANCE
    );
    println!(
        "  {:<12} {:>22} {:>22} {:>14}  steps ran; evaluations ran",
        "experiment", "first step (loss, ∇)", "losses over steps", "evaluations"
    );
    let mut code = 0;
    for trial in &trials {
        let result =
            crate::pool::run_in_pool(crate::cli::sweep::threads(None), || device_check::check(trial, &device, steps))?;
        match result {
            Ok(c) => {
                let verdict = if c.passed() { "" } else { "  ← beyond the tolerance" };
                println!(
                    "  {:<12} {:>22.1e} {:>22.1e} {:>14.1e}  {} × {}; {} × {}{verdict}",
                    c.experiment,
                    c.first_step,
                    c.training,
                    c.evaluation,
                    c.steps,
                    c.step_mode,
                    device_check::EVALUATIONS,
                    c.eval_mode
                );
                if !c.passed() {
                    code = 1;
                }
            }
            Err(e) => {
                println!("  {:<12} failed: {e}", trial.config.experiment);
                code = 1;
            }
        }
    }
    for check in &crate::bench::kernel_checks::KERNEL_CHECKS {
        let (name, unit) = (check.name, check.cases_are);
        match (check.run)(&device) {
            Ok((worst, cases)) => {
                let passed = worst <= device_check::TOLERANCE;
                let verdict = if passed { "" } else { "  ← beyond the tolerance" };
                println!("  {name:<12} {worst:>22.1e} {:>22} {:>14}  {cases} {unit}{verdict}", "", "");
                if !passed {
                    code = 1;
                }
            }
            Err(e) => {
                println!("  {name:<12} failed: {e}");
                code = 1;
            }
        }
    }
    if matches!(device, candle_core::Device::Cuda(_)) {
        // Which switches were on (as MEMCTL_CUDA asks) and which kernels the check launched, so
        // that a pass says what it covered.
        println!("  {}; kernel {}", cuda_switches()[0], module_loads());
        let launches = crate::kernels::cuda::fused::device_launches();
        if launches.is_empty() {
            println!("  memctl's fused kernels: none launched");
        } else {
            let each: Vec<String> = launches.iter().map(|(k, n)| format!("{k} {n}")).collect();
            println!("  memctl's fused kernels, launches outside replays: {}", each.join(", "));
        }
    }
    println!("check: {}", if code == 0 { "passed" } else { "FAILED" });
    Ok(code)
}

/// memctl's switches on CUDA (`kernels::cuda::switches`) as `MEMCTL_CUDA` sets them: which are on
/// and which off, what each one still off waits for, and names the variable has that no switch
/// has.
fn cuda_switches() -> Vec<String> {
    use crate::kernels::cuda::switches::{self, Standing, VARIABLE};
    let all = switches::all();
    let list = |on: bool| {
        let names: Vec<&str> = all.iter().filter(|s| switches::on_cuda(**s) == on).map(|s| s.name).collect();
        if names.is_empty() { "none".to_string() } else { names.join(", ") }
    };
    let setting = std::env::var(VARIABLE).unwrap_or_else(|_| "unset".into());
    let mut lines = vec![format!("{VARIABLE} ({setting}) on: {}", list(true)), format!("off: {}", list(false))];
    for s in &all {
        match s.standing {
            Standing::AwaitsGpu(measurement) => {
                lines.push(format!("{} waits for a GPU measurement: {measurement}", s.name))
            }
            Standing::Option => lines.push(format!("{} is an option, on only when named", s.name)),
            Standing::On => {}
        }
    }
    let unknown = switches::unknown_names();
    if !unknown.is_empty() {
        lines.push(format!("no switch is named {} (misspelt?)", unknown.join(", ")));
    }
    lines
}

/// How the CUDA kernel modules loaded so far came: from the SASS built for the card, or from
/// PTX that the driver compiled (or took from its cache).
fn module_loads() -> String {
    let (sass, ptx) = crate::device::kernel_module_loads();
    format!("modules loaded: {sass} from SASS, {ptx} from PTX")
}

fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|m| m.trim().to_string())
        })
        .unwrap_or_else(|| std::env::consts::ARCH.to_string())
}
