//! `matmul(a, b)` = `a @ b`: `[..., n, k] @ [..., k, m] → [..., n, m]`; a vector on either
//! side is treated as a row (left) or column (right) and that axis is dropped, as in NumPy.

use candle_core::Tensor;

use crate::prims::prelude::*;

primitive! {
    MatMul = "matmul",
    "matrix product a @ b (the `@` operator)",
    args: [tensor("a"), tensor("b")],
    examples: [[("a", t(&[2, 3])), ("b", t(&[3, 2]))], [("a", t(&[3])), ("b", t(&[3, 2]))]],
}

fn configure(args: &Args) -> Result<(impl Op + 'static, Inferred), PrimError> {
    let (a, b) = (args.shape("a")?, args.shape("b")?);
    if a.is_empty() || b.is_empty() {
        let arg = if a.is_empty() { "a" } else { "b" };
        return Err(PrimError::new(PrimErrorKind::Scalar { needs: "`@` needs vectors or matrices" }).on(arg));
    }
    let a_vec = a.len() == 1;
    let b_vec = b.len() == 1;
    let a2: Vec<usize> = if a_vec { vec![1, a[0]] } else { a.clone() };
    let b2: Vec<usize> = if b_vec { vec![b[0], 1] } else { b.clone() };
    let (n, k) = (a2[a2.len() - 2], a2[a2.len() - 1]);
    let (k2, m) = (b2[b2.len() - 2], b2[b2.len() - 1]);
    let lead_a = &a2[..a2.len() - 2];
    let lead_b = &b2[..b2.len() - 2];
    if k != k2 {
        return Err(
            PrimError::new(PrimErrorKind::Incompatible { a: a.clone(), b: b.clone(), how: Combine::Inner }).on("b")
        );
    }
    let lead = crate::kernels::cpu::broadcast::broadcast_shape(lead_a, lead_b).ok_or_else(|| {
        PrimError::new(PrimErrorKind::Incompatible { a: a.clone(), b: b.clone(), how: Combine::BatchBroadcast }).on("b")
    })?;
    let mut out = lead.clone();
    if !a_vec {
        out.push(n);
    }
    if !b_vec {
        out.push(m);
    }
    let flops = (2 * n * k * m * lead.iter().product::<usize>()) as u64;
    Ok((MatMulOp { a_vec, b_vec }, Inferred::new(vec![Ty::Tensor(out)], vec![], flops)))
}

struct MatMulOp {
    a_vec: bool,
    b_vec: bool,
}

impl Op for MatMulOp {
    fn forward(&self, inputs: &[&Tensor], _params: &[&Tensor]) -> candle_core::Result<Vec<Tensor>> {
        let [a, b] = op::inputs("matmul", inputs)?;
        let (mut a, mut b) = (a.clone(), b.clone());
        if self.a_vec {
            a = a.unsqueeze(a.rank() - 1)?;
        }
        if self.b_vec {
            b = b.unsqueeze(b.rank())?;
        }
        let (a, b) = crate::kernels::cpu::broadcast::align(&a, &b)?;
        let mut out = a.broadcast_matmul(&b)?;
        if self.b_vec {
            out = out.squeeze(out.rank() - 1)?;
        }
        if self.a_vec {
            out = out.squeeze(out.rank() - if self.b_vec { 1 } else { 2 })?;
        }
        Ok(vec![out])
    }
}

#[cfg(test)]
mod tests {
    use crate::prims::contract::testing::*;

    #[test]
    fn values_shapes_and_gradients() {
        // [[1, 2], [3, 4]] @ [1, 1] = [3, 7]
        assert_eq!(
            run("matmul", &[("a", t(&[2, 2])), ("b", t(&[2]))], &[vec![1.0, 2.0, 3.0, 4.0], vec![1.0, 1.0]]),
            vec![3.0, 7.0]
        );
        assert_eq!(out_shapes("matmul", &[("a", t(&[3])), ("b", t(&[3, 4]))]), vec![vec![4]]);
        assert_eq!(out_shapes("matmul", &[("a", t(&[2, 3, 4])), ("b", t(&[4, 5]))]), vec![vec![2, 3, 5]]);
        assert!(error("matmul", &[("a", t(&[2, 3])), ("b", t(&[4, 5]))]).contains("inner dimensions differ"));
    }
}
