//! `sub(a, b)` = `a - b`, broadcasting.
super::binary::binary_broadcast!(Sub, "sub", "element-wise a - b (the `-` operator)", Sub, |a, b| a.broadcast_sub(b));

#[cfg(test)]
mod tests {
    use super::super::testing::*;

    #[test]
    fn values_and_gradients() {
        assert_eq!(run("sub", &[("a", t(&[2])), ("b", t(&[2]))], &[vec![1.0, 2.0], vec![3.0, 5.0]]), vec![-2.0, -3.0]);
        grad_check("sub", &[("a", t(&[2, 3])), ("b", t(&[2, 1]))]);
    }

    #[test]
    fn manual_backward_matches_autograd() {
        manual_backward_check("sub", &[("a", t(&[2, 3])), ("b", t(&[2, 3]))]);
        manual_backward_check("sub", &[("a", t(&[2, 3])), ("b", t(&[2, 1]))]);
        manual_backward_check("sub", &[("a", t(&[2, 3])), ("b", shared(&[]))]);
    }
}
