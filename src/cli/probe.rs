//! `memctl probe FILE --trial KEY`: build one trial and take one training step, in a process of
//! its own. A sweep runs it before running again a trial whose process died before its first
//! step, and judges the trial by how this process ends (see `sweep::probe`). Not for users.

use std::path::PathBuf;

use crate::cli::{context::Context, load};
use crate::sweep::identity;
use crate::sweep::probe::EXIT_NO_TRIAL;

/// Build one trial of a spec and take one training step (used by sweeps).
#[derive(clap::Args)]
pub struct Args {
    /// Spec file.
    file: PathBuf,
    /// The trial's identity.
    #[arg(long)]
    trial: String,
    #[arg(long)]
    experiment: Option<String>,
    /// A command-line override of the sweep (repeatable).
    #[arg(long = "set")]
    overrides: Vec<String>,
    #[arg(long, default_value_t = 1)]
    threads: usize,
    #[arg(long)]
    device: Option<String>,
}

pub fn run(args: Args, ctx: &Context) -> anyhow::Result<i32> {
    let Ok((_, program)) = load::load_checked_with(&args.file, args.experiment.as_deref(), &args.overrides, ctx) else {
        return Ok(EXIT_NO_TRIAL);
    };
    // A search fixed by the overrides (`memctl ablate`) runs each of its seeds, not only the
    // first seed's trial that stands for it.
    let fixed = (program.experiments.iter())
        .filter(|e| args.experiment.as_deref().is_none_or(|name| name == e.name))
        .filter_map(|e| e.search.as_deref()?.fixed_trials()?.ok())
        .flatten();
    let trial = (load::select(&program, args.experiment.as_deref(), &args.file).unwrap_or_default().into_iter())
        .chain(fixed)
        .find(|t| identity::trial_key(t) == args.trial);
    let Some(trial) = trial else {
        eprintln!("memctl probe: no trial {} in {} (was the spec edited?)", args.trial, args.file.display());
        return Ok(EXIT_NO_TRIAL);
    };
    let device_name = args.device.as_deref().unwrap_or(&trial.config.train.device);
    let device = match crate::device::open(device_name) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("memctl probe: {e}");
            return Ok(1);
        }
    };
    let stepped = crate::pool::run_in_pool(args.threads, || crate::train::fixed_batch_losses(&trial, 1, &device));
    match stepped {
        Ok(Ok(_)) => Ok(0),
        Ok(Err(e)) => {
            eprintln!("memctl probe: {e}");
            Ok(1)
        }
        Err(e) => {
            eprintln!("memctl probe: {e}");
            Ok(1)
        }
    }
}
