//! A trial trained in a pack is the same trial: for every model family (STM, LSTM, RMC, LSAM,
//! NAM-TM, PKM, the NAM encoder) the losses of trials stepped together as one pack equal, bit
//! for bit over 200 steps, those of the same trials stepped alone on one compute thread; and a
//! whole packed training run records what the run alone records. Trials differ in seed and
//! learning rate, so each pack holds different parameters, data and optimiser settings.

use std::sync::atomic::AtomicBool;

use candle_core::Device;
use memctl::check::Trial;
use memctl::train::checkpoint::NoCheckpoints;
use memctl::train::pack::{PackMember, step_pack, train_pack};
use memctl::train::{Autograd, Outcome, Silent, Stepper, data_seed};

use crate::support::trials;

const MODELS: [&str; 7] = [
    include_str!("../../specs/models/stm.mem"),
    include_str!("../../specs/models/lstm.mem"),
    include_str!("../../specs/models/rmc.mem"),
    include_str!("../../specs/models/lsam.mem"),
    include_str!("../../specs/models/namtm.mem"),
    include_str!("../../specs/models/pkm.mem"),
    include_str!("../../specs/models/nam_encoder.mem"),
];

/// One small experiment per model family, each swept over three seeds and learning rates.
const FAMILIES: &str = include_str!("data/pack_families.mem");

fn family(name: &str) -> Vec<Trial> {
    let text = format!("{}\n{FAMILIES}", MODELS.join("\n"));
    let all = trials("families.mem", &text);
    let found: Vec<Trial> = all.into_iter().filter(|t| t.config.experiment == name).collect();
    assert_eq!(found.len(), 3, "{name}");
    found
}

/// `f` on `threads` compute threads.
fn on_threads<R: Send>(threads: usize, f: impl FnOnce() -> R + Send) -> R {
    rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap().install(f)
}

/// `f` on one compute thread, where a trial alone runs its whole batch in one part, as each
/// trial of a pack does on any number of threads (a pack splits its trials over the threads,
/// not their batches): both then sum each gradient over the batch in the same order.
fn on_one_thread<R: Send>(f: impl FnOnce() -> R + Send) -> R {
    on_threads(1, f)
}

/// The largest relative difference between the losses of `trials` stepped alone (on one
/// thread) and packed (on `threads`) over `steps` steps (each step's batch drawn from each
/// trial's own stream).
fn packed_against_alone(trials: &[Trial], steps: usize, threads: usize) -> f64 {
    packed_against_alone_by(trials, steps, threads, Autograd::Tape)
}

/// [`packed_against_alone`] with the gradients from `autograd`.
fn packed_against_alone_by(trials: &[Trial], steps: usize, threads: usize, autograd: Autograd) -> f64 {
    let device = Device::Cpu;
    let stepper = |t: &Trial| Stepper::with(t, &device, candle_core::DType::F32, autograd).unwrap();
    let mut alone: Vec<Stepper> = trials.iter().map(stepper).collect();
    let mut packed: Vec<Stepper> = trials.iter().map(stepper).collect();
    let mut data: Vec<_> = trials.iter().map(|t| t.task.data(data_seed(t.config.seed), &device).unwrap()).collect();
    let mut worst = 0.0f64;
    for step in 0..steps {
        let batches: Vec<_> =
            trials.iter().zip(&mut data).map(|(t, d)| d.train_batch(t.config.train.batch).unwrap()).collect();
        let lone: Vec<f64> =
            on_one_thread(|| alone.iter_mut().zip(&batches).map(|(s, b)| s.step(b).unwrap()).collect());
        let mut members: Vec<&mut Stepper> = packed.iter_mut().collect();
        let together = on_threads(threads, || step_pack(&mut members, &batches.iter().collect::<Vec<_>>()).unwrap());
        for (p, (a, b)) in lone.iter().zip(&together).enumerate() {
            assert!(a.is_finite(), "trial {p} step {step}: loss {a}");
            worst = worst.max((a - b).abs() / a.abs().max(1e-12));
        }
    }
    worst
}

fn assert_same_losses(name: &str) {
    let trials = family(name);
    for threads in [1, 2] {
        let worst = packed_against_alone(&trials, 200, threads);
        assert_eq!(worst, 0.0, "{name} on {threads} threads: packed losses differ from alone by {worst:e} (relative)");
    }
}

/// candle's autograd (the GPU's gradients) over a pack, for every model family: each trial's
/// losses over 20 steps within 2e-5 (relative) of the same trial's alone. Not bit for bit:
/// candle's backward adds a weight's gradients in the order of the pack's graph, which may
/// differ from the order alone in the last bit. Some batches' losses magnify that (STM at lr
/// 3e-3, step 16: 1.1e-5, the steps around it within 3e-6), and a trial that learns fast
/// amplifies it (from step 21 on), so the longer check below compares losses from the same
/// weights.
#[test]
fn a_pack_differentiated_by_candle_s_autograd_steps_as_its_trials_do_alone() {
    for name in ["stm", "lstm", "rmc", "lsam", "namtm", "pkm", "encoder"] {
        let worst = packed_against_alone_by(&family(name), 20, 1, Autograd::Candle);
        assert!(worst <= 2e-5, "{name}: packed losses differ from alone by {worst:e} (relative)");
    }
}

/// A pack differentiated by candle's autograd holds its parameters stacked, each trial's a view
/// of its row; when a trial leaves, the others are stacked anew, and every trial, the one that
/// left included, goes on stepping as it does alone (STM and the LSTM: RMSprop and Adam; the
/// trials' learning rates apart, each updating on its own, and one, where the pack updates as
/// one: `train::pack`'s unit tests check that it does).
#[test]
fn a_pack_holds_its_parameters_stacked_and_restacks_them_when_a_trial_leaves() {
    let device = Device::Cpu;
    for (name, one_rule) in [("stm", false), ("lstm", false), ("stm", true), ("lstm", true)] {
        let mut trials = family(name);
        if one_rule {
            let lr = trials[0].config.train.lr;
            trials.iter_mut().for_each(|t| t.config.train.lr = lr);
        }
        let stepper = |t: &Trial| Stepper::with(t, &device, candle_core::DType::F32, Autograd::Candle).unwrap();
        let mut alone: Vec<Stepper> = trials.iter().map(stepper).collect();
        let mut packed: Vec<Stepper> = trials.iter().map(stepper).collect();
        let mut data: Vec<_> = trials.iter().map(|t| t.task.data(data_seed(t.config.seed), &device).unwrap()).collect();
        for step in 0..12 {
            // Trial 1 leaves after step 5 and steps alone from then on.
            let who: Vec<usize> = if step < 6 { vec![0, 1, 2] } else { vec![0, 2] };
            let batches: Vec<_> =
                trials.iter().zip(&mut data).map(|(t, d)| d.train_batch(t.config.train.batch).unwrap()).collect();
            let mut values = vec![0.0; trials.len()];
            {
                let mut members: Vec<&mut Stepper> =
                    packed.iter_mut().enumerate().filter(|(p, _)| who.contains(p)).map(|(_, s)| s).collect();
                let batches: Vec<_> = who.iter().map(|&p| &batches[p]).collect();
                let together = step_pack(&mut members, &batches).unwrap();
                let cells: Vec<_> = members.iter().map(|s| s.cell()).collect();
                let held = memctl::compile::Cell::shared_stacks(&cells);
                assert_eq!(held.map(|h| h.trials()), Some(who.len()), "{name} step {step}: the pack holds stacks");
                for (&p, v) in who.iter().zip(together) {
                    values[p] = v;
                }
            }
            if step >= 6 {
                values[1] = packed[1].step(&batches[1]).unwrap();
            }
            for (p, (s, b)) in alone.iter_mut().zip(&batches).enumerate() {
                let lone = s.step(b).unwrap();
                let difference = (lone - values[p]).abs() / lone.abs().max(1e-12);
                assert!(difference <= 2e-5, "{name} trial {p} step {step}: {lone} alone, {} packed", values[p]);
            }
        }
    }
}

/// Along 200 steps of each trial trained alone by candle's autograd, the pack's forward from
/// the same weights (copied in before each step) gives every trial its loss within 1e-6.
#[test]
fn a_pack_s_forward_for_candle_s_autograd_gives_each_trial_its_loss_along_200_steps() {
    let device = Device::Cpu;
    for name in ["stm", "lstm", "rmc", "lsam", "namtm", "pkm", "encoder"] {
        let trials = family(name);
        let stepper = |t: &Trial| Stepper::with(t, &device, candle_core::DType::F32, Autograd::Candle).unwrap();
        let mut alone: Vec<Stepper> = trials.iter().map(stepper).collect();
        let mut packed: Vec<Stepper> = trials.iter().map(stepper).collect();
        let mut data: Vec<_> = trials.iter().map(|t| t.task.data(data_seed(t.config.seed), &device).unwrap()).collect();
        for step in 0..200 {
            let batches: Vec<_> =
                trials.iter().zip(&mut data).map(|(t, d)| d.train_batch(t.config.train.batch).unwrap()).collect();
            for (a, p) in alone.iter().zip(&packed) {
                for (from, to) in a.cell().vars().iter().zip(p.cell().vars()) {
                    to.set(from.as_tensor()).unwrap();
                }
            }
            let mut members: Vec<&mut Stepper> = packed.iter_mut().collect();
            let together = step_pack(&mut members, &batches.iter().collect::<Vec<_>>()).unwrap();
            for (p, ((a, b), value)) in alone.iter_mut().zip(&batches).zip(together).enumerate() {
                let lone = a.step(b).unwrap();
                let difference = (lone - value).abs() / lone.abs().max(1e-12);
                assert!(difference <= 1e-6, "{name} trial {p} step {step}: {lone} alone, {value} packed");
            }
        }
    }
}

#[test]
fn a_packed_stm_trial_steps_as_it_does_alone() {
    assert_same_losses("stm");
}

#[test]
fn a_packed_lstm_trial_steps_as_it_does_alone() {
    assert_same_losses("lstm");
}

#[test]
fn a_packed_rmc_trial_steps_as_it_does_alone() {
    assert_same_losses("rmc");
}

#[test]
fn a_packed_lsam_trial_steps_as_it_does_alone() {
    assert_same_losses("lsam");
}

#[test]
fn a_packed_namtm_trial_steps_as_it_does_alone() {
    assert_same_losses("namtm");
}

#[test]
fn a_packed_pkm_trial_steps_as_it_does_alone() {
    assert_same_losses("pkm");
}

#[test]
fn a_packed_nam_encoder_trial_steps_as_it_does_alone() {
    // listOps batches differ in length: a step packs the trials whose batches have one shape.
    assert_same_losses("encoder");
}

/// `trial` with `steps`, evaluations every `eval_every`, and `stop_when` on validation accuracy.
fn with_schedule(mut trial: Trial, steps: usize, eval_every: usize, stop_at: Option<f64>) -> Trial {
    let train = &mut trial.config.train;
    (train.steps, train.eval_every) = (steps, eval_every);
    train.stop_when = stop_at.map(|threshold| memctl::train_config::StopWhen {
        metric: "accuracy".into(),
        op: memctl::train_config::Comparison::Ge,
        threshold,
    });
    trial
}

#[test]
fn a_packed_run_records_what_the_run_alone_records() {
    // Three LSTM trials with different step budgets; one stops early on `stop_when` and leaves
    // the pack while the others go on.
    let base = family("lstm");
    let trials = [
        with_schedule(base[0].clone(), 60, 20, None),
        with_schedule(base[1].clone(), 40, 10, Some(0.0)),
        with_schedule(base[2].clone(), 50, 25, None),
    ];
    let cancel = AtomicBool::new(false);
    let (alone, packed) = on_one_thread(|| {
        let alone: Vec<Outcome> =
            trials.iter().map(|t| memctl::train::train(t, &Device::Cpu, &Silent, &cancel)).collect();
        let members: Vec<PackMember<'_>> =
            trials.iter().map(|trial| PackMember { trial, observer: &Silent, checkpoints: &NoCheckpoints }).collect();
        let mut packed: Vec<Option<Outcome>> = vec![None; trials.len()];
        let mut order = vec![];
        train_pack(&members, &Device::Cpu, &cancel, &mut |p, out| {
            order.push(p);
            packed[p] = Some(out);
        });
        assert_eq!(order, vec![1, 2, 0], "trials leave the pack as they end");
        (alone, packed.into_iter().map(Option::unwrap).collect::<Vec<_>>())
    });
    for (p, (a, b)) in alone.iter().zip(&packed).enumerate() {
        assert_eq!(a.ending, b.ending, "trial {p}");
        assert_eq!((a.steps_run, &a.converged, &a.stop_reason), (b.steps_run, &b.converged, &b.stop_reason));
        assert_eq!(a.curves.keys().collect::<Vec<_>>(), b.curves.keys().collect::<Vec<_>>(), "trial {p}");
        assert_curves_close(&a.curves, &b.curves, &format!("trial {p}"));
        assert_eq!(a.final_metrics.keys().collect::<Vec<_>>(), b.final_metrics.keys().collect::<Vec<_>>());
        for (k, v) in &a.final_metrics {
            assert!((v - b.final_metrics[k]).abs() <= 1e-5 * v.abs().max(1e-6), "trial {p} {k}");
        }
    }
    assert_eq!(packed[1].stop_reason, "stop_when");
}

/// A sweep of six trials (two widths × three seeds), run with `--pack` set to `pack` on one
/// thread per pack: its records, by trial.
fn sweep_records(pack: &str) -> Vec<serde_json::Value> {
    let (_dir, spec, store) = crate::support::spec_folder(&crate::support::tiny_lstm_sweep(
        "six",
        "batch = 8, steps = 30, eval_every = 10",
        "hidden in [8, 12]  seed in 1..3",
    ));
    let out = crate::support::memctl_at(&store)
        .arg("sweep")
        .arg(&spec)
        .args(["--jobs", "2", "--threads", "1", "--pack", pack, "-q"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", crate::support::text(&out.stderr));
    let out = crate::support::memctl_at(&store).args(["runs", "--all", "--format", "records"]).output().unwrap();
    let mut recs = serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap().as_array().unwrap().clone();
    recs.sort_by_key(|r| r["trial_key"].as_str().unwrap().to_string());
    recs
}

#[test]
fn a_packed_sweep_records_what_an_unpacked_sweep_records() {
    let (alone, packed) = (sweep_records("off"), sweep_records("3"));
    assert_eq!(alone.len(), 6);
    for (a, b) in alone.iter().zip(&packed) {
        assert_eq!(a["trial_key"], b["trial_key"], "a packed trial keeps its identity");
        for field in ["status", "curves", "final_metrics", "steps_run", "steps_to_converge", "stop_reason"] {
            assert_eq!(a[field], b[field], "{field} of {}", a["trial_key"]);
        }
    }
}

#[test]
fn a_dry_run_shows_the_packs() {
    let (_dir, spec, store) = crate::support::spec_folder(&crate::support::tiny_lstm_sweep(
        "six",
        "batch = 8, steps = 30, eval_every = 10",
        "hidden in [8, 12]  seed in 1..3",
    ));
    let dry = |pack: &str| {
        let out = crate::support::memctl_at(&store)
            .arg("sweep")
            .arg(&spec)
            .args(["--jobs", "2", "--dry-run", "--pack", pack])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", crate::support::text(&out.stderr));
        crate::support::text(&out.stdout)
    };
    // Trials 1–3 have hidden = 8, 4–6 hidden = 12: each width packs on its own.
    let packed = dry("3");
    assert!(packed.contains("packs (trials trained together as one program): [1 2 3] [4 5 6]"), "{packed}");
    assert!(packed.contains("6 of 6 trials would run in 2 packs"), "{packed}");
    let alone = dry("off");
    assert!(!alone.contains("packs"), "{alone}");
    assert!(alone.contains("6 of 6 trials would run (2 at a time"), "{alone}");
}

/// What runs at once is a pack: one pack of every trial takes every core, as a trial alone does.
#[test]
fn one_pack_of_a_sweep_s_trials_takes_every_core() {
    let (_dir, spec, store) =
        crate::support::spec_folder(&crate::support::tiny_lstm_sweep("six", "batch = 8, steps = 30", "seed in 1..6"));
    let out =
        crate::support::memctl_at(&store).arg("sweep").arg(&spec).args(["--dry-run", "--pack", "6"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", crate::support::text(&out.stderr));
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let plan = crate::support::text(&out.stdout);
    assert!(
        plan.contains(&format!("6 of 6 trials would run in 1 packs (1 at a time, {cores} threads each)")),
        "{plan}"
    );
}

/// A judge that stops its trial at its first evaluation at or after `at` (or never).
struct StopAt {
    at: Option<usize>,
}

impl memctl::sweep::live::Judge for StopAt {
    fn stop_here(&self, step: usize, _: &Outcome) -> Option<String> {
        self.at.filter(|at| step >= *at).map(|at| format!("stopped by the test at {at}"))
    }
    fn pruned(&self) -> Option<memctl::store::Pruned> {
        let step = self.at? as u64;
        Some(memctl::store::Pruned { rung: 1, step, metric: "val_loss".into(), value: 0.0, mean: 0.0, cutoff: 0.0 })
    }
}

/// Reports nothing.
struct Quiet;

impl memctl::sweep::Reporter for Quiet {
    fn warning(&self, message: &str) {
        eprintln!("warning: {message}");
    }
}

#[test]
fn a_trial_its_judge_stops_leaves_the_pack_recorded_pruned_and_the_others_go_on() {
    use memctl::store::Status;
    use memctl::sweep::packs::{Packed, run_packed};
    let trials: Vec<Trial> = family("lstm").into_iter().map(|t| with_schedule(t, 40, 10, None)).collect();
    let dir = tempfile::tempdir().unwrap();
    let store = memctl::store::Store::open(&dir.path().join("store")).unwrap();
    let spec = memctl::sweep::SpecSource { path: "families.mem".into(), text: FAMILIES.into() };
    let judges = [StopAt { at: None }, StopAt { at: Some(20) }, StopAt { at: None }];
    let members: Vec<Packed<'_>> = trials
        .iter()
        .zip(&judges)
        .enumerate()
        .map(|(index, (trial, judge))| Packed { index, trial, judge: Some(judge as &dyn memctl::sweep::live::Judge) })
        .collect();
    let opts = memctl::sweep::Options {
        pack: memctl::sweep::packs::Packing::Size(3),
        ..memctl::sweep::Options::one_at_a_time()
    };
    let cancel = AtomicBool::new(false);
    let results = run_packed(&store, &spec, &members, &opts, &Quiet, &cancel);
    assert_eq!(results.len(), 3);
    let records: Vec<memctl::store::RunRecord> = store.all().unwrap();
    let by_trial = |t: &Trial| {
        let key = memctl::sweep::identity::trial_key(t);
        records.iter().find(|r| r.trial_key == key).expect("recorded").clone()
    };
    let stopped = by_trial(&trials[1]);
    assert_eq!((stopped.status, stopped.steps_run), (Status::Pruned, 20));
    assert_eq!(stopped.pruned.as_ref().map(|p| p.step), Some(20));
    for t in [&trials[0], &trials[2]] {
        let r = by_trial(t);
        assert_eq!((r.status, r.steps_run), (Status::Done, 40), "the others went on to their budget");
    }
    // A trial that stayed in the pack after the pruned one left computed what it computes alone.
    let alone = on_one_thread(|| memctl::train::train(&trials[2], &Device::Cpu, &Silent, &cancel));
    let packed = by_trial(&trials[2]);
    assert_curves_close(&alone.curves, &packed.curves, "trial 2");
}

/// A run's curves: `(step, value)` by name.
type Curves = std::collections::BTreeMap<String, Vec<(u64, f64)>>;

/// Each curve of `alone` is in `packed`, at the same steps, each value within 1e-5 relative.
fn assert_curves_close(alone: &Curves, packed: &Curves, what: &str) {
    for (name, curve) in alone {
        let other = &packed[name];
        assert_eq!(curve.len(), other.len(), "{what} {name}");
        for ((s1, v1), (s2, v2)) in curve.iter().zip(other) {
            assert_eq!(s1, s2);
            assert!((v1 - v2).abs() <= 1e-5 * v1.abs().max(1e-6), "{what} {name} at {s1}: {v1} vs {v2}");
        }
    }
}

/// A sweep spread over several GPUs trains each pack where the placement put it: on stand-in
/// GPUs (cuda:0 with 5 GB free, cuda:1 with 10 GB; trials of 6 GB), every trial goes to cuda:1,
/// the only one it fits on, two never at once, and its record names that GPU. Without CUDA
/// the device does not open, so each trial fails saying which one it tried.
#[test]
fn a_spread_sweep_trains_each_pack_on_the_gpu_its_placement_chose() {
    if cfg!(feature = "cuda") {
        return; // stand-in GPUs would be real ones here
    }
    use memctl::device::DeviceSpec;
    use memctl::sweep::identity::trial_key;
    use memctl::sweep::memory_budget::{MemoryBudget, Need};
    let gb = 1u64 << 30;
    let trials = family("lstm");
    let needs = trials.iter().map(|t| (trial_key(t), Need { device: DeviceSpec::Cuda(0), bytes: 6 * gb })).collect();
    let free = std::collections::HashMap::from([(DeviceSpec::Cuda(0), 5 * gb), (DeviceSpec::Cuda(1), 10 * gb)]);
    let budget = MemoryBudget::new(free, needs).spread_over(vec![DeviceSpec::Cuda(0), DeviceSpec::Cuda(1)]);
    let dir = tempfile::tempdir().unwrap();
    let store = memctl::store::Store::open(&dir.path().join("store")).unwrap();
    let spec = memctl::sweep::SpecSource { path: "families.mem".into(), text: FAMILIES.into() };
    let opts = memctl::sweep::Options { jobs: 2, memory: budget.into(), ..memctl::sweep::Options::one_at_a_time() };
    let summary = memctl::sweep::run_all(&store, &spec, &trials, &opts, &Quiet, &AtomicBool::new(false)).unwrap();
    assert_eq!(summary.ran, 3);
    let records = store.all().unwrap();
    assert_eq!(records.len(), 3);
    for r in records {
        assert_eq!(r.environment.device, "cuda:1", "run {}", r.id);
        let error = r.error.unwrap_or_default();
        assert!(error.contains("`cuda:1`"), "run {}: {error}", r.id);
    }
}
