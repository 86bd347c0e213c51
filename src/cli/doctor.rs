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
    match crate::device::open("cuda") {
        Ok(_) => println!("  cuda:0: available"),
        Err(e) => println!("  cuda: {e}"),
    }
    println!("threads:");
    for var in ["CANDLE_NUM_THREADS", "RAYON_NUM_THREADS"] {
        println!("  {var}={}", std::env::var(var).unwrap_or_else(|_| "(unset)".into()));
    }
    println!("  each trial computes on its own pool of --threads threads (default: cores / jobs);");
    println!("  flush-to-zero and denormals-are-zero are set on every compute thread");
    println!("store: {}", ctx.store.display());
    Ok(0)
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
