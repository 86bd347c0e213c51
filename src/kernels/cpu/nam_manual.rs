//! NAM's matrix-memory write and read (NAM §3.1) on plain slices, forward and backward, for
//! the manual backward passes of `namWR` and `namRD`: the same formulas as
//! [`write`](crate::kernels::blocks::nam::write) and [`read`](crate::kernels::blocks::nam::read), one memory `[dv, dk]` (one
//! example's head) at a time.

use std::mem::MaybeUninit;

use super::par::multiversion;
use super::real::Real;
use super::reduce::{dot, dot2};

/// F.normalize's epsilon.
pub const EPS: f64 = 1e-12;

multiversion! {
    /// `μ(x)` into `unit`; returns the norm used, `max(‖x‖₂, eps)`.
    pub fn normalize[T: Real][T](x: &[T], unit: &mut [T]) -> T {
        let norm = clamped_norm(x);
        let inv = T::one() / norm;
        for (u, &v) in unit.iter_mut().zip(x) {
            *u = v * inv;
        }
        norm
    }
}

/// `max(‖x‖₂, eps)`, the norm [`normalize`] divides by.
#[inline(always)]
pub fn clamped_norm<T: Real>(x: &[T]) -> T {
    dot(x, x).max(T::from_f64(EPS * EPS)).sqrt()
}

/// The backward of [`normalize`]: `gx = (g − μ ⟨μ, g⟩) / ‖x‖`, or `g / eps` where the norm
/// was clamped (PyTorch's `F.normalize` gradient there).
pub fn normalize_backward<T: Real>(unit: &[T], norm: T, g: &[T], gx: &mut [T]) {
    let clamped = norm <= T::from_f64(EPS);
    let mut dot = T::zero();
    for (&u, &gv) in unit.iter().zip(g) {
        dot += u * gv;
    }
    let inv = T::one() / norm;
    for ((o, &u), &gv) in gx.iter_mut().zip(unit).zip(g) {
        *o = if clamped { gv * inv } else { (gv - u * dot) * inv };
    }
}

multiversion! {
    /// WR: `out = M + (pw v − pe M k) kᵀ` for one memory `m` (`[dv, dk]`, row-major) and a unit
    /// key `k`; writes `M k` into `mk`.
    pub fn write_forward[T: Real][T](m: &[T], k: &[T], v: &[T], pw: T, pe: T, mk: &mut [T], out: &mut [MaybeUninit<T>]) {
        let dk = k.len();
        for (r, row) in m.chunks_exact(dk).enumerate() {
            let mkr = dot(row, k);
            mk[r] = mkr;
            let delta = pw * v[r] - pe * mkr;
            let o = &mut out[r * dk..][..dk];
            for c in 0..dk {
                o[c] = MaybeUninit::new(row[c] + delta * k[c]);
            }
        }
    }
}

multiversion! {
    /// The backward of [`write_forward`] given `g = d loss / d out`: writes `gm`
    /// (`g − pe (g k) kᵀ`), `gv`, `gk` (of the unit key) and returns `(gpw, gpe)`.
    pub fn write_backward[T: Real][T](
        m: &[T],
        k: &[T],
        v: &[T],
        mk: &[T],
        pw: T,
        pe: T,
        g: &[T],
        gm: &mut [MaybeUninit<T>],
        gv: &mut [T],
        gk: &mut [T],
    ) -> (T, T) {
        let dk = k.len();
        let (mut gpw, mut gpe) = (T::zero(), T::zero());
        let gk = &mut gk[..dk];
        gk.fill(T::zero());
        for r in 0..mk.len() {
            let (gr, mr) = (&g[r * dk..][..dk], &m[r * dk..][..dk]);
            let gdelta = dot(gr, k);
            let delta = pw * v[r] - pe * mk[r];
            gv[r] = pw * gdelta;
            gpw += v[r] * gdelta;
            gpe -= mk[r] * gdelta;
            // Through the outer product (δ kᵀ) and through M k (with gmk = −pe gδ).
            let gmk = -pe * gdelta;
            let gmr = &mut gm[r * dk..][..dk];
            for c in 0..dk {
                gk[c] += gr[c] * delta + mr[c] * gmk;
                gmr[c] = MaybeUninit::new(gr[c] + gmk * k[c]);
            }
        }
        (gpw, gpe)
    }
}

multiversion! {
    /// RD: `out = pr · M q` for one memory (`[dv, dk]`) and a unit query `q`; writes `M q` into
    /// `mq`.
    pub fn read_forward[T: Real][T](m: &[T], q: &[T], pr: T, mq: &mut [T], out: &mut [T]) {
        let dk = q.len();
        for (r, row) in m.chunks_exact(dk).enumerate() {
            let mqr = dot(row, q);
            mq[r] = mqr;
            out[r] = pr * mqr;
        }
    }
}

multiversion! {
    /// The backward of [`read_forward`] given `g = d loss / d out`: writes `gm = pr g qᵀ` (when
    /// asked) and `gq` (of the unit query), returns `gpr = ⟨M q, g⟩`.
    pub fn read_backward[T: Real][T](m: &[T], q: &[T], mq: &[T], pr: T, g: &[T], gm: Option<&mut [T]>, gq: &mut [T]) -> T {
        let dk = q.len();
        let mut gpr = T::zero();
        let gq = &mut gq[..dk];
        gq.fill(T::zero());
        for r in 0..mq.len() {
            gpr += mq[r] * g[r];
            let (s, mr) = (pr * g[r], &m[r * dk..][..dk]);
            for c in 0..dk {
                gq[c] += s * mr[c];
            }
        }
        if let Some(gm) = gm {
            for r in 0..mq.len() {
                let (s, gmr) = (pr * g[r], &mut gm[r * dk..][..dk]);
                for c in 0..dk {
                    gmr[c] = s * q[c];
                }
            }
        }
        gpr
    }
}

multiversion! {
    /// WR on a tape (NAM §3.3): `out = T + p ⊗ (pw v − pe Tᵀ p)` for one tape `t` (`[L, d]`,
    /// row-major) and position `p` (`[L]`); writes the value under the head, `Tᵀ p`, into `old`.
    /// `scratch` holds at least `d` elements (the caller's, reused over the tapes of a batch:
    /// an allocation per tape cost as much as a row's arithmetic).
    pub fn tape_write_forward[T: Real][T](
        t: &[T],
        p: &[T],
        v: &[T],
        pw: T,
        pe: T,
        old: &mut [T],
        out: &mut [MaybeUninit<T>],
        scratch: &mut [T],
    ) {
        // Loops over zipped slices, not indices: without bounds checks the compiler vectorises
        // the loops over a row (indexed, they ran one element at a time: 17 % of a NAM-TM step).
        let d = v.len();
        let old = &mut old[..d];
        value_under_head(t, p, old);
        let delta = &mut scratch[..d];
        for ((dc, &vc), &oc) in delta.iter_mut().zip(v).zip(old.iter()) {
            *dc = pw * vc - pe * oc;
        }
        for ((o, row), &pl) in out.chunks_exact_mut(d).zip(t.chunks_exact(d)).zip(p) {
            for ((oc, &x), &dc) in o.iter_mut().zip(row).zip(delta.iter()) {
                *oc = MaybeUninit::new(x + pl * dc);
            }
        }
    }
}

/// `old = Tᵀ p`: the value under the head of the tape `t` (`[L, d]`, `d = old.len()`).
#[inline(always)]
pub fn value_under_head<T: Real>(t: &[T], p: &[T], old: &mut [T]) {
    old.fill(T::zero());
    for (row, &pl) in t.chunks_exact(old.len()).zip(p) {
        for (o, &x) in old.iter_mut().zip(row) {
            *o += pl * x;
        }
    }
}

multiversion! {
    /// The backward of [`tape_write_forward`] given `g = d loss / d out` (`[L, d]`): writes
    /// `gt`, `gp`, `gv` and returns `(gpw, gpe)`. `scratch` holds at least `3d` elements.
    pub fn tape_write_backward[T: Real][T](
        t: &[T],
        p: &[T],
        v: &[T],
        old: &[T],
        pw: T,
        pe: T,
        g: &[T],
        gt: &mut [MaybeUninit<T>],
        gp: &mut [T],
        gv: &mut [T],
        scratch: &mut [T],
    ) -> (T, T) {
        let d = v.len();
        let (v, old, gv) = (&v[..d], &old[..d], &mut gv[..d]);
        let (gdelta, rest) = scratch[..3 * d].split_at_mut(d);
        let (delta, gold) = rest.split_at_mut(d);
        // gδ = gᵀ p: the update δ = pw v − pe old reaches every row l scaled by p_l.
        gdelta.fill(T::zero());
        for (gr, &pl) in g.chunks_exact(d).zip(p) {
            for (a, &x) in gdelta.iter_mut().zip(gr) {
                *a += pl * x;
            }
        }
        let (mut gpw, mut gpe) = (T::zero(), T::zero());
        for c in 0..d {
            gv[c] = pw * gdelta[c];
            gpw += v[c] * gdelta[c];
            gpe -= old[c] * gdelta[c];
        }
        // old = Tᵀ p gets g_old = −pe gδ.
        for c in 0..d {
            delta[c] = pw * v[c] - pe * old[c];
            gold[c] = -pe * gdelta[c];
        }
        let rows = g.chunks_exact(d).zip(t.chunks_exact(d)).zip(gt.chunks_exact_mut(d));
        for (((gr, tr), gtr), (gpl, &pl)) in rows.zip(gp.iter_mut().zip(p)) {
            for ((o, &x), &y) in gtr.iter_mut().zip(gr).zip(gold.iter()) {
                *o = MaybeUninit::new(x + pl * y);
            }
            *gpl = dot2(gr, delta, tr, gold);
        }
        (gpw, gpe)
    }
}

multiversion! {
    /// RD on a tape: `out = pr · Tᵀ p` for one tape (`[L, d]`) and position `p`; writes `Tᵀ p`
    /// into `old`.
    pub fn tape_read_forward[T: Real][T](t: &[T], p: &[T], pr: T, old: &mut [T], out: &mut [T]) {
        let d = out.len();
        let old = &mut old[..d];
        old.fill(T::zero());
        for (row, &pl) in t.chunks_exact(d).zip(p) {
            for (o, &x) in old.iter_mut().zip(row) {
                *o += pl * x;
            }
        }
        for (o, &x) in out.iter_mut().zip(old.iter()) {
            *o = pr * x;
        }
    }
}

multiversion! {
    /// The backward of [`tape_read_forward`] given `g = d loss / d out` (`[d]`): writes
    /// `gt = pr p ⊗ g` (when asked) and `gp`, returns `gpr = ⟨Tᵀ p, g⟩`.
    pub fn tape_read_backward[T: Real][T](t: &[T], p: &[T], old: &[T], pr: T, g: &[T], gt: Option<&mut [T]>, gp: &mut [T]) -> T {
        let d = g.len();
        let gpr = dot(old, g);
        for (l, row) in t.chunks_exact(d).enumerate() {
            gp[l] = pr * dot(row, g);
        }
        if let Some(gt) = gt {
            for (l, gtr) in gt.chunks_exact_mut(d).enumerate() {
                for c in 0..d {
                    gtr[c] = pr * p[l] * g[c];
                }
            }
        }
        gpr
    }
}
