//! `mul(a, b)` = `a ⊙ b` (also written `a * b`), element-wise with broadcasting.
super::binary::binary_broadcast!(Mul, "mul", "element-wise a ⊙ b (the `*` and `⊙` operators)", Mul, |a, b| a
    .broadcast_mul(b));

#[cfg(test)]
mod tests {
    use super::super::testing::*;

    #[test]
    fn values_and_gradients() {
        assert_eq!(run("mul", &[("a", t(&[2])), ("b", t(&[]))], &[vec![1.0, 2.0], vec![3.0]]), vec![3.0, 6.0]);
        grad_check("mul", &[("a", t(&[2, 3])), ("b", t(&[]))]);
    }

    #[test]
    fn manual_backward_matches_autograd() {
        manual_backward_check("mul", &[("a", t(&[2, 3])), ("b", t(&[2, 3]))]);
        manual_backward_check("mul", &[("a", shared(&[])), ("b", t(&[2, 3]))]);
        manual_backward_check("mul", &[("a", t(&[2, 3])), ("b", t(&[]))]);
        manual_backward_check("mul", &[("a", t(&[4, 3])), ("b", shared(&[3]))]);
    }
}
