//! `c, h = lstmCell(c, h, x)`: one LSTM step, PyTorch's `nn.LSTMCell` (gate order i, f, g, o).
//!
//! `[i f g o] = W x + b_ih + U h + b_hh`; `c' = σ(f) ⊙ c + σ(i) ⊙ tanh(g)`; `h' = σ(o) ⊙ tanh(c')`.
//! Shapes: `c, h: [H]`, `x: [n]` → `c': [H]`, `h': [H]`. Init U(±1/√H) as PyTorch.

use candle_core::{D, Tensor};

use super::backward::with_real;
use super::*;
use crate::kernels::dense::{Transposed, backward_slices, dense, forward_slices};
use crate::kernels::par::simd;
use crate::kernels::{real::Real, view};

pub struct LstmCell;

static SIGNATURE: [ArgSpec; 3] = [ArgSpec::tensor("c"), ArgSpec::tensor("h"), ArgSpec::tensor("x")];

impl Primitive for LstmCell {
    fn name(&self) -> &'static str {
        "lstmCell"
    }
    fn summary(&self) -> &'static str {
        "one LSTM step (c, h) → (c', h'), PyTorch's LSTMCell"
    }
    fn signature(&self) -> &'static [ArgSpec] {
        &SIGNATURE
    }
    fn outputs(&self) -> &'static [&'static str] {
        &["c", "h"]
    }
    fn instantiate(&self, args: &Args) -> Result<Instance, PrimError> {
        let c = args.shape_of_rank("c", 1, "a cell state vector")?;
        let hidden = c[0];
        let h = args.shape("h")?;
        if h != &vec![hidden] {
            return Err(PrimError::shape_mismatch("h", &[hidden], h, "(like the cell state `c`)"));
        }
        let x = args.shape_of_rank("x", 1, "an input vector")?;
        let n = x[0];
        let bound = 1.0 / (hidden as f64).sqrt();
        let params = vec![
            ParamDecl::new("w_ih", vec![4 * hidden, n], Init::Uniform(bound)),
            ParamDecl::new("b_ih", vec![4 * hidden], Init::Uniform(bound)),
            ParamDecl::new("w_hh", vec![4 * hidden, hidden], Init::Uniform(bound)),
            ParamDecl::new("b_hh", vec![4 * hidden], Init::Uniform(bound)),
        ];
        let flops = (2 * 4 * hidden * (n + hidden) + 20 * hidden) as u64;
        let out = Ty::Tensor(vec![hidden]);
        let op = LstmOp { hidden, wih_t: Transposed::default(), whh_t: Transposed::default() };
        Ok(Instance::new(op, vec![out.clone(), out], params, flops))
    }
}

struct LstmOp {
    hidden: usize,
    wih_t: Transposed,
    whh_t: Transposed,
}

impl Op for LstmOp {
    fn forward(&self, inputs: &[&Tensor], params: &[&Tensor]) -> candle_core::Result<Vec<Tensor>> {
        let (c, h, x) = (inputs[0], inputs[1], inputs[2]);
        let gates = dense(x, params[0], Some(params[1]))?.broadcast_add(&dense(h, params[2], Some(params[3]))?)?;
        let n = self.hidden;
        let gate = |i: usize| gates.narrow(D::Minus1, i * n, n);
        let (i, f, g, o) = (gate(0)?, gate(1)?, gate(2)?, gate(3)?);
        let sig = candle_nn::ops::sigmoid;
        let c_next = sig(&f)?.broadcast_mul(c)?.add(&sig(&i)?.mul(&g.tanh()?)?)?;
        let h_next = sig(&o)?.mul(&c_next.tanh()?)?;
        Ok(vec![c_next, h_next])
    }

    fn has_backward(&self) -> bool {
        true
    }

    /// Two GEMMs into one gate buffer, then one pass for the activations and the new state;
    /// saves the activated gates `[σi, σf, tanh g, σo]` and `tanh c'`.
    fn forward_train(&self, inputs: &[&Tensor], params: &[&Tensor]) -> candle_core::Result<(Vec<Tensor>, Saved)> {
        let batch = inputs[2].dim(0)?;
        if inputs.iter().any(|t| t.dim(0).ok() != Some(batch)) {
            let outs = self.forward(inputs, params)?;
            return Ok((outs.iter().map(|o| o.contiguous()).collect::<candle_core::Result<_>>()?, vec![]));
        }
        with_real!(inputs[0].dtype(), T => self.train_forward::<T>(inputs, params))
    }

    fn backward(&self, b: &Backward<'_>, param_grads: &mut [ParamGrad]) -> candle_core::Result<Vec<Option<Tensor>>> {
        if b.saved.is_empty() {
            return super::backward::via_autograd(self, b, param_grads);
        }
        with_real!(b.inputs[0].dtype(), T => self.train_backward::<T>(b, param_grads))
    }
}

impl LstmOp {
    fn train_forward<T: Real>(
        &self,
        inputs: &[&Tensor],
        params: &[&Tensor],
    ) -> candle_core::Result<(Vec<Tensor>, Saved)> {
        let hd = self.hidden;
        let batch = inputs[2].dim(0)?;
        let n = inputs[2].dim(1)?;
        let (cr, hr, xr) = (view::Read::new(inputs[0])?, view::Read::new(inputs[1])?, view::Read::new(inputs[2])?);
        let (wih_t, whh_t) = (self.wih_t.of(params[0])?, self.whh_t.of(params[2])?);
        let p: Vec<view::Read> = params.iter().map(|t| view::Read::new(t)).collect::<candle_core::Result<_>>()?;
        let (wih, whh) = (view::Read::new(&wih_t)?, view::Read::new(&whh_t)?);
        let (c, h, x) = (cr.slice::<T>()?, hr.slice::<T>()?, xr.slice::<T>()?);
        let mut gates = forward_slices(x, batch, wih.slice::<T>()?, Some(p[1].slice::<T>()?), n, 4 * hd);
        let gh = forward_slices(h, batch, whh.slice::<T>()?, Some(p[3].slice::<T>()?), hd, 4 * hd);
        let mut c_next = vec![T::zero(); batch * hd];
        let mut h_next = vec![T::zero(); batch * hd];
        let mut tc = vec![T::zero(); batch * hd];
        simd(|| {
            for ex in 0..batch {
                let gt = &mut gates[ex * 4 * hd..][..4 * hd];
                for (v, &u) in gt.iter_mut().zip(&gh[ex * 4 * hd..][..4 * hd]) {
                    *v += u;
                }
                for j in 0..hd {
                    let (i, f, g, o) =
                        (gt[j].sigmoid(), gt[hd + j].sigmoid(), gt[2 * hd + j].tanh(), gt[3 * hd + j].sigmoid());
                    let cn = f * c[ex * hd + j] + i * g;
                    let t = cn.tanh();
                    gt[j] = i;
                    gt[hd + j] = f;
                    gt[2 * hd + j] = g;
                    gt[3 * hd + j] = o;
                    c_next[ex * hd + j] = cn;
                    tc[ex * hd + j] = t;
                    h_next[ex * hd + j] = o * t;
                }
            }
        });
        Ok((
            vec![view::tensor(c_next, (batch, hd))?, view::tensor(h_next, (batch, hd))?],
            vec![view::tensor(gates, (batch, 4 * hd))?, view::tensor(tc, (batch, hd))?],
        ))
    }

    fn train_backward<T: Real>(
        &self,
        bw: &Backward<'_>,
        param_grads: &mut [ParamGrad],
    ) -> candle_core::Result<Vec<Option<Tensor>>> {
        let hd = self.hidden;
        let (c, h, x) = (&bw.inputs[0], &bw.inputs[1], &bw.inputs[2]);
        let (batch, n) = (x.dim(0)?, x.dim(1)?);
        let (gc, gh) = (bw.grad_or_zeros(0)?, bw.grad_or_zeros(1)?);
        let (gcr, ghr, cr) = (view::Read::new(&gc)?, view::Read::new(&gh)?, view::Read::new(c)?);
        let (gtr, tcr) = (view::Read::new(&bw.saved[0])?, view::Read::new(&bw.saved[1])?);
        let (gc, gh, c, gates, tc) =
            (gcr.slice::<T>()?, ghr.slice::<T>()?, cr.slice::<T>()?, gtr.slice::<T>()?, tcr.slice::<T>()?);
        // Pre-activation gradients [gi, gf, gg, go] and d loss / d c.
        let mut gpre = vec![T::zero(); batch * 4 * hd];
        let mut gc_prev = vec![T::zero(); batch * hd];
        simd(|| {
            for ex in 0..batch {
                let gt = &gates[ex * 4 * hd..][..4 * hd];
                let gp = &mut gpre[ex * 4 * hd..][..4 * hd];
                for j in 0..hd {
                    let k = ex * hd + j;
                    let (i, f, g, o) = (gt[j], gt[hd + j], gt[2 * hd + j], gt[3 * hd + j]);
                    let t = tc[k];
                    let gct = gc[k] + gh[k] * o * (T::one() - t * t);
                    gp[j] = gct * g * i * (T::one() - i);
                    gp[hd + j] = gct * c[k] * f * (T::one() - f);
                    gp[2 * hd + j] = gct * i * (T::one() - g * g);
                    gp[3 * hd + j] = gh[k] * t * o * (T::one() - o);
                    gc_prev[k] = gct * f;
                }
            }
        });
        let (hr, xr) = (view::Read::new(h)?, view::Read::new(x)?);
        let p: Vec<view::Read> = bw.params.iter().map(view::Read::new).collect::<candle_core::Result<_>>()?;
        let (gih, ghh) = param_grads.split_at_mut(2);
        let (gwi, gbi) = gih.split_at_mut(1);
        let (gwh, gbh) = ghh.split_at_mut(1);
        let gx = backward_slices(
            &gpre,
            xr.slice::<T>()?,
            batch,
            p[0].slice::<T>()?,
            n,
            4 * hd,
            Some(gwi[0].slice_mut::<T>(4 * hd * n)?),
            Some(gbi[0].slice_mut::<T>(4 * hd)?),
            bw.needs[2],
        );
        let gh_prev = backward_slices(
            &gpre,
            hr.slice::<T>()?,
            batch,
            p[2].slice::<T>()?,
            hd,
            4 * hd,
            Some(gwh[0].slice_mut::<T>(4 * hd * hd)?),
            Some(gbh[0].slice_mut::<T>(4 * hd)?),
            bw.needs[1],
        );
        Ok(vec![
            if bw.needs[0] { Some(view::tensor(gc_prev, (batch, hd))?) } else { None },
            gh_prev.map(|g| view::tensor(g, (batch, hd))).transpose()?,
            gx.map(|g| view::tensor(g, (batch, n))).transpose()?,
        ])
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;

    #[test]
    fn shapes_and_gradients() {
        let args = [("c", t(&[3])), ("h", t(&[3])), ("x", t(&[2]))];
        assert_eq!(out_shapes("lstmCell", &args), vec![vec![3], vec![3]]);
        assert_eq!(param_count("lstmCell", &args), 12 * 2 + 12 + 12 * 3 + 12);
        assert!(
            error("lstmCell", &[("c", t(&[3])), ("h", t(&[4])), ("x", t(&[2]))]).contains("`h` must have shape [3]")
        );
        grad_check("lstmCell", &args);
        manual_backward_check("lstmCell", &args);
    }
}
