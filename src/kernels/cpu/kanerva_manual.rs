//! The Kanerva Machine's read and write on plain slices, forward and backward, one batch
//! element at a time: the fused training path of `kanervaRead` and `kanervaUpdate` (the same
//! formulas as `kernels::blocks::kanerva`, which candle differentiates; the registry's gradient checks
//! compare the two).
//!
//! Per machine `i` (mean `R_i: c × m`, covariance `V_i: m × m`, query or code `z: c`):
//! ```text
//!   G_i = R_iᵀR_i + λI = L_i L_iᵀ      w_i = G_i⁻¹ R_iᵀ z      p_i = R_i w_i
//!   γ_i = η_i⁻² / Σ_j η_j⁻²             μ = Σ_i γ_i p_i                              (read)
//!   δ = z − μ    u_i = V_i w_i    β_i = 1 / (w_iᵀu_i + η_i²)
//!   R_i' = R_i + β_i δ u_iᵀ             V_i' = V_i − β_i u_i u_iᵀ                    (write)
//! ```
//! Backward of the addressing, given `ḡ_p` (into `p_i`) and `ḡ_w` (into `w_i` by other paths):
//! with `a = G_i⁻¹ (R_iᵀ ḡ_p + ḡ_w)`, `R̄_i += (ḡ_p − R_i a) w_iᵀ + (z − p_i) aᵀ` and
//! `z̄ += R_i a` (the `G_i` term `−R_i (a w_iᵀ + w_i aᵀ)` folded with the `R_iᵀz` term).
//! The Cholesky factor is kept from the forward, so the backward solves without factorising.

use candle_core::{Result, bail};

use super::cholesky::{cholesky_into, cholesky_solve_in_place};
use super::gemm::{Mat, Par, matmul_new};
use super::real::Real;
use super::reduce::dot;
use super::width::{WIDEST_FIXED, Width, by_width};

/// The sizes: `k` machines, each `c × m`.
#[derive(Clone, Copy, Debug)]
pub struct Machines {
    pub k: usize,
    pub c: usize,
    pub m: usize,
}

/// What addressing one batch element keeps, per machine: the weights `w` (`k × m`), the
/// Cholesky factors of `G` (`k × m × m`, f64), the readouts `p = R w` (`k × c`) and the
/// machine weights `γ` (`k`): mutable slices (`AddressedMut`) for the forward to fill, shared
/// ones (`AddressedRef`) for the backward to read.
pub struct Addressed<S, F> {
    pub w: S,
    pub chol: F,
    pub p: S,
    pub gamma: S,
}
pub type AddressedMut<'a, T> = Addressed<&'a mut [T], &'a mut [f64]>;
pub type AddressedRef<'a, T> = Addressed<&'a [T], &'a [f64]>;

/// The effective noise of machine `i` from `η` (`k` values, one shared value, or none: 1).
pub fn noise<T: Real>(eta: Option<&[T]>, i: usize) -> T {
    match eta {
        Some(e) if e.len() == 1 => e[0],
        Some(e) => e[i],
        None => T::one(),
    }
}

/// Addresses every machine with `z` against the means `r` (`k × c × m`) and returns nothing
/// but fills `out`; fails if a `G_i` is not positive definite (only with non-finite means).
pub fn address<T: Real>(
    s: Machines,
    r: &[T],
    z: &[T],
    eta: Option<&[T]>,
    lambda: f64,
    out: AddressedMut<'_, T>,
) -> Result<()> {
    // Compiled once per width (`kernels::cpu::width`): narrow rows unroll.
    by_width!(s.m, width => {
        let (Machines { k, c, .. }, m) = (s, width.get());
        let (mut rhs, mut g) = (vec![0.0f64; m], vec![0.0f64; m * m]);
        for i in 0..k {
            let ri = &r[i * c * m..][..c * m];
            gram(ri, c, width, lambda, &mut g);
            let chol = &mut out.chol[i * m * m..][..m * m];
            if !cholesky_into(&g, m, chol) {
                bail!("kanerva addressing: RᵀR + λI of machine {i} is not positive definite (non-finite memory?)");
            }
            rhs.fill(0.0);
            for (row, zr) in ri.chunks_exact(m).zip(z) {
                let zr = zr.to_f64();
                rhs.iter_mut().zip(row).for_each(|(s, v)| *s += v.to_f64() * zr);
            }
            cholesky_solve_in_place(chol, m, &mut rhs, 1);
            let w = &mut out.w[i * m..][..m];
            w.iter_mut().zip(&rhs).for_each(|(w, v)| *w = T::from_f64(*v));
            let p = &mut out.p[i * c..][..c];
            mat_vec(width, ri, w, p);
        }
        machine_weights(eta, k, out.gamma);
        Ok(())
    })
}

/// `G = RᵀR + λI` of one machine (`r: c × m`) into `g` (`m × m`, f64), its lower triangle
/// at least: what the Cholesky factorisation reads.
fn gram<T: Real, W: Width>(r: &[T], c: usize, width: W, lambda: f64, g: &mut [f64]) {
    let m = width.get();
    if W::FIXED {
        // Narrow rows: a few multiply-adds per row, in registers; a product's call would
        // cost more than its arithmetic.
        let mut acc = [0.0f64; WIDEST_FIXED * WIDEST_FIXED];
        for row in r.chunks_exact(m) {
            for a in 0..m {
                let ra = row[a].to_f64();
                for b in 0..=a {
                    acc[a * m + b] += ra * row[b].to_f64();
                }
            }
        }
        g[..m * m].copy_from_slice(&acc[..m * m]);
    } else {
        let product = matmul_new(Mat::new(r, c, m).t(), Mat::new(r, c, m), Par::Seq);
        g.iter_mut().zip(&product).for_each(|(g, v)| *g = v.to_f64());
    }
    (0..m).for_each(|a| g[a * m + a] += lambda);
}

/// `γ_i = η_i⁻² / Σ_j η_j⁻²` (`1/k` each without `η`).
fn machine_weights<T: Real>(eta: Option<&[T]>, k: usize, gamma: &mut [T]) {
    for (i, g) in gamma.iter_mut().enumerate() {
        let e = noise(eta, i);
        *g = T::one() / (e * e);
    }
    let total = gamma.iter().fold(T::zero(), |a, &g| a + g);
    gamma.iter_mut().for_each(|g| *g /= total);
    debug_assert_eq!(gamma.len(), k);
}

/// `μ = Σ_i γ_i p_i`.
pub fn mix<T: Real>(p: &[T], gamma: &[T], mu: &mut [T]) {
    let c = mu.len();
    mu.fill(T::zero());
    for (pi, &g) in p.chunks_exact(c).zip(gamma) {
        mu.iter_mut().zip(pi).for_each(|(o, &v)| *o += g * v);
    }
}

/// The backward of [`mix`] and [`address`] for one batch element: given `μ̄` (`g_mu`) and the
/// gradients that reach each `w_i` by other paths (`g_w_extra`, `k × m`, or none), adds into
/// `R̄` (`g_r`, `k × c × m`), `z̄` (`g_z`) and `η̄` (`g_eta`, when `η` was given).
#[allow(clippy::too_many_arguments)]
pub fn address_backward<T: Real>(
    s: Machines,
    r: &[T],
    z: &[T],
    eta: Option<&[T]>,
    saved: &AddressedRef<'_, T>,
    g_mu: &[T],
    g_w_extra: Option<&[T]>,
    g_r: &mut [T],
    g_z: &mut [T],
    g_eta: Option<&mut [T]>,
) {
    // Compiled once per width (`kernels::cpu::width`): narrow rows unroll.
    by_width!(s.m, width => {
        let (Machines { k, c, .. }, m) = (s, width.get());
        let (mut g_p, mut a, mut ra) = (vec![T::zero(); c], vec![0.0f64; m], vec![T::zero(); c]);
        let mut a_t = vec![T::zero(); m];
        let mut g_gamma = vec![T::zero(); k];
        for i in 0..k {
            let (ri, pi, wi) = (&r[i * c * m..][..c * m], &saved.p[i * c..][..c], &saved.w[i * m..][..m]);
            let gamma = saved.gamma[i];
            g_gamma[i] = dot(g_mu, pi);
            g_p.iter_mut().zip(g_mu).for_each(|(gp, &gm)| *gp = gamma * gm);
            // a = G⁻¹ (Rᵀ ḡ_p + ḡ_w)
            a.fill(0.0);
            for (row, &gp) in ri.chunks_exact(m).zip(&g_p) {
                let gp = gp.to_f64();
                a.iter_mut().zip(row).for_each(|(s, v)| *s += v.to_f64() * gp);
            }
            if let Some(extra) = g_w_extra {
                a.iter_mut().zip(&extra[i * m..][..m]).for_each(|(s, v)| *s += v.to_f64());
            }
            cholesky_solve_in_place(&saved.chol[i * m * m..][..m * m], m, &mut a, 1);
            a_t.iter_mut().zip(&a).for_each(|(t, &v)| *t = T::from_f64(v));
            mat_vec(width, ri, &a_t, &mut ra);
            let gri = &mut g_r[i * c * m..][..c * m];
            for (row_idx, row) in gri.chunks_exact_mut(m).enumerate() {
                let (left, right) = (g_p[row_idx] - ra[row_idx], z[row_idx] - pi[row_idx]);
                for ((g, &wv), &av) in row.iter_mut().zip(wi).zip(&a_t) {
                    *g += left * wv + right * av;
                }
            }
            g_z.iter_mut().zip(&ra).for_each(|(g, &v)| *g += v);
        }
        if let (Some(eta), Some(g_eta)) = (eta, g_eta) {
            machine_weights_backward(eta, saved.gamma, &g_gamma, g_eta);
        }
    })
}

/// Adds `η̄` from `γ̄`: with `π_i = η_i⁻²` and `S = Σ π`, `π̄_i = (γ̄_i − Σ_j γ̄_j γ_j) / S` and
/// `η̄_i = −2 π̄_i / η_i³` (summed into one value when `η` is shared).
fn machine_weights_backward<T: Real>(eta: &[T], gamma: &[T], g_gamma: &[T], g_eta: &mut [T]) {
    let total = (0..gamma.len()).fold(T::zero(), |a, i| {
        let e = noise(Some(eta), i);
        a + T::one() / (e * e)
    });
    let mean = dot(g_gamma, gamma);
    for (i, &g_gamma) in g_gamma.iter().enumerate() {
        let e = noise(Some(eta), i);
        let g_pi = (g_gamma - mean) / total;
        let slot = if eta.len() == 1 { 0 } else { i };
        g_eta[slot] += -T::from_f64(2.0) * g_pi / (e * e * e);
    }
}

/// What a write keeps beyond the addressing, per machine: `u = V w` (`k × m`), `β` (`k`); and
/// the shared `δ = z − μ` (`c`).
pub struct Written<S> {
    pub u: S,
    pub beta: S,
    pub delta: S,
}

/// The write of one batch element, after [`address`] and [`mix`] (`mu`): fills `out` and the
/// new means and covariances `r_next`, `v_next`.
#[allow(clippy::too_many_arguments)]
pub fn write<T: Real>(
    s: Machines,
    r: &[T],
    v: &[T],
    z: &[T],
    eta: Option<&[T]>,
    w: &[T],
    mu: &[T],
    out: Written<&mut [T]>,
    r_next: &mut [T],
    v_next: &mut [T],
) {
    // Compiled once per width (`kernels::cpu::width`): narrow rows unroll.
    by_width!(s.m, width => {
        let (Machines { k, c, .. }, m) = (s, width.get());
        out.delta.iter_mut().zip(z.iter().zip(mu)).for_each(|(d, (&zv, &mv))| *d = zv - mv);
        for i in 0..k {
            let (vi, wi) = (&v[i * m * m..][..m * m], &w[i * m..][..m]);
            let ui = &mut out.u[i * m..][..m];
            mat_vec(width, vi, wi, ui);
            let e = noise(eta, i);
            let beta = T::one() / (dot(wi, ui) + e * e);
            out.beta[i] = beta;
            let (ri, rn) = (&r[i * c * m..][..c * m], &mut r_next[i * c * m..][..c * m]);
            for ((rn_row, r_row), &d) in rn.chunks_exact_mut(m).zip(ri.chunks_exact(m)).zip(out.delta.iter()) {
                for ((o, &rv), &uv) in rn_row.iter_mut().zip(r_row).zip(ui.iter()) {
                    *o = rv + d * (uv * beta);
                }
            }
            let vn = &mut v_next[i * m * m..][..m * m];
            for ((vn_row, v_row), &ua) in vn.chunks_exact_mut(m).zip(vi.chunks_exact(m)).zip(ui.iter()) {
                for ((o, &vv), &ub) in vn_row.iter_mut().zip(v_row).zip(ui.iter()) {
                    *o = vv - ua * ub * beta; // (u uᵀ) β: exactly symmetric
                }
            }
        }
    })
}

/// The backward of [`write`] up to the addressing, for one batch element: given `R̄'`, `V̄'`
/// (`g_rn`, `g_vn`), adds `R̄'` into `R̄` and `V̄'` plus the `u = V w` term into `V̄`, the `δ` term
/// into `z̄`, the noise term into `η̄`; returns `μ̄` (`g_mu`, which is `−δ̄`) and fills the
/// gradients reaching each `w_i` (`g_w`), for [`address_backward`].
#[allow(clippy::too_many_arguments)]
pub fn write_backward<T: Real>(
    s: Machines,
    v: &[T],
    eta: Option<&[T]>,
    w: &[T],
    saved: &Written<&[T]>,
    g_rn: &[T],
    g_vn: &[T],
    g_r: &mut [T],
    g_v: &mut [T],
    g_z: &mut [T],
    g_eta: Option<&mut [T]>,
    g_mu: &mut [T],
    g_w: &mut [T],
) {
    // Compiled once per width (`kernels::cpu::width`): narrow rows unroll.
    by_width!(s.m, width => {
        let (Machines { k, c, .. }, m) = (s, width.get());
        let mut g_delta = vec![T::zero(); c];
        let (mut gu, mut grn_u, mut gvn_u) = (vec![T::zero(); m], vec![T::zero(); c], vec![T::zero(); m]);
        let mut g_eta = g_eta;
        let delta = saved.delta;
        for i in 0..k {
            let (vi, wi, ui, beta) = (&v[i * m * m..][..m * m], &w[i * m..][..m], &saved.u[i * m..][..m], saved.beta[i]);
            let (grn, gvn) = (&g_rn[i * c * m..][..c * m], &g_vn[i * m * m..][..m * m]);
            g_r[i * c * m..][..c * m].iter_mut().zip(grn).for_each(|(g, &v)| *g += v);
            let gvi = &mut g_v[i * m * m..][..m * m];
            gvi.iter_mut().zip(gvn).for_each(|(g, &v)| *g += v);
            // R' = R + β δ uᵀ: δ̄ += β R̄' u, ū = β R̄'ᵀ δ, β̄ = δᵀ R̄' u.
            mat_vec(width, grn, ui, &mut grn_u);
            g_delta.iter_mut().zip(&grn_u).for_each(|(g, &v)| *g += beta * v);
            mat_t_vec(width, grn, delta, &mut gu);
            gu.iter_mut().for_each(|g| *g *= beta);
            let mut g_beta = dot(delta, &grn_u);
            // V' = V − β u uᵀ: ū −= β (V̄' + V̄'ᵀ) u, β̄ −= uᵀ V̄' u.
            mat_vec(width, gvn, ui, &mut gvn_u);
            g_beta -= dot(ui, &gvn_u);
            gu.iter_mut().zip(&gvn_u).for_each(|(g, &v)| *g -= beta * v);
            mat_t_vec(width, gvn, ui, &mut gvn_u);
            gu.iter_mut().zip(&gvn_u).for_each(|(g, &v)| *g -= beta * v);
            // β = 1 / (wᵀu + η²): q̄ = −β² β̄, η̄ += 2η q̄.
            let g_q = -beta * beta * g_beta;
            if let (Some(eta), Some(g_eta)) = (eta, g_eta.as_deref_mut()) {
                let slot = if eta.len() == 1 { 0 } else { i };
                g_eta[slot] += T::from_f64(2.0) * noise(Some(eta), i) * g_q;
            }
            // q = wᵀu: w̄ += q̄ u, ū += q̄ w; u = V w: V̄ += ū wᵀ, w̄ += Vᵀ ū.
            gu.iter_mut().zip(wi).for_each(|(g, &wv)| *g += g_q * wv);
            for (row, &g) in gvi.chunks_exact_mut(m).zip(&gu) {
                row.iter_mut().zip(wi).for_each(|(o, &wv)| *o += g * wv);
            }
            let gwi = &mut g_w[i * m..][..m];
            mat_t_vec(width, vi, &gu, gwi);
            gwi.iter_mut().zip(ui).for_each(|(g, &uv)| *g += g_q * uv);
        }
        // δ = z − μ.
        g_z.iter_mut().zip(&g_delta).for_each(|(g, &d)| *g += d);
        g_mu.iter_mut().zip(&g_delta).for_each(|(g, &d)| *g = -d);
    })
}

/// `y = A x` for row-major `A: y.len() × m` (`x`: `m`).
#[inline(always)]
fn mat_vec<T: Real, W: Width>(width: W, a: &[T], x: &[T], y: &mut [T]) {
    let m = width.get();
    let x = &x[..m];
    for (o, row) in y.iter_mut().zip(a.chunks_exact(m)) {
        *o = if W::FIXED { (0..m).fold(T::zero(), |s, j| s + row[j] * x[j]) } else { dot(row, x) };
    }
}

/// `y = Aᵀ x` for row-major `A: x.len() × m` (`y`: `m`).
#[inline(always)]
fn mat_t_vec<T: Real, W: Width>(width: W, a: &[T], x: &[T], y: &mut [T]) {
    let m = width.get();
    let y = &mut y[..m];
    y.fill(T::zero());
    for (row, &xv) in a.chunks_exact(m).zip(x) {
        y.iter_mut().zip(row).for_each(|(o, &v)| *o += v * xv);
    }
}
