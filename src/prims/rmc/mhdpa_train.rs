//! `mhdpa`'s manual backward: the training forward on plain slices, keeping what the backward
//! needs per block, and the backward through the blocks in reverse. The formulas are those of
//! `MhdpaOp::forward` (the parent module); the registry's checks compare the two.
//!
//! Every dense layer and layer norm works row by row, so they run on all `B·R` rows at once
//! (`R = N + 1`, the memory rows and the input row); only the attention is per example and
//! head.

use candle_core::{Result, Tensor};

use super::*;
use crate::kernels::cpu::dense::{backward_slices, forward_slices};
use crate::kernels::cpu::par::multiversion;
use crate::kernels::cpu::real::Real;
use crate::kernels::cpu::row_norm::{backward_rows, forward_rows};
use crate::kernels::cpu::view;

/// A layer norm's saved values: the normalised rows and their `1/σ`.
pub(super) struct NormSaved<T> {
    xhat: Vec<T>,
    rstd: Vec<T>,
}

/// One block's saved values (rows `[B·R, ·]`).
pub(super) struct BlockSaved<T> {
    /// The block's input rows.
    y_in: Vec<T>,
    qkv_norm: NormSaved<T>,
    /// The normalised `qkv` rows (the attention's inputs).
    qkv: Vec<T>,
    /// Attention weights `[B, H, R, R]`.
    weights: Vec<T>,
    attn_norm: NormSaved<T>,
    /// The input of every MLP layer (the first is the attention norm's output), and the
    /// MLP's output.
    mlp_in: Vec<Vec<T>>,
    mlp_norm: NormSaved<T>,
}

/// What the training forward keeps: one entry per block.
pub(super) struct Saved<T> {
    blocks: Vec<BlockSaved<T>>,
}

/// A parameter's values as a slice (the tensors are the call's detached, contiguous weights).
fn values<'a, T: Real>(reads: &'a [view::Read<'a>], slot: Slot) -> Result<&'a [T]> {
    reads[slot.index()].slice::<T>()
}

impl SlicedBackward for MhdpaOp {
    /// A [`Saved`] of the element type.
    type Saved = SavedAny;

    /// `M`: `[B, N, D]`, `x`: `[B, D]`.
    fn forward_typed<T: Real>(&self, inputs: &[&Tensor], params: &[&Tensor]) -> Forward<SavedAny> {
        let [m, x] = op::inputs("mhdpa", inputs)?;
        let Config { n, heads, blocks, mlp } = &self.config;
        let (n, d) = (*n, heads.heads * heads.head_size);
        let (batch, rows) = (m.dim(0)?, n + 1);
        let br = batch * rows;
        let q = heads.heads * (2 * heads.key_size + heads.head_size);
        let reads: Vec<view::Read> = params.iter().map(|p| view::Read::new(p)).collect::<Result<_>>()?;
        let (mr, xr) = (view::Read::new(m)?, view::Read::new(x)?);
        let (ms, xs) = (mr.slice::<T>()?, xr.slice::<T>()?);
        let mut y = Vec::with_capacity(br * d);
        for b in 0..batch {
            y.extend_from_slice(&ms[b * n * d..][..n * d]);
            y.extend_from_slice(&xs[b * d..][..d]);
        }
        let norm = |x: &[T], width: usize, ln: &Norm| -> Result<(Vec<T>, NormSaved<T>)> {
            let (mut xhat, mut out, mut rstd) =
                (vec![T::zero(); x.len()], vec![T::zero(); x.len()], vec![T::zero(); br]);
            let (w, b) = (values::<T>(&reads, ln.weight)?, values::<T>(&reads, ln.bias)?);
            forward_rows(x, width, w, b, &mut xhat, &mut out, &mut rstd);
            Ok((out, NormSaved { xhat, rstd }))
        };
        let dense = |x: &[T], layer: &Dense, wt: &Transposed, fan_in: usize, fan_out: usize| -> Result<Vec<T>> {
            let wt = wt.of(layer.weight.of(params))?;
            let wt = view::Read::new(&wt)?;
            Ok(forward_slices(x, br, wt.slice::<T>()?, Some(values::<T>(&reads, layer.bias)?), fan_in, fan_out))
        };
        let mut saved = Vec::with_capacity(blocks.len());
        for (bi, block) in blocks.iter().enumerate() {
            let pre = dense(&y, &block.qkv, &self.qkv_t[bi], d, q)?;
            let (qkv, qkv_norm) = norm(&pre, q, &block.qkv_ln)?;
            let mut attended = vec![T::zero(); br * d];
            let mut weights = vec![T::zero(); batch * heads.heads * rows * rows];
            attention_forward(*heads, rows, &qkv, &mut attended, &mut weights);
            for (a, v) in attended.iter_mut().zip(&y) {
                *a += *v;
            }
            let (y1, attn_norm) = norm(&attended, d, &block.attn_ln)?;
            let mut mlp_in = vec![y1];
            for (l, layer) in mlp.iter().enumerate() {
                let mut h = dense(&mlp_in[l], layer, &self.mlp_t[l], d, d)?;
                if l + 1 < mlp.len() {
                    for v in &mut h {
                        *v = v.max(T::zero());
                    }
                }
                mlp_in.push(h);
            }
            let mut z = mlp_in.last().cloned().unwrap_or_default();
            for (a, v) in z.iter_mut().zip(&mlp_in[0]) {
                *a += *v;
            }
            let (y2, mlp_norm) = norm(&z, d, &block.mlp_ln)?;
            saved.push(BlockSaved {
                y_in: std::mem::replace(&mut y, y2),
                qkv_norm,
                qkv,
                weights,
                attn_norm,
                mlp_in,
                mlp_norm,
            });
        }
        let mut out = Vec::with_capacity(batch * n * d);
        for b in 0..batch {
            out.extend_from_slice(&y[b * rows * d..][..n * d]);
        }
        Ok((vec![view::tensor(out, (batch, n, d))?], Box::new(Saved { blocks: saved })))
    }

    /// The gradients of `M` and `x` from that of `M̃`; adds every parameter's.
    fn backward_typed<T: Real>(&self, bw: &Backward<'_, SavedAny>, param_grads: &mut [ParamGrad]) -> InputGrads {
        let Some(saved) = bw.saved.downcast_ref::<Saved<T>>() else {
            candle_core::bail!("internal: mhdpa's backward received saved values of another type")
        };
        let Config { n, heads, blocks, mlp } = &self.config;
        let (n, d) = (*n, heads.heads * heads.head_size);
        let [m, _] = bw.inputs_of()?;
        let (batch, rows) = (m.dim(0)?, n + 1);
        let br = batch * rows;
        let q = heads.heads * (2 * heads.key_size + heads.head_size);
        let reads: Vec<view::Read> = bw.params.iter().map(|p| view::Read::new(p)).collect::<Result<_>>()?;
        let gout = bw.grad_or_zeros(0)?;
        let gr = view::Read::new(&gout)?;
        let gs = gr.slice::<T>()?;
        // d loss / d the rows after the last block; the dropped input row has none.
        let mut gy = vec![T::zero(); br * d];
        for b in 0..batch {
            gy[b * rows * d..][..n * d].copy_from_slice(&gs[b * n * d..][..n * d]);
        }
        let norm_back =
            |gy: &[T], s: &NormSaved<T>, width: usize, ln: &Norm, grads: &mut [ParamGrad]| -> Result<Vec<T>> {
                let mut gx = vec![T::zero(); gy.len()];
                let w = values::<T>(&reads, ln.weight)?;
                let (gw, gb) = Slot::pair_mut(ln.weight, ln.bias, grads);
                backward_rows(
                    gy,
                    &s.xhat,
                    &s.rstd,
                    width,
                    w,
                    &mut gx,
                    gw.slice_mut::<T>(width)?,
                    gb.slice_mut::<T>(width)?,
                );
                Ok(gx)
            };
        // The dense layers' backward: parameters' gradients added, the input's returned.
        let dense_back = |gy: &[T],
                          x: &[T],
                          layer: &Dense,
                          fan_in: usize,
                          fan_out: usize,
                          grads: &mut [ParamGrad]|
         -> Result<Vec<T>> {
            let w = values::<T>(&reads, layer.weight)?;
            let (gw, gb) = Slot::pair_mut(layer.weight, layer.bias, grads);
            let gx = backward_slices(
                gy,
                x,
                br,
                w,
                fan_in,
                fan_out,
                Some(gw.slice_mut::<T>(fan_in * fan_out)?),
                Some(gb.slice_mut::<T>(fan_out)?),
                true,
            );
            Ok(gx.unwrap_or_default())
        };
        for (block, s) in blocks.iter().zip(&saved.blocks).rev() {
            let gz = norm_back(&gy, &s.mlp_norm, d, &block.mlp_ln, param_grads)?;
            // z = y1 + MLP(y1): the residual's gradient, then the MLP's.
            let mut gy1 = gz.clone();
            let mut gh = gz;
            for (l, layer) in mlp.iter().enumerate().rev() {
                if l + 1 < mlp.len() {
                    for (g, &h) in gh.iter_mut().zip(&s.mlp_in[l + 1]) {
                        if h <= T::zero() {
                            *g = T::zero();
                        }
                    }
                }
                gh = dense_back(&gh, &s.mlp_in[l], layer, d, d, param_grads)?;
            }
            for (a, g) in gy1.iter_mut().zip(&gh) {
                *a += *g;
            }
            // attended + y: the residual's gradient, then the attention's.
            let g_attn = norm_back(&gy1, &s.attn_norm, d, &block.attn_ln, param_grads)?;
            let mut gqkv = vec![T::zero(); br * q];
            attention_backward(*heads, rows, &s.qkv, &s.weights, &g_attn, &mut gqkv);
            let gpre = norm_back(&gqkv, &s.qkv_norm, q, &block.qkv_ln, param_grads)?;
            let g_in = dense_back(&gpre, &s.y_in, &block.qkv, d, q, param_grads)?;
            gy = g_attn;
            for (a, g) in gy.iter_mut().zip(&g_in) {
                *a += *g;
            }
        }
        let (mut gm, mut gx) = (Vec::with_capacity(batch * n * d), Vec::with_capacity(batch * d));
        for b in 0..batch {
            gm.extend_from_slice(&gy[b * rows * d..][..n * d]);
            gx.extend_from_slice(&gy[(b * rows + n) * d..][..d]);
        }
        bw.input_grads([Some(gm), Some(gx)])
    }
}

multiversion! {
    /// Per example and head: `A_h = softmax(q_h k_hᵀ / √key_size) v_h` over the `rows` rows of
    /// `qkv` (`[B·rows, heads·(2k+v)]`, head-major), heads concatenated into `out`
    /// (`[B·rows, heads·v]`); the weights into `weights` (`[B, heads, rows, rows]`).
    fn attention_forward[T: Real][T](shape: Heads, rows: usize, qkv: &[T], out: &mut [T], weights: &mut [T]) {
        let Heads { heads, key_size: k, head_size: v } = shape;
        let (width, d) = (heads * (2 * k + v), heads * v);
        let scale = T::one() / T::from_f64(k as f64).sqrt();
        let batch = out.len() / (rows * d);
        for b in 0..batch {
            for h in 0..heads {
                let at = |r: usize, off: usize| (b * rows + r) * width + h * (2 * k + v) + off;
                let p = &mut weights[(b * heads + h) * rows * rows..][..rows * rows];
                for i in 0..rows {
                    let pi = &mut p[i * rows..][..rows];
                    let mut max = T::from_f64(f64::NEG_INFINITY);
                    for j in 0..rows {
                        let mut dot = T::zero();
                        for c in 0..k {
                            dot += qkv[at(i, c)] * qkv[at(j, k + c)];
                        }
                        pi[j] = dot * scale;
                        max = max.max(pi[j]);
                    }
                    let mut sum = T::zero();
                    for w in pi.iter_mut() {
                        *w = (*w - max).exp();
                        sum += *w;
                    }
                    for w in pi.iter_mut() {
                        *w /= sum;
                    }
                    let o = &mut out[(b * rows + i) * d + h * v..][..v];
                    for j in 0..rows {
                        let vj = &qkv[at(j, 2 * k)..][..v];
                        for c in 0..v {
                            o[c] += pi[j] * vj[c];
                        }
                    }
                }
            }
        }
    }
}

multiversion! {
    /// The backward of [`attention_forward`]: from `gout` (`[B·rows, heads·v]`) writes the
    /// gradients of `q`, `k` and `v` into `gqkv` (zeroed, the layout of `qkv`).
    fn attention_backward[T: Real][T](shape: Heads, rows: usize, qkv: &[T], weights: &[T], gout: &[T], gqkv: &mut [T]) {
        let Heads { heads, key_size: k, head_size: v } = shape;
        let (width, d) = (heads * (2 * k + v), heads * v);
        let scale = T::one() / T::from_f64(k as f64).sqrt();
        let batch = gout.len() / (rows * d);
        let mut gl = vec![T::zero(); rows];
        for b in 0..batch {
            for h in 0..heads {
                let at = |r: usize, off: usize| (b * rows + r) * width + h * (2 * k + v) + off;
                let p = &weights[(b * heads + h) * rows * rows..][..rows * rows];
                for i in 0..rows {
                    let (pi, go) = (&p[i * rows..][..rows], &gout[(b * rows + i) * d + h * v..][..v]);
                    // gp_j = ⟨go, v_j⟩; g logits = p ⊙ (gp − ⟨p, gp⟩); gv_j += p_j go.
                    let mut dot = T::zero();
                    for j in 0..rows {
                        let mut gp = T::zero();
                        for c in 0..v {
                            gp += go[c] * qkv[at(j, 2 * k + c)];
                            gqkv[at(j, 2 * k + c)] += pi[j] * go[c];
                        }
                        gl[j] = gp;
                        dot += pi[j] * gp;
                    }
                    for j in 0..rows {
                        let g = pi[j] * (gl[j] - dot) * scale;
                        for c in 0..k {
                            gqkv[at(i, c)] += g * qkv[at(j, k + c)];
                            gqkv[at(j, k + c)] += g * qkv[at(i, c)];
                        }
                    }
                }
            }
        }
    }
}
