//! `kanervaRead(R, z, eta?, lambda = 0.35)`: the queried read of the Product Kanerva Machine
//! (PKM paper Eq. 44–45 / 52–53, Alg. 2); with `k = 1` the (Dynamic) Kanerva Machine's read.
//!
//! Shapes: `R: [k, c, m_i]` (the machines' means, packed as for `kanervaUpdate`), query
//! `z: [c]`, optional `eta: [k]` (or `[1]`) → `μ_z: [c]`.
//! `w_j = (R_jᵀR_j + λI)⁻¹ R_jᵀ z` per machine (the ridge form — see `kanervaUpdate` for why
//! not the DKM code's Gram-matrix form), `γ_j = (1/η_j²) / Σ_l 1/η_l²` (uniform without `eta`),
//! `μ_z = Σ_j γ_j R_j w_j`. The read uses the mean only (no sample of the memory or of `w`),
//! so it needs no `V`. Differentiable through the Cholesky solve. No parameters.

use candle_core::Tensor;

use super::kanerva_train::{AddressSaved, Locked, address_all};
use super::kanerva_update::{address_flops, check_memory};
use crate::kernels::blocks::kanerva::address;
use crate::kernels::cpu::{real::Real, view};
use crate::prims::prelude::*;

primitive! {
    KanervaRead = "kanervaRead",
    "Product Kanerva Machine read μ_z = Σ γ_j R_j w_j, ridge-solved w_j (PKM Eq. 44-45, Alg. 2)",
    args: [tensor("R"), tensor("z"), optional("eta"), float_or("lambda", 0.35)],
    examples: [
        [("R", t(&[1, 3, 2])), ("z", t(&[3]))],
        [("R", t(&[3, 4, 2])), ("z", t(&[4])), ("eta", t(&[3])), ("lambda", float(0.1))],
        // Rows wider than `kernels::cpu::width::WIDEST_FIXED`: the kernels' run-time width.
        [("R", t(&[2, 5, 9])), ("z", t(&[5])), ("eta", t(&[2]))],
    ],
}

pub(super) fn configure(args: &Args) -> Result<(KanervaReadOp, Inferred), PrimError> {
    let (k, c, m, lambda) = check_memory(args)?;
    let op = KanervaReadOp { k, lambda, has_eta: args.is_present("eta") };
    Ok((op, Inferred::new(vec![Ty::Tensor(vec![c])], vec![], address_flops(k, c, m))))
}

pub(super) struct KanervaReadOp {
    k: usize,
    pub(super) lambda: f64,
    pub(super) has_eta: bool,
}

impl Op for KanervaReadOp {
    fn forward(&self, inputs: &[&Tensor], _params: &[&Tensor]) -> candle_core::Result<Vec<Tensor>> {
        let ([r, z], eta) = op::inputs_and_optional("kanervaRead", inputs, self.has_eta)?;
        let batch = r.dim(0)?.max(z.dim(0)?);
        Ok(vec![address(r, z, eta, self.k, batch, self.lambda)?.mu])
    }

    fn manual(&self) -> Option<&dyn TrainOp> {
        Some(self)
    }
}

impl SlicedBackward for KanervaReadOp {
    type Saved = AddressSaved;

    fn forward_typed<T: Real>(&self, inputs: &[&Tensor], _params: &[&Tensor]) -> Forward<AddressSaved> {
        let locked = Locked::new(inputs[0], inputs[1], inputs.get(2).copied())?;
        let o = locked.operands::<T>()?;
        let (mu, saved) = address_all(&o, self.lambda)?;
        Ok((vec![view::tensor(mu, (o.batch, o.s.c))?], saved))
    }

    fn backward_typed<T: Real>(&self, bw: &Backward<'_, AddressSaved>, _param_grads: &mut [ParamGrad]) -> InputGrads {
        let g_mu = bw.grad_or_zeros(0)?;
        let ins: Vec<&Tensor> = bw.inputs.iter().collect();
        let locked = Locked::new(ins[0], ins[1], ins.get(2).copied())?;
        let o = locked.operands::<T>()?;
        let (mut g_r, mut g_z) = (vec![T::zero(); o.r.len()], vec![T::zero(); o.z.len()]);
        let mut g_eta = o.eta.map(|e| vec![T::zero(); e.len()]);
        let g_mu_read = view::Read::new(&g_mu)?;
        bw.saved.backward(&o, g_mu_read.slice::<T>()?, None, &mut g_r, &mut g_z, g_eta.as_deref_mut())?;
        bw.input_grads([Some(g_r), Some(g_z), g_eta])
    }
}

#[cfg(test)]
mod tests {
    use crate::prims::contract::testing::*;

    #[test]
    fn shapes_and_checks() {
        let args = [("R", t(&[5, 50, 6])), ("z", t(&[50])), ("eta", t(&[5]))];
        assert_eq!(out_shapes("kanervaRead", &args), vec![vec![50]]);
        assert_eq!(param_count("kanervaRead", &args), 0);
        assert!(error("kanervaRead", &[("R", t(&[5, 50, 6])), ("z", t(&[6]))]).contains("`z` must have shape [50]"));
    }

    #[test]
    fn identity_memory_reads_the_shrunk_query() {
        // R = I₂: w = z / (1 + λ) and R w = w.
        let out =
            run("kanervaRead", &[("R", t(&[1, 2, 2])), ("z", t(&[2]))], &[vec![1.0, 0.0, 0.0, 1.0], vec![2.7, -1.35]]);
        assert!((out[0] - 2.0).abs() < 1e-12 && (out[1] + 1.0).abs() < 1e-12, "{out:?}");
    }

    #[test]
    fn product_read_is_the_precision_weighted_sum_of_single_machine_reads() {
        let (c, m) = (4, 3);
        let r: Vec<f64> = (0..2 * c * m).map(|i| (i as f64 * 0.91).sin()).collect();
        let z = vec![0.3, -1.2, 0.8, 2.0];
        let single = |i: usize| {
            run(
                "kanervaRead",
                &[("R", t(&[1, c, m])), ("z", t(&[c]))],
                &[r[i * c * m..(i + 1) * c * m].to_vec(), z.clone()],
            )
        };
        let (r0, r1) = (single(0), single(1));
        let args = [("R", t(&[2, c, m])), ("z", t(&[c])), ("eta", t(&[2]))];
        // η = (1, 2): γ = (1, 1/4) / (5/4) = (0.8, 0.2).
        let both = run("kanervaRead", &args, &[r.clone(), z.clone(), vec![1.0, 2.0]]);
        for j in 0..c {
            assert!((both[j] - (0.8 * r0[j] + 0.2 * r1[j])).abs() < 1e-12, "{both:?}");
        }
        // Without `eta`: equal weights.
        let equal = run("kanervaRead", &[("R", t(&[2, c, m])), ("z", t(&[c]))], &[r, z]);
        assert!((0..c).all(|j| (equal[j] - 0.5 * (r0[j] + r1[j])).abs() < 1e-12), "{equal:?}");
    }
}
