//! Memory before training: each trial's estimate (`train::memory`), printed by `memctl check`,
//! the sweep's refusal, located in the spec, of trials that cannot fit in the memory free, and
//! the budget that keeps the trials running at once within it (`sweep::memory_budget`).

use std::collections::HashMap;
use std::sync::Arc;

use crate::check::error_kind::CheckErrorKind;
use crate::check::{ExperimentPlan, Program, Trial};
use crate::cli::context::Context;
use crate::diag::{Diagnostic, Diagnostics};
use crate::lang::Spec;
use crate::report::numbers::bytes;
use crate::sweep::identity;
use crate::sweep::memory_budget::{MemoryBudget, Need};
use crate::train::memory::{self, MemoryEstimate};

/// Estimates for a program's trials, computed once per distinct configuration (a failure too,
/// shared by the trials of that configuration).
#[derive(Default)]
pub struct Estimates(HashMap<String, Result<MemoryEstimate, Arc<candle_core::Error>>>);

impl Estimates {
    /// `trial`'s estimate on `device` (`cpu`, `cuda:1`): the CPU's evaluation batches differ
    /// from a GPU's.
    pub fn of(&mut self, trial: &Trial, device: &str) -> Result<MemoryEstimate, Arc<candle_core::Error>> {
        let on_cpu = matches!(crate::device::parse(device), Some(crate::device::DeviceSpec::Cpu));
        let key =
            format!("{} {:?} {:?} {on_cpu}", trial.graph.fingerprint(), trial.config.train, trial.config.task_options);
        self.0.entry(key).or_insert_with(|| memory::estimate(trial, on_cpu).map_err(Arc::new)).clone()
    }
}

/// `1.2 GB (parameters 4.0 MB, gradients 4.0 MB, optimiser 8.0 MB, data sets 12.0 MB,
/// activations 1.1 GB, batch 2.0 MB; an evaluation batch 64.0 MB)`: the total counts a training
/// step or an evaluation batch, whichever needs more.
pub fn describe(e: &MemoryEstimate) -> String {
    format!(
        "{} (parameters {}, gradients {}, optimiser {}, data sets {}, activations {}, batch {}; an evaluation batch {})",
        bytes(e.total()),
        bytes(e.params),
        bytes(e.gradients),
        bytes(e.optimizer),
        bytes(e.data),
        bytes(e.activations),
        bytes(e.batch),
        bytes(e.evaluation)
    )
}

/// The trials' memory before they run: `None` after printing why (located in the spec) when a
/// trial cannot fit in its device's free memory even alone; otherwise the budget that keeps
/// the trials running at once within that memory. Free memory is the host's (or its
/// cgroup's) for the CPU, the GPU's for a CUDA device. `device` overrides the trials' own
/// `device` setting.
pub fn budget(
    spec: &Spec,
    program: &Program,
    trials: &[Trial],
    device: Option<&str>,
    ctx: &Context,
) -> Option<MemoryBudget> {
    let measured = Measured::of(trials, device);
    match refuse_too_large(spec, program, trials, &measured) {
        Ok(()) => Some(measured.budget(trials)),
        Err(d) => {
            eprint!("{}", d.render(&spec.sources, ctx.color));
            None
        }
    }
}

/// The budget of trials that were not checked against their device's memory (`ablate`): one
/// too large even alone runs when nothing else does.
pub fn budget_unchecked(trials: &[Trial], device: Option<&str>) -> MemoryBudget {
    Measured::of(trials, device).budget(trials)
}

/// Each trial's device and estimate, and each device's free memory, read once. A device whose
/// free memory cannot be read (not present, no CUDA support) is not measured: opening it
/// fails later, with its own message.
struct Measured {
    /// Per trial, in order: its device's name and its estimate (where its device is measured).
    trials: Vec<(String, Option<MemoryEstimate>)>,
    free_on: HashMap<String, Option<u64>>,
}

impl Measured {
    fn of(trials: &[Trial], device: Option<&str>) -> Measured {
        let mut free_on: HashMap<String, Option<u64>> = HashMap::new();
        // A sweep spread over several GPUs: each is measured, and a trial is checked against
        // the one with the most memory free (the placement puts it where it fits).
        let spread = device.and_then(|d| crate::device::spread::parse(d).ok().flatten());
        let roomiest = spread.map(|gpus| {
            let names: Vec<String> = gpus.iter().map(|g| g.to_string()).collect();
            for name in &names {
                free_on.insert(name.clone(), memory::available_on(name));
            }
            names.into_iter().max_by_key(|n| free_on[n]).unwrap_or_default()
        });
        let device = roomiest.as_deref().or(device);
        let mut estimates = Estimates::default();
        let trials = trials
            .iter()
            .map(|t| {
                let name = device.unwrap_or(&t.config.train.device).to_string();
                let free = *free_on.entry(name.clone()).or_insert_with(|| memory::available_on(&name));
                let estimate = free.and_then(|_| estimates.of(t, &name).ok());
                (name, estimate)
            })
            .collect();
        Measured { trials, free_on }
    }

    fn budget(&self, trials: &[Trial]) -> MemoryBudget {
        let free =
            self.free_on.iter().filter_map(|(name, free)| Some((crate::device::parse(name)?, (*free)?))).collect();
        let needs = trials
            .iter()
            .zip(&self.trials)
            .filter_map(|(t, (name, estimate))| {
                let need = Need { device: crate::device::parse(name)?, bytes: estimate.as_ref()?.total() };
                Some((identity::trial_key(t), need))
            })
            .collect();
        MemoryBudget::new(free, needs)
    }
}

/// Errors, located at the experiment's `batch` setting (or its name), for the trials whose
/// estimate exceeds the memory free now on their device.
fn refuse_too_large(spec: &Spec, program: &Program, trials: &[Trial], measured: &Measured) -> Result<(), Diagnostics> {
    let mut errors = vec![];
    for exp in &program.experiments {
        // The trial of this experiment that overshoots its device's memory the most.
        let mut worst: Option<(i128, MemoryEstimate, &Trial, &str, u64)> = None;
        for (t, (name, estimate)) in
            trials.iter().zip(&measured.trials).filter(|(t, _)| t.config.experiment == exp.name)
        {
            let (Some(Some(free)), Some(e)) = (measured.free_on.get(name), estimate) else { continue };
            let over = e.total() as i128 - *free as i128;
            if over > 0 && worst.as_ref().is_none_or(|w| over > w.0) {
                worst = Some((over, *e, t, name, *free));
            }
        }
        if let Some((_, e, t, name, free)) = worst {
            errors.push(too_large(spec, exp, t, &e, name, free));
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
    let on_command_line = crate::cli::load::override_value(spec, "batch");
    let batch = on_command_line.or_else(|| {
        let experiment = spec.ast.experiments.iter().find(|x| x.name.name == exp.name)?;
        Some(experiment.train.iter().flatten().find(|s| s.key.name == "batch")?.value.span)
    });
    let swept = crate::value::assignments(&trial.config.swept);
    let which = if swept.is_empty() { String::new() } else { format!(" (at {swept})") };
    let place = if device == "cpu" { "this machine has".to_string() } else { format!("`{device}` has") };
    let d = CheckErrorKind::TooLargeForDevice {
        experiment: exp.name.clone(),
        needs: describe(e),
        at: which,
        place,
        free: bytes(free),
    }
    .error();
    if e.data_dominates() {
        let task = spec.ast.experiments.iter().find(|x| x.name.name == exp.name).and_then(|x| x.task.first());
        let d = match task {
            Some(call) => d.at(call.span, "the task"),
            None => d.at(exp.span, "this experiment"),
        };
        return d.hint(format!(
            "the task's data sets need the most ({}: a trial holds its training, validation and test sets \
             from start to end): lower the task's `train`, `validation` or `test`, or the size of its examples",
            bytes(e.data)
        ));
    }
    let d = match batch {
        Some(span) if on_command_line.is_some() => d.at(span, "the batch size, set on the command line"),
        Some(span) => d.at(span, "the batch size"),
        None => d.at(exp.span, "this experiment"),
    };
    match e.evaluation_dominates() {
        true => d.hint(
            "an evaluation batch needs the most (its outputs over every step, for at least 64 sequences on \
             the CPU and 1 024 on a GPU): lower the output's size (the task's classes) or the sequence length",
        ),
        false => d.hint("lower `batch`, or the model's sizes; the activations grow with batch × sequence length"),
    }
}
