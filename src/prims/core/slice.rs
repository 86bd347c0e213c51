//! `slice(x, start, size)`: elements `start .. start + size` of the last axis (PyTorch's
//! `narrow(-1, start, size)`), e.g. splitting a controller's `[p_r : p_w]` output.
//! `[..., n] → [..., size]`, `0 ≤ start`, `start + size ≤ n`.

use candle_core::{D, Tensor};

use crate::prims::prelude::*;

primitive! {
    Slice = "slice",
    "elements start .. start + size of the last axis",
    args: [tensor("x"), int("start"), int("size")],
    examples: [[("x", t(&[2, 5])), ("start", int(1)), ("size", int(3))]],
}

fn configure(args: &Args) -> Result<(impl Op + 'static, Inferred), PrimError> {
    let (n, lead) = args.last_axis("x", "slice cuts the last axis of a vector (or larger)")?;
    let start = args.value("start")?.as_int().unwrap_or(-1);
    if start < 0 {
        return Err(PrimError::new(PrimErrorKind::AtLeast { least: 0, found: start }).on("start"));
    }
    let start = start as usize;
    let size = args.size("size")?;
    if start + size > n {
        return Err(PrimError::new(PrimErrorKind::SlicePastEnd { start, end: start + size, len: n })
            .on("size")
            .hint(Hint::SliceSize { start, most: n.saturating_sub(start) }));
    }
    let mut out = lead.to_vec();
    out.push(size);
    Ok((SliceOp { start, size }, Inferred::new(vec![Ty::Tensor(out)], vec![], 0)))
}

struct SliceOp {
    start: usize,
    size: usize,
}

impl Op for SliceOp {
    fn forward(&self, inputs: &[&Tensor], _params: &[&Tensor]) -> candle_core::Result<Vec<Tensor>> {
        let [x] = op::inputs("slice", inputs)?;
        Ok(vec![x.narrow(D::Minus1, self.start, self.size)?])
    }

    fn manual(&self) -> Option<&dyn TrainOp> {
        Some(self)
    }
}

// A shape op: the backward moves the gradient back to where the elements came from.
backward_from_inputs!(SliceOp, |op, b, _param_grads| {
    let [x] = b.inputs_of()?;
    let n = x.dim(D::Minus1)?;
    let pad = |g: &Tensor| g.pad_with_zeros(D::Minus1, op.start, n - op.start - op.size);
    Ok(vec![b.grads[0].as_ref().map(pad).transpose()?])
});

#[cfg(test)]
mod tests {
    use crate::prims::contract::testing::*;

    #[test]
    fn values_shapes_and_gradients() {
        let args = [("x", t(&[4])), ("start", int(1)), ("size", int(2))];
        assert_eq!(run("slice", &args, &[vec![1.0, 2.0, 3.0, 4.0]]), vec![2.0, 3.0]);
        assert_eq!(out_shapes("slice", &[("x", t(&[3, 4])), ("start", int(0)), ("size", int(4))]), vec![vec![3, 4]]);
        assert!(error("slice", &[("x", t(&[4])), ("start", int(3)), ("size", int(2))]).contains("past the end"));
        assert!(error("slice", &[("x", t(&[4])), ("start", int(-1)), ("size", int(2))]).contains("0 or more"));
        assert!(
            error("slice", &[("x", t(&[4])), ("start", int(0)), ("size", int(0))]).contains("`size` must be a size")
        );
    }
}
