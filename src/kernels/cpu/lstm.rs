//! The element-wise half of an LSTM cell on plain slices, forward and backward, for
//! `lstmCell`'s manual backward. The gates are laid out per example as `[i, f, g, o]`, each
//! `hidden` wide (PyTorch's order).
//!
//! Each pass is a few flat loops over contiguous runs of one gate, inside a
//! [`multiversion!`] body, so that the sigmoids and tanhs (inlined `exp_f32`/`tanh_f32`)
//! vectorise 8 wide; written as one loop over `j` reading four gates, inside a closure, it
//! ran scalar (40 % of an LSTM training step).

use super::par::multiversion;
use super::real::Real;

multiversion! {
    /// `pre` (`[batch, 4·hidden]`, the gates' pre-activations, `x W_ihᵀ + b_ih`) gets the
    /// recurrent half `recurrent` (`h W_hhᵀ + b_hh`) added and becomes the activations
    /// `[σ(i), σ(f), tanh(g), σ(o)]`; writes `c' = f c + i g`, `tanh c'` and `h' = o tanh c'`
    /// (each `[batch, hidden]`).
    pub fn lstm_forward[T: Real][T](
        pre: &mut [T],
        recurrent: &[T],
        c: &[T],
        hidden: usize,
        c_next: &mut [T],
        tanh_c: &mut [T],
        h_next: &mut [T],
    ) {
        let hd = hidden;
        let batch = c.len() / hd;
        for ex in 0..batch {
            let gates = &mut pre[ex * 4 * hd..][..4 * hd];
            let rec = &recurrent[ex * 4 * hd..][..4 * hd];
            for k in 0..4 * hd {
                gates[k] += rec[k];
            }
            let (ifg, o) = gates.split_at_mut(3 * hd);
            let (i_f, g) = ifg.split_at_mut(2 * hd);
            for v in i_f.iter_mut() {
                *v = v.sigmoid();
            }
            for v in g.iter_mut() {
                *v = v.tanh();
            }
            for v in o.iter_mut() {
                *v = v.sigmoid();
            }
            let (i, f) = i_f.split_at(hd);
            let (c, c_next) = (&c[ex * hd..][..hd], &mut c_next[ex * hd..][..hd]);
            let (tanh_c, h_next) = (&mut tanh_c[ex * hd..][..hd], &mut h_next[ex * hd..][..hd]);
            for j in 0..hd {
                let cn = f[j] * c[j] + i[j] * g[j];
                let t = cn.tanh();
                c_next[j] = cn;
                tanh_c[j] = t;
                h_next[j] = o[j] * t;
            }
        }
    }
}

multiversion! {
    /// The backward of [`lstm_forward`]'s element-wise part: from the activations `gates`,
    /// `tanh c'`, the old cell `c` and the gradients `gc`, `gh` of `c'` and `h'`, writes the
    /// pre-activation gradients `gpre` (`[batch, 4·hidden]`) and `d loss / d c` (`gc_prev`).
    pub fn lstm_backward[T: Real][T](
        gates: &[T],
        tanh_c: &[T],
        c: &[T],
        gc: &[T],
        gh: &[T],
        hidden: usize,
        gpre: &mut [T],
        gc_prev: &mut [T],
    ) {
        let hd = hidden;
        let batch = c.len() / hd;
        for ex in 0..batch {
            let gt = &gates[ex * 4 * hd..][..4 * hd];
            let (i, f, g, o) = (&gt[..hd], &gt[hd..2 * hd], &gt[2 * hd..3 * hd], &gt[3 * hd..]);
            let gp = &mut gpre[ex * 4 * hd..][..4 * hd];
            let (gi_gf, gg_go) = gp.split_at_mut(2 * hd);
            let (gi, gf) = gi_gf.split_at_mut(hd);
            let (gg, go) = gg_go.split_at_mut(hd);
            let (t, c) = (&tanh_c[ex * hd..][..hd], &c[ex * hd..][..hd]);
            let (gc, gh, gc_prev) = (&gc[ex * hd..][..hd], &gh[ex * hd..][..hd], &mut gc_prev[ex * hd..][..hd]);
            let one = T::one();
            for j in 0..hd {
                let gct = gc[j] + gh[j] * o[j] * (one - t[j] * t[j]);
                gi[j] = gct * g[j] * i[j] * (one - i[j]);
                gf[j] = gct * c[j] * f[j] * (one - f[j]);
                gg[j] = gct * i[j] * (one - g[j] * g[j]);
                go[j] = gh[j] * t[j] * o[j] * (one - o[j]);
                gc_prev[j] = gct * f[j];
            }
        }
    }
}
