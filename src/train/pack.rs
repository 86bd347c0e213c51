//! Packs: trials of one step graph trained together, one step at a time, as one program. Each
//! step draws every trial's batch from its own data stream and runs the tape once over all of
//! them ([`crate::compile::tape`]): work that reads no parameter runs once over every trial's
//! sequences, and each trial's parameters see only its own. Learning rate, clipping, loss,
//! evaluation, `stop_when` and `max_time` stay per trial, and a trial that ends leaves the
//! pack at once ([`Finished`]) while the others go on. A trial trained in a pack computes
//! what it computes alone (`tests/integration/packs.rs` compares them for every model family).
//!
//! On the CPU a pack runs the tape; elsewhere candle's autograd over the pack's forward
//! (`compile::packed_run`), on CUDA replayed from a graph of the whole pack's step
//! (`pack_replay`). There the trials hold their parameters stacked for as long as the pack
//! keeps them (`compile::stacked_params`), so that the packed ops read each stack as it is.

use std::panic::AssertUnwindSafe;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use candle_core::{Device, Result, Tensor};

use super::checkpoint::Checkpoints;
use super::pack_replay::PackReplay;
use super::pack_update::PackUpdate;
use super::trial_run::{Run, TrialRun};
use super::{Autograd, Observer, Outcome, Stepper, TrainError, loss, panic_message};
use crate::check::Trial;
use crate::compile::Cell;
use crate::compile::tape::{Member, TrialGrads};
use crate::tasks::Batch;

/// One trial of a pack, with where its progress and checkpoints go.
#[derive(Clone, Copy)]
pub struct PackMember<'a> {
    pub trial: &'a Trial,
    pub observer: &'a dyn Observer,
    pub checkpoints: &'a dyn Checkpoints,
}

/// Called as each trial of a pack ends (its index in the pack and its outcome), while the
/// others may still train.
pub type Finished<'a> = dyn FnMut(usize, Outcome) + 'a;

/// Trains `members` as one pack on `device` (each as [`super::train_resumable`] would train
/// it alone: resumed from its checkpoint, saving checkpoints, stopped by `cancel`), calling
/// `finished` for each as it ends.
pub fn train_pack(members: &[PackMember<'_>], device: &Device, cancel: &AtomicBool, finished: &mut Finished<'_>) {
    let autograd = Autograd::default_for(device);
    let mut outs: Vec<Outcome> = members.iter().map(|m| Outcome::starting(m.trial)).collect();
    let mut runs: Vec<Option<TrialRun<'_>>> = Vec::with_capacity(members.len());
    for (p, m) in members.iter().enumerate() {
        let run = Run { trial: m.trial, device, autograd, observer: m.observer, cancel, checkpoints: m.checkpoints };
        // A panic (a bug) while a trial starts fails that trial alone, as it would alone.
        let out = &mut outs[p];
        match super::failing_on_panic("starting", || TrialRun::start(run, out)) {
            Ok(r) => runs.push(Some(r)),
            Err(error) => {
                outs[p].end_on(error);
                finished(p, outs[p].clone());
                runs.push(None);
            }
        }
    }
    // A panic (a bug) fails the trials still training, keeping their steps and curves so far.
    let mut steps = PackSteps::new(device, autograd);
    let trained =
        std::panic::catch_unwind(AssertUnwindSafe(|| train_steps(&mut runs, &mut outs, &mut steps, finished)));
    if let Some(why) = steps.failure() {
        eprintln!("warning: a pack's steps ran eagerly: its CUDA graph capture failed: {why}");
    }
    if let Err(panic) = trained {
        let reason = TrainError::Panic { doing: "training", message: panic_message(panic.as_ref()) }.to_string();
        for (p, run) in runs.iter_mut().enumerate() {
            if run.take().is_some() {
                outs[p].fail(reason.clone());
                finished(p, outs[p].clone());
            }
        }
    }
}

/// How a trial's training went, when it leaves the pack.
type Ended = std::result::Result<(), TrainError>;

/// Steps the trials in `runs` until each has ended (its slot then empty).
fn train_steps(
    runs: &mut [Option<TrialRun<'_>>],
    outs: &mut [Outcome],
    steps: &mut PackSteps,
    finished: &mut Finished<'_>,
) {
    let mut end = |p: usize, runs: &mut [Option<TrialRun<'_>>], outs: &mut [Outcome], result: Ended| {
        let Some(run) = runs[p].take() else { return };
        // Its slot is empty from here: a panic in its test evaluation fails it here, as alone,
        // where the pack's own catch would no longer see it.
        let out = &mut outs[p];
        if let Err(e) = result.and_then(|()| super::failing_on_panic("testing", || run.finish(out))) {
            outs[p].fail(e);
        }
        finished(p, outs[p].clone());
    };
    loop {
        let mark = Instant::now();
        // The test evaluations of trials that end here are no part of the others' step.
        let mut ending = Duration::ZERO;
        let mut active = vec![];
        let mut batches = vec![];
        for p in 0..runs.len() {
            let Some(run) = runs[p].as_mut() else { continue };
            let result = match run.next_batch(&mut outs[p]) {
                Ok(Some(batch)) => {
                    active.push(p);
                    batches.push(batch);
                    continue;
                }
                Ok(None) => Ok(()),
                Err(e) => Err(e),
            };
            let t0 = Instant::now();
            end(p, runs, outs, result);
            ending += t0.elapsed();
        }
        if active.is_empty() {
            return;
        }
        let values = {
            let mut steppers: Vec<&mut Stepper> = runs
                .iter_mut()
                .enumerate()
                .filter(|(p, _)| active.contains(p))
                .filter_map(|(_, r)| r.as_mut().map(|r| &mut r.stepper))
                .collect();
            let batches: Vec<&Batch> = batches.iter().collect();
            steps.step(&active, &mut steppers, &batches)
        };
        // Each trial is charged its share of the step.
        let share = mark.elapsed().saturating_sub(ending) / active.len() as u32;
        match values {
            Ok(values) => {
                for (&p, value) in active.iter().zip(values) {
                    let Some(run) = runs[p].as_mut() else { continue };
                    run.charge(share);
                    match run.after_step(value, &mut outs[p]) {
                        Ok(true) => {}
                        Ok(false) => end(p, runs, outs, Ok(())),
                        Err(e) => end(p, runs, outs, Err(e)),
                    }
                }
            }
            Err(e) => {
                // The pack's step failed: every trial in it fails with the reason.
                let reason = e.to_string();
                for &p in &active {
                    end(p, runs, outs, Err(TrainError::Candle(candle_core::Error::Msg(reason.clone()))));
                }
            }
        }
    }
}

/// A pack's steps: replayed from a CUDA graph where they can be (`pack_replay`), else eagerly
/// ([`step_pack`]).
pub struct PackSteps(PackReplay);

impl PackSteps {
    pub fn new(device: &Device, autograd: Autograd) -> PackSteps {
        PackSteps(PackReplay::for_device(device, autograd))
    }

    /// One step of the trials `who` (their indices in the pack, which say when the set of
    /// trials changes) on their batches: each trial's loss before its update.
    pub fn step(&mut self, who: &[usize], steppers: &mut [&mut Stepper], batches: &[&Batch]) -> Result<Vec<f64>> {
        hold_stacked(steppers, batches)?;
        match self.0.step(who, steppers, batches)? {
            Some(values) => Ok(values),
            None => step_pack(steppers, batches),
        }
    }

    /// Why the CUDA graph capture failed, where it did (the steps then run eagerly).
    pub fn failure(&self) -> Option<&str> {
        self.0.failure()
    }

    /// Whether the last step was replayed from a CUDA graph.
    pub fn replays(&self) -> bool {
        self.0.replays()
    }
}

/// One training step of each stepper on its batch, as [`Stepper::step`] takes it: the losses
/// before the updates. Steppers whose batches have the same shape train as one pack.
pub fn step_pack(steppers: &mut [&mut Stepper], batches: &[&Batch]) -> Result<Vec<f64>> {
    hold_stacked(steppers, batches)?;
    // The pack's optimiser counts every step of its trials, whichever updates them; until it
    // updates the pack below, the trials update on their own.
    let as_one = match held_pack_update(steppers) {
        Some(update) => {
            update.prepare()?;
            update.left_to_trials();
            true
        }
        None => false,
    };
    let mut values = vec![0.0; steppers.len()];
    for group in same_shapes(batches)? {
        // A trial alone in its shape steps as it would alone (on CUDA, from its own graph).
        if let [i] = group[..] {
            values[i] = steppers[i].step(batches[i])?;
            continue;
        }
        let (grads, stacked) = {
            let members: Vec<&Stepper> = group.iter().map(|&i| &*steppers[i]).collect();
            let batches: Vec<&Batch> = group.iter().map(|&i| batches[i]).collect();
            loss_and_grads(&members, &batches)?
        };
        match stacked.filter(|_| as_one && group.len() == steppers.len()) {
            Some(stacked) => {
                for (&i, (value, _)) in group.iter().zip(grads) {
                    steppers[i].opt.prepare()?;
                    values[i] = value;
                }
                if let Some(update) = held_pack_update(steppers) {
                    update.update(&stacked)?;
                }
            }
            None => {
                for (&i, (value, grads)) in group.iter().zip(grads) {
                    values[i] = steppers[i].update(value, grads)?;
                }
            }
        }
    }
    Ok(values)
}

/// Whether the last step of `steppers`, a whole pack, updated them as one ([`PackUpdate`])
/// rather than each trial on its own (`memctl bench --pack` says which).
pub fn updates_as_one(steppers: &mut [&mut Stepper]) -> bool {
    held_pack_update(steppers).is_some_and(|u| u.made_last())
}

/// The pack's own optimiser ([`PackUpdate`]), where `steppers` are the whole pack that holds it.
pub(super) fn held_pack_update<'s>(steppers: &'s mut [&mut Stepper]) -> Option<&'s mut PackUpdate> {
    let held = Cell::shared_stacks(&steppers.iter().map(|s| &s.cell).collect::<Vec<_>>())?;
    steppers.first_mut()?.pack_update.as_mut().filter(|u| u.serves(&held))
}

/// Makes `steppers` hold their parameters stacked ([`crate::compile::stacked_params`]) where
/// candle's autograd trains them as one pack this step (all of one shape) and they do not hold
/// them so already: when a pack starts and when a trial leaves it. The stacks are a copy of
/// the parameters; the steppers' own CUDA graphs, captured on the old ones, are dropped. Where
/// the trials update by one rule, the first holds the pack's optimiser ([`PackUpdate`]). The
/// tape (the CPU's gradients) runs each trial's weights apart and keeps them as they are.
pub(super) fn hold_stacked(steppers: &mut [&mut Stepper], batches: &[&Batch]) -> Result<()> {
    let candle = steppers.iter().all(|s| s.autograd == Autograd::Candle);
    if !candle || steppers.len() < 2 || same_shapes(batches)?.len() != 1 {
        return Ok(());
    }
    if Cell::shared_stacks(&steppers.iter().map(|s| &s.cell).collect::<Vec<_>>()).is_some() {
        return Ok(());
    }
    let stacks = Cell::stack_parameters(&mut steppers.iter_mut().map(|s| &mut s.cell).collect::<Vec<_>>())?;
    steppers.iter_mut().try_for_each(|s| s.parameters_moved())?;
    let update = PackUpdate::hold(steppers, &stacks)?;
    steppers.iter_mut().for_each(|s| s.pack_update = None);
    steppers[0].pack_update = update;
    Ok(())
}

/// The indices of `batches`, grouped by the shape of their inputs and their scored steps (a
/// pack runs one time step count over one batch size), in order.
pub(super) fn same_shapes(batches: &[&Batch]) -> Result<Vec<Vec<usize>>> {
    let mut groups: Vec<(Vec<usize>, Vec<usize>, Vec<usize>)> = vec![];
    for (i, b) in batches.iter().enumerate() {
        let dims = b.inputs.dims().to_vec();
        match groups.iter_mut().find(|(d, s, _)| *d == dims && *s == b.scored) {
            Some(g) => g.2.push(i),
            None => groups.push((dims, b.scored.clone(), vec![i])),
        }
    }
    Ok(groups.into_iter().map(|g| g.2).collect())
}

/// Each stepper's loss and gradients on its batch (all of one shape), from packed tapes: the
/// trials are split into one part per pool thread, each part one tape over its trials.
fn loss_and_grads(steppers: &[&Stepper], batches: &[&Batch]) -> Result<(Vec<TrialGrads>, Stacked)> {
    let tape = steppers.iter().all(|s| s.autograd == Autograd::Tape);
    if steppers.len() == 1 {
        return Ok((steppers.iter().zip(batches).map(|(s, b)| s.loss_and_grads(b)).collect::<Result<_>>()?, None));
    }
    if !tape {
        return autograd_loss_and_grads(steppers, batches);
    }
    Ok((tape_loss_and_grads(steppers, batches)?, None))
}

/// Each parameter's gradient over a pack that holds its parameters stacked, `[P, …]`, where
/// every trial's gradient is its row (`compile::packed_run::PackGradients::stacked`).
type Stacked = Option<Vec<Option<Tensor>>>;

/// [`loss_and_grads`] by the tape.
fn tape_loss_and_grads(steppers: &[&Stepper], batches: &[&Batch]) -> Result<Vec<TrialGrads>> {
    use rayon::prelude::*;
    let inputs: Vec<Tensor> = steppers.iter().zip(batches).map(|(s, b)| s.inputs_of(b)).collect::<Result<_>>()?;
    let weights: Vec<Vec<Tensor>> = steppers.iter().map(|s| s.cell.weights(false)).collect();
    let tracked: Vec<Vec<Tensor>> = steppers.iter().map(|s| s.cell.weights(true)).collect();
    let (cell, target) = (&steppers[0].cell, steppers[0].target);
    let part = |range: std::ops::Range<usize>| -> Result<Vec<TrialGrads>> {
        let start = range.start;
        let members: Vec<Member<'_>> =
            range.clone().map(|i| Member { weights: &weights[i], tracked: &tracked[i] }).collect();
        let x = Tensor::cat(&inputs[range], 1)?;
        let scored = &batches[start].scored;
        cell.train_grads_packed(&members, &x, scored, &mut |q, s, logits| {
            let targets = &batches[start + q].targets;
            loss::step_loss_and_grad(target, logits, &targets.get(s)?, scored.len(), targets.dim(1)?)
        })
    };
    let trials = steppers.len();
    let parts = rayon::current_num_threads().clamp(1, trials);
    if parts == 1 {
        return part(0..trials);
    }
    let per = trials.div_ceil(parts);
    let results: Vec<Result<Vec<TrialGrads>>> = (0..trials.div_ceil(per))
        .into_par_iter()
        .map(|c| crate::kernels::cpu::par::serial(|| part(c * per..((c + 1) * per).min(trials))))
        .collect();
    let mut all = Vec::with_capacity(trials);
    for r in results {
        all.extend(r?);
    }
    Ok(all)
}

/// [`loss_and_grads`] by candle's autograd (where the tape does not run): one forward of the
/// pack ([`crate::compile::packed_run`]), each trial's loss on its rows, and one backward of
/// their sum. A trial whose loss is not finite gets no gradients, as alone; the stacked
/// gradients come only where every loss is finite.
fn autograd_loss_and_grads(steppers: &[&Stepper], batches: &[&Batch]) -> Result<(Vec<TrialGrads>, Stacked)> {
    let inputs: Vec<Tensor> = steppers.iter().zip(batches).map(|(s, b)| s.inputs_of(b)).collect::<Result<_>>()?;
    let targets: Vec<&Tensor> = batches.iter().map(|b| &b.targets).collect();
    let (losses, weights) = pack_losses(steppers, &inputs, &targets, &batches[0].scored)?;
    let values: Vec<f64> = losses.to_dtype(candle_core::DType::F64)?.to_vec1()?;
    let all_finite = values.iter().all(|v| v.is_finite());
    // Only the finite losses are differentiated: a trial that diverged fails on its own.
    let total = match all_finite {
        true => Some(losses.sum_all()?),
        false => {
            let finite = values.iter().enumerate().filter(|(_, v)| v.is_finite());
            sum(finite.map(|(p, _)| losses.get(p)).collect::<Result<_>>()?)?
        }
    };
    let Some(total) = total else {
        let none = steppers.iter().map(|s| vec![None; s.cell.vars().len()]);
        return Ok((values.into_iter().zip(none).collect(), None));
    };
    let mut grads = crate::compile::packed_run::packed_gradients(&weights, &total)?;
    for (g, v) in grads.trials.iter_mut().zip(&values) {
        if !v.is_finite() {
            g.iter_mut().for_each(|x| *x = None);
        }
    }
    let stacked = grads.stacked.filter(|_| all_finite);
    Ok((values.into_iter().zip(grads.trials).collect(), stacked))
}

/// The pack's forward by candle's autograd over every trial's `inputs` (joined along the batch)
/// and each trial's loss on its rows against its `targets` (`[P]`), with the weights each
/// trial's steps read (for [`crate::compile::packed_run::packed_gradients`]). Shared by the
/// eager step and the replayed one (`pack_replay`).
pub(super) fn pack_losses(
    steppers: &[&Stepper],
    inputs: &[Tensor],
    targets: &[&Tensor],
    scored: &[usize],
) -> Result<(Tensor, Vec<crate::compile::StepWeights>)> {
    let members: Vec<Vec<Tensor>> = steppers.iter().map(|s| s.cell.weights(true)).collect();
    let held = Cell::shared_stacks(&steppers.iter().map(|s| &s.cell).collect::<Vec<_>>());
    let (cell, target) = (&steppers[0].cell, steppers[0].target);
    let (logits, weights) = cell.run_packed_for_gradients(members, held, &Tensor::cat(inputs, 1)?, scored)?;
    let losses = loss::pack_losses(target, &logits, &Tensor::cat(targets, 1)?, steppers.len())?;
    Ok((losses, weights))
}

/// The sum of `losses`; `None` for none.
fn sum(losses: Vec<Tensor>) -> Result<Option<Tensor>> {
    let mut losses = losses.into_iter();
    let Some(first) = losses.next() else { return Ok(None) };
    losses.try_fold(first, |total, l| total + l).map(Some)
}

#[cfg(test)]
pub(super) mod tests {
    use candle_core::{DType, Device};

    use super::*;

    /// `graph_step`'s model (an LSTM, a learned memory, SAM's read) swept over three seeds
    /// with one update rule.
    pub(in crate::train) fn one_rule_spec(optimizer: &str) -> String {
        swept_spec(optimizer, "seed in [1, 2, 3]")
    }

    /// `graph_step`'s model with `optimizer`, swept by `sweep`, as experiment `one_rule`.
    fn swept_spec(optimizer: &str, sweep: &str) -> String {
        let sweep = format!(
            "experiment one_rule {{ task tiny model mix
               train {{ optimizer = {optimizer}, batch = 8, steps = 8, clip_value = 0.05 }}
               sweep {{ {sweep} }} }}"
        );
        format!("{}\n{sweep}", crate::train::graph_step::tests::SPEC)
    }

    /// Each stepper's parameters and optimiser state (its checkpoint's content) equal the
    /// other's within 1e-4 of each tensor's largest magnitude, and its update count.
    pub(in crate::train) fn assert_same_state(a: &Stepper, b: &Stepper, what: &str) -> Result<()> {
        let ((pa, sa), (pb, sb)) = (a.snapshot(), b.snapshot());
        assert_eq!(sa.updates, sb.updates, "{what}: update counts");
        let all = |p: Vec<Tensor>, s: &crate::train::optim::OptimState| {
            p.into_iter().map(Some).chain(s.buffers.iter().flatten().cloned()).collect::<Vec<_>>()
        };
        let (ta, tb) = (all(pa, &sa), all(pb, &sb));
        assert_eq!(ta.len(), tb.len(), "{what}");
        for (x, y) in ta.iter().zip(&tb) {
            let (Some(x), Some(y)) = (x, y) else {
                assert!(x.is_none() && y.is_none(), "{what}: a buffer on one side only");
                continue;
            };
            let worst = (x - y)?.abs()?.max_all()?.to_scalar::<f32>()?;
            let scale = x.abs()?.max_all()?.to_scalar::<f32>()?.max(1e-6);
            assert!(worst <= 1e-4 * scale, "{what}: a tensor differs by {worst} of {scale}");
        }
        Ok(())
    }

    /// Checkpoints whose resume panics: a bug as a trial starts.
    struct PanicsOnResume;

    impl crate::train::checkpoint::Checkpoints for PanicsOnResume {
        fn resume(&self, _: &Device) -> candle_core::Result<Option<crate::train::checkpoint::TrainState>> {
            panic!("a bug while the trial starts")
        }
        fn every(&self) -> Option<std::time::Duration> {
            None
        }
        fn save(&self, _: &crate::train::checkpoint::TrainState) {}
    }

    /// A panic as one trial of a pack starts fails that trial, with the panic's message, and
    /// the others train to their end, as trials alone would.
    #[test]
    fn a_panic_as_one_trial_starts_fails_it_and_the_others_train() {
        let program = crate::check::checked_text(&one_rule_spec("adam(lr = 1e-3)"));
        let trials = &program.experiments.iter().find(|e| e.name == "one_rule").unwrap().trials;
        let none = crate::train::checkpoint::NoCheckpoints;
        let member = |p: usize| PackMember {
            trial: &trials[p],
            observer: &crate::train::Silent,
            checkpoints: if p == 1 { &PanicsOnResume } else { &none },
        };
        let members: Vec<PackMember<'_>> = (0..trials.len()).map(member).collect();
        let mut ended: Vec<(usize, Outcome)> = vec![];
        train_pack(&members, &Device::Cpu, &std::sync::atomic::AtomicBool::new(false), &mut |p, o| ended.push((p, o)));
        ended.sort_by_key(|(p, _)| *p);
        assert_eq!(ended.len(), 3, "every trial ends once");
        for (p, out) in &ended {
            match (p, &out.ending) {
                (1, crate::train::Ending::Failed(why)) => {
                    assert!(why.contains("a bug while the trial starts"), "{why}")
                }
                (1, other) => panic!("the trial whose start panics: {other:?}"),
                (_, ending) => {
                    assert!(matches!(ending, crate::train::Ending::Done), "trial {p}: {ending:?}");
                    assert_eq!(out.steps_run, 8, "trial {p}");
                }
            }
        }
    }

    /// A pack whose trials update by one rule updates as one, over its stacks (the learned
    /// memory's included), and each trial computes what it computes alone: its losses, and
    /// afterwards its parameters and optimiser state, for RMSprop, Adam and SGD with and
    /// without momentum, and for a pack of two learning rates, a run of trials each.
    #[test]
    fn a_pack_of_one_update_rule_updates_as_one_and_each_trial_as_alone() -> Result<()> {
        let cases = [
            ("rmsprop(lr = 1e-3, momentum = 0.9)", "seed in [1, 2, 3]"),
            ("adam(lr = 1e-3)", "seed in [1, 2, 3]"),
            ("sgd(lr = 1e-2)", "seed in [1, 2, 3]"),
            ("sgd(lr = 1e-2, momentum = 0.9)", "seed in [1, 2, 3]"),
            // Two runs of one learning rate each.
            ("adam(lr = 1e-3)", "lr in [1e-3, 2e-3]  seed in [1, 2]"),
        ];
        for (optimizer, sweep) in cases {
            let program = crate::check::checked_text(&swept_spec(optimizer, sweep));
            let trials = &program.experiments.iter().find(|e| e.name == "one_rule").unwrap().trials;
            let stepper = |t| Stepper::with(t, &Device::Cpu, DType::F32, Autograd::Candle);
            let mut alone: Vec<Stepper> = trials.iter().map(stepper).collect::<Result<_>>()?;
            let mut packed: Vec<Stepper> = trials.iter().map(stepper).collect::<Result<_>>()?;
            let seed = |t: &Trial| super::super::data_seed(t.config.seed);
            let mut data: Vec<_> = trials.iter().map(|t| t.task.data(seed(t), &Device::Cpu)).collect::<Result<_>>()?;
            for step in 0..8 {
                let batches: Vec<Batch> = data.iter_mut().map(|d| d.train_batch(8)).collect::<Result<_>>()?;
                let batches: Vec<&Batch> = batches.iter().collect();
                let mut members: Vec<&mut Stepper> = packed.iter_mut().collect();
                let together = step_pack(&mut members, &batches)?;
                assert!(updates_as_one(&mut members), "{optimizer}: the pack updated as one");
                let shared: Vec<&Stepper> = members.iter().map(|s| &**s).collect();
                assert!(loss_and_grads(&shared, &batches)?.1.is_some(), "{optimizer}: the gradients come stacked");
                for (p, (s, b)) in alone.iter_mut().zip(&batches).enumerate() {
                    let lone = s.step(b)?;
                    let value = together[p];
                    assert!(
                        (lone - value).abs() <= 1e-5 * lone.abs(),
                        "{optimizer} trial {p} step {step}: {lone}, {value}"
                    );
                }
            }
            for (p, (a, b)) in alone.iter().zip(&packed).enumerate() {
                assert_same_state(a, b, &format!("{optimizer} trial {p}"))?;
            }
        }
        Ok(())
    }
}
