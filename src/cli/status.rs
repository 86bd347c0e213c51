//! `memctl status [DIR]`: progress of Slurm submissions, from `squeue` and the shards present.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;

use crate::cli::{context::Context, slurm_submit, sync};
use crate::slurm::shard;

/// Show the progress of Slurm submissions: queued, running, finished, failed, missing.
#[derive(clap::Args)]
pub struct Args {
    /// A sweep directory, or the shared root holding several (default: `slurm`).
    #[arg(default_value = "slurm")]
    dir: PathBuf,
}

pub fn run(args: Args, _ctx: &Context) -> anyhow::Result<i32> {
    if !args.dir.is_dir() {
        anyhow::bail!(
            "{}: {}; pass a Slurm sweep's folder or the shared root above it (`--shared-dir` of the submission)",
            args.dir.display(),
            if args.dir.exists() { "a file, not a folder" } else { "no such folder" }
        );
    }
    let dirs = sync::sweep_dirs(&args.dir);
    if dirs.is_empty() {
        println!("no Slurm sweeps under {}", args.dir.display());
    }
    for dir in dirs {
        let shards: HashMap<String, String> = shard::read_all(&dir)
            .into_iter()
            .filter_map(|(_, r)| r.ok())
            .map(|r| (r.trial_key, r.status.as_str().to_string()))
            .collect();
        println!("{}", dir.display());
        for (n, m) in slurm_submit::manifests(&dir).iter().enumerate() {
            // Without the queue, a trial with no shard may be queued or lost: it is not called missing.
            let (queued, unread): (HashMap<usize, String>, _) = match m.queued_tasks() {
                Ok(tasks) => (tasks.into_iter().collect(), None),
                Err(e) => (HashMap::new(), Some(e)),
            };
            if let Some(e) = &unread {
                println!("  submission {}: the queue cannot be read ({e})", n + 1);
            }
            let mut counts: BTreeMap<String, usize> = BTreeMap::new();
            if let Some(search) = &m.search {
                // A search's workers record into the store: here only whether they still run.
                for state in queued.values() {
                    *counts.entry(state.to_lowercase()).or_default() += 1;
                }
                let ended = search.workers.saturating_sub(queued.len());
                if ended > 0 && unread.is_none() {
                    counts.insert("ended".into(), ended);
                }
                let mut summary: Vec<String> = counts.iter().map(|(k, v)| format!("{v} {k}")).collect();
                if summary.is_empty() {
                    summary.push("state unknown".into());
                }
                println!(
                    "  submission {} (job {}): search {}, {} workers: {}; its runs are in the store {}",
                    n + 1,
                    m.job.as_deref().unwrap_or("?"),
                    search.experiment,
                    search.workers,
                    summary.join(", "),
                    search.store.display()
                );
                continue;
            }
            for (i, t) in m.trials.iter().enumerate() {
                // A trial of a pack that ended has its shard while its task still runs the others.
                let state = match (m.task_of_trial(i).and_then(|task| queued.get(&task)), shards.get(&t.trial_key)) {
                    (_, Some(s)) if !m.packs.is_empty() => s.clone(),
                    (Some(s), _) => s.to_lowercase(),
                    (None, Some(s)) => s.clone(),
                    (None, None) if unread.is_some() => "without a result yet".to_string(),
                    (None, None) => "missing".to_string(),
                };
                *counts.entry(state).or_default() += 1;
            }
            let summary: Vec<String> = counts.iter().map(|(k, v)| format!("{v} {k}")).collect();
            println!(
                "  submission {} (job {}): {} trials: {}",
                n + 1,
                m.job.as_deref().unwrap_or("?"),
                m.trials.len(),
                summary.join(", ")
            );
        }
    }
    Ok(0)
}
