//! Memory before training: each trial's estimate (`train::memory`), printed by `memctl check`,
//! and the sweep's refusal, located in the spec, of trials that cannot fit in the memory free.

use std::collections::HashMap;

use crate::check::error_kind::CheckErrorKind;
use crate::check::{ExperimentPlan, Program, Trial};
use crate::cli::Context;
use crate::diag::{Diagnostic, Diagnostics};
use crate::lang::Spec;
use crate::report::numbers::bytes;
use crate::train::memory::{self, MemoryEstimate};

/// Estimates for a program's trials, computed once per distinct configuration.
#[derive(Default)]
pub struct Estimates(HashMap<String, Result<MemoryEstimate, String>>);

impl Estimates {
    pub fn of(&mut self, trial: &Trial) -> Result<MemoryEstimate, String> {
        let key = format!("{} {:?} {:?}", trial.graph.fingerprint(), trial.config.train, trial.config.task_options);
        self.0.entry(key).or_insert_with(|| memory::estimate(trial).map_err(|e| e.to_string())).clone()
    }
}

/// `1.2 GB (parameters 4.0 MB, gradients 4.0 MB, optimiser 8.0 MB, activations 1.1 GB, batch 2.0 MB)`.
pub fn describe(e: &MemoryEstimate) -> String {
    format!(
        "{} (parameters {}, gradients {}, optimiser {}, activations {}, batch {})",
        bytes(e.total()),
        bytes(e.params),
        bytes(e.gradients),
        bytes(e.optimizer),
        bytes(e.activations),
        bytes(e.batch)
    )
}

/// True when the trials fit; otherwise prints why (located in the spec) and returns false.
/// Each trial is bounded by its device's free memory: the host's (or its cgroup's) for the
/// CPU, the GPU's for a CUDA device. `device` overrides the trials' own `device` setting.
pub fn fits(spec: &Spec, program: &Program, trials: &[Trial], device: Option<&str>, ctx: &Context) -> bool {
    match refuse_too_large(spec, program, trials, device) {
        Ok(()) => true,
        Err(d) => {
            eprint!("{}", d.render(&spec.sources, ctx.color));
            false
        }
    }
}

/// Errors, located at the experiment's `batch` setting (or its name), for the trials whose
/// estimate exceeds the memory free now on their device. A device whose free memory cannot
/// be read (not present, no CUDA support) is not checked here: opening it fails later, with
/// its own message.
pub fn refuse_too_large(
    spec: &Spec,
    program: &Program,
    trials: &[Trial],
    device: Option<&str>,
) -> Result<(), Diagnostics> {
    let mut free_on: HashMap<String, Option<u64>> = HashMap::new();
    let mut estimates = Estimates::default();
    let mut errors = vec![];
    for exp in &program.experiments {
        // The trial of this experiment that overshoots its device's memory the most.
        let mut worst: Option<(i128, MemoryEstimate, &Trial, String, u64)> = None;
        for t in trials.iter().filter(|t| t.config.experiment == exp.name) {
            let name = device.unwrap_or(&t.config.train.device).to_string();
            let free = *free_on.entry(name.clone()).or_insert_with(|| memory::available_on(&name));
            let (Some(free), Ok(e)) = (free, estimates.of(t)) else { continue };
            let over = e.total() as i128 - free as i128;
            if over > 0 && worst.as_ref().is_none_or(|w| over > w.0) {
                worst = Some((over, e, t, name, free));
            }
        }
        if let Some((_, e, t, name, free)) = worst {
            errors.push(too_large(spec, exp, t, &e, &name, free));
        }
    }
    if errors.is_empty() { Ok(()) } else { Err(Diagnostics(errors)) }
}

fn too_large(
    spec: &Spec,
    exp: &ExperimentPlan,
    trial: &Trial,
    e: &MemoryEstimate,
    device: &str,
    free: u64,
) -> Diagnostic {
    let batch = spec
        .ast
        .experiments
        .iter()
        .find(|x| x.name.name == exp.name)
        .and_then(|x| x.train.iter().flatten().find(|s| s.key.name == "batch"))
        .map(|s| s.value.span);
    let swept: Vec<String> = trial.config.swept.iter().map(|(k, v)| format!("{k}={v}")).collect();
    let which = if swept.is_empty() { String::new() } else { format!(" (at {})", swept.join(" ")) };
    let place = if device == "cpu" { "this machine has".to_string() } else { format!("`{device}` has") };
    let d = CheckErrorKind::TooLargeForDevice {
        experiment: exp.name.clone(),
        needs: describe(e),
        at: which,
        place,
        free: bytes(free),
    }
    .error();
    let d = match batch {
        Some(span) => d.at(span, "the batch size"),
        None => d.at(exp.span, "this experiment"),
    };
    d.hint("lower `batch`, or the model's sizes; the activations grow with batch × sequence length")
}
