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

use super::define::primitive;
use super::*;
use crate::kernels::dense::dense;

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
    let op = RmcGateOp { gate, forget_bias, input_bias, gate_in, gate_mem };
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
}

impl Op for RmcGateOp {
    fn forward(&self, inputs: &[&Tensor], params: &[&Tensor]) -> candle_core::Result<Vec<Tensor>> {
        let [m, new, x] = op::inputs("rmcGate", inputs)?;
        let (gate_in, gate_mem) = (&self.gate_in, &self.gate_mem);
        let g_mem = dense(&m.tanh()?, gate_mem.weight.of(params), Some(gate_mem.bias.of(params)))?; // [B, N, 2g]
        let g_in = dense(x, gate_in.weight.of(params), Some(gate_in.bias.of(params)))?.unsqueeze(1)?; // [B, 1, 2g]
        let g = g_mem.broadcast_add(&g_in)?;
        let input_gate = candle_nn::ops::sigmoid(&(g.narrow(D::Minus1, 0, self.gate)? + self.input_bias)?)?;
        let forget_gate = candle_nn::ops::sigmoid(&(g.narrow(D::Minus1, self.gate, self.gate)? + self.forget_bias)?)?;
        let written = input_gate.broadcast_mul(&new.tanh()?)?;
        Ok(vec![written.broadcast_add(&forget_gate.broadcast_mul(m)?)?])
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;

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
