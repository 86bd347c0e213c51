//! `kanervaRead(R, z, eta)` and `kanervaUpdate(R, V, z, eta)` on the same operands as one op
//! for training (`fusion`, [`Joint::Share`](super::fusion::Joint::Share)): the read's
//! addressing (`w_i = (R_iᵀR_i + λI)⁻¹ R_iᵀ z`, `μ = Σ γ_i R_i w_i`) is the first half of the
//! write, so the fused op addresses once and puts out `[μ, R', V']`. Its backward runs the
//! addressing's backward once too: that backward is linear in `μ̄`, so the read's `μ̄` joins
//! the one the write's `δ = z − μ` sends back. PKM reads and writes every step with the same
//! `R`, `z` and `η` (specs/models/pkm.mem): the addressing is most of both primitives' cost.
//!
//! Inputs: the update's (`R`, `V`, `z`, `η` when given); no parameters.

use std::sync::Arc;

use candle_core::Tensor;

use super::kanerva_read::{self, KanervaReadOp};
use super::kanerva_train::{Locked, address_all};
use super::kanerva_update::{self, KanervaUpdateOp, WriteSaved, write_all, write_backward_all};
use crate::kernels::cpu::{real::Real, view};
use crate::prims::prelude::*;

pub(super) struct KanervaReadUpdate {
    read: KanervaReadOp,
    update: KanervaUpdateOp,
}

/// The fused op, where the two calls address alike (the same `λ`, both with `η` or neither).
pub(in crate::prims) fn build(read: &Args, update: &Args) -> Result<Option<Arc<dyn FusedOp>>, PrimError> {
    let (read, _) = kanerva_read::configure(read)?;
    let (update, _) = kanerva_update::configure(update)?;
    if read.lambda != update.lambda || read.has_eta != update.has_eta {
        return Ok(None);
    }
    Ok(Some(Arc::new(KanervaReadUpdate { read, update })))
}

impl KanervaReadUpdate {
    /// The read's operands among the update's: `R`, `z` and `η` (without `V`).
    fn read_inputs<'a>(inputs: &[&'a Tensor]) -> Vec<&'a Tensor> {
        inputs.iter().enumerate().filter(|&(i, _)| i != 1).map(|(_, t)| *t).collect()
    }
}

impl Op for KanervaReadUpdate {
    fn forward(&self, inputs: &[&Tensor], params: &[&Tensor]) -> candle_core::Result<Vec<Tensor>> {
        let mut outs = self.read.forward(&Self::read_inputs(inputs), params)?;
        outs.extend(self.update.forward(inputs, params)?);
        Ok(outs)
    }

    fn manual(&self) -> Option<&dyn TrainOp> {
        Some(self)
    }
}

impl SlicedBackward for KanervaReadUpdate {
    type Saved = WriteSaved;

    fn forward_typed<T: Real>(&self, inputs: &[&Tensor], _params: &[&Tensor]) -> Forward<WriteSaved> {
        let locked = Locked::new(inputs[0], inputs[2], inputs.get(3).copied())?;
        let o = locked.operands::<T>()?;
        let (mu, address) = address_all(&o, self.update.lambda)?;
        let (written, saved) = write_all(&o, inputs[1], &mu, address)?;
        let mut outs = vec![view::tensor(mu, (o.batch, o.s.c))?];
        outs.extend(written);
        Ok((outs, saved))
    }

    fn backward_typed<T: Real>(&self, bw: &Backward<'_, WriteSaved>, _param_grads: &mut [ParamGrad]) -> InputGrads {
        let ins: Vec<&Tensor> = bw.inputs.iter().collect();
        let locked = Locked::new(ins[0], ins[2], ins.get(3).copied())?;
        let o = locked.operands::<T>()?;
        let g_mu = bw.grads[0].as_ref().map(view::contiguous).transpose()?;
        let g_mu_read = g_mu.as_ref().map(view::Read::new).transpose()?;
        let g_mu_read = g_mu_read.as_ref().map(|r| r.slice::<T>()).transpose()?;
        let (g_rn, g_vn) = (bw.grad_or_zeros(1)?, bw.grad_or_zeros(2)?);
        let grads = write_backward_all(&o, ins[1], bw.saved, &g_rn, &g_vn, g_mu_read)?;
        bw.input_grads([Some(grads.r), Some(grads.v), Some(grads.z), grads.eta])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prims::contract::testing::*;

    /// The fused op's training forward and backward against the two primitives' candle
    /// forms composed under candle's autograd: one machine, two with a noise each, three
    /// sharing one noise.
    #[test]
    fn read_and_update_fused_match_the_two_primitives() {
        // The last case's rows are wider than `kernels::cpu::width::WIDEST_FIXED`.
        let cases: [(usize, usize, usize, Option<usize>); 4] =
            [(1, 3, 2, None), (2, 4, 3, Some(2)), (3, 2, 2, Some(1)), (2, 5, 9, Some(2))];
        for (k, c, m, eta) in cases {
            let mut read = vec![("R", t(&[k, c, m])), ("z", t(&[c]))];
            let mut update = vec![("R", t(&[k, c, m])), ("V", t(&[k, m, m])), ("z", t(&[c]))];
            if let Some(n) = eta {
                read.push(("eta", t(&[n])));
                update.push(("eta", t(&[n])));
            }
            let (read, update) =
                (bind(&kanerva_read::KanervaRead, &read), bind(&kanerva_update::KanervaUpdate, &update));
            let fused = build(&read, &update).unwrap().expect("the same λ and η");
            let mut inputs = vec![vec![k, c, m], vec![k, m, m], vec![c]];
            inputs.extend(eta.map(|n| vec![n]));
            manual_backward_check_op("kanervaRead+kanervaUpdate", &*fused, &inputs, &[]);
        }
    }

    #[test]
    fn calls_that_address_differently_are_not_fused() {
        let read = bind(&kanerva_read::KanervaRead, &[("R", t(&[1, 3, 2])), ("z", t(&[3])), ("lambda", float(0.1))]);
        let update =
            bind(&kanerva_update::KanervaUpdate, &[("R", t(&[1, 3, 2])), ("V", t(&[1, 2, 2])), ("z", t(&[3]))]);
        assert!(build(&read, &update).unwrap().is_none());
    }
}
