//! A pack's update as one optimiser over its stacked parameters: where every trial of a pack
//! that holds its parameters stacked (`compile::stacked_params`) updates by the same rule (the
//! optimiser and its settings, the clamp of `clip_value`, no `clip_norm`, the same update
//! count), one update of each `[P, …]` stack does what each trial's own update of its row
//! would: on a GPU one fused kernel a parameter for the whole pack, where the trials' own
//! updates launch one a parameter and trial. Every operation of the rules is element by
//! element, so each row is updated exactly as alone.
//!
//! The trials' optimiser state is stacked beside the parameters and each trial's own state
//! made views of its rows; the optimisers write their state in place (`optim::keep`), so
//! whichever updates a step (the pack's, or each trial's where a step cannot go as one), every
//! trial's parameters and state stay its own rows, for its checkpoints and for when it leaves.

use std::sync::Arc;

use candle_core::{Result, Tensor, Var};

use super::Stepper;
use super::optim::{self, OptimState, Optimizer};
use crate::compile::stacked_params::StackedParams;
use crate::train_config::TrainConfig;

/// The optimiser of a pack's stacks, held by the pack's first trial.
pub(super) struct PackUpdate {
    opt: Box<dyn Optimizer>,
    clamp: Option<f64>,
    /// The stacks it updates: it serves the pack while the trials hold these.
    stacks: Arc<StackedParams>,
    /// Whether it made the last step's update (else each trial made its own: a step whose
    /// gradients do not come stacked). A replayed step repeats the step it was captured from.
    made_last: bool,
}

impl PackUpdate {
    /// The optimiser over `stacks` (which the cells of `steppers` hold, in order), its state
    /// each trial's stacked and each trial's own state made views of its row; `None` where
    /// the trials do not all update by one rule.
    pub(super) fn hold(steppers: &mut [&mut Stepper], stacks: &Arc<StackedParams>) -> Result<Option<PackUpdate>> {
        let Some(first) = steppers.first() else { return Ok(None) };
        let config = first.config.clone();
        if config.clip_norm.is_some() || steppers.iter().any(|s| !same_rule(&s.config, &config)) {
            return Ok(None);
        }
        let states: Vec<OptimState> = steppers.iter().map(|s| s.opt.state()).collect();
        let Some(stacked) = stacked_state(&states)? else { return Ok(None) };
        for (row, s) in steppers.iter_mut().enumerate() {
            let rows =
                stacked.buffers.iter().map(|kind| kind.iter().map(|b| b.as_ref().map(|t| t.get(row)).transpose()));
            let buffers = rows.map(|kind| kind.collect::<Result<_>>()).collect::<Result<_>>()?;
            s.opt.restore(OptimState { updates: stacked.updates, buffers })?;
        }
        let vars = (0..stacks.params())
            .map(|k| match stacks.stack(k) {
                Some(t) => Var::from_tensor(t),
                None => candle_core::bail!("internal: parameter {k} of {} stacked", stacks.params()),
            })
            .collect::<Result<_>>()?;
        let mut opt = optim::build(&config, vars)?;
        opt.restore(stacked)?;
        Ok(Some(PackUpdate { opt, clamp: config.clip_value, stacks: Arc::clone(stacks), made_last: false }))
    }

    /// Whether it updates `stacks`.
    pub(super) fn serves(&self, stacks: &Arc<StackedParams>) -> bool {
        Arc::ptr_eq(&self.stacks, stacks)
    }

    /// Host-side work before each of the pack's updates, by it or by the trials' own (its
    /// update count stays theirs).
    pub(super) fn prepare(&mut self) -> Result<()> {
        self.opt.prepare()
    }

    /// The update of every stack from its gradient over the pack (`None`: no update).
    pub(super) fn update(&mut self, grads: &[Option<Tensor>]) -> Result<()> {
        self.made_last = true;
        self.opt.update(grads, self.clamp)
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
