//! The command line. One verb per file; this file registers them and dispatches.
//!
//! Exit codes: 0 success, 1 some trial failed, 2 the command could not run (bad spec,
//! bad arguments, store locked, ...).

use std::io::IsTerminal;
use std::path::PathBuf;

use clap::{Parser, Subcommand};

pub use context::Context;

pub mod ablate;
mod bench;
mod check;
mod context;
mod counts;
mod diff;
mod doctor;
mod import;
mod load;
mod memory;
mod output;
mod plot;
mod prims;
mod probe;
mod progress;
mod results;
mod rm;
mod run;
mod runs;
mod search_report;
mod show;
mod slurm_submit;
mod status;
mod sweep;
mod sweep_table;
mod sync;
mod tag;
mod task_sample;
mod tasks;
mod ui;
mod worker;

#[derive(Parser)]
#[command(name = "memctl", version, about = "Declarative experiments with memory-augmented neural networks")]
pub struct Cli {
    /// Run store location.
    #[arg(long, global = true, env = "MEMCTL_STORE", default_value = "store")]
    pub store: PathBuf,
    /// Colour: auto, always or never.
    #[arg(long, global = true, default_value = "auto")]
    pub color: ColorChoice,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Clone, Copy, clap::ValueEnum)]
pub enum ColorChoice {
    Auto,
    Always,
    Never,
}

#[derive(Subcommand)]
pub enum Command {
    Bench(bench::Args),
    Check(check::Args),
    Doctor(doctor::Args),
    Run(run::Args),
    Sweep(sweep::Args),
    Runs(runs::Args),
    Show(show::Args),
    Diff(diff::Args),
    Plot(plot::Args),
    Ablate(ablate::Args),
    Tag(tag::Args),
    Rm(rm::Args),
    Prims(prims::Args),
    Tasks(tasks::Args),
    Ui(ui::Args),
    Results(results::Args),
    SearchReport(search_report::Args),
    Status(status::Args),
    Sync(sync::Args),
    Import(import::Args),
    #[command(hide = true)]
    Worker(worker::Args),
    #[command(hide = true)]
    Probe(probe::Args),
}

/// Parses arguments, runs the verb, returns the exit code.
pub fn main() -> i32 {
    let cli = Cli::parse();
    let color = match cli.color {
        ColorChoice::Always => true,
        ColorChoice::Never => false,
        ColorChoice::Auto => std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none(),
    };
    let ctx = Context { store: cli.store, color };
    let result = match cli.command {
        Command::Bench(a) => bench::run(a, &ctx),
        Command::Check(a) => check::run(a, &ctx),
        Command::Doctor(a) => doctor::run(a, &ctx),
        Command::Run(a) => run::run(a, &ctx),
        Command::Sweep(a) => sweep::run(a, &ctx),
        Command::Runs(a) => runs::run(a, &ctx),
        Command::Show(a) => show::run(a, &ctx),
        Command::Diff(a) => diff::run(a, &ctx),
        Command::Plot(a) => plot::run(a, &ctx),
        Command::Ablate(a) => ablate::run(a, &ctx),
        Command::Tag(a) => tag::run(a, &ctx),
        Command::Rm(a) => rm::run(a, &ctx),
        Command::Prims(a) => prims::run(a, &ctx),
        Command::Tasks(a) => tasks::run(a, &ctx),
        Command::Ui(a) => ui::run(a, &ctx),
        Command::Results(a) => results::run(a, &ctx),
        Command::SearchReport(a) => search_report::run(a, &ctx),
        Command::Status(a) => status::run(a, &ctx),
        Command::Sync(a) => sync::run(a, &ctx),
        Command::Import(a) => import::run(a, &ctx),
        Command::Worker(a) => worker::run(a, &ctx),
        Command::Probe(a) => probe::run(a, &ctx),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            2
        }
    }
}
