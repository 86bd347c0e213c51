//! `R, V = kanervaUpdate(R, V, z, eta?, lambda = 0.35)`: the Bayesian write of the Product
//! Kanerva Machine (PKM paper Eq. 2–4 / 55–57, Alg. 1); with `k = 1` the (Dynamic) Kanerva
//! Machine's write.
//!
//! Shapes: `R: [k, c, m_i]` — the `k` machines' means `R_i` (`c × m_i`, code size `c`, `m_i =
//! m/k` columns), packed along the first axis; `V: [k, m_i, m_i]` — their column covariances;
//! `z: [c]` — the code to write; optional `eta: [k]` (or `[1]`, shared) — the effective
//! observation noise per machine `η_i = σ_i/√r_i` (positive; e.g. `softplus` of the spec's
//! assignment network, as PKM A.1, or a learned scalar). Without `eta`, `η_i = 1` (DKM's fixed
//! observation noise) and the machines are weighted equally. Outputs `R': [k, c, m_i]`,
//! `V': [k, m_i, m_i]`.
//!
//! 1. Addressing, per machine, against the **old** mean: `w_i = (R_iᵀR_i + λI)⁻¹ R_iᵀ z`.
//!    memctl implements this textbook ridge form — the MAP of `w_i` under the prior `N(0, I)`,
//!    and what TF's `matrix_solve_ls(R, z, λ)` (which PKM A.1.2 cites, λ ≈ 0.35) computes when
//!    given `R` itself — not the DKM code's `((RᵀR)² + λI)⁻¹ RᵀR Rᵀ z`, which solves on the Gram
//!    matrix, squares its condition number and agrees with ridge only as λ → 0 (docs/models.md,
//!    PKM). The `m_i × m_i` system goes through the differentiable Cholesky solve
//!    (`kernels::cuda::kanerva::spd_solve`), as in the paper (its O((m/k)³) cost is what k
//!    machines reduce).
//! 2. `γ_i = (1/η_i²) / Σ_j 1/η_j²`, `Δ = z − Σ_i γ_i R_i w_i` (Eq. 2; shared by all machines).
//! 3. `β_i = 1 / (w_iᵀ V_i w_i + η_i²)`, `R_i ← R_i + β_i Δ w_iᵀ V_i`,
//!    `V_i ← V_i − β_i V_i w_i w_iᵀ V_i` (Eq. 3–4), both with the **old** `V_i` as Eq. 3–4 and
//!    the DKM code (Alg. 1 lists the `V` update first). `V_i` is symmetric, so `w_iᵀV_i` is taken
//!    as `(V_i w_i)ᵀ`: the update `u uᵀ` is then exactly symmetric in floating point and `V`
//!    stays symmetric positive definite (its trace never grows).
//!
//! `w_i` is the least-squares mean (no sampling) and is differentiated through, as in DKM.
//! One pass per step. No parameters: priors (`R_0`, `V_0 = ψI`) are the spec's states.

use candle_core::Tensor;

use super::kanerva_train::{AddressSaved, Locked, Operands, address_all};
use crate::kernels::blocks::kanerva::{Address, address, eta_per_machine};
use crate::kernels::cpu::kanerva_manual::{Written, write, write_backward};
use crate::kernels::cpu::{real::Real, view};
use crate::kernels::cuda::kanerva::kanerva_write;
use crate::prims::prelude::*;

/// Checks `R: [k, c, m]`, `z: [c]`, `eta: [k] | [1]` and `lambda > 0`; returns `(k, c, m, λ)`.
pub(crate) fn check_memory(args: &Args) -> Result<(usize, usize, usize, f64), PrimError> {
    let r = args.shape_of_rank("R", 3, "the machines' means [k, c, m/k]")?;
    let (k, c, m) = (r[0], r[1], r[2]);
    let z = args.shape("z")?;
    if z != &vec![c] {
        return Err(PrimError::shape("z", &[c], z, "(one code of the memory's size c)"));
    }
    if args.is_present("eta") {
        let eta = args.shape("eta")?;
        if eta != &vec![k] && eta != &vec![1] {
            return Err(PrimError::shape("eta", &[k], eta, "(one noise per machine)"));
        }
    }
    let lambda = args.float("lambda")?;
    if !(lambda > 0.0 && lambda.is_finite()) {
        return Err(PrimError::new(PrimErrorKind::Positive { what: "regulariser", found: lambda }).on("lambda"));
    }
    Ok((k, c, m, lambda))
}

/// Forward FLOPs of addressing and readout for `k` machines of `c × m`.
pub(crate) fn address_flops(k: usize, c: usize, m: usize) -> u64 {
    (k * (2 * c * m * m + 2 * c * m + m * m * m / 3 + 2 * m * m + 2 * c * m) + 2 * k * c) as u64
}

primitive! {
    KanervaUpdate = "kanervaUpdate",
    "Product Kanerva Machine write: R_i += β_i Δ w_iᵀV_i, V_i -= β_i V_i w_i w_iᵀ V_i (PKM Eq. 2-4)",
    args: [tensor("R"), tensor("V"), tensor("z"), optional("eta"), float_or("lambda", 0.35)],
    outputs: ["R", "V"],
}

fn examples() -> Vec<Example> {
    use crate::signature::example_args::*;
    vec![
        Example::new([("R", t(&[1, 3, 2])), ("V", t(&[1, 2, 2])), ("z", t(&[3]))]),
        Example::new([("R", t(&[2, 3, 2])), ("V", t(&[2, 2, 2])), ("z", t(&[3])), ("eta", t(&[2]))]),
        // A shared noise for every machine.
        Example::new([("R", t(&[3, 2, 2])), ("V", t(&[3, 2, 2])), ("z", t(&[2])), ("eta", t(&[1]))]),
        // Rows wider than `kernels::cpu::width::WIDEST_FIXED`: the kernels' run-time width.
        Example::new([("R", t(&[2, 4, 9])), ("V", t(&[2, 9, 9])), ("z", t(&[4])), ("eta", t(&[2]))]),
    ]
}

pub(super) fn configure(args: &Args) -> Result<(KanervaUpdateOp, Inferred), PrimError> {
    let (k, c, m, lambda) = check_memory(args)?;
    let v = args.shape("V")?;
    if v != &vec![k, m, m] {
        return Err(PrimError::shape("V", &[k, m, m], v, "(one m/k × m/k covariance per machine)"));
    }
    let flops = address_flops(k, c, m) + (k * (4 * m * m + 2 * m + 2 * c * m + 2 * m * m)) as u64;
    let op = KanervaUpdateOp { k, lambda, has_eta: args.is_present("eta") };
    Ok((op, Inferred::new(vec![Ty::Tensor(vec![k, c, m]), Ty::Tensor(vec![k, m, m])], vec![], flops)))
}

pub(super) struct KanervaUpdateOp {
    k: usize,
    pub(super) lambda: f64,
    pub(super) has_eta: bool,
}

impl Op for KanervaUpdateOp {
    fn forward(&self, inputs: &[&Tensor], _params: &[&Tensor]) -> candle_core::Result<Vec<Tensor>> {
        let ([r, v, z], eta) = op::inputs_and_optional("kanervaUpdate", inputs, self.has_eta)?;
        let batch = r.dim(0)?.max(v.dim(0)?).max(z.dim(0)?);
        let (_, k, _, m) = r.dims4()?;
        let v = v.broadcast_as((batch, k, m, m))?.contiguous()?;
        let Address { r, w, mu, .. } = address(r, z, eta, self.k, batch, self.lambda)?;
        let delta = z.broadcast_sub(&mu)?; // [B, c]
        let eta = eta.map(|eta| eta_per_machine(eta, self.k)).transpose()?;
        let (r_next, v_next) = kanerva_write::write(&r, &v, &w, &delta, eta.as_ref())?;
        Ok(vec![r_next, v_next])
    }

    fn manual(&self) -> Option<&dyn TrainOp> {
        Some(self)
    }
}

/// What the write keeps: the addressing, and per batch element `u = V w`, `β` and `δ`.
pub(super) struct WriteSaved {
    address: AddressSaved,
    u: Tensor,
    beta: Tensor,
    delta: Tensor,
}

impl SlicedBackward for KanervaUpdateOp {
    type Saved = WriteSaved;

    fn forward_typed<T: Real>(
        &self,
        inputs: &[&Tensor],
        _params: &[&Tensor],
    ) -> candle_core::Result<(Vec<Tensor>, WriteSaved)> {
        let locked = Locked::new(inputs[0], inputs[2], inputs.get(3).copied())?;
        let o = locked.operands::<T>()?;
        let (mu, address) = address_all(&o, self.lambda)?;
        write_all(&o, inputs[1], &mu, address)
    }

    fn backward_typed<T: Real>(&self, bw: &Backward<'_, WriteSaved>, _param_grads: &mut [ParamGrad]) -> InputGrads {
        let ins: Vec<&Tensor> = bw.inputs.iter().collect();
        let locked = Locked::new(ins[0], ins[2], ins.get(3).copied())?;
        let o = locked.operands::<T>()?;
        let (g_rn, g_vn) = (bw.grad_or_zeros(0)?, bw.grad_or_zeros(1)?);
        let grads = write_backward_all(&o, ins[1], bw.saved, &g_rn, &g_vn, None)?;
        bw.input_grads([Some(grads.r), Some(grads.v), Some(grads.z), grads.eta])
    }
}

/// The write of every batch element from its addressing (`μ` and what [`address_all`] saved),
/// with the covariances `v` (`[B, k, m, m]`): the outputs `[R', V']` and what the backward
/// keeps. `kanervaUpdate`'s forward, and the second half of `kanervaRead` + `kanervaUpdate`
/// fused (`kanerva_read_update`), which addresses once for both.
pub(super) fn write_all<T: Real>(
    o: &Operands<'_, T>,
    v: &Tensor,
    mu: &[T],
    address: AddressSaved,
) -> candle_core::Result<(Vec<Tensor>, WriteSaved)> {
    let vr = view::Read::new(v)?;
    let v_values = vr.slice::<T>()?;
    let w = address.weights::<T>()?;
    let (b, k, c, m) = (o.batch, o.s.k, o.s.c, o.s.m);
    let (mut r_next, mut v_next) = (vec![T::zero(); o.r.len()], vec![T::zero(); v_values.len()]);
    let (mut u, mut beta, mut delta) = (vec![T::zero(); b * k * m], vec![T::zero(); b * k], vec![T::zero(); b * c]);
    for i in 0..b {
        let out =
            Written { u: &mut u[i * k * m..][..k * m], beta: &mut beta[i * k..][..k], delta: &mut delta[i * c..][..c] };
        write(
            o.s,
            o.r_of(i),
            &v_values[i * k * m * m..][..k * m * m],
            o.z_of(i),
            o.eta_of(i),
            &w[i * k * m..][..k * m],
            &mu[i * c..][..c],
            out,
            &mut r_next[i * k * c * m..][..k * c * m],
            &mut v_next[i * k * m * m..][..k * m * m],
        );
    }
    let saved = WriteSaved {
        address,
        u: view::tensor(u, b * k * m)?,
        beta: view::tensor(beta, b * k)?,
        delta: view::tensor(delta, b * c)?,
    };
    Ok((vec![view::tensor(r_next, (b, k, c, m))?, view::tensor(v_next, (b, k, m, m))?], saved))
}

/// The gradients of a write's inputs `R`, `V`, `z` and `η` (when given), flat.
pub(super) struct WriteGrads<T> {
    pub r: Vec<T>,
    pub v: Vec<T>,
    pub z: Vec<T>,
    pub eta: Option<Vec<T>>,
}

/// The backward of [`write_all`] and of its addressing, given `R̄'`, `V̄'` and the gradient of a
/// read of the same addressing's `μ` (`g_mu_read`, `[B, c]`; its backward is folded into the
/// write's, since the addressing's backward is linear in `μ̄`).
pub(super) fn write_backward_all<T: Real>(
    o: &Operands<'_, T>,
    v: &Tensor,
    saved: &WriteSaved,
    g_rn: &Tensor,
    g_vn: &Tensor,
    g_mu_read: Option<&[T]>,
) -> candle_core::Result<WriteGrads<T>> {
    let reads = [v, g_rn, g_vn, &saved.u, &saved.beta, &saved.delta].map(view::Read::new);
    let [vr, grn, gvn, ur, br, dr] = reads;
    let (v, g_rn, g_vn) = (vr?, grn?, gvn?);
    let (v, g_rn, g_vn) = (v.slice::<T>()?, g_rn.slice::<T>()?, g_vn.slice::<T>()?);
    let (ur, br, dr) = (ur?, br?, dr?);
    let (u, beta, delta) = (ur.slice::<T>()?, br.slice::<T>()?, dr.slice::<T>()?);
    let w = saved.address.weights::<T>()?;
    let (b, k, c, m) = (o.batch, o.s.k, o.s.c, o.s.m);
    let (mut g_r, mut g_v, mut g_z) =
        (vec![T::zero(); o.r.len()], vec![T::zero(); v.len()], vec![T::zero(); o.z.len()]);
    let mut g_eta = o.eta.map(|e| vec![T::zero(); e.len()]);
    let eta_len = o.eta.map_or(0, |e| e.len() / b);
    let (mut g_mu, mut g_w) = (vec![T::zero(); b * c], vec![T::zero(); b * k * m]);
    for i in 0..b {
        let written = Written { u: &u[i * k * m..][..k * m], beta: &beta[i * k..][..k], delta: &delta[i * c..][..c] };
        write_backward(
            o.s,
            &v[i * k * m * m..][..k * m * m],
            o.eta_of(i),
            &w[i * k * m..][..k * m],
            &written,
            &g_rn[i * k * c * m..][..k * c * m],
            &g_vn[i * k * m * m..][..k * m * m],
            &mut g_r[i * k * c * m..][..k * c * m],
            &mut g_v[i * k * m * m..][..k * m * m],
            &mut g_z[i * c..][..c],
            g_eta.as_deref_mut().map(|g| &mut g[i * eta_len..][..eta_len]),
            &mut g_mu[i * c..][..c],
            &mut g_w[i * k * m..][..k * m],
        );
    }
    if let Some(read) = g_mu_read {
        g_mu.iter_mut().zip(read).for_each(|(g, &r)| *g += r);
    }
    saved.address.backward(o, &g_mu, Some(&g_w), &mut g_r, &mut g_z, g_eta.as_deref_mut())?;
    Ok(WriteGrads { r: g_r, v: g_v, z: g_z, eta: g_eta })
}

#[cfg(test)]
mod tests {
    use candle_core::{Device, Tensor};
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    use crate::kernels::cpu::cholesky::cholesky;
    use crate::prims::contract::testing::*;

    fn args(k: usize, c: usize, m: usize, eta: bool) -> Vec<(&'static str, TArg)> {
        let mut a = vec![("R", t(&[k, c, m])), ("V", t(&[k, m, m])), ("z", t(&[c]))];
        if eta {
            a.push(("eta", t(&[k])));
        }
        a
    }

    #[test]
    fn shapes_and_checks() {
        assert_eq!(out_shapes("kanervaUpdate", &args(5, 50, 6, true)), vec![vec![5, 50, 6], vec![5, 6, 6]]);
        assert_eq!(param_count("kanervaUpdate", &args(5, 50, 6, true)), 0);
        let bad_v = [("R", t(&[2, 4, 3])), ("V", t(&[2, 3, 4])), ("z", t(&[4]))];
        assert!(error("kanervaUpdate", &bad_v).contains("`V` must have shape [2, 3, 3]"));
        let bad_z = [("R", t(&[2, 4, 3])), ("V", t(&[2, 3, 3])), ("z", t(&[3]))];
        assert!(error("kanervaUpdate", &bad_z).contains("`z` must have shape [4]"));
        let mut bad_eta = args(2, 4, 3, false);
        bad_eta.push(("eta", t(&[3])));
        assert!(error("kanervaUpdate", &bad_eta).contains("`eta` must have shape [2]"));
        let mut bad_lambda = args(2, 4, 3, false);
        bad_lambda.push(("lambda", float(0.0)));
        assert!(error("kanervaUpdate", &bad_lambda).contains("positive"));
        assert!(
            error("kanervaUpdate", &[("R", t(&[4, 3])), ("V", t(&[3, 3])), ("z", t(&[4]))]).contains("3 dimensions")
        );
    }

    /// The single-machine write (DKM / PKM with k = 1) for c = 3, m = 2, in plain scalars.
    #[test]
    fn single_machine_update_matches_the_formula_by_hand() {
        let r = [[1.0, 2.0], [0.0, 1.0], [1.0, 0.0]]; // c × m
        let v = [[1.0, 0.5], [0.5, 2.0]];
        let z = [1.0, -1.0, 2.0];
        let (eta, lambda) = (0.7, 0.35);
        // A = RᵀR + λI = [[2.35, 2], [2, 5.35]], Rᵀz = [3, 1], w = A⁻¹ Rᵀz.
        let a = [[2.0 + lambda, 2.0], [2.0, 5.0 + lambda]];
        let det = a[0][0] * a[1][1] - a[0][1] * a[1][0];
        let w = [(a[1][1] * 3.0 - a[0][1] * 1.0) / det, (a[0][0] * 1.0 - a[1][0] * 3.0) / det];
        let rw: Vec<f64> = (0..3).map(|i| r[i][0] * w[0] + r[i][1] * w[1]).collect();
        let delta: Vec<f64> = (0..3).map(|i| z[i] - rw[i]).collect();
        let vw = [v[0][0] * w[0] + v[0][1] * w[1], v[1][0] * w[0] + v[1][1] * w[1]];
        let beta = 1.0 / (w[0] * vw[0] + w[1] * vw[1] + eta * eta);
        let r_next: Vec<f64> =
            (0..3).flat_map(|i| (0..2).map(move |j| (i, j))).map(|(i, j)| r[i][j] + beta * delta[i] * vw[j]).collect();
        let v_next: Vec<f64> =
            (0..2).flat_map(|i| (0..2).map(move |j| (i, j))).map(|(i, j)| v[i][j] - beta * vw[i] * vw[j]).collect();

        let data = vec![r.concat(), v.concat(), z.to_vec(), vec![eta]];
        let out = run_all("kanervaUpdate", &args(1, 3, 2, true), &data);
        for (got, want) in out[0].iter().zip(&r_next).chain(out[1].iter().zip(&v_next)) {
            assert!((got - want).abs() < 1e-12, "{out:?} vs {r_next:?} {v_next:?}");
        }
        // Without `eta` the noise is 1.
        let out = run_all("kanervaUpdate", &args(1, 3, 2, false), &data[..3]);
        let beta1 = 1.0 / (w[0] * vw[0] + w[1] * vw[1] + 1.0);
        assert!((out[1][1] - (v[0][1] - beta1 * vw[0] * vw[1])).abs() < 1e-12);
    }

    fn normal(rng: &mut ChaCha8Rng, n: usize) -> Vec<f64> {
        (0..n).map(|_| rng.sample::<f64, _>(rand_distr::StandardNormal)).collect()
    }

    /// `k` symmetric positive definite `m × m` matrices: `(S + Sᵀ)/2` shifted by `m`.
    fn spd(rng: &mut ChaCha8Rng, k: usize, m: usize) -> Vec<f64> {
        let s = normal(rng, k * m * m);
        (0..k * m * m)
            .map(|idx| {
                let (b, i, j) = (idx / (m * m), idx / m % m, idx % m);
                let sym = 0.5 * (s[b * m * m + i * m + j] + s[b * m * m + j * m + i]);
                sym * 0.3 + if i == j { 1.0 } else { 0.0 }
            })
            .collect()
    }

    fn read_error(k: usize, c: usize, m: usize, r: &[f64], z: &[f64], eta: &[f64]) -> f64 {
        let args = [("R", t(&[k, c, m])), ("z", t(&[c])), ("eta", t(&[k]))];
        let out = run("kanervaRead", &args, &[r.to_vec(), z.to_vec(), eta.to_vec()]);
        out.iter().zip(z).map(|(a, b)| (a - b).powi(2)).sum()
    }

    #[test]
    fn writing_z_makes_reading_z_reconstruct_it_better() {
        let mut rng = ChaCha8Rng::seed_from_u64(5);
        for (k, c, m) in [(1, 8, 4), (3, 8, 2), (2, 5, 6)] {
            for _ in 0..3 {
                let r = normal(&mut rng, k * c * m);
                let v = spd(&mut rng, k, m);
                let z = normal(&mut rng, c);
                let eta: Vec<f64> = (0..k).map(|_| rng.random_range(0.2..1.0)).collect();
                let before = read_error(k, c, m, &r, &z, &eta);
                let out = run_all("kanervaUpdate", &args(k, c, m, true), &[r, v, z.clone(), eta.clone()]);
                let after = read_error(k, c, m, &out[0], &z, &eta);
                assert!(after < 0.8 * before, "k = {k}: error {before} before the write, {after} after");
            }
        }
    }

    #[test]
    fn covariances_stay_symmetric_positive_definite_and_their_traces_do_not_grow() {
        let (k, c, m) = (3, 5, 4);
        let mut rng = ChaCha8Rng::seed_from_u64(9);
        let mut r = normal(&mut rng, k * c * m);
        let mut v = spd(&mut rng, k, m);
        let eta = vec![0.3, 0.6, 1.2];
        let trace = |v: &[f64], i: usize| (0..m).map(|j| v[i * m * m + j * m + j]).sum::<f64>();
        for step in 0..20 {
            let z = normal(&mut rng, c);
            let out = run_all("kanervaUpdate", &args(k, c, m, true), &[r, v.clone(), z, eta.clone()]);
            for i in 0..k {
                let vi = &out[1][i * m * m..(i + 1) * m * m];
                for a in 0..m {
                    for b in 0..m {
                        assert_eq!(vi[a * m + b], vi[b * m + a], "step {step}: V_{i} is not symmetric");
                    }
                }
                assert!(cholesky(vi, m).is_some(), "step {step}: V_{i} is not positive definite: {vi:?}");
                assert!(trace(&out[1], i) <= trace(&v, i), "step {step}: trace of V_{i} grew");
            }
            r = out[0].clone();
            v = out[1].clone();
        }
        // Twenty writes into 4 columns shrink the uncertainty substantially.
        assert!((0..k).all(|i| trace(&v, i) < 0.5 * m as f64), "{v:?}");
    }

    #[test]
    fn runs_on_f32() {
        let dev = Device::Cpu;
        let inst = instance("kanervaUpdate", &args(2, 4, 3, false)).unwrap();
        let r = Tensor::randn(0f32, 1.0, (5, 2, 4, 3), &dev).unwrap();
        let v = Tensor::eye(3, candle_core::DType::F32, &dev).unwrap().broadcast_as((5, 2, 3, 3)).unwrap();
        let z = Tensor::randn(0f32, 1.0, (5, 4), &dev).unwrap();
        let out = inst.op.forward(&[&r, &v, &z], &[]).unwrap();
        assert_eq!(out[0].dims(), &[5, 2, 4, 3]);
        assert_eq!(out[1].dims(), &[5, 2, 3, 3]);
    }
}
