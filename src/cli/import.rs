//! `memctl import FILE...`: merge runs exported from another store
//! (`memctl --store OTHER runs --all --format records > runs.json`) into this one, or the runs
//! behind a results table (`memctl results --data-dir`, e.g. `docs/results/*.json`).
//!
//! What moves between stores is a run's whole record: configuration, curves, metrics, spec
//! text, environment. Each imported run gets a fresh id here, in the order the runs started,
//! because the newest id is a trial's latest run (what sweeps skip on and tables show). A run
//! counts as already present when this store holds a run of the same trial that started at the
//! same moment, so importing a file twice, or two exports that overlap, adds each run once.
//!
//! An import never changes which run of a trial is latest here for the worse, so it leaves out:
//! - running and interrupted runs: they belong to the store that can resume them from their
//!   checkpoints;
//! - runs of a trial that is running or interrupted here (the local run resumes);
//! - runs older than the trial's latest run here;
//! - a failed run of a trial done here.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use crate::cli::context::Context;
use crate::query::fields::LAST_DATE;
use crate::store::{RunRecord, Status, Store, record};

/// Merge runs exported with `memctl runs --all --format records`, or the runs behind a results
/// table (`memctl results --data-dir`), into this store (idempotent).
#[derive(clap::Args)]
pub struct Args {
    /// Files written by `memctl runs --format records` or `memctl results --data-dir`
    /// (`-` reads standard input).
    #[arg(required = true)]
    files: Vec<PathBuf>,
}

/// What one file added, and why the rest was left out.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Imported {
    pub added: usize,
    /// Runs this store already holds.
    pub present: usize,
    /// Running or interrupted runs.
    pub unfinished: usize,
    /// Runs of trials running or interrupted here.
    pub in_progress_here: usize,
    /// Runs older than their trial's latest run here, and failed or pruned runs of trials done
    /// here.
    pub superseded: usize,
}

/// Why a run is not imported, as decided against the trial's latest run here.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Skip {
    Present,
    InProgressHere,
    Superseded,
}

fn skip(run: (Status, f64), latest: &RunRecord) -> Option<Skip> {
    let (status, started_at) = run;
    if latest.started_at.to_bits() == started_at.to_bits() {
        Some(Skip::Present)
    } else if matches!(latest.status, Status::Running | Status::Interrupted) {
        Some(Skip::InProgressHere)
    } else if started_at < latest.started_at
        || (matches!(status, Status::Failed | Status::Pruned) && latest.status == Status::Done)
    {
        Some(Skip::Superseded)
    } else {
        None
    }
}

pub fn run(args: Args, ctx: &Context) -> anyhow::Result<i32> {
    // Read every file before touching the store, so that a bad file changes nothing.
    let mut exports = vec![];
    for file in &args.files {
        exports.push((file, read_export(file)?));
    }
    let store = Store::open(&ctx.store)?;
    for (file, records) in exports {
        let n = import(&store, records)?;
        eprintln!(
            "{}: {} imported, {} already in the store{}{}{}",
            file.display(),
            n.added,
            n.present,
            match n.unfinished {
                0 => String::new(),
                k => format!(", {k} unfinished (not imported: they resume in the store that ran them)"),
            },
            match n.in_progress_here {
                0 => String::new(),
                k => format!(", {k} of trials running or interrupted here (not imported)"),
            },
            match n.superseded {
                0 => String::new(),
                k => format!(
                    ", {k} older than their trial's latest run here or failed or pruned where it is done here \
                     (not imported)"
                ),
            }
        );
    }
    Ok(0)
}

/// Whether `run` is a run record: one says its version, or (version 1) has its configuration
/// and identity; a row of `runs --format json` has none of them.
fn looks_like_a_record(run: &serde_json::Value) -> bool {
    run.get("record_version").is_some()
        || (run.get("config").is_some_and(serde_json::Value::is_object) && run.get("trial_key").is_some())
}

/// The runs of one file: an export (`memctl runs --format records`: an array of records) or a
/// table's data (`memctl results --data-dir`: records under `runs`, their spec texts under
/// `spec_texts`, by spec hash). Records of older layouts are migrated as the store migrates
/// its own.
fn read_export(file: &Path) -> anyhow::Result<Vec<RunRecord>> {
    let text = if file == Path::new("-") {
        std::io::read_to_string(std::io::stdin())?
    } else {
        std::fs::read_to_string(file).map_err(|e| anyhow::anyhow!("cannot read {}: {e}", file.display()))?
    };
    let not_runs = |why: String| {
        anyhow::anyhow!(
            "{}: not an export of runs ({why}); write one with `memctl runs --all --format records`",
            file.display()
        )
    };
    let json: serde_json::Value = serde_json::from_str(&text).map_err(|e| {
        // serde_json ends its message with the position, which leads the line here instead.
        let message = e.to_string();
        let message = message.rsplit_once(" at line ").map_or(message.as_str(), |(m, _)| m).to_string();
        anyhow::anyhow!("{}:{}:{}: not JSON ({message})", file.display(), e.line(), e.column().max(1))
    })?;
    let (runs, spec_texts) = match json {
        serde_json::Value::Array(runs) if !runs.iter().all(looks_like_a_record) => {
            return Err(not_runs(
                "an array of rows, as `runs --format json` writes, or of other values, not of run records".into(),
            ));
        }
        serde_json::Value::Array(runs) => (runs, serde_json::Map::new()),
        serde_json::Value::Object(mut table) => match (table.remove("runs"), table.remove("spec_texts")) {
            (Some(serde_json::Value::Array(runs)), Some(serde_json::Value::Object(texts))) => (runs, texts),
            (Some(serde_json::Value::Array(_)), None) => {
                anyhow::bail!(
                    "{}: a table's data without `spec_texts` (written before memctl kept them), so its runs \
                     cannot be rebuilt; regenerate it with `memctl results --data-dir` from the store that has them",
                    file.display()
                )
            }
            _ => return Err(not_runs("an object without `runs` and `spec_texts`, which a table's data has".into())),
        },
        _ => return Err(not_runs("neither an array of runs nor a table's data".into())),
    };
    runs.into_iter()
        .enumerate()
        .map(|(i, mut run)| {
            let hash = run.get("spec_hash").and_then(|h| h.as_str()).unwrap_or_default().to_string();
            // Records are named by place and by the id they had in their store.
            let which = match run.get("id").and_then(|id| id.as_u64()) {
                Some(id) => format!("record {} (run {id})", i + 1),
                None => format!("record {}", i + 1),
            };
            if let (Some(fields), Some(text)) = (run.as_object_mut(), spec_texts.get(&hash)) {
                fields.entry("spec_text").or_insert_with(|| text.clone());
            }
            // An export whose one record is wrong (or of a later layout) is still an export:
            // say which record, not that the file is something else.
            let record = record::decode_value(run).map_err(|e| anyhow::anyhow!("{}: {which}: {e}", file.display()))?;
            // Its tags as `memctl tag` lets them be written, so that listings read them back.
            let mut record = record;
            let tags = crate::store::tag_text::normalised(&record.tags);
            if tags != record.tags {
                eprintln!(
                    "{}: {which}: tags {:?} kept as {:?} (a tag is one line, without commas or semicolons)",
                    file.display(),
                    record.tags,
                    tags
                );
                record.tags = tags;
            }
            // Its times order a trial's runs (the latest is the one that counts) and are shown
            // as dates: each must be one.
            for (name, t) in [("started_at", Some(record.started_at)), ("ended_at", record.ended_at)] {
                if let Some(t) = t.filter(|t| !(0.0..=LAST_DATE).contains(t)) {
                    anyhow::bail!(
                        "{}: {which}: `{name}` is {t:e}, not a time in Unix seconds up to 9999-12-31",
                        file.display()
                    );
                }
            }
            Ok(record)
        })
        .collect()
}

/// Adds the finished runs of `records` that the store does not hold yet, oldest first.
pub fn import(store: &Store, mut records: Vec<RunRecord>) -> anyhow::Result<Imported> {
    let mut held: HashSet<(String, u64)> =
        store.summaries()?.into_iter().map(|s| (s.trial_key, s.started_at.to_bits())).collect();
    records.sort_by(|a, b| a.started_at.total_cmp(&b.started_at));
    let mut n = Imported::default();
    let mut candidates = vec![];
    for record in records {
        if !matches!(record.status, Status::Done | Status::Failed | Status::Pruned) {
            n.unfinished += 1;
        } else if held.insert((record.trial_key.clone(), record.started_at.to_bits())) {
            candidates.push(record);
        } else {
            n.present += 1;
        }
    }
    while !candidates.is_empty() {
        let rest = candidates.split_off(candidates.len().min(RUNS_PER_SESSION));
        let chunk = std::mem::replace(&mut candidates, rest);
        // Decided inside the store's session, against a concurrent import or sweep.
        let mut skipped = vec![];
        store.import_all(chunk, |run, latest| {
            skipped.push(latest.and_then(|l| skip((run.status, run.started_at), l)));
            skipped.last().is_some_and(Option::is_some)
        })?;
        for s in skipped {
            match s {
                None => n.added += 1,
                Some(Skip::InProgressHere) => n.in_progress_here += 1,
                Some(Skip::Superseded) => n.superseded += 1,
                Some(Skip::Present) => n.present += 1,
            }
        }
    }
    Ok(n)
}

/// Runs imported in one store session: the session holds the store, so a sweep's writes wait
/// for it, for well under a second.
const RUNS_PER_SESSION: usize = 256;
