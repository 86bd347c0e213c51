//! `itemWrite(M, a, b?, gated = true)`: the item memory write of STM (SAM paper Eq. 9–10, App. D).
//!
//! Shapes: `M: [d, d]`, `a: [d]`, optional `b: [d]` → `[d, d]`.
//! - Write candidate `X = a ⊗ b`; without `b`, `X = a ⊗ a`. The paper writes `f1(x) ⊗ f2(x)`;
//!   the authors' code writes `f1(x) ⊗ f1(x)` (docs/models.md, STM, DIFF 1). memctl's STM spec
//!   follows the code by passing only `a`; pass `b` for the paper's form.
//! - Ungated (Eq. 9, the "w/o gates" ablation): `M' = M + X`.
//! - Gated, as the authors' code (not the paper's App. D, which has no squashing and uses raw
//!   `x`): `G = U tanh(M) + (W a)` row-wise, `I = σ(G[:, :d] + b_in)`, `F = σ(G[:, d:] + b_forget)`,
//!   `M' = I ⊙ tanh(X) + F ⊙ M` — note the `tanh` on `X` (DIFF 2) and the sigmoids (DIFF 3).
//!   `gate_in`, `gate_mem`: dense `d → 2d`; scalar biases `b_in = 0`, `b_forget = 1` at init.

use std::mem::MaybeUninit;

use candle_core::{D, Tensor};
use rayon::prelude::*;

use crate::kernels::cpu::dense::{Transposed, column_sums_into, forward_slices};
use crate::kernels::cpu::elementwise::{map1, map3};
use crate::kernels::cpu::par::{group_size, multiversion};
use crate::kernels::cpu::reduce::dot;
use crate::kernels::cpu::{real::Real, view};
use crate::kernels::cuda::layers::tanh::tanh;
use crate::kernels::cuda::sam::item_gate;
use crate::kernels::cuda::switches::used_for;
use crate::prims::prelude::*;

primitive! {
    ItemWrite = "itemWrite",
    "STM item memory write M' = I ⊙ tanh(a ⊗ b) + F ⊙ M, or M + a ⊗ b ungated (SAM Eq. 9-10)",
    args: [tensor("M"), tensor("a"), optional("b"), bool_or("gated", true)],
    op: |config| ItemWriteOp { config, wi_t: Transposed::default(), wm_t: Transposed::default() },
}

fn examples() -> Vec<Example> {
    use crate::signature::example_args::*;
    let (m3, v3) = (("M", t(&[3, 3])), ("a", t(&[3])));
    vec![
        Example::new([("M", t(&[4, 4])), ("a", t(&[4]))]),
        Example::new([m3.clone(), v3.clone()]),
        Example::new([m3.clone(), v3.clone(), ("b", t(&[3]))]),
        Example::new([m3.clone(), v3.clone(), ("gated", boolean(false))]),
        // Operands of batch 1 beside batched ones: one memory shared by the batch, one vector.
        Example::new([("M", shared(&[3, 3])), v3.clone(), ("b", t(&[3]))]),
        Example::new([m3.clone(), ("a", shared(&[3]))]),
        Example::new([m3, v3, ("b", t(&[3])), ("gated", boolean(false))]),
    ]
}

/// One call, configured.
struct Config {
    d: usize,
    /// Whether `b` is given (else the write is `a ⊗ a`).
    has_b: bool,
    /// The gates' parameters; `None` for the ungated write.
    gates: Option<Gates>,
}

struct Gates {
    /// `d → 2d` on the written vector `a`.
    gate_in: Dense,
    /// `d → 2d` on every row of `tanh(M)`.
    gate_mem: Dense,
    /// Scalar biases of the input and forget gates.
    b_in: Slot,
    b_forget: Slot,
}

fn configure(args: &Args) -> Result<(Config, Inferred), PrimError> {
    let m = args.shape_of_rank("M", 2, "a square matrix")?;
    let d = m[0];
    if m[1] != d {
        return Err(PrimError::shape("M", &[d, d], m, "(the item memory is square)"));
    }
    let a = args.shape("a")?;
    if a != &vec![d] {
        return Err(PrimError::shape("a", &[d], a, "to write into a [d, d] memory"));
    }
    let has_b = args.is_present("b");
    if has_b {
        let b = args.shape("b")?;
        if b != &vec![d] {
            return Err(PrimError::shape("b", &[d], b, "to write into a [d, d] memory"));
        }
    }
    let mut params = ParamList::new();
    let mut flops = (d * d) as u64; // the outer product
    let gates = if args.bool("gated")? {
        flops += (2 * d * 2 * d * d + 2 * d * 2 * d + 12 * d * d) as u64;
        Some(Gates {
            gate_in: params.dense("gate_in", d, 2 * d),
            gate_mem: params.dense("gate_mem", d, 2 * d),
            b_in: params.push("b_in", vec![1], Init::Constant(0.0)),
            b_forget: params.push("b_forget", vec![1], Init::Constant(1.0)),
        })
    } else {
        flops += (d * d) as u64;
        None
    };
    let inferred = Inferred::new(vec![Ty::Tensor(vec![d, d])], params.into_decls(), flops);
    Ok((Config { d, has_b, gates }, inferred))
}

struct ItemWriteOp {
    config: Config,
    wi_t: Transposed,
    wm_t: Transposed,
}

/// What the gated write's training forward keeps: `tanh(M)`, the gates `[I | F]` (row-wise,
/// `[B, d, 2d]`) and `tanh(X)`.
struct GateValues {
    tanh_m: Tensor,
    gates: Tensor,
    tanh_x: Tensor,
}

impl ItemWriteOp {
    /// `M`, `a` and `b` (`a` again when `b` is not given).
    fn operands<'a>(&self, inputs: &[&'a Tensor]) -> candle_core::Result<(&'a Tensor, &'a Tensor, &'a Tensor)> {
        if self.config.has_b {
            let [m, a, b] = op::inputs("itemWrite", inputs)?;
            Ok((m, a, b))
        } else {
            let [m, a] = op::inputs("itemWrite", inputs)?;
            Ok((m, a, a))
        }
    }
}

impl WithProducts for ItemWriteOp {
    fn with_products(&self, inputs: &[&Tensor], params: &[&Tensor], products: &dyn Products) -> Outputs {
        let (m, a, b) = self.operands(inputs)?;
        let x = crate::kernels::cuda::layers::outer::outer(a, b)?;
        let Some(gates) = &self.config.gates else {
            return Ok(vec![m.broadcast_add(&x)?]);
        };
        let d = self.config.d;
        let (gate_mem, gate_in) = (&gates.gate_mem, &gates.gate_in);
        let g_mem = products.dense(&tanh(m)?, gate_mem.weight.of(params), Some(gate_mem.bias.of(params)))?; // [B, d, 2d]
        let g_in = products.dense(a, gate_in.weight.of(params), Some(gate_in.bias.of(params)))?.unsqueeze(1)?; // [B, 1, 2d]
        // The scalar biases as a value per row, `[rows, 2]` over the `[input | forget]` halves.
        let bias = products.per_row(&Tensor::cat(&[gates.b_in.of(params), gates.b_forget.of(params)], D::Minus1)?)?;
        let rows = bias.dim(0)?;
        if used_for(&g_mem, crate::kernels::cuda::sam::item_gate::ITEM_GATE) {
            // One kernel forward and one backward for the gates, the squashed write and the sum
            // (kernels::cuda::sam::item_gate). The scalar biases join `g_in` ([B, 1, 2d])
            // rather than the whole pre-activation: their gradient is then a sum of B·2d
            // elements, not of B·d·2d.
            let (batch, one, width) = g_in.dims3()?;
            let g_in = g_in
                .reshape((batch, one, 2, width / 2))?
                .broadcast_add(&bias.reshape((rows, 1, 2, 1))?)?
                .reshape((batch, one, width))?;
            let g = g_mem.broadcast_add(&g_in)?;
            // One batch for the three, as the broadcasting ops below would have it (a memory,
            // `a` or `b` of batch 1 spreads over the others'; the initial memory has none).
            let batch = g.dim(0)?.max(x.dim(0)?).max(if m.rank() == 3 { m.dim(0)? } else { 1 });
            let g = g.broadcast_as((batch, d, 2 * d))?;
            let (x, m) = (x.broadcast_as((batch, d, d))?, m.broadcast_as((batch, d, d))?);
            return Ok(vec![item_gate::gated_write(&g, &x, &m)?]);
        }
        let g = g_mem.broadcast_add(&g_in)?;
        let (b_in, b_forget) =
            (bias.narrow(1, 0, 1)?.reshape((rows, 1, 1))?, bias.narrow(1, 1, 1)?.reshape((rows, 1, 1))?);
        let input_gate = candle_nn::ops::sigmoid(&g.narrow(D::Minus1, 0, d)?.broadcast_add(&b_in)?)?;
        let forget_gate = candle_nn::ops::sigmoid(&g.narrow(D::Minus1, d, d)?.broadcast_add(&b_forget)?)?;
        let written = input_gate.broadcast_mul(&tanh(&x)?)?;
        Ok(vec![(written + forget_gate.broadcast_mul(m)?)?])
    }
}

impl ManualBackward for ItemWriteOp {
    /// `None` for the ungated write, which needs nothing saved, and for operands of
    /// different batch sizes, whose backward falls back to candle's autograd.
    type Saved = Option<GateValues>;

    /// Gated: `tanh(M)`, the two gate GEMMs, then one fused pass computing both gates, the
    /// squashed write and the new memory.
    fn forward_train(&self, inputs: &[&Tensor], params: &[&Tensor]) -> Forward<Self::Saved> {
        let (m, _, _) = self.operands(inputs)?;
        let batch = m.dim(0)?;
        if inputs.iter().any(|t| t.dim(0).ok() != Some(batch)) {
            return Ok((vec![self.forward(inputs, params)?.remove(0).contiguous()?], None));
        }
        with_real!(m.dtype(), T => self.train_forward::<T>(inputs, params))
    }

    fn backward(&self, b: &Backward<'_, Self::Saved>, param_grads: &mut [ParamGrad]) -> InputGrads {
        match (&self.config.gates, b.saved) {
            (Some(gates), Some(saved)) => {
                with_real!(b.inputs[0].dtype(), T => self.gated_backward::<T>(gates, saved, b, param_grads))
            }
            (Some(_), None) => via_autograd(self, b, param_grads),
            (None, _) => with_real!(b.inputs[0].dtype(), T => self.ungated_backward::<T>(b)),
        }
    }
}

impl ItemWriteOp {
    fn train_forward<T: Real>(&self, inputs: &[&Tensor], params: &[&Tensor]) -> Forward<Option<GateValues>> {
        let d = self.config.d;
        let (m, a, b) = self.operands(inputs)?;
        let batch = m.dim(0)?;
        let (mr, ar, br) = (view::Read::new(m)?, view::Read::new(a)?, view::Read::new(b)?);
        let (m, a, b) = (mr.slice::<T>()?, ar.slice::<T>()?, br.slice::<T>()?);
        let dims = (batch, d, d);
        let Some(gate) = &self.config.gates else {
            let mut out = m.to_vec();
            for ((o, a), b) in out.chunks_exact_mut(d * d).zip(a.chunks_exact(d)).zip(b.chunks_exact(d)) {
                for (row, &ai) in o.chunks_exact_mut(d).zip(a) {
                    for (v, &bj) in row.iter_mut().zip(b) {
                        *v += ai * bj;
                    }
                }
            }
            return Ok((vec![view::tensor(out, dims)?], None));
        };
        let (wi_t, wm_t) =
            (self.wi_t.of(gate.gate_in.weight.of(params))?, self.wm_t.of(gate.gate_mem.weight.of(params))?);
        let (wit, wmt) = (view::Read::new(&wi_t)?, view::Read::new(&wm_t)?);
        let (bir, bmr) =
            (view::Read::new(gate.gate_in.bias.of(params))?, view::Read::new(gate.gate_mem.bias.of(params))?);
        let (wi, bi, wm, bm) = (wit.slice::<T>()?, bir.slice::<T>()?, wmt.slice::<T>()?, bmr.slice::<T>()?);
        let (b_in, b_f) = (view::scalar::<T>(gate.b_in.of(params))?, view::scalar::<T>(gate.b_forget.of(params))?);
        let tm: Vec<T> = map1(m, |v| v.tanh());
        // Row (example, i) of `gates` holds the pre-activations `[G_in | G_forget]`, then the gates.
        let mut gates = forward_slices(&tm, batch * d, wm, Some(bm), d, 2 * d);
        let g_in = forward_slices(a, batch, wi, Some(bi), d, 2 * d);
        let len = batch * d * d;
        let (mut out, mut tx): (Vec<T>, Vec<T>) = (Vec::with_capacity(len), Vec::with_capacity(len));
        let group = group_size(batch, batch * d * d * 16);
        out.spare_capacity_mut()[..len]
            .par_chunks_mut(group * d * d)
            .zip(tx.spare_capacity_mut()[..len].par_chunks_mut(group * d * d))
            .zip(gates.par_chunks_mut(group * d * 2 * d))
            .enumerate()
            .for_each(|(gi, ((out, tx), gates))| {
                for (k, ((o, t), g)) in out
                    .chunks_exact_mut(d * d)
                    .zip(tx.chunks_exact_mut(d * d))
                    .zip(gates.chunks_exact_mut(2 * d * d))
                    .enumerate()
                {
                    let ex = gi * group + k;
                    let (a, b, m, gin) =
                        (&a[ex * d..][..d], &b[ex * d..][..d], &m[ex * d * d..][..d * d], &g_in[ex * 2 * d..][..2 * d]);
                    gates_forward(d, a, b, m, gin, b_in, b_f, g, t, o);
                }
            });
        // SAFETY: `gates_forward` wrote every element of both, for every example.
        unsafe {
            out.set_len(len);
            tx.set_len(len);
        }
        let saved = GateValues {
            tanh_m: view::tensor(tm, dims)?,
            gates: view::tensor(gates, (batch, d, 2 * d))?,
            tanh_x: view::tensor(tx, dims)?,
        };
        Ok((vec![view::tensor(out, dims)?], Some(saved)))
    }

    /// `M`, `a` and `b` of a backward (`b` is `a` when not given).
    fn backward_operands<'r, S>(&self, bw: &'r Backward<'_, S>) -> candle_core::Result<[&'r Tensor; 3]> {
        if self.config.has_b {
            bw.inputs_of()
        } else {
            let [m, a] = bw.inputs_of()?;
            Ok([m, a, a])
        }
    }

    fn ungated_backward<T: Real>(&self, bw: &Backward<'_, Option<GateValues>>) -> InputGrads {
        let d = self.config.d;
        let [m, a, b] = self.backward_operands(bw)?;
        let (batch, dims) = (m.dim(0)?, m.dims().to_vec());
        let (ar, br) = (view::Read::new(a)?, view::Read::new(b)?);
        let g = bw.grad_or_zeros(0)?;
        let gr = view::Read::new(&g)?;
        let (g, a, b) = (gr.slice::<T>()?, ar.slice::<T>()?, br.slice::<T>()?);
        // d loss / d X[i, j] contracted with b (for a) and a (for b).
        let (mut ga, mut gb) = (vec![T::zero(); batch * d], vec![T::zero(); batch * d]);
        outer_grads(g, a, b, d, &mut ga, &mut gb);
        self.input_grads(bw, bw.needs[0].then(|| g.to_vec()), ga, gb, &dims)
    }

    fn gated_backward<T: Real>(
        &self,
        gate: &Gates,
        saved: &GateValues,
        bw: &Backward<'_, Option<GateValues>>,
        param_grads: &mut [ParamGrad],
    ) -> InputGrads {
        let d = self.config.d;
        let [m, a, b] = self.backward_operands(bw)?;
        let (batch, dims) = (m.dim(0)?, m.dims().to_vec());
        let (mr, ar, br) = (view::Read::new(m)?, view::Read::new(a)?, view::Read::new(b)?);
        let g = bw.grad_or_zeros(0)?;
        let gr = view::Read::new(&g)?;
        let (g, m, a, b) = (gr.slice::<T>()?, mr.slice::<T>()?, ar.slice::<T>()?, br.slice::<T>()?);
        let (mut ga, mut gb) = (vec![T::zero(); batch * d], vec![T::zero(); batch * d]);
        let (tmr, gatesr, txr) =
            (view::Read::new(&saved.tanh_m)?, view::Read::new(&saved.gates)?, view::Read::new(&saved.tanh_x)?);
        let (tm, gates, tx) = (tmr.slice::<T>()?, gatesr.slice::<T>()?, txr.slice::<T>()?);
        // One pass: the pre-activation gradients [gzi | gzf] per row, d loss / d M through
        // the forget gate, and d loss / d X = g ⊙ I ⊙ (1 − tanh² X).
        let len = batch * d * d;
        let (mut gg, mut gm, mut gx): (Vec<T>, Vec<T>, Vec<T>) =
            (Vec::with_capacity(2 * len), Vec::with_capacity(len), Vec::with_capacity(len));
        let group = group_size(batch, batch * d * d * 16);
        gg.spare_capacity_mut()[..2 * len]
            .par_chunks_mut(group * 2 * d * d)
            .zip(gm.spare_capacity_mut()[..len].par_chunks_mut(group * d * d))
            .zip(gx.spare_capacity_mut()[..len].par_chunks_mut(group * d * d))
            .enumerate()
            .for_each(|(gi, ((gg, gm), gx))| {
                let off = gi * group * d * d;
                let n = gm.len();
                gates_backward(
                    d,
                    &g[off..][..n],
                    &m[off..][..n],
                    &tx[off..][..n],
                    &gates[2 * off..][..2 * n],
                    gg,
                    gm,
                    gx,
                );
            });
        // SAFETY: `gates_backward` wrote every element of the three, for every row.
        unsafe {
            gg.set_len(2 * len);
            gm.set_len(len);
            gx.set_len(len);
        }
        outer_grads(&gx, a, b, d, &mut ga, &mut gb);
        drop(gx);
        // G = G_mem (per row) + G_in (per example): G_in's gradient sums the rows.
        let mut g_in = vec![T::zero(); batch * 2 * d];
        for (gi, rows) in g_in.chunks_exact_mut(2 * d).zip(gg.chunks_exact(d * 2 * d)) {
            column_sums_into(rows, 2 * d, gi);
        }
        // The scalar biases: sums of each half over everything (in f64: many small terms of
        // both signs).
        let (mut s_in, mut s_f) = (0.0f64, 0.0f64);
        for row in g_in.chunks_exact(2 * d) {
            for j in 0..d {
                s_in += row[j].to_f64();
                s_f += row[d + j].to_f64();
            }
        }
        gate.b_in.of_mut(param_grads).slice_mut::<T>(1)?[0] += T::from_f64(s_in);
        gate.b_forget.of_mut(param_grads).slice_mut::<T>(1)?[0] += T::from_f64(s_f);
        let ga_in = bw.dense_backward(gate.gate_in, &g_in, a, bw.needs[1], param_grads)?;
        if let Some(ga_in) = ga_in {
            for (x, y) in ga.iter_mut().zip(&ga_in) {
                *x += *y;
            }
        }
        let gtm = bw.dense_backward(gate.gate_mem, &gg, tm, bw.needs[0], param_grads)?;
        let gm = gtm.map(|gtm| map3(&gm, &gtm, tm, |x, y, t| x + y * (T::one() - t * t)));
        self.input_grads(bw, gm, ga, gb, &dims)
    }

    /// The gradients in input order (`b`'s folded into `a`'s when `b` is `a`).
    fn input_grads<T: Real, S>(
        &self,
        bw: &Backward<'_, S>,
        gm: Option<Vec<T>>,
        mut ga: Vec<T>,
        gb: Vec<T>,
        dims: &[usize],
    ) -> InputGrads {
        let d = self.config.d;
        let batch = dims[0];
        let mut out = vec![if bw.needs[0] { gm.map(|g| view::tensor(g, dims)).transpose()? } else { None }];
        if self.config.has_b {
            out.push(if bw.needs[1] { Some(view::tensor(ga, (batch, d))?) } else { None });
            out.push(if bw.needs[2] { Some(view::tensor(gb, (batch, d))?) } else { None });
        } else {
            for (x, y) in ga.iter_mut().zip(&gb) {
                *x += *y;
            }
            out.push(if bw.needs[1] { Some(view::tensor(ga, (batch, d))?) } else { None });
        }
        Ok(out)
    }
}

multiversion! {
    /// One example of the gated write: from the gate pre-activations of the memory rows
    /// (`gates`, `[d, 2d]`, overwritten with the gates `[I | F]`) and of the input (`gin`,
    /// `[2d]`), writes `tanh(a_i b_j)` into `tx` and `I ⊙ tanh(X) + F ⊙ M` into `out`.
    fn gates_forward[T: Real][T](
        d: usize,
        a: &[T],
        b: &[T],
        m: &[T],
        gin: &[T],
        b_in: T,
        b_f: T,
        gates: &mut [T],
        tx: &mut [MaybeUninit<T>],
        out: &mut [MaybeUninit<T>],
    ) {
        let (gin_i, gin_f, b) = (&gin[..d], &gin[d..2 * d], &b[..d]);
        for i in 0..d {
            let (gi, gf) = gates[i * 2 * d..(i + 1) * 2 * d].split_at_mut(d);
            let (o, t, mr) = (&mut out[i * d..(i + 1) * d], &mut tx[i * d..(i + 1) * d], &m[i * d..(i + 1) * d]);
            let ai = a[i];
            for j in 0..d {
                let ig = (gi[j] + gin_i[j] + b_in).sigmoid();
                let fg = (gf[j] + gin_f[j] + b_f).sigmoid();
                let x = (ai * b[j]).tanh();
                gi[j] = ig;
                gf[j] = fg;
                t[j].write(x);
                o[j].write(ig * x + fg * mr[j]);
            }
        }
    }
}

multiversion! {
    /// Rows of the gated write's backward: from `g = d loss / d out`, the memory, `tanh(X)`
    /// and the gates, the pre-activation gradients `[gzi | gzf]` (`gg`), `d loss / d M`
    /// through the forget gate (`gm`) and `d loss / d X` (`gx`).
    fn gates_backward[T: Real][T](
        d: usize,
        g: &[T],
        m: &[T],
        tx: &[T],
        gates: &[T],
        gg: &mut [MaybeUninit<T>],
        gm: &mut [MaybeUninit<T>],
        gx: &mut [MaybeUninit<T>],
    ) {
        let rows = gm.len() / d;
        for r in 0..rows {
            let (g, m, tx) = (&g[r * d..(r + 1) * d], &m[r * d..(r + 1) * d], &tx[r * d..(r + 1) * d]);
            let (ig, fg) = gates[r * 2 * d..(r + 1) * 2 * d].split_at(d);
            let (gzi, gzf) = gg[r * 2 * d..(r + 1) * 2 * d].split_at_mut(d);
            let (gmr, gxr) = (&mut gm[r * d..(r + 1) * d], &mut gx[r * d..(r + 1) * d]);
            for j in 0..d {
                let gv = g[j];
                gzi[j].write(gv * tx[j] * ig[j] * (T::one() - ig[j]));
                gzf[j].write(gv * m[j] * fg[j] * (T::one() - fg[j]));
                gmr[j].write(gv * fg[j]);
                gxr[j].write(gv * ig[j] * (T::one() - tx[j] * tx[j]));
            }
        }
    }
}

multiversion! {
    /// For `X = a ⊗ b` with `gx = d loss / d X` (`[B, d, d]`): adds `gx b` to `ga` and
    /// `gxᵀ a` to `gb`.
    fn outer_grads[T: Real][T](gx: &[T], a: &[T], b: &[T], d: usize, ga: &mut [T], gb: &mut [T]) {
        for (((gx, a), b), (ga, gb)) in gx
            .chunks_exact(d * d)
            .zip(a.chunks_exact(d))
            .zip(b.chunks_exact(d))
            .zip(ga.chunks_exact_mut(d).zip(gb.chunks_exact_mut(d)))
        {
            // The row's dot product apart from the update of `gb`: in one loop, its serial sum
            // kept the whole loop scalar.
            for ((row, &ai), gai) in gx.chunks_exact(d).zip(a).zip(ga.iter_mut()) {
                for (gbj, &g) in gb.iter_mut().zip(row) {
                    *gbj += g * ai;
                }
                *gai += dot(row, b);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::prims::contract::testing::*;

    #[test]
    fn shapes_and_parameters() {
        let args = [("M", t(&[4, 4])), ("a", t(&[4]))];
        assert_eq!(out_shapes("itemWrite", &args), vec![vec![4, 4]]);
        // gate_in and gate_mem: 2 × (4·8 + 8); scalar biases: 2.
        assert_eq!(param_count("itemWrite", &args), 2 * (32 + 8) + 2);
        assert_eq!(param_count("itemWrite", &[("M", t(&[4, 4])), ("a", t(&[4])), ("gated", boolean(false))]), 0);
        assert!(error("itemWrite", &[("M", t(&[4, 4])), ("a", t(&[5]))]).contains("`a` must have shape [4]"));
        assert!(error("itemWrite", &[("M", t(&[4, 3])), ("a", t(&[4]))]).contains("square"));
    }

    #[test]
    fn ungated_write_adds_the_outer_product() {
        let out = run(
            "itemWrite",
            &[("M", t(&[2, 2])), ("a", t(&[2])), ("gated", boolean(false))],
            &[vec![1.0, 2.0, 3.0, 4.0], vec![1.0, 2.0]],
        );
        assert_eq!(out, vec![2.0, 4.0, 5.0, 8.0]);
    }
}
