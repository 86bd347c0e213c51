//! `itemWrite(M, a, b?, gated = true)`: the item memory write of STM (SAM paper Eq. 9–10, App. D).
//!
//! Shapes: `M: [d, d]`, `a: [d]`, optional `b: [d]` → `[d, d]`.
//! - Write candidate `X = a ⊗ b`; without `b`, `X = a ⊗ a`. The paper writes `f1(x) ⊗ f2(x)`;
//!   the authors' code writes `f1(x) ⊗ f1(x)` (reference.md §1.2, DIFF 1). memctl's STM spec
//!   follows the code by passing only `a`; pass `b` for the paper's form.
//! - Ungated (Eq. 9, the "w/o gates" ablation): `M' = M + X`.
//! - Gated, as the authors' code (not the paper's App. D, which has no squashing and uses raw
//!   `x`): `G = U tanh(M) + (W a)` row-wise, `I = σ(G[:, :d] + b_in)`, `F = σ(G[:, d:] + b_forget)`,
//!   `M' = I ⊙ tanh(X) + F ⊙ M` — note the `tanh` on `X` (DIFF 2) and the sigmoids (DIFF 3).
//!   `gate_in`, `gate_mem`: dense `d → 2d`; scalar biases `b_in = 0`, `b_forget = 1` at init.

use candle_core::{D, Tensor};

use super::*;
use crate::kernels::dense::dense;

pub struct ItemWrite;

static SIGNATURE: [ArgSpec; 4] = [
    ArgSpec::tensor("M"),
    ArgSpec::tensor("a"),
    ArgSpec::optional_tensor("b"),
    ArgSpec::value("gated", Kind::Bool, Default::Bool(true)),
];

impl Primitive for ItemWrite {
    fn name(&self) -> &'static str {
        "itemWrite"
    }
    fn summary(&self) -> &'static str {
        "STM item memory write M' = I ⊙ tanh(a ⊗ b) + F ⊙ M, or M + a ⊗ b ungated (SAM Eq. 9-10)"
    }
    fn signature(&self) -> &'static [ArgSpec] {
        &SIGNATURE
    }
    fn instantiate(&self, args: &Args) -> Result<Instance, PrimError> {
        let m = args.shape_of_rank("M", 2, "a square matrix")?;
        let d = m[0];
        if m[1] != d {
            return Err(PrimError::shape_mismatch("M", &[d, d], m, "(the item memory is square)"));
        }
        let a = args.shape("a")?;
        if a != &vec![d] {
            return Err(PrimError::shape_mismatch("a", &[d], a, "to write into a [d, d] memory"));
        }
        let has_b = args.is_present("b");
        if has_b {
            let b = args.shape("b")?;
            if b != &vec![d] {
                return Err(PrimError::shape_mismatch("b", &[d], b, "to write into a [d, d] memory"));
            }
        }
        let gated = args.bool("gated")?;
        let mut params = vec![];
        let mut flops = (d * d) as u64; // the outer product
        if gated {
            params.extend(ParamDecl::dense("gate_in", d, 2 * d));
            params.extend(ParamDecl::dense("gate_mem", d, 2 * d));
            params.push(ParamDecl::new("b_in", vec![1], Init::Constant(0.0)));
            params.push(ParamDecl::new("b_forget", vec![1], Init::Constant(1.0)));
            flops += (2 * d * 2 * d * d + 2 * d * 2 * d + 12 * d * d) as u64;
        } else {
            flops += (d * d) as u64;
        }
        Ok(Instance::new(ItemWriteOp { d, gated, has_b }, vec![Ty::Tensor(vec![d, d])], params, flops))
    }
}

struct ItemWriteOp {
    d: usize,
    gated: bool,
    has_b: bool,
}

impl Op for ItemWriteOp {
    fn forward(&self, inputs: &[&Tensor], params: &[&Tensor]) -> candle_core::Result<Vec<Tensor>> {
        let (m, a) = (inputs[0], inputs[1]);
        let b = if self.has_b { inputs[2] } else { a };
        let x = a.unsqueeze(D::Minus1)?.broadcast_mul(&b.unsqueeze(1)?)?;
        if !self.gated {
            return Ok(vec![m.broadcast_add(&x)?]);
        }
        let d = self.d;
        let g_mem = dense(&m.tanh()?, params[2], Some(params[3]))?; // [B, d, 2d]
        let g_in = dense(a, params[0], Some(params[1]))?.unsqueeze(1)?; // [B, 1, 2d]
        let g = g_mem.broadcast_add(&g_in)?;
        let input_gate = candle_nn::ops::sigmoid(&g.narrow(D::Minus1, 0, d)?.broadcast_add(params[4])?)?;
        let forget_gate = candle_nn::ops::sigmoid(&g.narrow(D::Minus1, d, d)?.broadcast_add(params[5])?)?;
        let written = input_gate.broadcast_mul(&x.tanh()?)?;
        Ok(vec![(written + forget_gate.broadcast_mul(m)?)?])
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;

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

    #[test]
    fn gradients_match_finite_differences() {
        grad_check("itemWrite", &[("M", t(&[3, 3])), ("a", t(&[3]))]);
        grad_check("itemWrite", &[("M", t(&[3, 3])), ("a", t(&[3])), ("b", t(&[3]))]);
        grad_check("itemWrite", &[("M", t(&[3, 3])), ("a", t(&[3])), ("gated", boolean(false))]);
    }
}
