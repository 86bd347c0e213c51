//! `add(a, b)` = `a + b`, broadcasting.
super::binary::binary_broadcast!(Add, "add", "element-wise a + b (the `+` operator)", Add, |a, b| a.broadcast_add(b));

#[cfg(test)]
mod tests {
    use super::super::testing::*;

    #[test]
    fn broadcasts_after_the_batch_axis() {
        assert_eq!(out_shapes("add", &[("a", t(&[2, 3])), ("b", t(&[3]))]), vec![vec![2, 3]]);
        assert_eq!(
            run("add", &[("a", t(&[2, 2])), ("b", t(&[2]))], &[vec![1.0, 2.0, 3.0, 4.0], vec![10.0, 20.0]]),
            vec![11.0, 22.0, 13.0, 24.0]
        );
        assert!(error("add", &[("a", t(&[2, 3])), ("b", t(&[2]))]).contains("do not broadcast"));
        grad_check("add", &[("a", t(&[2, 3])), ("b", t(&[3]))]);
    }

    #[test]
    fn manual_backward_matches_autograd() {
        manual_backward_check("add", &[("a", t(&[2, 3])), ("b", t(&[2, 3]))]);
        manual_backward_check("add", &[("a", t(&[2, 3])), ("b", t(&[3]))]);
        manual_backward_check("add", &[("a", shared(&[])), ("b", t(&[2, 3]))]);
    }
}
