//! The element-wise half of a GRU cell (PyTorch's `nn.GRUCell`, gates `[r, z, n]`, each
//! `hidden` wide) on plain slices, forward and backward, for `gruCell`'s manual backward.
//! Flat loops per gate inside [`multiversion!`] bodies, so that they vectorise (see
//! `kernels::cpu::lstm`).

use super::par::multiversion;
use super::real::Real;

multiversion! {
    /// From the input half `gi = W_ih x + b_ih` and the recurrent half `gh = W_hh h + b_hh`
    /// (`[batch, 3·hidden]` each) and the state `h`: writes `h' = n + z ⊙ (h − n)` and keeps
    /// `[r, z, n, n_h]` (`[batch, 4·hidden]`, `n_h` the recurrent part of `n`) in `saved`.
    pub fn gru_forward[T: Real][T](gi: &[T], gh: &[T], h: &[T], hidden: usize, saved: &mut [T], h_next: &mut [T]) {
        let hd = hidden;
        let batch = h.len() / hd;
        for ex in 0..batch {
            let (gi, gh) = (&gi[ex * 3 * hd..][..3 * hd], &gh[ex * 3 * hd..][..3 * hd]);
            let s = &mut saved[ex * 4 * hd..][..4 * hd];
            let (rz, rest) = s.split_at_mut(2 * hd);
            let (n, nh) = rest.split_at_mut(hd);
            for k in 0..2 * hd {
                rz[k] = (gi[k] + gh[k]).sigmoid();
            }
            let (r, z) = rz.split_at(hd);
            for j in 0..hd {
                nh[j] = gh[2 * hd + j];
                n[j] = (gi[2 * hd + j] + r[j] * nh[j]).tanh();
            }
            let (h, out) = (&h[ex * hd..][..hd], &mut h_next[ex * hd..][..hd]);
            for j in 0..hd {
                out[j] = n[j] + z[j] * (h[j] - n[j]);
            }
        }
    }
}

multiversion! {
    /// The backward of [`gru_forward`] given `g = d loss / d h'`: writes the gradients of the
    /// input half `g_gi` and of the recurrent half `g_gh` (`[batch, 3·hidden]` each) and the
    /// direct part of `d loss / d h` (`g ⊙ z`).
    pub fn gru_backward[T: Real][T](saved: &[T], h: &[T], g: &[T], hidden: usize, g_gi: &mut [T], g_gh: &mut [T], g_h: &mut [T]) {
        let hd = hidden;
        let batch = h.len() / hd;
        let one = T::one();
        for ex in 0..batch {
            let s = &saved[ex * 4 * hd..][..4 * hd];
            let (r, z, n, nh) = (&s[..hd], &s[hd..2 * hd], &s[2 * hd..3 * hd], &s[3 * hd..]);
            let (h, g, gh_direct) = (&h[ex * hd..][..hd], &g[ex * hd..][..hd], &mut g_h[ex * hd..][..hd]);
            let (gi, ghh) = (&mut g_gi[ex * 3 * hd..][..3 * hd], &mut g_gh[ex * 3 * hd..][..3 * hd]);
            for j in 0..hd {
                let gn = g[j] * (one - z[j]) * (one - n[j] * n[j]);
                let gz = g[j] * (h[j] - n[j]) * z[j] * (one - z[j]);
                let gr = gn * nh[j] * r[j] * (one - r[j]);
                gi[j] = gr;
                gi[hd + j] = gz;
                gi[2 * hd + j] = gn;
                ghh[j] = gr;
                ghh[hd + j] = gz;
                ghh[2 * hd + j] = gn * r[j];
                gh_direct[j] = g[j] * z[j];
            }
        }
    }
}
