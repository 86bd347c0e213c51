//! `mul(a, b)` = `a ⊙ b` (also written `a * b`), element-wise with broadcasting.
//! A single number times a tensor (STM's learned α) runs as `kernels::cuda::layers::scale` where
//! memctl's fused ops run.
use crate::signature::Example;
super::binary::binary_broadcast!(
    Mul,
    "mul",
    "element-wise a ⊙ b (the `*` and `⊙` operators)",
    Mul,
    crate::kernels::cuda::layers::scale::mul
);

fn examples() -> Vec<Example> {
    use crate::signature::example_args::*;
    vec![
        Example::new([("a", t(&[2, 3])), ("b", t(&[]))]),
        Example::new([("a", t(&[2, 3])), ("b", t(&[2, 3]))]),
        Example::new([("a", shared(&[])), ("b", t(&[2, 3]))]),
        Example::new([("a", t(&[4, 3])), ("b", shared(&[3]))]),
        // A number per example against the whole example (a gate).
        Example::new([("a", t(&[1])), ("b", t(&[2, 3]))]),
    ]
}

#[cfg(test)]
mod tests {
    use crate::prims::contract::testing::*;

    #[test]
    fn values() {
        assert_eq!(run("mul", &[("a", t(&[2])), ("b", t(&[]))], &[vec![1.0, 2.0], vec![3.0]]), vec![3.0, 6.0]);
    }
}
