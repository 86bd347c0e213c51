//! `flatten(x)`: all per-example axes as one, `[a, b, ...] → [a·b·...]` (row-major); a scalar
//! becomes `[1]`. The batch axis is kept.

use super::reshape::ReshapeOp;
use crate::prims::prelude::*;

primitive! {
    Flatten = "flatten",
    "all per-example axes flattened into one (row-major)",
    args: [tensor("x")],
    examples: [[("x", t(&[2, 3]))]],
}

fn configure(args: &Args) -> Result<(impl Op + 'static, Inferred), PrimError> {
    let n = args.shape("x")?.iter().product::<usize>();
    // A reshape to `[n]`: the same op, forward and backward.
    Ok((ReshapeOp::to(vec![n]), Inferred::new(vec![Ty::Tensor(vec![n])], vec![], 0)))
}

#[cfg(test)]
mod tests {
    use crate::prims::contract::testing::*;

    #[test]
    fn values_shapes_and_gradients() {
        assert_eq!(out_shapes("flatten", &[("x", t(&[2, 3, 4]))]), vec![vec![24]]);
        assert_eq!(out_shapes("flatten", &[("x", t(&[]))]), vec![vec![1]]);
        assert_eq!(run("flatten", &[("x", t(&[2, 2]))], &[vec![1.0, 2.0, 3.0, 4.0]]), vec![1.0, 2.0, 3.0, 4.0]);
    }
}
