//! The fused training path shared by `kanervaRead` and `kanervaUpdate`: the batch loops around
//! `kernels::cpu::kanerva_manual`, and what both keep for their backward (the addressing).

use candle_core::{Result, Tensor};

use crate::kernels::cpu::kanerva_manual::{Addressed, AddressedRef, Machines, address, address_backward, mix};
use crate::kernels::cpu::{real::Real, view};

/// The addressing of every batch element, as the forward computed it.
pub struct AddressSaved {
    w: Tensor,
    chol: Vec<f64>,
    p: Tensor,
    gamma: Tensor,
}

/// The operands as slices: `R: [B, k, c, m]`, `z: [B, c]`, `η: [B, k | 1]` if given.
pub struct Operands<'a, T> {
    pub s: Machines,
    pub batch: usize,
    pub r: &'a [T],
    pub z: &'a [T],
    pub eta: Option<&'a [T]>,
}

impl<'a, T: Real> Operands<'a, T> {
    pub fn r_of(&self, b: usize) -> &'a [T] {
        let n = self.s.k * self.s.c * self.s.m;
        &self.r[b * n..][..n]
    }

    pub fn z_of(&self, b: usize) -> &'a [T] {
        &self.z[b * self.s.c..][..self.s.c]
    }

    pub fn eta_of(&self, b: usize) -> Option<&'a [T]> {
        self.eta.map(|e| {
            let n = e.len() / self.batch;
            &e[b * n..][..n]
        })
    }
}

/// Addresses every batch element; returns `μ` (`[B, c]`, as a vector) and the saved addressing.
pub fn address_all<T: Real>(o: &Operands<'_, T>, lambda: f64) -> Result<(Vec<T>, AddressSaved)> {
    let Machines { k, c, m } = o.s;
    let (mut w, mut chol) = (vec![T::zero(); o.batch * k * m], vec![0.0; o.batch * k * m * m]);
    let (mut p, mut gamma, mut mu) =
        (vec![T::zero(); o.batch * k * c], vec![T::zero(); o.batch * k], vec![T::zero(); o.batch * c]);
    for b in 0..o.batch {
        let out = Addressed {
            w: &mut w[b * k * m..][..k * m],
            chol: &mut chol[b * k * m * m..][..k * m * m],
            p: &mut p[b * k * c..][..k * c],
            gamma: &mut gamma[b * k..][..k],
        };
        address(o.s, o.r_of(b), o.z_of(b), o.eta_of(b), lambda, out)?;
        mix(&p[b * k * c..][..k * c], &gamma[b * k..][..k], &mut mu[b * c..][..c]);
    }
    let saved = AddressSaved {
        w: view::tensor(w, o.batch * k * m)?,
        chol,
        p: view::tensor(p, o.batch * k * c)?,
        gamma: view::tensor(gamma, o.batch * k)?,
    };
    Ok((mu, saved))
}

impl AddressSaved {
    /// The weights `w` of every batch element (`[B, k, m]`, flat).
    pub fn weights<T: Real>(&self) -> Result<Vec<T>> {
        view::values(&self.w)
    }

    /// The backward of the addressing and the mixture over the batch: given `μ̄` (`[B, c]`) and
    /// the gradients reaching each `w` by other paths (`[B, k, m]`), adds into `R̄`, `z̄`, `η̄`.
    pub fn backward<T: Real>(
        &self,
        o: &Operands<'_, T>,
        g_mu: &[T],
        g_w: Option<&[T]>,
        g_r: &mut [T],
        g_z: &mut [T],
        mut g_eta: Option<&mut [T]>,
    ) -> Result<()> {
        let Machines { k, c, m } = o.s;
        let (wr, pr, gr) = (view::Read::new(&self.w)?, view::Read::new(&self.p)?, view::Read::new(&self.gamma)?);
        let (w, p, gamma) = (wr.slice::<T>()?, pr.slice::<T>()?, gr.slice::<T>()?);
        let eta_len = o.eta.map_or(0, |e| e.len() / o.batch);
        for b in 0..o.batch {
            let saved: AddressedRef<'_, T> = Addressed {
                w: &w[b * k * m..][..k * m],
                chol: &self.chol[b * k * m * m..][..k * m * m],
                p: &p[b * k * c..][..k * c],
                gamma: &gamma[b * k..][..k],
            };
            address_backward(
                o.s,
                o.r_of(b),
                o.z_of(b),
                o.eta_of(b),
                &saved,
                &g_mu[b * c..][..c],
                g_w.map(|g| &g[b * k * m..][..k * m]),
                &mut g_r[b * k * c * m..][..k * c * m],
                &mut g_z[b * c..][..c],
                g_eta.as_deref_mut().map(|g| &mut g[b * eta_len..][..eta_len]),
            );
        }
        Ok(())
    }
}

/// Read locks on the operands `R` (`[B, k, c, m]`), `z` and `η`, for [`Operands`].
pub struct Locked<'a> {
    s: Machines,
    batch: usize,
    r: view::Read<'a>,
    z: view::Read<'a>,
    eta: Option<view::Read<'a>>,
}

impl<'a> Locked<'a> {
    pub fn new(r: &'a Tensor, z: &'a Tensor, eta: Option<&'a Tensor>) -> Result<Locked<'a>> {
        let (batch, k, c, m) = r.dims4()?;
        let eta = eta.map(view::Read::new).transpose()?;
        Ok(Locked { s: Machines { k, c, m }, batch, r: view::Read::new(r)?, z: view::Read::new(z)?, eta })
    }

    pub fn operands<T: Real>(&self) -> Result<Operands<'_, T>> {
        let eta = self.eta.as_ref().map(|e| e.slice::<T>()).transpose()?;
        Ok(Operands { s: self.s, batch: self.batch, r: self.r.slice()?, z: self.z.slice()?, eta })
    }
}
