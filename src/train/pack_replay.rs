//! Replaying a pack's step from a CUDA graph, as a trial alone replays its own
//! (`graph_step`): the first step of a set of trials runs eagerly on persistent buffers (one
//! per trial), the second is captured, and every later step copies each trial's batch into its
//! buffers and launches the graph: the pack's forward, the trials' losses, one backward, and
//! the update (the pack's own where its trials update by one rule, `pack_update`, else each
//! trial's clipping and update). A trial that leaves the pack changes the program, so the
//! trials left warm up and capture again; a step whose batches differ in shape from the
//! captured ones (or from each other) runs eagerly, the graph kept. A capture that fails
//! leaves the pack eager (`PackReplay::Failed` keeps why).
//! As alone, a replayed step updates a trial's parameters even when its loss is not finite
//! (the graph cannot branch on it); the trial fails at that step either way.

use candle_core::{DType, Device, Result, Tensor};

use super::graph_step::{Buffers, Graph, capture, with_upload_cache};
use super::{Autograd, Stepper, clip};
use crate::tasks::Batch;

/// Where a pack stands with graph replay.
pub(super) enum PackReplay {
    /// Steps run eagerly (not on CUDA, not candle's autograd, or `cuda_graphs` off).
    Off,
    /// A capture failed; steps run eagerly.
    Failed(String),
    /// The next step of a new set of trials is the eager warm-up.
    Cold,
    /// The trials `who` (indices in the pack) warmed up; their next step is captured.
    WarmedUp { who: Vec<usize>, buffers: Vec<Buffers> },
    /// The trials `who` replay their steps.
    Captured { who: Vec<usize>, buffers: Vec<Buffers>, graph: Graph },
}

impl PackReplay {
    pub(super) fn for_device(device: &Device, autograd: Autograd) -> PackReplay {
        let replays = device.is_cuda()
            && autograd == Autograd::Candle
            && crate::kernels::cuda::switches::on_cuda(crate::device::tuning::CUDA_GRAPHS);
        if replays { PackReplay::Cold } else { PackReplay::Off }
    }

    /// The trials the buffers (and graph) are for.
    fn trials(&self) -> Option<&[usize]> {
        match self {
            PackReplay::WarmedUp { who, .. } | PackReplay::Captured { who, .. } => Some(who),
            _ => None,
        }
    }

    /// Whether the steps replay a captured graph.
    pub(super) fn replays(&self) -> bool {
        matches!(self, PackReplay::Captured { .. })
    }

    /// Why a capture failed, where one did.
    pub(super) fn failure(&self) -> Option<&str> {
        match self {
            PackReplay::Failed(why) => Some(why),
            _ => None,
        }
    }

    /// One step of the trials `who` (indices in the pack) on their `batches`, replayed or on
    /// its way there: each trial's loss before the update. `None`: run it eagerly.
    pub(super) fn step(
        &mut self,
        who: &[usize],
        steppers: &mut [&mut Stepper],
        batches: &[&Batch],
    ) -> Result<Option<Vec<f64>>> {
        let off = matches!(self, PackReplay::Off | PackReplay::Failed(_));
        // One graph runs one shape: trials whose batches differ this step run eagerly.
        if off || steppers.len() < 2 || super::pack::same_shapes(batches)?.len() != 1 {
            return Ok(None);
        }
        let inputs: Vec<Tensor> = steppers.iter().zip(batches).map(|(s, b)| s.inputs_of(b)).collect::<Result<_>>()?;
        let holds = |buffers: &[Buffers]| {
            buffers.len() == batches.len()
                && buffers.iter().zip(&inputs).zip(batches).all(|((f, x), b)| f.holds(x, &b.targets, &b.scored))
        };
        let fill = |buffers: &[Buffers]| -> Result<()> {
            buffers.iter().zip(&inputs).zip(batches).try_for_each(|((f, x), b)| f.fill(x, &b.targets))
        };
        let losses = |buffers: &[Buffers]| buffers.iter().map(Buffers::loss_value).collect::<Result<Vec<_>>>();
        match std::mem::replace(self, PackReplay::Cold) {
            PackReplay::WarmedUp { who: was, buffers } if was == who && holds(&buffers) => {
                fill(&buffers)?;
                prepare(steppers)?;
                let device = buffers[0].loss.device().clone();
                match capture(&device, "pack step", || device_step(steppers, &buffers)) {
                    Ok(graph) => {
                        graph.launch()?;
                        let values = losses(&buffers)?;
                        *self = PackReplay::Captured { who: who.to_vec(), buffers, graph };
                        Ok(Some(values))
                    }
                    Err(why) => {
                        // Nothing ran during the capture; the step runs now, eagerly.
                        device_step(steppers, &buffers)?;
                        *self = PackReplay::Failed(why.to_string());
                        Ok(Some(losses(&buffers)?))
                    }
                }
            }
            PackReplay::Captured { who: was, buffers, graph } if was == who && holds(&buffers) => {
                fill(&buffers)?;
                prepare(steppers)?;
                graph.launch()?;
                let values = losses(&buffers)?;
                *self = PackReplay::Captured { who: who.to_vec(), buffers, graph };
                Ok(Some(values))
            }
            // The same trials on batches of other shapes: eagerly, the graph kept for later.
            kept @ (PackReplay::WarmedUp { .. } | PackReplay::Captured { .. }) if kept.trials() == Some(who) => {
                *self = kept;
                Ok(None)
            }
            // A new set of trials: warm up on fresh buffers.
            _ => {
                let buffers: Vec<Buffers> = inputs
                    .iter()
                    .zip(batches)
                    .map(|(x, b)| Buffers::new(x, &b.targets, &b.scored))
                    .collect::<Result<_>>()?;
                prepare(steppers)?;
                let device = buffers[0].loss.device().clone();
                with_upload_cache(&device, || device_step(steppers, &buffers))?;
                let values = losses(&buffers)?;
                *self = PackReplay::WarmedUp { who: who.to_vec(), buffers };
                Ok(Some(values))
            }
        }
    }
}

/// Each optimiser's host-side bookkeeping before a step's launches, the pack's own included.
fn prepare(steppers: &mut [&mut Stepper]) -> Result<()> {
    if let Some(update) = super::pack::held_pack_update(steppers) {
        update.prepare()?;
    }
    steppers.iter_mut().try_for_each(|s| s.opt.prepare())
}

/// The pack's forward, each trial's loss into its buffer, one backward of their sum, and the
/// update (the pack's own, or each trial's clipping and update), launching device work only
/// (so that it can be captured).
fn device_step(steppers: &mut [&mut Stepper], buffers: &[Buffers]) -> Result<()> {
    let inputs: Vec<Tensor> = buffers.iter().map(|b| b.inputs.clone()).collect();
    let targets: Vec<&Tensor> = buffers.iter().map(|b| &b.targets).collect();
    let shared: Vec<&Stepper> = steppers.iter().map(|s| &**s).collect();
    let (losses, weights) = super::pack::pack_losses(&shared, &inputs, &targets, &buffers[0].scored)?;
    let values = losses.to_dtype(DType::F32)?;
    for (p, b) in buffers.iter().enumerate() {
        b.loss.slice_set(&values.narrow(0, p, 1)?, 0, 0)?;
    }
    let grads = crate::compile::packed_run::packed_gradients(&weights, &losses.sum_all()?)?;
    if let Some(stacked) = &grads.stacked
        && let Some(update) = super::pack::held_pack_update(steppers)
    {
        return update.update(stacked);
    }
    if let Some(update) = super::pack::held_pack_update(steppers) {
        update.left_to_trials();
    }
    for (s, mut g) in steppers.iter_mut().zip(grads.trials) {
        let clamp = clip::before_update(&mut g, s.config.clip_value, s.config.clip_norm, true)?;
        s.opt.update(&g, clamp)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The replay's model, swept over three seeds and learning rates.
    fn spec() -> String {
        let sweep = "experiment mix { task tiny model mix
          train { optimizer = adam(lr = 1e-2), batch = 16, steps = 6, clip_norm = 0.5 }
          sweep { zip { seed in [1, 2, 3]  lr in [1e-2, 3e-3, 5e-3] } } }";
        format!("{}\n{sweep}", crate::train::graph_step::tests::SPEC)
    }

    /// Four steps of `experiment`'s three trials in `spec`, packed through a replay that starts
    /// cold (stacked first, as `PackSteps::step` does) and alone, each trial's losses asserted
    /// to be those it has stepped alone (within the rounding of clipping by norm on the
    /// device, as a trial's own replay), and each step asserted to update the pack `as_one` or
    /// not: the steppers alone, packed, and the replay.
    fn replayed_against_alone(spec: &str, experiment: &str, as_one: bool) -> (Vec<Stepper>, Vec<Stepper>, PackReplay) {
        let program = crate::check::checked_text(spec);
        let trials = &program.experiments.iter().find(|e| e.name == experiment).unwrap().trials;
        let stepper = |t| Stepper::with(t, &Device::Cpu, DType::F32, Autograd::Candle).unwrap();
        let mut alone: Vec<Stepper> = trials.iter().map(stepper).collect();
        let mut packed: Vec<Stepper> = trials.iter().map(stepper).collect();
        let batches: Vec<Batch> = trials
            .iter()
            .map(|t| {
                let mut data = t.task.data(super::super::data_seed(t.config.seed), &Device::Cpu).unwrap();
                data.train_batch(t.config.train.batch).unwrap()
            })
            .collect();
        let batches: Vec<&Batch> = batches.iter().collect();
        let mut replay = PackReplay::Cold;
        for step in 0..4 {
            let mut members: Vec<&mut Stepper> = packed.iter_mut().collect();
            crate::train::pack::hold_stacked(&mut members, &batches).unwrap();
            let together = match replay.step(&[0, 1, 2], &mut members, &batches).unwrap() {
                Some(values) => values,
                None => crate::train::pack::step_pack(&mut members, &batches).unwrap(),
            };
            assert_eq!(crate::train::pack::updates_as_one(&mut members), as_one, "step {step}");
            for (p, (s, b)) in alone.iter_mut().zip(&batches).enumerate() {
                let lone = s.step(b).unwrap();
                let value = together[p];
                assert!((lone - value).abs() <= 1e-5 * lone.abs(), "trial {p} step {step}: {lone} alone, {value}");
            }
        }
        (alone, packed, replay)
    }

    /// Off a GPU the capture fails, so this runs a pack's warm-up step and the fallback the
    /// way a GPU would, each trial updating on its own (learning rates apart, clipping by
    /// norm).
    #[test]
    fn a_pack_s_warm_up_and_failed_capture_train_each_trial_as_alone() {
        let (_, _, replay) = replayed_against_alone(&spec(), "mix", false);
        assert!(replay.failure().is_some_and(|why| why.contains("without CUDA")), "{:?}", replay.failure());
    }

    /// The same with trials of one update rule: the warm-up and the failed capture update the
    /// pack as one (`train::pack_update`), and each trial computes what it computes alone, its
    /// parameters and optimiser state included.
    #[test]
    fn a_pack_of_one_rule_updates_as_one_in_its_warm_up_and_failed_capture() {
        use crate::train::pack::tests::{assert_same_state, one_rule_spec};
        let (alone, packed, replay) = replayed_against_alone(&one_rule_spec("adam(lr = 1e-3)"), "one_rule", true);
        assert!(replay.failure().is_some_and(|why| why.contains("without CUDA")), "{:?}", replay.failure());
        for (p, (a, b)) in alone.iter().zip(&packed).enumerate() {
            assert_same_state(a, b, &format!("trial {p}")).unwrap();
        }
    }
}
