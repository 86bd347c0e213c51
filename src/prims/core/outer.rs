//! `outer(a, b)` = `a ⊗ b`: `[..., n] ⊗ [..., m] → [..., n, m]`, leading axes equal.

use candle_core::Tensor;

use crate::kernels::cpu::{real::Real, view};
use crate::prims::prelude::*;

primitive! {
    Outer = "outer",
    "outer product a ⊗ b over the last axes (the `⊗` operator)",
    args: [tensor("a"), tensor("b")],
    examples: [
        [("a", t(&[2, 3])), ("b", t(&[2, 2]))],
        [("a", t(&[4])), ("b", t(&[3]))],
        [("a", shared(&[4])), ("b", t(&[3]))],
    ],
}

fn configure(args: &Args) -> Result<(impl Op + 'static, Inferred), PrimError> {
    let (a, b) = (args.shape("a")?, args.shape("b")?);
    let (Some((&n, lead_a)), Some((&m, lead_b))) = (a.split_last(), b.split_last()) else {
        let arg = if a.is_empty() { "a" } else { "b" };
        return Err(PrimError::new(PrimErrorKind::Scalar { needs: "outer products need vectors (or larger)" }).on(arg));
    };
    if lead_a != lead_b {
        return Err(PrimError::leading_axes_differ("outer", a, b));
    }
    let mut out = lead_a.to_vec();
    out.extend([n, m]);
    let flops = out.iter().product::<usize>() as u64;
    Ok((OuterOp, Inferred::new(vec![Ty::Tensor(out)], vec![], flops)))
}

struct OuterOp;

impl Op for OuterOp {
    fn forward(&self, inputs: &[&Tensor], _params: &[&Tensor]) -> candle_core::Result<Vec<Tensor>> {
        let [a, b] = op::inputs("outer", inputs)?;
        Ok(vec![crate::kernels::cuda::layers::outer::outer(a, b)?])
    }

    fn manual(&self) -> Option<&dyn TrainOp> {
        Some(self)
    }
}

impl SlicedBackward for OuterOp {
    /// Nothing: the backward reads the operands.
    type Saved = ();

    fn forward_typed<T: Real>(&self, inputs: &[&Tensor], _params: &[&Tensor]) -> Forward<()> {
        let [a, b] = op::inputs("outer", inputs)?;
        Ok((vec![outer_forward::<T>(a, b)?], ()))
    }

    /// `d a_i = Σ_j g_ij b_j`, `d b_j = Σ_i g_ij a_i` (row by row).
    fn backward_typed<T: Real>(&self, bw: &Backward<'_, ()>, _param_grads: &mut [ParamGrad]) -> InputGrads {
        let [a, b] = bw.inputs_of()?;
        outer_backward::<T>(a, b, &bw.grad_or_zeros(0)?, bw.needs)
    }
}

fn outer_forward<T: Real>(a: &Tensor, b: &Tensor) -> candle_core::Result<Tensor> {
    let (n, m) = (last(a), last(b));
    let (ar, br) = (view::Read::new(a)?, view::Read::new(b)?);
    let (x, y) = (ar.slice::<T>()?, br.slice::<T>()?);
    let mut out = Vec::with_capacity(x.len() * m);
    for (xs, ys) in x.chunks_exact(n).zip(y.chunks_exact(m)) {
        for &u in xs {
            out.extend(ys.iter().map(|&v| u * v));
        }
    }
    let mut dims = a.dims().to_vec();
    dims.push(m);
    view::tensor(out, dims)
}

fn outer_backward<T: Real>(a: &Tensor, b: &Tensor, g: &Tensor, needs: &[bool]) -> InputGrads {
    let (n, m) = (last(a), last(b));
    let (ar, br, gr) = (view::Read::new(a)?, view::Read::new(b)?, view::Read::new(g)?);
    let (x, y, g) = (ar.slice::<T>()?, br.slice::<T>()?, gr.slice::<T>()?);
    let mut ga = vec![T::zero(); x.len()];
    let mut gb = vec![T::zero(); y.len()];
    for (((xs, ys), gs), (gas, gbs)) in x
        .chunks_exact(n)
        .zip(y.chunks_exact(m))
        .zip(g.chunks_exact(n * m))
        .zip(ga.chunks_exact_mut(n).zip(gb.chunks_exact_mut(m)))
    {
        for (i, row) in gs.chunks_exact(m).enumerate() {
            let mut dot = T::zero();
            for ((&gv, &yv), gbv) in row.iter().zip(ys).zip(gbs.iter_mut()) {
                dot += gv * yv;
                *gbv += gv * xs[i];
            }
            gas[i] = dot;
        }
    }
    Ok(vec![
        if needs[0] { Some(view::tensor(ga, a.dims())?) } else { None },
        if needs[1] { Some(view::tensor(gb, b.dims())?) } else { None },
    ])
}

/// The last axis's size.
fn last(t: &Tensor) -> usize {
    t.dims().last().copied().unwrap_or(1)
}

#[cfg(test)]
mod tests {
    use crate::prims::contract::testing::*;

    #[test]
    fn values_shapes_and_gradients() {
        assert_eq!(
            run("outer", &[("a", t(&[2])), ("b", t(&[2]))], &[vec![1.0, 2.0], vec![3.0, 4.0]]),
            vec![3.0, 4.0, 6.0, 8.0]
        );
        assert_eq!(out_shapes("outer", &[("a", t(&[3, 2])), ("b", t(&[3, 4]))]), vec![vec![3, 2, 4]]);
        assert!(error("outer", &[("a", t(&[3, 2])), ("b", t(&[2, 4]))]).contains("leading axes differ"));
    }
}
