//! `memctl check FILE...`: parse and check specs without running anything.

use std::path::PathBuf;

use crate::check::ExperimentPlan;
use crate::cli::{context::Context, load};
use crate::device::{DeviceError, DeviceSpec};
use crate::report::numbers::{count, si};
use crate::store::Store;

/// Check specs: syntax, names, arities, kinds and shapes. Prints how many trials each
/// experiment has (and how many the store holds already), and each model's parameter count
/// and FLOPs per time step; `sweep --dry-run` lists the trials.
#[derive(clap::Args)]
pub struct Args {
    /// Spec files.
    #[arg(required = true)]
    files: Vec<PathBuf>,
    /// Estimate the memory to train on this device (cpu, cuda, cuda:N, or a sweep's cuda:all or
    /// cuda:0,2) instead of each trial's own `device`: a GPU's evaluation batches differ from the
    /// CPU's. Nothing is opened.
    #[arg(long)]
    device: Option<String>,
}

pub fn run(args: Args, ctx: &Context) -> anyhow::Result<i32> {
    let device = args.device.as_deref().map(estimated_on).transpose()?;
    let mut code = 0;
    // Which trials are done already, if the store is there and free (check never waits for it).
    let store =
        if crate::store::Store::exists_at(&ctx.store) { crate::store::Store::open(&ctx.store).ok() } else { None };
    for file in &args.files {
        let Ok((_, program)) = load::load_checked(file, ctx) else {
            code = 2;
            continue;
        };
        println!("{}: ok", file.display());
        for exp in &program.experiments {
            let first = first_of_each(exp);
            print_heading(exp, &first, store.as_ref(), ctx);
            print_packs(exp, &first);
            print_models(exp, device);
        }
        for m in &program.unused_models {
            println!("  model {m}: not used by an experiment here (checked with its defaults on probe inputs)");
        }
    }
    Ok(code)
}

/// The experiment's line: its trials (and how many the store has done), or its search's size.
fn print_heading(exp: &ExperimentPlan, first: &[bool], store: Option<&Store>, ctx: &Context) {
    let task = &exp.trials[0].config.task;
    if let Some(search) = &exp.search {
        let s = &search.spec;
        let n = s.configurations();
        // A random or TPE search of a smaller finite space tries each of its configurations once.
        let whole_space =
            if n < s.trials { format!(" (all its space has; trials = {})", s.trials) } else { String::new() };
        println!(
            "  experiment {}: a search of {n} configuration{}{whole_space} × {} seed{}, task {task} (the models \
             below are its searched ranges' ends)",
            exp.name,
            if n == 1 { "" } else { "s" },
            s.seeds.len(),
            if s.seeds.len() == 1 { "" } else { "s" },
        );
        return;
    }
    let distinct = first.iter().filter(|f| **f).count();
    let mut notes = vec![];
    if let Some(s) = store {
        let plans = crate::sweep::Plan::of_all(s, &exp.trials).unwrap_or_default();
        let done =
            plans.iter().zip(first).filter(|(p, first)| **first && matches!(p, crate::sweep::Plan::Done(_))).count();
        notes.push(format!("{done} done in {}, {} to run", ctx.store.display(), distinct - done));
    }
    match exp.trials.len() - distinct {
        0 => {}
        1 => notes.push("1 more repeats another's configuration and seed exactly".into()),
        n => notes.push(format!("{n} more repeat others' configuration and seed exactly")),
    }
    let notes = if notes.is_empty() { String::new() } else { format!(" ({})", notes.join("; ")) };
    println!("  experiment {}: {distinct} trial{}{notes}, task {task}", exp.name, if distinct == 1 { "" } else { "s" });
}

/// Whether each trial of `exp` is the first with its identity: one listed twice (`seed in
/// [1, 1]`) is one trial, as a sweep runs it.
fn first_of_each(exp: &ExperimentPlan) -> Vec<bool> {
    let mut seen = std::collections::HashSet::new();
    exp.trials.iter().map(|t| seen.insert(crate::sweep::identity::trial_key(t))).collect()
}

/// Which of a sweep's trials can train as one program (`sweep --pack`), and which of those
/// `--pack auto` packs on a GPU. A search's trials are proposed as it runs: they pack as a
/// sweep's do, but are not known here.
fn print_packs(exp: &ExperimentPlan, first: &[bool]) {
    let groups = match exp.search {
        None => crate::sweep::packs::groups(&exp.trials, None, |i| first[i]),
        Some(_) => vec![],
    };
    let packable: Vec<&Vec<usize>> = groups.iter().filter(|g| g.len() > 1).collect();
    let trials: usize = packable.iter().map(|g| g.len()).sum();
    let small: usize =
        packable.iter().filter(|g| crate::sweep::packs::small_for_gpu(&exp.trials[g[0]])).map(|g| g.len()).sum();
    let what = match packable.len() {
        0 => return,
        1 => format!("{trials} trials of one model and shapes can train as one program"),
        n => format!("{trials} trials in {n} groups of one model and shapes; each group can train as one program"),
    };
    let limit = crate::sweep::packs::AUTO_GPU_MAX_FLOPS as f64 / 1e6;
    let on_gpu = if small == trials {
        "packed".to_string()
    } else if small == 0 {
        format!("alone too, each over {limit:.0} MFLOP a time step over its batch")
    } else {
        format!("the {small} of at most {limit:.0} MFLOP a time step over the batch packed, the others alone")
    };
    println!("    packs: {what} (`sweep --pack`)");
    println!("      `--pack auto` (the default) trains them alone on the CPU; on a GPU: {on_gpu}");
}

/// The model configurations `check` describes one by one; a larger sweep's others are counted
/// in one line, with their range of sizes.
const MODEL_LINES: usize = 16;

/// One line per distinct model configuration (a sweep may change its size): parameters, FLOPs
/// and the memory to train it.
fn print_models(exp: &ExperimentPlan, device: Option<DeviceSpec>) {
    // One line per model configuration, and per size where task options change it: two
    // configurations of equal size (an activation swept) are two lines.
    let mut seen: std::collections::HashSet<(Vec<String>, usize, u64)> = Default::default();
    let mut memory = crate::cli::memory::Estimates::default();
    // Beyond `MODEL_LINES`: how many, the fewest parameters, and the largest trial (whose
    // memory says whether the sweep fits).
    let mut more: Option<(usize, usize, &crate::check::Trial)> = None;
    for t in &exp.trials {
        let varied: Vec<String> = t
            .config
            .swept
            .iter()
            .filter(|(k, _)| t.config.params.contains_key(k))
            .map(|(k, v)| format!("{k}={}", crate::value::Label(v)))
            .collect();
        let (params, flops) = (t.graph.param_count(), t.graph.flops_per_step());
        let key = (varied, params, flops);
        if seen.contains(&key) {
            continue;
        }
        if seen.len() >= MODEL_LINES {
            let (n, least, largest) = more.unwrap_or((0, params, t));
            let largest = if params > largest.graph.param_count() { t } else { largest };
            more = Some((n + 1, least.min(params), largest));
            seen.insert(key);
            continue;
        }
        println!(
            "    model {}{}: {} parameters, {}FLOP per step and example (forward)",
            t.config.model,
            if key.0.is_empty() { String::new() } else { format!(" ({})", key.0.join(" ")) },
            count(params as u64),
            si(flops as f64)
        );
        seen.insert(key);
        print_memory(&mut memory, t, device);
    }
    if let Some((n, least, largest)) = more {
        let most = largest.graph.param_count();
        let sizes = match least == most {
            true => format!("of {} parameters", count(most as u64)),
            false => format!("of {} to {} parameters", count(least as u64), count(most as u64)),
        };
        println!("    … and {n} more model configuration{}, {sizes}; the largest:", if n == 1 { "" } else { "s" });
        print_memory(&mut memory, largest, device);
    }
}

/// The memory line of a model configuration: what training `t` takes where it would run.
fn print_memory(memory: &mut crate::cli::memory::Estimates, t: &crate::check::Trial, device: Option<DeviceSpec>) {
    let on = device.map_or_else(|| t.config.train.device.clone(), |d| d.to_string());
    let gpu = if on == "cpu" { "" } else { " on a GPU" };
    match memory.of(t, &on) {
        Ok(e) => println!("      memory to train{gpu}: {}", crate::cli::memory::describe(&e)),
        Err(e) => println!("      memory to train{gpu}: not estimated ({e})"),
    }
}

/// The device whose estimate `--device` asks for. The GPUs of a list or of `cuda:all` all get
/// the first one's estimate (a GPU's does not depend on which), without asking how many there are.
fn estimated_on(name: &str) -> Result<DeviceSpec, DeviceError> {
    if name == "cuda:all" {
        return Ok(DeviceSpec::Cuda(0));
    }
    match crate::device::spread::parse(name)? {
        Some(gpus) => Ok(gpus[0]),
        None => crate::device::parse(name).ok_or_else(|| DeviceError::Unknown(name.to_string())),
    }
}
