//! `memctl doctor`: what this build can do here — features, devices, threads, store.

use crate::cli::Context;

/// Show the build's features, the devices it can use, thread settings and the store.
#[derive(clap::Args)]
pub struct Args {}

pub fn run(_args: Args, ctx: &Context) -> anyhow::Result<i32> {
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
                    "  cuda:0: works (a 256×256 product agrees with the CPU's to {:.1e}; first launch {:.0} ms){free}",
                    t.max_difference,
                    t.seconds * 1e3
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
    println!("threads:");
    for var in ["CANDLE_NUM_THREADS", "RAYON_NUM_THREADS"] {
        println!("  {var}={}", std::env::var(var).unwrap_or_else(|_| "(unset)".into()));
    }
    println!("  each trial computes on its own pool of --threads threads (default: cores / jobs);");
    println!("  flush-to-zero and denormals-are-zero are set on every compute thread");
    println!("store: {}", ctx.store.display());
    Ok(code)
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
