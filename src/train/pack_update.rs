//! A pack's update as one optimiser over its stacked parameters: where the trials of a pack
//! that holds its parameters stacked (`compile::stacked_params`) update by the same rule (the
//! optimiser and its settings, the clamp of `clip_value`, no `clip_norm`, the same update
//! count), one update of each `[P, …]` stack does what each trial's own update of its row
//! would: on a GPU one fused kernel a parameter for the whole pack, where the trials' own
//! updates launch one a parameter and trial. Neighbouring trials of one rule form a run, which
//! one optimiser updates over its rows (a sweep over learning rates and seeds, the seeds
//! innermost: a launch a parameter and learning rate). Every operation of the rules is element
//! by element, so each row is updated exactly as alone.
//!
//! The trials' optimiser state is stacked beside the parameters and each trial's own state
//! made views of its rows; the optimisers write their state in place (`optim::keep`), so
//! whichever updates a step (the pack's, or each trial's where a step cannot go as one), every
//! trial's parameters and state stay its own rows, for its checkpoints and for when it leaves.

use std::ops::Range;
use std::sync::Arc;

use candle_core::{Result, Tensor, Var};

use super::Stepper;
use super::optim::{self, OptimState, Optimizer};
use crate::compile::stacked_params::StackedParams;
use crate::train_config::TrainConfig;

/// The optimisers of a pack's stacks, held by the pack's first trial: one for each run of
/// neighbouring trials that update by one rule, over the run's rows of every stack.
pub(super) struct PackUpdate {
    runs: Vec<RunUpdate>,
    /// The stacks it updates: it serves the pack while the trials hold these.
    stacks: Arc<StackedParams>,
    /// Whether it made the last step's update (else each trial made its own: a step whose
    /// gradients do not come stacked). A replayed step repeats the step it was captured from.
    made_last: bool,
}

/// The optimiser of the rows `rows` of a pack's stacks.
struct RunUpdate {
    rows: Range<usize>,
    opt: Box<dyn Optimizer>,
    clamp: Option<f64>,
}

impl PackUpdate {
    /// The optimisers over `stacks` (which the cells of `steppers` hold, in order), one for
    /// each run of neighbouring trials of one rule (a sweep over learning rates and seeds, the
    /// seeds innermost, has a run per learning rate), their state the trials' stacked and each
    /// trial's own state made views of its row; `None` where a trial clips by norm (a norm per
    /// trial), its run's trials have made different numbers of updates, or every run is one
    /// trial.
    pub(super) fn hold(steppers: &mut [&mut Stepper], stacks: &Arc<StackedParams>) -> Result<Option<PackUpdate>> {
        if steppers.iter().any(|s| s.config.clip_norm.is_some()) {
            return Ok(None);
        }
        let mut bounds = vec![0];
        bounds.extend((1..steppers.len()).filter(|&p| !same_rule(&steppers[p - 1].config, &steppers[p].config)));
        bounds.push(steppers.len());
        if bounds.len() > steppers.len() {
            return Ok(None);
        }
        let mut runs = Vec::with_capacity(bounds.len() - 1);
        for rows in bounds.windows(2).map(|w| w[0]..w[1]) {
            let states: Vec<OptimState> = steppers[rows.clone()].iter().map(|s| s.opt.state()).collect();
            let Some(stacked) = stacked_state(&states)? else { return Ok(None) };
            runs.push((rows, stacked));
        }
        let mut updates = Vec::with_capacity(runs.len());
        for (rows, stacked) in runs {
            for (row, s) in steppers[rows.clone()].iter_mut().enumerate() {
                let own =
                    stacked.buffers.iter().map(|kind| kind.iter().map(|b| b.as_ref().map(|t| t.get(row)).transpose()));
                let buffers = own.map(|kind| kind.collect::<Result<_>>()).collect::<Result<_>>()?;
                s.opt.restore(OptimState { updates: stacked.updates, buffers })?;
            }
            let vars = (0..stacks.params())
                .map(|k| match stacks.stack(k) {
                    // The run's rows: a view that the optimiser writes in place.
                    Some(t) => Var::from_tensor(&t.narrow(0, rows.start, rows.len())?.share_as_var()),
                    None => candle_core::bail!("internal: parameter {k} of {} stacked", stacks.params()),
                })
                .collect::<Result<_>>()?;
            let config = &steppers[rows.start].config;
            let mut opt = optim::build(config, vars)?;
            opt.restore(stacked)?;
            updates.push(RunUpdate { rows, opt, clamp: config.clip_value });
        }
        Ok(Some(PackUpdate { runs: updates, stacks: Arc::clone(stacks), made_last: false }))
    }

    /// Whether it updates `stacks`.
    pub(super) fn serves(&self, stacks: &Arc<StackedParams>) -> bool {
        Arc::ptr_eq(&self.stacks, stacks)
    }

    /// Host-side work before each of the pack's updates, by it or by the trials' own (its
    /// update count stays theirs).
    pub(super) fn prepare(&mut self) -> Result<()> {
        self.runs.iter_mut().try_for_each(|run| run.opt.prepare())
    }

    /// The update of every stack from its gradient over the pack (`None`: no update).
    pub(super) fn update(&mut self, grads: &[Option<Tensor>]) -> Result<()> {
        self.made_last = true;
        for run in &mut self.runs {
            let rows = |g: &Tensor| g.narrow(0, run.rows.start, run.rows.len());
            let own: Vec<Option<Tensor>> =
                grads.iter().map(|g| g.as_ref().map(rows).transpose()).collect::<Result<_>>()?;
            run.opt.update(&own, run.clamp)?;
        }
        Ok(())
    }

    /// Notes that each trial made this step's update on its own.
    pub(super) fn left_to_trials(&mut self) {
        self.made_last = false;
    }

    /// Whether it made the last step's update.
    pub(super) fn made_last(&self) -> bool {
        self.made_last
    }
}

/// Whether two trials update by the same rule: the optimiser, its settings and the clipping.
fn same_rule(a: &TrainConfig, b: &TrainConfig) -> bool {
    let rule = |c: &TrainConfig| {
        (c.optimizer, [c.lr, c.momentum, c.alpha, c.beta1, c.beta2, c.eps, c.weight_decay], c.clip_value, c.clip_norm)
    };
    rule(a) == rule(b)
}

/// The trials' optimiser `states` stacked buffer by buffer (`[P, …]`), where they have made
/// the same number of updates and each buffer exists in all or none of them; `None` else.
fn stacked_state(states: &[OptimState]) -> Result<Option<OptimState>> {
    let Some(first) = states.first() else { return Ok(None) };
    if states.iter().any(|s| s.updates != first.updates || s.buffers.len() != first.buffers.len()) {
        return Ok(None);
    }
    let mut buffers = Vec::with_capacity(first.buffers.len());
    for kind in 0..first.buffers.len() {
        let params = first.buffers[kind].len();
        let mut stacked = Vec::with_capacity(params);
        for k in 0..params {
            let rows: Option<Vec<&Tensor>> = states.iter().map(|s| s.buffers[kind].get(k)?.as_ref()).collect();
            let absent = states.iter().all(|s| s.buffers[kind].get(k).is_some_and(Option::is_none));
            stacked.push(match (rows, absent) {
                (Some(rows), _) => Some(Tensor::stack(&rows, 0)?),
                (None, true) => None,
                (None, false) => return Ok(None),
            });
        }
        buffers.push(stacked);
    }
    Ok(Some(OptimState { updates: first.updates, buffers }))
}
