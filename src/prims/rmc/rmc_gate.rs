//! `rmcGate(M, Mnew, x, style = "unit", forget_bias = 1.0, input_bias = 0.0)`: the LSTM-style
//! gating of the Relational Memory Core (RMC paper Eq. 3–9; docs/models.md, RMC, step 4).
//!
//! Shapes: `M: [N, D]` (the memory of the previous step), `Mnew: [N, D]` (the attended memory
//! `M̃`, e.g. from `mhdpa`), `x: [D]` (the **projected** input row, the same one `mhdpa` saw)
//! → `M_t: [N, D]`.
//!
//! `[i f] = W x + b_W + U tanh(M) + b_U` (`W` on the input row, broadcast over the slots; `U` on
//! every slot), `M_t = σ(i + input_bias) ⊙ tanh(M̃) + σ(f + forget_bias) ⊙ M`.
//! - `style = "unit"`: one gate per element (`W, U: D → 2D`);
//! - `style = "memory"`: one scalar gate per slot (`W, U: D → 2`), broadcast over the row.
//!
//! Follows the official Sonnet code: the `tanh` on `M̃` (the paper's Eq. 7 writes `σ(i) ⊙ g(m̃)`
//! with no squashing), gates computed from `tanh(M)` and the projected input, no output gate
//! (the paper found none needed), and the biases are fixed constants (options), as in Sonnet;
//! the L0SG port learns them. For `gate_style = None` simply use `Mnew` without this primitive.

use candle_core::{D, Tensor};

use crate::kernels::cpu::dense::{Transposed, forward_slices};
use crate::kernels::cpu::elementwise::map1;
use crate::kernels::cpu::par::multiversion;
use crate::kernels::cpu::{real::Real, view};
use crate::kernels::cuda::layers::tanh::tanh;
use crate::prims::prelude::*;

primitive! {
    RmcGate = "rmcGate",
    "RMC gating M' = σ(i + b_i) ⊙ tanh(M̃) + σ(f + b_f) ⊙ M, per unit or per slot (RMC Eq. 3-9, Sonnet form)",
    args: [
        tensor("M"), tensor("Mnew"), tensor("x"), str_or("style", "unit"), float_or("forget_bias", 1.0),
        float_or("input_bias", 0.0),
    ],
}

fn examples() -> Vec<Example> {
    use crate::signature::example_args::*;
    let args = |style: &str| [("M", t(&[3, 4])), ("Mnew", t(&[3, 4])), ("x", t(&[4])), ("style", string(style))];
    vec![Example::new(args("unit")), Example::new(args("memory"))]
}

/// The gating styles: one gate per element, or one per slot.
const STYLES: &[&str] = &["unit", "memory"];

fn configure(args: &Args) -> Result<(RmcGateOp, Inferred), PrimError> {
    let m = args.shape_of_rank("M", 2, "a memory [slots, size]")?.clone();
    let (n, d) = (m[0], m[1]);
    let new = args.shape("Mnew")?;
    if new != &m {
        return Err(PrimError::shape("Mnew", &m, new, "(like the previous memory `M`)"));
    }
    let x = args.shape("x")?;
    if x != &vec![d] {
        return Err(PrimError::shape("x", &[d], x, "(the projected input row)").hint(Hint::ProjectInput { d }));
    }
    let gate = match args.str("style")? {
        "unit" => d,
        "memory" => 1,
        other => {
            return Err(PrimError::new(PrimErrorKind::NotOneOf { choices: STYLES, found: other.to_string() })
                .on("style")
                .hint(Hint::NoGating));
        }
    };
    let forget_bias = args.float("forget_bias")?;
    let input_bias = args.float("input_bias")?;
    let mut params = ParamList::new();
    let (gate_in, gate_mem) = (params.dense("gate_in", d, 2 * gate), params.dense("gate_mem", d, 2 * gate));
    let flops = (2 * d * 2 * gate * (n + 1) + 4 * n * 2 * gate + 10 * n * d) as u64;
    let op = RmcGateOp {
        gate,
        forget_bias,
        input_bias,
        gate_in,
        gate_mem,
        gate_in_t: Transposed::default(),
        gate_mem_t: Transposed::default(),
    };
    Ok((op, Inferred::new(vec![Ty::Tensor(m)], params.into_decls(), flops)))
}

struct RmcGateOp {
    /// Gates per slot: `D` (unit style) or 1 (memory style).
    gate: usize,
    forget_bias: f64,
    input_bias: f64,
    /// `W` on the input row and `U` on every slot of `tanh(M)`, each `D → 2·gate`.
    gate_in: Dense,
    gate_mem: Dense,
    /// Their weights transposed, for the training forward.
    gate_in_t: Transposed,
    gate_mem_t: Transposed,
}

impl WithProducts for RmcGateOp {
    fn with_products(&self, inputs: &[&Tensor], params: &[&Tensor], products: &dyn Products) -> Outputs {
        let [m, new, x] = op::inputs("rmcGate", inputs)?;
        let (gate_in, gate_mem) = (&self.gate_in, &self.gate_mem);
        let g_mem = products.dense(&tanh(m)?, gate_mem.weight.of(params), Some(gate_mem.bias.of(params)))?; // [B, N, 2g]
        let g_in = products.dense(x, gate_in.weight.of(params), Some(gate_in.bias.of(params)))?.unsqueeze(1)?; // [B, 1, 2g]
        let g = g_mem.broadcast_add(&g_in)?;
        let input_gate = candle_nn::ops::sigmoid(&(g.narrow(D::Minus1, 0, self.gate)? + self.input_bias)?)?;
        let forget_gate = candle_nn::ops::sigmoid(&(g.narrow(D::Minus1, self.gate, self.gate)? + self.forget_bias)?)?;
        let written = input_gate.broadcast_mul(&tanh(new)?)?;
        Ok(vec![written.broadcast_add(&forget_gate.broadcast_mul(m)?)?])
    }
}

/// What the gate's training forward keeps (rows `[B·N, ·]`): `tanh M`, `tanh M̃` and the
/// gates `[σ(i), σ(f)]`.
struct GateSaved {
    tanh_m: Tensor,
    tanh_new: Tensor,
    gates: Tensor,
}

impl SlicedBackward for RmcGateOp {
    type Saved = GateSaved;

    fn forward_typed<T: Real>(&self, inputs: &[&Tensor], params: &[&Tensor]) -> Forward<Self::Saved> {
        let [m, new, x] = op::inputs("rmcGate", inputs)?;
        let (batch, n, d) = m.dims3()?;
        let g2 = 2 * self.gate;
        let (mr, nr, xr) = (view::Read::new(m)?, view::Read::new(new)?, view::Read::new(x)?);
        let (ms, ns, xs) = (mr.slice::<T>()?, nr.slice::<T>()?, xr.slice::<T>()?);
        let (um_t, w_t) =
            (self.gate_mem_t.of(self.gate_mem.weight.of(params))?, self.gate_in_t.of(self.gate_in.weight.of(params))?);
        let (um_t, w_t) = (view::Read::new(&um_t)?, view::Read::new(&w_t)?);
        let (bu, bw) =
            (view::Read::new(self.gate_mem.bias.of(params))?, view::Read::new(self.gate_in.bias.of(params))?);
        // The project's multiversioned map, so that tanh runs 8 wide.
        let tanh_m = map1(ms, |v: T| v.tanh());
        let mut gates = forward_slices(&tanh_m, batch * n, um_t.slice::<T>()?, Some(bu.slice::<T>()?), d, g2);
        let from_input = forward_slices(xs, batch, w_t.slice::<T>()?, Some(bw.slice::<T>()?), d, g2);
        let (mut tanh_new, mut out) = (vec![T::zero(); batch * n * d], vec![T::zero(); batch * n * d]);
        let biases = [T::from_f64(self.input_bias), T::from_f64(self.forget_bias)];
        for b in 0..batch {
            let rows = b * n..(b + 1) * n;
            gate_forward(
                self.gate,
                biases,
                &from_input[b * g2..][..g2],
                &ms[rows.start * d..rows.end * d],
                &ns[rows.start * d..rows.end * d],
                &mut gates[rows.start * g2..rows.end * g2],
                &mut tanh_new[rows.start * d..rows.end * d],
                &mut out[rows.start * d..rows.end * d],
            );
        }
        let saved = GateSaved {
            tanh_m: view::tensor(tanh_m, (batch * n, d))?,
            tanh_new: view::tensor(tanh_new, (batch * n, d))?,
            gates: view::tensor(gates, (batch * n, g2))?,
        };
        Ok((vec![view::tensor(out, (batch, n, d))?], saved))
    }

    /// `gM = go ⊙ f + (gG U) ⊙ (1 − tanh² M)`, `gM̃ = go ⊙ i ⊙ (1 − tanh² M̃)`, `gx = (Σ_rows gG) W`,
    /// with `gG` the gates' pre-activation gradients.
    fn backward_typed<T: Real>(&self, bw: &Backward<'_, Self::Saved>, param_grads: &mut [ParamGrad]) -> InputGrads {
        let [m, _, x] = bw.inputs_of()?;
        let (batch, n, d) = m.dims3()?;
        let g2 = 2 * self.gate;
        let go = bw.grad_or_zeros(0)?;
        let (gor, mr, xr) = (view::Read::new(&go)?, view::Read::new(m)?, view::Read::new(x)?);
        let (tmr, tnr, gtr) = (
            view::Read::new(&bw.saved.tanh_m)?,
            view::Read::new(&bw.saved.tanh_new)?,
            view::Read::new(&bw.saved.gates)?,
        );
        let (go, ms, xs) = (gor.slice::<T>()?, mr.slice::<T>()?, xr.slice::<T>()?);
        let (tanh_m, tanh_new, gates) = (tmr.slice::<T>()?, tnr.slice::<T>()?, gtr.slice::<T>()?);
        let (mut g_pre, mut g_new, mut g_m) =
            (vec![T::zero(); batch * n * g2], vec![T::zero(); batch * n * d], vec![T::zero(); batch * n * d]);
        gate_backward(self.gate, go, ms, tanh_new, gates, &mut g_pre, &mut g_new, &mut g_m);
        let g_tanh_m = bw.dense_backward(self.gate_mem, &g_pre, tanh_m, bw.needs[0], param_grads)?;
        if let Some(g_tanh_m) = g_tanh_m {
            for ((gm, g), t) in g_m.iter_mut().zip(&g_tanh_m).zip(tanh_m) {
                *gm += *g * (T::one() - *t * *t);
            }
        }
        let mut g_in = vec![T::zero(); batch * g2];
        for (b, rows) in g_pre.chunks_exact(n * g2).enumerate() {
            for row in rows.chunks_exact(g2) {
                for (a, v) in g_in[b * g2..][..g2].iter_mut().zip(row) {
                    *a += *v;
                }
            }
        }
        let gx = bw.dense_backward(self.gate_in, &g_in, xs, bw.needs[2], param_grads)?;
        bw.input_grads([Some(g_m), Some(g_new), gx])
    }
}

multiversion! {
    /// One example's `N` rows: `gates` (`[N, 2g]`, `U tanh M + b_U` on entry) get the input's
    /// part added and become `[σ(i + b_i), σ(f + b_f)]`; writes `tanh M̃` and
    /// `M' = σ(i) ⊙ tanh M̃ + σ(f) ⊙ M` (a gate per element, or one per row when `g = 1`).
    fn gate_forward[T: Real][T](
        gate: usize,
        biases: [T; 2],
        from_input: &[T],
        m: &[T],
        new: &[T],
        gates: &mut [T],
        tanh_new: &mut [T],
        out: &mut [T],
    ) {
        let d = m.len() / (gates.len() / (2 * gate));
        for (r, g) in gates.chunks_exact_mut(2 * gate).enumerate() {
            // Input gates then forget gates, each with its own bias (no division per element).
            for (half, bias) in biases.iter().enumerate() {
                let (gh, xh) = (&mut g[half * gate..][..gate], &from_input[half * gate..][..gate]);
                for (v, &x) in gh.iter_mut().zip(xh) {
                    *v = (*v + x + *bias).sigmoid();
                }
            }
            let (ms, ns) = (&m[r * d..][..d], &new[r * d..][..d]);
            let (ts, os) = (&mut tanh_new[r * d..][..d], &mut out[r * d..][..d]);
            for (t, &v) in ts.iter_mut().zip(ns) {
                *t = v.tanh();
            }
            // Two loops rather than a branch per element, so that each vectorises.
            if gate == 1 {
                for c in 0..d {
                    os[c] = g[0] * ts[c] + g[1] * ms[c];
                }
            } else {
                let (i, f) = g.split_at(gate);
                for c in 0..d {
                    os[c] = i[c] * ts[c] + f[c] * ms[c];
                }
            }
        }
    }
}

multiversion! {
    /// The element-wise backward of [`gate_forward`] over all rows: from `go = d loss / d M'`
    /// writes the gates' pre-activation gradients, `d loss / d M̃` and the direct part of
    /// `d loss / d M` (`go ⊙ f`).
    fn gate_backward[T: Real][T](
        gate: usize,
        go: &[T],
        m: &[T],
        tanh_new: &[T],
        gates: &[T],
        g_pre: &mut [T],
        g_new: &mut [T],
        g_m: &mut [T],
    ) {
        let d = go.len() / (gates.len() / (2 * gate));
        for (r, (g, gp)) in gates.chunks_exact(2 * gate).zip(g_pre.chunks_exact_mut(2 * gate)).enumerate() {
            let (gos, ms, ts) = (&go[r * d..][..d], &m[r * d..][..d], &tanh_new[r * d..][..d]);
            let (gns, gms) = (&mut g_new[r * d..][..d], &mut g_m[r * d..][..d]);
            for c in 0..d {
                let k = if gate == 1 { 0 } else { c };
                let (i, f) = (g[k], g[gate + k]);
                gp[k] += gos[c] * ts[c];
                gp[gate + k] += gos[c] * ms[c];
                gns[c] = gos[c] * i * (T::one() - ts[c] * ts[c]);
                gms[c] = gos[c] * f;
            }
            for k in 0..2 * gate {
                gp[k] *= g[k] * (T::one() - g[k]);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::prims::contract::testing::*;

    fn args(style: &str) -> Vec<(&'static str, TArg)> {
        vec![("M", t(&[3, 4])), ("Mnew", t(&[3, 4])), ("x", t(&[4])), ("style", string(style))]
    }

    #[test]
    fn shapes_and_parameters() {
        assert_eq!(out_shapes("rmcGate", &args("unit")), vec![vec![3, 4]]);
        // gate_in and gate_mem: 4 → 8 each, 'unit'; 4 → 2 each, 'memory'.
        assert_eq!(param_count("rmcGate", &args("unit")), 2 * (4 * 8 + 8));
        assert_eq!(param_count("rmcGate", &args("memory")), 2 * (4 * 2 + 2));
        assert!(error("rmcGate", &args("lstm")).contains("\"unit\" or \"memory\""));
        let bad = [("M", t(&[3, 4])), ("Mnew", t(&[2, 4])), ("x", t(&[4]))];
        assert!(error("rmcGate", &bad).contains("`Mnew` must have shape [3, 4]"));
        let bad = [("M", t(&[3, 4])), ("Mnew", t(&[3, 4])), ("x", t(&[5]))];
        assert!(error("rmcGate", &bad).contains("`x` must have shape [4]"));
    }

    fn data() -> Vec<Vec<f64>> {
        let m: Vec<f64> = (0..12).map(|i| (i as f64 * 0.7).sin()).collect();
        let new: Vec<f64> = (0..12).map(|i| (i as f64 * 1.3).cos() * 2.0).collect();
        vec![m, new, vec![0.5, -1.0, 0.25, 2.0]]
    }

    fn forced(style: &str, forget_bias: f64, input_bias: f64) -> Vec<f64> {
        let mut a = args(style);
        a.extend([("forget_bias", float(forget_bias)), ("input_bias", float(input_bias))]);
        run("rmcGate", &a, &data())
    }

    #[test]
    fn closed_gates_keep_the_memory() {
        for style in ["unit", "memory"] {
            assert_eq!(forced(style, 1e3, -1e3), data()[0], "{style}");
        }
    }

    #[test]
    fn open_gates_replace_the_memory_with_tanh_of_the_attended_memory() {
        let expected: Vec<f64> = data()[1].iter().map(|v| v.tanh()).collect();
        for style in ["unit", "memory"] {
            assert_eq!(forced(style, -1e3, 1e3), expected, "{style}");
        }
    }

    #[test]
    fn memory_style_gates_whole_rows() {
        // Per-slot gates: row n of the output is a_n tanh(M̃_n) + b_n M_n with two scalars. Solve
        // for (a_n, b_n) from the first two columns; the other columns must then agree.
        let out = run("rmcGate", &args("memory"), &data());
        let d = data();
        for r in 0..3 {
            let (m, t) = (&d[0][4 * r..4 * r + 4], d[1][4 * r..4 * r + 4].iter().map(|v| v.tanh()).collect::<Vec<_>>());
            let o = &out[4 * r..4 * r + 4];
            let det = t[0] * m[1] - t[1] * m[0];
            let a = (o[0] * m[1] - o[1] * m[0]) / det;
            let b = (t[0] * o[1] - t[1] * o[0]) / det;
            assert!(a > 0.0 && a < 1.0 && b > 0.0 && b < 1.0, "gates must be in (0, 1): {a}, {b}");
            for c in 2..4 {
                assert!((o[c] - (a * t[c] + b * m[c])).abs() < 1e-12, "row {r} column {c}");
            }
        }
    }
}
