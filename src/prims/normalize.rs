//! `normalize(x)`: `μ(x) = x / max(‖x‖₂, 1e-12)` along the last axis — the papers' unit
//! normalisation (NAM §3.1–3.3), PyTorch's `F.normalize`. On `[H, dh]` it normalises each
//! head's row. An all-zero vector stays zero (and has PyTorch's finite gradient, not NaN).

use candle_core::Tensor;

use super::define::primitive;
use super::*;
use crate::kernels::nam::l2_normalize;

primitive! {
    Normalize = "normalize",
    "unit L2 normalisation μ(x) along the last axis (F.normalize, eps 1e-12)",
    args: [tensor("x")],
    examples: [[("x", t(&[2, 3]))]],
}

fn configure(args: &Args) -> Result<(impl Op + 'static, Inferred), PrimError> {
    let x = args.shape("x")?.clone();
    if x.is_empty() {
        return Err(PrimError::new(PrimErrorKind::Scalar { needs: "normalize works on vectors (or larger)" }).on("x"));
    }
    let flops = 3 * x.iter().product::<usize>() as u64;
    Ok((NormalizeOp, Inferred::new(vec![Ty::Tensor(x)], vec![], flops)))
}

struct NormalizeOp;

impl Op for NormalizeOp {
    fn forward(&self, inputs: &[&Tensor], _params: &[&Tensor]) -> candle_core::Result<Vec<Tensor>> {
        let [x] = op::inputs("normalize", inputs)?;
        Ok(vec![l2_normalize(x)?])
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;

    #[test]
    fn values_shapes_and_gradients() {
        assert_eq!(run("normalize", &[("x", t(&[2]))], &[vec![3.0, 4.0]]), vec![0.6, 0.8]);
        assert_eq!(run("normalize", &[("x", t(&[2, 2]))], &[vec![0.0, -2.0, 0.0, 0.0]]), vec![0.0, -1.0, 0.0, 0.0]);
        assert_eq!(out_shapes("normalize", &[("x", t(&[2, 3]))]), vec![vec![2, 3]]);
        assert!(error("normalize", &[("x", t(&[]))]).contains("scalar"));
    }
}
