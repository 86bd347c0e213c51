//! `flatten(x)`: all per-example axes as one, `[a, b, ...] → [a·b·...]` (row-major); a scalar
//! becomes `[1]`. The batch axis is kept.

use candle_core::Tensor;

use super::*;

pub struct Flatten;

static SIGNATURE: [ArgSpec; 1] = [ArgSpec::tensor("x")];

impl Primitive for Flatten {
    fn name(&self) -> &'static str {
        "flatten"
    }
    fn summary(&self) -> &'static str {
        "all per-example axes flattened into one (row-major)"
    }
    fn signature(&self) -> &'static [ArgSpec] {
        &SIGNATURE
    }
    fn instantiate(&self, args: &Args) -> Result<Instance, PrimError> {
        let n = args.shape("x")?.iter().product::<usize>();
        Ok(Instance::new(FlattenOp { n }, vec![Ty::Tensor(vec![n])], vec![], 0))
    }
}

struct FlattenOp {
    n: usize,
}

impl Op for FlattenOp {
    fn forward(&self, inputs: &[&Tensor], _params: &[&Tensor]) -> candle_core::Result<Vec<Tensor>> {
        Ok(vec![inputs[0].reshape((inputs[0].dim(0)?, self.n))?])
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;

    #[test]
    fn values_shapes_and_gradients() {
        assert_eq!(out_shapes("flatten", &[("x", t(&[2, 3, 4]))]), vec![vec![24]]);
        assert_eq!(out_shapes("flatten", &[("x", t(&[]))]), vec![vec![1]]);
        assert_eq!(run("flatten", &[("x", t(&[2, 2]))], &[vec![1.0, 2.0, 3.0, 4.0]]), vec![1.0, 2.0, 3.0, 4.0]);
        grad_check("flatten", &[("x", t(&[2, 3]))]);
    }
}
