//! `memctl tasks`: the task generators a spec can use, with their options, inputs, targets,
//! metrics and test sets.

use crate::cli::context::Context;
use crate::tasks::{TASKS, Target, TaskKind};

/// List the tasks, their options (with defaults) and what they report.
#[derive(clap::Args)]
pub struct Args {
    /// Show only this task.
    name: Option<String>,
    /// Print one generated training sequence of the task (with its default options): what
    /// the model reads at each step, and what it must answer at the scored ones.
    #[arg(long, requires = "name")]
    sample: bool,
    /// The data seed of `--sample`.
    #[arg(long, default_value_t = 1, requires = "sample")]
    seed: u64,
}

pub fn run(args: Args, _ctx: &Context) -> anyhow::Result<i32> {
    let chosen: Vec<_> = TASKS.iter().filter(|t| args.name.as_deref().is_none_or(|n| n == t.name())).collect();
    if chosen.is_empty() {
        let names: Vec<&str> = TASKS.iter().map(|t| t.name()).collect();
        let name = args.name.unwrap_or_default();
        if let Some(hint) = crate::suggest::did_you_mean(&name, names.iter().copied()) {
            anyhow::bail!("no task `{name}`; {hint}");
        }
        anyhow::bail!("no task `{name}`; the tasks are {}", names.join(", "));
    }
    if args.sample {
        super::task_sample::print(*chosen[0], args.seed)?;
        return Ok(0);
    }
    for (i, kind) in chosen.into_iter().enumerate() {
        if i > 0 {
            println!();
        }
        println!("{}({})", kind.name(), crate::check::call_signature(kind.signature()));
        println!("    {}", kind.summary());
        print_options(*kind);
        // What the defaults give: the sizes depend on the options, the metrics do not.
        let defaults: Option<Vec<_>> = kind.signature().iter().map(|s| s.default.value()).collect();
        let configured = match defaults {
            Some(values) => kind.instantiate(&values).map_err(|e| e.to_string()),
            None => Err("it has options without a default".to_string()),
        };
        match configured {
            Ok(task) => {
                let target = match task.target() {
                    Target::Classes(n) => format!("{n} classes"),
                    Target::Bits(n) => format!("{n} bits"),
                };
                println!("    input {} per step; target {target} (with the default options)", task.input());
                println!("    metrics: {}", task.metric_names().join(", "));
                let splits = task.test_splits();
                if splits.len() > 1 {
                    let rest: Vec<String> = splits[1..].iter().map(|s| format!("{s}_<metric>")).collect();
                    println!("    test sets: {} (as <metric>), {}", splits[0], rest.join(", "));
                }
            }
            Err(e) => match kind.reads() {
                // A reader of files: what it reads, since there is no data to show sizes from.
                Some(reads) => println!("    reads {reads}"),
                None => println!("    (its defaults do not configure it: {e})"),
            },
        }
    }
    Ok(0)
}

/// Each option with its default and the values it accepts, then a line to copy into a spec.
fn print_options(kind: &dyn TaskKind) {
    let signature = kind.signature();
    let accepted = kind.accepted();
    if signature.is_empty() {
        return;
    }
    let defaults: Vec<String> = signature
        .iter()
        .map(|s| s.default.value().map_or_else(|| "(required)".to_string(), |v| v.to_string()))
        .collect();
    let name_width = signature.iter().map(|s| s.name.len()).max().unwrap_or(0);
    let default_width = defaults.iter().map(String::len).max().unwrap_or(0);
    println!("    options:");
    for (i, s) in signature.iter().enumerate() {
        let accepts = accepted.get(i).map(String::as_str).unwrap_or_default();
        println!("      {:<name_width$}  {:<default_width$}  {accepts}", s.name, defaults[i]);
    }
    // The options without a default (a reader's path) and the first one with one.
    let mut shown: Vec<String> = signature
        .iter()
        .zip(&defaults)
        .filter(|(s, _)| s.default.value().is_none())
        .map(|(s, _)| format!("{} = \"…\"", s.name))
        .collect();
    if let Some((s, d)) = signature.iter().zip(&defaults).find(|(s, _)| s.default.value().is_some()) {
        shown.push(format!("{} = {d}", s.name));
    }
    println!("    example: task data = {}({})", kind.name(), shown.join(", "));
}
