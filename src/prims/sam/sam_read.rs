//! `samRead(M, nq)`: the Self-attentive Associative Memory operator (SAM paper Eq. 4–8).
//!
//! Shapes: `M: [n, d]` → `[nq, n, n]` (in STM, `n = d`).
//! Follows the authors' code (docs/models.md, SAM), not the paper's three projections:
//! - one dense layer `d → 3·nq` with bias on every **row** of `M` (the paper's `W_q M` mixes
//!   rows; the code mixes columns, i.e. acts on `Mᵀ` — they differ because `M` is not symmetric);
//! - one LayerNorm over the whole `[n, 3·nq]` projection jointly (the paper has three);
//! - transposed and split into `q, k, v: [nq, n]`, then outer product attention
//!   `SAM(M)[s] = Σ_j tanh(q_s ⊙ k_j) ⊗ v_j` with `n_kv = n_q` as in the code.

use candle_core::Tensor;
use rayon::prelude::*;

use crate::kernels::blocks::opa::outer_product_attention;
use crate::kernels::cpu::dense::{Transposed, forward_slices};
use crate::kernels::cpu::gemm::{Mat, MatMut, Par, filled, matmul};
use crate::kernels::cpu::par::{group_size, multiversion};
use crate::kernels::cpu::reduce::{dot, sum, sum_sq_dev};
use crate::kernels::cpu::row_norm::EPS;
use crate::kernels::cpu::{real::Real, view};
use crate::kernels::cuda::sam::sam_attend;
use crate::kernels::cuda::sam::sam_attend::{attention_backward, attention_weights};
use crate::prims::prelude::*;

primitive! {
    SamRead = "samRead",
    "SAM: nq queries of outer product attention over LN(W M) (SAM Eq. 4-8, authors' form)",
    args: [tensor("M"), int_or("nq", 1)],
    examples: [[("M", t(&[3, 3])), ("nq", int(2))], [("M", t(&[5, 4])), ("nq", int(3))]],
    op: SamReadOp::new,
}

/// One call, configured: `M: [n, d]`, `nq` queries.
pub(crate) struct Config {
    n: usize,
    nq: usize,
    /// `d → 3·nq` on every row of `M`.
    qkv: Dense,
    /// The joint layer norm's affine map over the `[n, 3·nq]` projection.
    ln: Norm,
}

pub(crate) fn configure(args: &Args) -> Result<(Config, Inferred), PrimError> {
    let m = args.shape_of_rank("M", 2, "an item memory [n, d]")?;
    let (n, d) = (m[0], m[1]);
    let nq = args.size("nq")?;
    let mut params = ParamList::new();
    let qkv = params.dense("qkv", d, 3 * nq);
    let ln = params.norm("ln", n * 3 * nq);
    let flops = (2 * n * d * 3 * nq + 8 * n * 3 * nq + 3 * nq * nq * n + 2 * nq * n * nq * n) as u64;
    let inferred = Inferred::new(vec![Ty::Tensor(vec![nq, n, n])], params.into_decls(), flops);
    Ok((Config { n, nq, qkv, ln }, inferred))
}

pub(crate) struct SamReadOp {
    config: Config,
    wt: Transposed,
}

/// What samRead's training forward keeps, per example.
pub(crate) struct SamValues {
    /// The normalised projection `x̂` before the layer norm's affine map, `[B, n·3nq]`.
    xhat: Tensor,
    /// `y = x̂ ⊙ w + b`, `[B, n·3nq]`: row `f` holds `[q[·, f] | k[·, f] | v[·, f]]`, so `v[j, f]`
    /// sits at `f·3nq + 2nq + j`.
    pub(crate) normed: Tensor,
    /// `1/σ` of each example's projection, `[B]`.
    rstd: Tensor,
    /// The attention weights `A[j, (s, e)] = tanh(q[s, e] k[j, e])`, key-major `[B, nq, nq·n]`:
    /// stacked over the batch, its rows are uniformly strided, which the fused transfer uses.
    pub(crate) att: Tensor,
}

impl SamReadOp {
    pub(crate) fn new(config: Config) -> SamReadOp {
        SamReadOp { config, wt: Transposed::default() }
    }

    /// The memory's rows `n` and the number of queries `nq`.
    pub(crate) fn sizes(&self) -> (usize, usize) {
        (self.config.n, self.config.nq)
    }
}

impl WithProducts for SamReadOp {
    fn with_products(&self, inputs: &[&Tensor], params: &[&Tensor], products: &dyn Products) -> Outputs {
        let Config { n, nq, qkv, ln } = &self.config;
        let (n, nq) = (*n, *nq);
        let [m] = op::inputs("samRead", inputs)?;
        let batch = m.dim(0)?;
        let proj = products.dense(m, qkv.weight.of(params), Some(qkv.bias.of(params)))?; // [B, n, 3nq]
        let normed =
            products.layer_norm(&proj.reshape((batch, n * 3 * nq))?, ln.weight.of(params), ln.bias.of(params))?;
        let fits = normed.device().is_cpu() || sam_attend::fits_a_block(n, nq);
        if crate::kernels::cuda::switches::used_for(&normed, crate::kernels::cuda::sam::sam_attend::SAM_ATTEND) && fits
        {
            return Ok(vec![sam_attend::attend(&normed.reshape((batch, n, 3 * nq))?, nq)?]);
        }
        let qkv = normed.reshape((batch, n, 3 * nq))?.transpose(1, 2)?; // [B, 3nq, n]
        let q = qkv.narrow(1, 0, nq)?;
        let k = qkv.narrow(1, nq, nq)?;
        let v = qkv.narrow(1, 2 * nq, nq)?;
        Ok(vec![outer_product_attention(&q, &k, &v)?])
    }
}

impl ManualBackward for SamReadOp {
    type Saved = SamValues;

    /// The projection GEMM, the joint layer norm, the attention weights
    /// `A[s, e, j] = tanh(q[s, e] k[j, e])` and one `[nq·n × nq] · [nq × n]` GEMM per
    /// example, reading `q`, `k`, `v` in place in the normalised `[n, 3nq]` projection.
    fn forward_train(&self, inputs: &[&Tensor], params: &[&Tensor]) -> Forward<SamValues> {
        let [m] = op::inputs("samRead", inputs)?;
        with_real!(m.dtype(), T => self.train_forward::<T>(m, params))
    }

    fn backward(&self, b: &Backward<'_, SamValues>, param_grads: &mut [ParamGrad]) -> InputGrads {
        let [m] = b.inputs_of()?;
        with_real!(m.dtype(), T => self.backward_with::<T>(b, param_grads, None))
    }
}

impl SamReadOp {
    /// The output `R[(s, e), f] = Σ_j A[j, (s, e)] v[j, f]` and the values the backward needs.
    pub(crate) fn train_forward<T: Real>(&self, m: &Tensor, params: &[&Tensor]) -> Forward<SamValues> {
        let Config { n, nq, qkv, ln } = &self.config;
        let (n, nq) = (*n, *nq);
        let (batch, d) = (m.dim(0)?, m.dim(2)?);
        let w3 = 3 * nq;
        let len = n * w3;
        let wt = self.wt.of(qkv.weight.of(params))?;
        let (wtr, br) = (view::Read::new(&wt)?, view::Read::new(qkv.bias.of(params))?);
        let (lnwr, lnbr) = (view::Read::new(ln.weight.of(params))?, view::Read::new(ln.bias.of(params))?);
        let (w, bias, lnw, lnb) = (wtr.slice::<T>()?, br.slice::<T>()?, lnwr.slice::<T>()?, lnbr.slice::<T>()?);
        let mr = view::Read::new(m)?;
        // The projection, normalised in place into x̂; `normed` = x̂ ⊙ w + b.
        let mut xhat = forward_slices(mr.slice::<T>()?, batch * n, w, Some(bias), d, w3);
        let mut normed = vec![T::zero(); batch * len];
        let mut rstd = vec![T::zero(); batch];
        let mut att = vec![T::zero(); batch * nq * n * nq];
        let group = group_size(batch, batch * (nq * n * n * nq * 2 + len * 8));
        let fill = |out: &mut [std::mem::MaybeUninit<T>]| {
            xhat.par_chunks_mut(group * len)
                .zip(normed.par_chunks_mut(group * len))
                .zip(rstd.par_chunks_mut(group))
                .zip(att.par_chunks_mut(group * nq * n * nq))
                .zip(out.par_chunks_mut(group * nq * n * n))
                .for_each(|((((xh, nm), rs), at), out)| {
                    for ((((x, y), r), a), o) in xh
                        .chunks_exact_mut(len)
                        .zip(nm.chunks_exact_mut(len))
                        .zip(rs.iter_mut())
                        .zip(at.chunks_exact_mut(nq * n * nq))
                        .zip(out.chunks_exact_mut(nq * n * n))
                    {
                        *r = ln_attention_forward(n, nq, lnw, lnb, x, y, a);
                        // out[(s, e), f] = Σ_j A[j, (s, e)] v[j, f], v[j, f] = y[f, 2nq + j].
                        let v = Mat::strided(&y[2 * nq..], nq, n, 1, w3);
                        matmul(MatMut::uninit(o, nq * n, n), Mat::new(a, nq, nq * n).t(), v, false, Par::Seq);
                    }
                })
        };
        // SAFETY: one product per example overwrites all of its output.
        let out = unsafe { filled(batch * nq * n * n, fill) };
        let saved = SamValues {
            xhat: view::tensor(xhat, (batch, len))?,
            normed: view::tensor(normed, (batch, len))?,
            rstd: view::tensor(rstd, batch)?,
            att: view::tensor(att, (batch, nq * n * nq))?,
        };
        Ok((vec![view::tensor(out, (batch, nq, n, n))?], saved))
    }

    /// The backward, with optional further gradients of the attention weights and of `v`
    /// (`extra = (gA [B, nq, nq·n], gv [B, nq, n])`, from a fused consumer of the output
    /// that works on the factors, see `prims::fusion`) added to those from `d loss / d R`.
    pub(crate) fn backward_with<T: Real>(
        &self,
        bw: &Backward<'_, SamValues>,
        param_grads: &mut [ParamGrad],
        extra: Option<(&[T], &[T])>,
    ) -> InputGrads {
        let Config { n, nq, qkv, ln } = &self.config;
        let (n, nq) = (*n, *nq);
        let [m] = bw.inputs_of()?;
        let batch = m.dim(0)?;
        let w3 = 3 * nq;
        let len = n * w3;
        let g = bw.grads[0].as_ref().map(view::contiguous).transpose()?;
        let gr = g.as_ref().map(view::Read::new).transpose()?;
        let mr = view::Read::new(m)?;
        let saved = bw.saved;
        let (xr, yr, rr, ar) = (
            view::Read::new(&saved.xhat)?,
            view::Read::new(&saved.normed)?,
            view::Read::new(&saved.rstd)?,
            view::Read::new(&saved.att)?,
        );
        let g = gr.as_ref().map(|r| r.slice::<T>()).transpose()?;
        let (xhat, normed, rstd, att) = (xr.slice::<T>()?, yr.slice::<T>()?, rr.slice::<T>()?, ar.slice::<T>()?);
        let lnwr = view::Read::new(ln.weight.of(bw.params))?;
        let lnw = lnwr.slice::<T>()?;
        // d loss / d normed, per example: v's part from one GEMM, q's and k's from the
        // attention weights' gradient.
        let mut gn = vec![T::zero(); batch * len];
        let mut gatt = vec![T::zero(); batch * nq * n * nq];
        let group = group_size(batch, batch * nq * n * n * nq * 4);
        if g.is_none() && extra.is_none() {
            return Ok(vec![None]);
        }
        gn.par_chunks_mut(group * len).zip(gatt.par_chunks_mut(group * nq * n * nq)).enumerate().for_each(
            |(gi, (gn, ga))| {
                for (k, (gy, ga)) in gn.chunks_exact_mut(len).zip(ga.chunks_exact_mut(nq * n * nq)).enumerate() {
                    let ex = gi * group + k;
                    let (y, a) = (&normed[ex * len..][..len], &att[ex * nq * n * nq..][..nq * n * nq]);
                    if let Some((ga_extra, gv_extra)) = extra {
                        ga.copy_from_slice(&ga_extra[ex * nq * n * nq..][..nq * n * nq]);
                        let gv = &gv_extra[ex * nq * n..][..nq * n];
                        for (j, row) in gv.chunks_exact(n).enumerate() {
                            for (f, &v) in row.iter().enumerate() {
                                gy[f * w3 + 2 * nq + j] = v;
                            }
                        }
                    }
                    if let Some(g) = g {
                        // gA += gout · vᵀ; gv += Aᵀ · gout.
                        let go = &g[ex * nq * n * n..][..nq * n * n];
                        let acc = extra.is_some();
                        let vt = Mat::strided(&y[2 * nq..], n, nq, w3, 1);
                        matmul(MatMut::strided(ga, nq * n, nq, 1, nq * n), Mat::new(go, nq * n, n), vt, acc, Par::Seq);
                        matmul(
                            MatMut::strided(&mut gy[2 * nq..], nq, n, 1, w3),
                            Mat::new(a, nq, nq * n),
                            Mat::new(go, nq * n, n),
                            acc,
                            Par::Seq,
                        );
                    }
                    attention_backward(n, nq, y, a, ga, gy);
                }
            },
        );
        drop(gatt);
        // The layer norm: weight and bias gradients, then d loss / d projection in place.
        {
            let (glnw, glnb) = Slot::pair_mut(ln.weight, ln.bias, param_grads);
            let (glnw, glnb) = (glnw.slice_mut::<T>(len)?, glnb.slice_mut::<T>(len)?);
            for (gy, x) in gn.chunks_exact(len).zip(xhat.chunks_exact(len)) {
                for j in 0..len {
                    glnw[j] += gy[j] * x[j];
                    glnb[j] += gy[j];
                }
            }
        }
        let group = group_size(batch, batch * len * 6);
        gn.par_chunks_mut(group * len).enumerate().for_each(|(gi, gn)| {
            for (k, gy) in gn.chunks_exact_mut(len).enumerate() {
                let ex = gi * group + k;
                layer_norm_backward(lnw, &xhat[ex * len..][..len], rstd[ex], gy);
            }
        });
        let gm = bw.dense_backward(*qkv, &gn, mr.slice::<T>()?, bw.needs[0], param_grads)?;
        bw.input_grads([gm])
    }
}

multiversion! {
    /// One example: normalises the projection `x` (`[n, 3nq]`) in place into `x̂`, writes
    /// `y = x̂ ⊙ w + b` and the attention weights `a[j, s, e] = tanh(y[e, s] y[e, nq + j])`;
    /// returns `1/σ`.
    fn ln_attention_forward[T: Real][T](n: usize, nq: usize, w: &[T], b: &[T], x: &mut [T], y: &mut [T], a: &mut [T]) -> T {
        let w3 = 3 * nq;
        let len = n * w3;
        let (w, b, y) = (&w[..len], &b[..len], &mut y[..len]);
        let x = &mut x[..len];
        let inv = T::one() / T::from_f64(len as f64);
        let mean = sum(x) * inv;
        let var = sum_sq_dev(x, mean) * inv;
        let r = T::one() / (var + T::from_f64(EPS)).sqrt();
        for j in 0..len {
            let xv = (x[j] - mean) * r;
            x[j] = xv;
            y[j] = xv * w[j] + b[j];
        }
        attention_weights(n, nq, y, a);
        r
    }
}

multiversion! {
    /// One example's layer norm backward, in place: `gy = d loss / d y` becomes
    /// `d loss / d x = (1/σ)(g − mean(g) − x̂ mean(g ⊙ x̂))` with `g = gy ⊙ w`.
    fn layer_norm_backward[T: Real][T](w: &[T], xhat: &[T], r: T, gy: &mut [T]) {
        let len = gy.len();
        let (w, x) = (&w[..len], &xhat[..len]);
        for j in 0..len {
            gy[j] *= w[j];
        }
        let inv = T::one() / T::from_f64(len as f64);
        let (m1, m2) = (sum(gy) * inv, dot(gy, x) * inv);
        for j in 0..len {
            gy[j] = r * (gy[j] - m1 - x[j] * m2);
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::prims::contract::testing::*;

    #[test]
    fn shapes_and_parameters() {
        assert_eq!(out_shapes("samRead", &[("M", t(&[4, 4])), ("nq", int(2))]), vec![vec![2, 4, 4]]);
        // qkv: 4·6 + 6; joint LayerNorm over [4, 6]: 2 · 24.
        assert_eq!(param_count("samRead", &[("M", t(&[4, 4])), ("nq", int(2))]), 30 + 48);
        assert!(error("samRead", &[("M", t(&[2, 4, 4])), ("nq", int(2))]).contains("2 dimensions"));
        assert!(error("samRead", &[("M", t(&[4, 4])), ("nq", int(0))]).contains("`nq` must be a size"));
    }
}
