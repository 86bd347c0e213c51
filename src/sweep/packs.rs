//! Packs in a sweep (`--pack`): which trials train together as one program, and training a
//! pack. Trials pack together when their step graphs compute the same thing with the same
//! shapes ([`crate::graph::StepGraph::fingerprint`]) over batches of one size on one device;
//! seeds, learning rates, optimisers, clipping, step budgets and task options that keep shapes
//! may differ. Each trial of a pack is claimed, checkpointed and recorded on its own, as a trial
//! alone is, and is recorded as soon as it ends.

use std::collections::HashMap;
use std::sync::atomic::AtomicBool;

use super::{Claimed, Options, Reporter, TrialError, TrialResult, claim, complete_record, identity, live, settle};
use crate::check::Trial;
use crate::store::{Store, StoreError};
use crate::train::pack::{PackMember, train_pack};

/// How a sweep packs its trials.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Packing {
    /// Packs where it pays: on a GPU, trials whose step is bound by its launches
    /// ([`pays_on_gpu`]), up to [`AUTO_GPU_PACK`] to a pack, split further until a spread sweep
    /// (`--device cuda:all`) has a pack for each GPU; every other trial alone. On the
    /// CPU a pack does not pay: a trial's step there is bound by its arithmetic and memory
    /// traffic, not by per-op overhead, and a pack adds the copies that gather its trials' rows
    /// (16 seeds of `assoc_small.mem`'s STM took 1.0–1.3× as long packed, docs/performance.md
    /// "Parallel trials and packs").
    Auto,
    /// Every trial alone.
    Off,
    /// Up to this many trials per pack.
    Size(usize),
}

/// A `--pack` value that is none of `auto`, `off` or a size.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[error("expected `auto`, `off` or a pack size of at least 1, found `{0}`")]
pub struct PackingError(String);

impl std::str::FromStr for Packing {
    type Err = PackingError;

    fn from_str(s: &str) -> Result<Packing, PackingError> {
        match s {
            "auto" => Ok(Packing::Auto),
            "off" => Ok(Packing::Off),
            n => match n.parse::<usize>() {
                Ok(0) | Err(_) => Err(PackingError(n.to_string())),
                Ok(1) => Ok(Packing::Off),
                Ok(n) => Ok(Packing::Size(n)),
            },
        }
    }
}

/// The most trials `--pack auto` trains as one pack on a GPU: the largest pack measured
/// (docs/performance.md, "Packs on one GPU").
pub const AUTO_GPU_PACK: usize = 16;

/// The forward FLOPs of one time step over a whole batch up to which a GPU trial's step is bound
/// by its launches, so that packing it pays. H200, 2026-11-30: STM A (26 MFLOP) trains 3.7× as
/// many trial-steps a second in packs of 16 as alone and `assoc_small.mem`'s STM (6 MFLOP) 1.7×
/// faster as a 16-seed sweep; SAM Table 1's d = 96 row (960 MFLOP) 0.6× as fast in a pack of 3.
pub const AUTO_GPU_MAX_FLOPS: u64 = 100_000_000;

/// Whether `--pack auto` packs `trial` on the device it trains on under `opts`: on a GPU, when
/// its step is small enough to be bound by launches ([`small_for_gpu`]).
pub fn pays_on_gpu(trial: &Trial, opts: &Options) -> bool {
    device_of(trial, opts).starts_with("cuda") && small_for_gpu(trial)
}

/// Whether `trial`'s forward is at most [`AUTO_GPU_MAX_FLOPS`] a time step over its batch.
pub fn small_for_gpu(trial: &Trial) -> bool {
    trial.graph.flops_per_step().saturating_mul(trial.config.train.batch as u64) <= AUTO_GPU_MAX_FLOPS
}

/// The most trials a pack of `trial`'s holds under `opts`.
fn pack_cap(trial: &Trial, opts: &Options) -> usize {
    match opts.pack {
        Packing::Off => 1,
        Packing::Size(n) => n,
        Packing::Auto if pays_on_gpu(trial, opts) => AUTO_GPU_PACK,
        Packing::Auto => 1,
    }
}

/// The device a trial trains on under `opts`.
fn device_of<'a>(trial: &'a Trial, opts: &'a Options) -> &'a str {
    opts.device.as_deref().unwrap_or(&trial.config.train.device)
}

/// The sweep's packs: lists of indices into `trials`, in the order the sweep reaches them (by
/// each pack's first trial). Trials that cannot pack, and those that will not run (`runs`
/// false: done already, say), are packs of one; a group of `n` trials that can pack, under
/// `--pack N`, is spread over ⌈n / N⌉ packs of even sizes (`auto`: [`Packing::Auto`]).
pub fn plan(trials: &[Trial], opts: &Options, runs: &[bool]) -> Vec<Vec<usize>> {
    let runs_at = |i: usize| runs.get(i).copied().unwrap_or(true);
    let packable = |i: usize| pack_cap(&trials[i], opts) > 1 && runs_at(i);
    // Each group with the number of packs it splits into. The trials of a group share their
    // graph, batch and device, so their cap too.
    let mut split: Vec<(Vec<usize>, usize)> = groups(trials, opts.device.as_deref(), packable)
        .into_iter()
        .map(|g| {
            let count = g.len().div_ceil(pack_cap(&trials[g[0]], opts));
            (g, count)
        })
        .collect();
    if opts.pack == Packing::Auto {
        spread_over_gpus(&mut split, opts.memory.spread().len(), runs_at);
    }
    let mut packs: Vec<Vec<usize>> = vec![];
    for (group, count) in split {
        for pack in split_evenly(&group, count) {
            packs.extend(within_memory(pack, trials, opts));
        }
    }
    packs.sort_by_key(|p| p[0]);
    packs
}

/// Splits the largest packs of `split` (groups and their pack counts) one more time each until
/// the packs that run are at least `gpus`, so that a sweep spread over `gpus` GPUs gives each
/// one a pack where it has the trials; a sweep on one device keeps its packs as large as
/// `auto` allows.
fn spread_over_gpus(split: &mut [(Vec<usize>, usize)], gpus: usize, runs: impl Fn(usize) -> bool) {
    loop {
        let running: usize = split.iter().filter(|(g, _)| runs(g[0])).map(|(_, count)| count).sum();
        if running >= gpus {
            return;
        }
        let largest = split
            .iter_mut()
            .filter(|(g, count)| runs(g[0]) && g.len() > *count)
            .max_by_key(|(g, count)| g.len().div_ceil(*count));
        match largest {
            Some((_, count)) => *count += 1,
            None => return,
        }
    }
}

/// `trials` grouped by what the trials of a pack share (a step graph with the same shapes,
/// the batch size, the loss, the device; `device` overrides each trial's), in order of first
/// appearance. Trials that `packable` leaves out are groups of one.
pub fn groups(trials: &[Trial], device: Option<&str>, packable: impl Fn(usize) -> bool) -> Vec<Vec<usize>> {
    let mut groups: Vec<Vec<usize>> = vec![];
    let mut group_of: HashMap<(String, usize, String, String), usize> = HashMap::new();
    for (i, trial) in trials.iter().enumerate() {
        if !packable(i) {
            groups.push(vec![i]);
            continue;
        }
        let on = device.unwrap_or(&trial.config.train.device).to_string();
        let target = format!("{:?}", trial.task.target());
        let key = (trial.graph.fingerprint(), trial.config.train.batch, target, on);
        match group_of.get(&key) {
            Some(&g) => groups[g].push(i),
            None => {
                group_of.insert(key, groups.len());
                groups.push(vec![i]);
            }
        }
    }
    groups
}

/// `items` in `count` runs of consecutive items whose lengths differ by one at most.
fn split_evenly(items: &[usize], count: usize) -> Vec<Vec<usize>> {
    let count = count.clamp(1, items.len().max(1));
    let (base, extra) = (items.len() / count, items.len() % count);
    let mut out = Vec::with_capacity(count);
    let mut at = 0;
    for k in 0..count {
        let len = base + usize::from(k < extra);
        out.push(items[at..at + len].to_vec());
        at += len;
    }
    out
}

/// `pack`, halved until each part fits its device's free memory (a pack of one as it is).
fn within_memory(pack: Vec<usize>, trials: &[Trial], opts: &Options) -> Vec<Vec<usize>> {
    let keys: Vec<String> = pack.iter().map(|&i| identity::trial_key(&trials[i])).collect();
    if pack.len() <= 1 || opts.memory.fits_together(&keys.iter().map(String::as_str).collect::<Vec<_>>()) {
        return vec![pack];
    }
    let (a, b) = pack.split_at(pack.len() / 2);
    let mut out = within_memory(a.to_vec(), trials, opts);
    out.extend(within_memory(b.to_vec(), trials, opts));
    out
}

/// Runs the pack `pack` (indices into `trials`): claims each trial, trains the claimed ones
/// together, and records each as it ends. One result per trial.
pub fn run_pack(
    store: &Store,
    spec: &super::SpecSource,
    pack: &[usize],
    trials: &[Trial],
    opts: &Options,
    reporter: &dyn Reporter,
    cancel: &AtomicBool,
) -> Vec<Result<TrialResult, StoreError>> {
    let members: Vec<Packed<'_>> = pack.iter().map(|&i| Packed { index: i, trial: &trials[i], judge: None }).collect();
    run_packed(store, spec, &members, opts, reporter, cancel)
}

/// A trial of a pack: its index in its sweep (for progress), the trial, and the pruner that
/// judges it after every evaluation (a search's); a trial it stops leaves the pack, recorded
/// `pruned`, and the others go on.
pub struct Packed<'a> {
    pub index: usize,
    pub trial: &'a Trial,
    pub judge: Option<&'a dyn live::Judge>,
}

/// Runs `members` as one pack: claims each trial, trains the claimed ones together, and
/// records each as it ends. One result per trial.
pub fn run_packed(
    store: &Store,
    spec: &super::SpecSource,
    members: &[Packed<'_>],
    opts: &Options,
    reporter: &dyn Reporter,
    cancel: &AtomicBool,
) -> Vec<Result<TrialResult, StoreError>> {
    if let [m] = members {
        return vec![super::run_trial(store, spec, m.index, m.trial, opts, reporter, cancel, m.judge)];
    }
    let mut results = vec![];
    let mut claimed: Vec<(&Packed<'_>, Claimed)> = vec![];
    for m in members {
        match claim(store, spec, m.index, m.trial, opts, reporter) {
            Ok(Ok(c)) => claimed.push((m, c)),
            Ok(Err(result)) => results.push(Ok(result)),
            Err(e) => {
                release(store, &claimed, reporter);
                results.push(Err(e));
                return results;
            }
        }
    }
    let Some(first) = claimed.first().map(|(m, _)| m.trial) else { return results };
    let observers: Vec<Box<dyn crate::train::Observer + '_>> = claimed
        .iter()
        .map(|(m, c)| {
            let resumed_from = c.record.progress.as_ref().and_then(|p| p.resumed_from);
            reporter.trial_started(m.index, m.trial, c.record.id, resumed_from)
        })
        .collect();
    let lives: Vec<live::Live<'_>> = claimed
        .iter_mut()
        .zip(&observers)
        .map(|((m, c), observer)| {
            live::Live::new(
                Some(store),
                store.checkpoints(),
                c.record.clone(),
                c.key.clone(),
                observer.as_ref(),
                reporter,
                c.resume.take(),
            )
            .judged_by(m.judge)
        })
        .collect();
    let pack: Vec<PackMember<'_>> = claimed
        .iter()
        .zip(&lives)
        .map(|((m, _), live)| PackMember { trial: m.trial, observer: live, checkpoints: live })
        .collect();
    let device = device_of(first, opts).to_string();
    // Each trial is recorded the moment it leaves the pack.
    let mut end = |p: usize, outcome: crate::train::Outcome| {
        let (m, c) = &claimed[p];
        let mut record = c.record.clone();
        complete_record(&mut record, Ok(outcome));
        if record.status == crate::store::Status::Pruned {
            record.pruned = m.judge.and_then(|j| j.pruned());
        }
        lives[p].stop_writing();
        record.progress = lives[p].progress();
        results.push(settle(store, m.index, m.trial, record, &c.key, reporter));
    };
    let trained = crate::pool::run_in_pool(opts.threads, || {
        let device = crate::device::open(&device)?;
        train_pack(&pack, &device, cancel, &mut end);
        Ok::<_, TrialError>(())
    });
    if let Err(e) = trained.map_err(TrialError::from).and_then(|r| r) {
        // No trial of the pack trained (no compute threads, or the device did not open).
        for (p, member) in pack.iter().enumerate() {
            let mut outcome = crate::train::Outcome::starting(member.trial);
            outcome.fail(&e);
            end(p, outcome);
        }
    }
    results
}

/// Records the trials `claimed` before the store failed as interrupted, so that no other sweep
/// skips them as running here; each resumes from its checkpoint when a sweep takes it over. A
/// store that still fails leaves them `running` until this process exits, with a warning.
fn release(store: &Store, claimed: &[(&Packed<'_>, Claimed)], reporter: &dyn Reporter) {
    for (m, c) in claimed {
        let mut record = c.record.clone();
        let mut outcome = crate::train::Outcome::starting(m.trial);
        outcome.ending = crate::train::Ending::Interrupted;
        outcome.stop_reason = STORE_FAILED_WHILE_CLAIMING.into();
        // A trial resumed from a checkpoint stands where that checkpoint does.
        outcome.steps_run = record.progress.as_ref().and_then(|p| p.resumed_from).unwrap_or(0) as usize;
        complete_record(&mut record, Ok(outcome));
        if let Err(e) = store.put(&record) {
            reporter.warning(&format!("run {} stays `running` until this process exits: {e}", record.id));
        }
    }
}

/// The stop reason of a trial released because the store failed as its pack was claimed.
const STORE_FAILED_WHILE_CLAIMING: &str = "the store failed while its pack was claimed";

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;
    use crate::device::DeviceSpec;
    use crate::sweep::Quiet;
    use crate::sweep::memory_budget::{MemoryBudget, Need};

    /// Twelve trials: widths 8 and 12 (graphs of two shapes) × batches 4 and 8 × three seeds.
    fn trials() -> Vec<Trial> {
        let spec = crate::lang::parse_str(
            "t.mem",
            r#"
            model m(width = 8) {
              state h = zeros(width)
              step x { h = tanh(linear(x, width) + h)  out linear(h, output_size) }
            }
            experiment e { task randomSequence(input = 2, output = 2, length = 3) model m
                           train { batch = 4, optimizer = adam(lr = 1e-3) }
                           sweep { width in [8, 12]  batch in [4, 8]  seed in 1..3 } }
            "#,
        )
        .unwrap();
        let program = crate::check::check(&spec, &crate::prims::Primitives).unwrap();
        program.experiments[0].trials.clone()
    }

    fn opts(pack: Packing) -> Options {
        Options { pack, ..Options::one_at_a_time() }
    }

    #[test]
    fn trials_pack_by_graph_and_batch_in_even_packs() {
        let trials = trials();
        let all = vec![true; trials.len()];
        // Each (width, batch) pair is a group of three seeds.
        assert_eq!(
            plan(&trials, &opts(Packing::Size(3)), &all),
            vec![vec![0, 1, 2], vec![3, 4, 5], vec![6, 7, 8], vec![9, 10, 11]]
        );
        // Three trials in packs of at most two: two packs, not three.
        assert_eq!(plan(&trials, &opts(Packing::Size(2)), &all)[..2], [vec![0, 1], vec![2]]);
        let alone: Vec<Vec<usize>> = (0..12).map(|i| vec![i]).collect();
        assert_eq!(plan(&trials, &opts(Packing::Off), &all), alone);
        assert_eq!(plan(&trials, &opts(Packing::Auto), &all), alone, "auto trains CPU trials alone");
    }

    #[test]
    fn trials_that_will_not_run_stay_alone_and_auto_packs_small_gpu_trials() {
        let mut trials = trials();
        let mut runs = vec![true; trials.len()];
        runs[1] = false; // done already
        assert_eq!(plan(&trials, &opts(Packing::Size(3)), &runs)[..3], [vec![0, 2], vec![1], vec![3, 4, 5]]);
        let on_gpu = |pack| Options { device: Some("cuda".into()), ..opts(pack) };
        assert_eq!(plan(&trials, &on_gpu(Packing::Size(3)), &runs)[..3], [vec![0, 2], vec![1], vec![3, 4, 5]]);
        let groups = vec![vec![0, 2], vec![1], vec![3, 4, 5], vec![6, 7, 8], vec![9, 10, 11]];
        assert_eq!(plan(&trials, &on_gpu(Packing::Auto), &runs), groups, "auto packs small GPU trials");
        // The last group's batch makes a step of more than AUTO_GPU_MAX_FLOPS: alone.
        let big_batch = (AUTO_GPU_MAX_FLOPS / trials[9].graph.flops_per_step()) as usize + 1;
        for t in &mut trials[9..] {
            t.config.train.batch = big_batch;
        }
        assert!(!pays_on_gpu(&trials[9], &on_gpu(Packing::Auto)) && pays_on_gpu(&trials[6], &on_gpu(Packing::Auto)));
        let packs = plan(&trials, &on_gpu(Packing::Auto), &runs);
        assert_eq!(packs[3..], [vec![6, 7, 8], vec![9], vec![10], vec![11]], "auto trains large GPU trials alone");
        assert_eq!(plan(&trials, &opts(Packing::Auto), &runs).len(), 12, "and every CPU trial alone");
    }

    #[test]
    fn auto_packs_at_most_sixteen_gpu_trials_together() {
        // 17 seeds of one small model: two packs, of 9 and 8.
        let one = trials()[0].clone();
        let seeds: Vec<Trial> = (0..17).map(|_| one.clone()).collect();
        let on_gpu = Options { device: Some("cuda".into()), ..opts(Packing::Auto) };
        let packs = plan(&seeds, &on_gpu, &vec![true; seeds.len()]);
        assert_eq!(AUTO_GPU_PACK, 16);
        assert_eq!(packs, vec![(0..9).collect::<Vec<_>>(), (9..17).collect()]);
    }

    #[test]
    fn auto_gives_every_gpu_of_a_spread_sweep_a_pack() {
        let sizes = |packs: Vec<Vec<usize>>| packs.iter().map(Vec::len).collect::<Vec<_>>();
        // 16 seeds over four stand-in GPUs: four packs of four, not one of 16 on one GPU.
        let one = trials()[0].clone();
        let seeds: Vec<Trial> = (0..16).map(|_| one.clone()).collect();
        let gpus: Vec<DeviceSpec> = (0..4).map(DeviceSpec::Cuda).collect();
        let memory = MemoryBudget::default().spread_over(gpus);
        let on_gpus = Options { device: Some("cuda:all".into()), memory: memory.into(), ..opts(Packing::Auto) };
        let all = vec![true; 32];
        assert_eq!(sizes(plan(&seeds, &on_gpus, &all[..16])), [4, 4, 4, 4]);
        // Two models of 16 seeds: two packs each, not four of four each.
        let mut two = seeds.clone();
        two.extend(trials()[3..4].iter().cycle().take(16).cloned());
        assert_eq!(sizes(plan(&two, &on_gpus, &all)), [8, 8, 8, 8]);
        // Ten of the 16 done already: the six that run split over the four GPUs.
        let mut runs = vec![false; 16];
        runs[10..].fill(true);
        let running: Vec<Vec<usize>> = plan(&seeds, &on_gpus, &runs).into_iter().filter(|p| runs[p[0]]).collect();
        assert_eq!(sizes(running), [2, 2, 1, 1]);
        // Fewer trials than GPUs: each alone. `--pack N` keeps its packs as asked.
        assert_eq!(plan(&seeds[..3], &on_gpus, &all[..3]).len(), 3);
        let asked = Options { pack: Packing::Size(16), ..on_gpus };
        assert_eq!(plan(&seeds, &asked, &all[..16]).len(), 1);
    }

    #[test]
    fn trials_on_different_devices_never_share_a_pack() {
        let mut trials = trials();
        for t in trials.iter_mut().skip(1).step_by(3) {
            t.config.train.device = "cuda".into();
        }
        let packs = plan(&trials, &opts(Packing::Size(3)), &vec![true; trials.len()]);
        assert_eq!(packs[..3], [vec![0, 2], vec![1], vec![3, 5]]);
    }

    #[test]
    fn a_pack_larger_than_its_device_is_split() {
        let trials = trials();
        let gb = 1 << 30;
        let needs: HashMap<String, Need> =
            trials.iter().map(|t| (identity::trial_key(t), Need { device: DeviceSpec::Cpu, bytes: 4 * gb })).collect();
        // 10 GB free: a pack of three trials of 4 GB each does not fit, one of two does.
        let budget = MemoryBudget::new(HashMap::from([(DeviceSpec::Cpu, 10 * gb)]), needs);
        let opts = Options { memory: budget.into(), ..opts(Packing::Size(3)) };
        let packs = plan(&trials, &opts, &vec![true; trials.len()]);
        assert_eq!(packs[..2], [vec![0], vec![1, 2]]);
        assert!(packs.iter().all(|p| p.len() <= 2), "{packs:?}");
    }

    #[test]
    fn pack_sizes_read_as_the_flag_says() {
        assert_eq!("auto".parse::<Packing>(), Ok(Packing::Auto));
        assert_eq!("off".parse::<Packing>(), Ok(Packing::Off));
        assert_eq!("1".parse::<Packing>(), Ok(Packing::Off));
        assert_eq!("16".parse::<Packing>(), Ok(Packing::Size(16)));
        assert!("0".parse::<Packing>().unwrap_err().to_string().contains("at least 1"));
        assert!("many".parse::<Packing>().is_err());
    }

    /// Probes the one suspected trial and meanwhile has another handle hold the store for
    /// `hold`, so that the next trial's claim finds it busy.
    struct HoldsTheStore {
        path: std::path::PathBuf,
        hold: std::time::Duration,
        holder: std::sync::Mutex<Option<std::thread::JoinHandle<()>>>,
    }

    impl crate::sweep::probe::Prober for HoldsTheStore {
        fn probe(&self, _: &Trial) -> crate::sweep::probe::Probe {
            let (taken, holding) = std::sync::mpsc::channel();
            let (path, hold) = (self.path.clone(), self.hold);
            *self.holder.lock().unwrap() = Some(std::thread::spawn(move || {
                let other = Store::open(&path).unwrap();
                other
                    .update_study("holder", "e", |_| {
                        taken.send(()).unwrap();
                        std::thread::sleep(hold);
                    })
                    .unwrap();
            }));
            holding.recv().unwrap();
            crate::sweep::probe::Probe::Clean
        }
    }

    /// Names a process that is gone as `record`'s.
    fn gone(record: &mut crate::store::RunRecord) {
        let me = crate::store::owner::this_process().clone();
        record.environment.process = Some(crate::store::record::ProcessIdentity { pid: 1 << 30, start_ticks: 1, ..me });
    }

    #[test]
    fn plans_read_in_one_session_see_done_dead_and_new_trials() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let trials = &trials()[..3];
        let spec = crate::sweep::SpecSource { path: "t.mem".into(), text: String::new() };
        let opts = opts(Packing::Off);
        let claimed = |i: usize| match claim(&store, &spec, i, &trials[i], &opts, &Quiet) {
            Ok(Ok(c)) => c.record,
            _ => panic!("trial {i} is claimed"),
        };
        let mut done = claimed(0);
        done.status = crate::store::Status::Done;
        store.put(&done).unwrap();
        // A run whose process is gone reads as interrupted, as a sweep would take it over.
        let mut dead = claimed(1);
        gone(&mut dead);
        store.put(&dead).unwrap();
        let plans = crate::sweep::Plan::of_all(&store, trials).unwrap();
        use crate::sweep::Plan;
        assert_eq!(plans, [Plan::Done(done.id), Plan::Interrupted(dead.id), Plan::New]);
    }

    #[test]
    fn trials_claimed_before_the_store_fails_are_released_not_left_running() {
        let dir = tempfile::tempdir().unwrap();
        // A store error needs the store to be busy for longer than its wait as the third trial
        // is claimed, and free again within a second wait, when the first two are released.
        let wait = std::time::Duration::from_millis(1000);
        let store = Store::open_with(dir.path(), wait).unwrap();
        let trials = &trials()[..3];
        let spec = crate::sweep::SpecSource { path: "t.mem".into(), text: String::new() };
        let prober = std::sync::Arc::new(HoldsTheStore {
            path: dir.path().into(),
            hold: std::time::Duration::from_millis(1500),
            holder: Default::default(),
        });
        let opts = Options { prober: Some(prober.clone()), ..opts(Packing::Size(3)) };
        // The second trial's last attempt died before its first step: its claim probes it.
        let Ok(Ok(Claimed { mut record, .. })) = claim(&store, &spec, 1, &trials[1], &opts, &Quiet) else {
            panic!("the second trial is claimed")
        };
        gone(&mut record);
        store.put(&record).unwrap();

        let members: Vec<Packed<'_>> =
            trials.iter().enumerate().map(|(index, trial)| Packed { index, trial, judge: None }).collect();
        let results = run_packed(&store, &spec, &members, &opts, &Quiet, &AtomicBool::new(false));
        prober.holder.lock().unwrap().take().unwrap().join().unwrap();
        assert!(matches!(results.last(), Some(Err(StoreError::Locked { .. }))), "{results:?}");
        let latest: Vec<_> =
            trials.iter().map(|t| store.latest_of_trial(&identity::trial_key(t)).unwrap().map(|r| r.status)).collect();
        assert_eq!(latest, [Some(crate::store::Status::Interrupted), Some(crate::store::Status::Interrupted), None]);
        let released = store.latest_of_trial(&identity::trial_key(&trials[0])).unwrap().unwrap();
        assert_eq!(released.stop_reason, STORE_FAILED_WHILE_CLAIMING);
    }
}
