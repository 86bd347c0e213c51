//! `div(a, b)` = `a / b`, element-wise with broadcasting.
super::binary::binary_broadcast!(Div, "div", "element-wise a / b (the `/` operator)", Div, |a, b| a.broadcast_div(b));

#[cfg(test)]
mod tests {
    use super::super::testing::*;

    #[test]
    fn values_and_gradients() {
        assert_eq!(run("div", &[("a", t(&[2])), ("b", t(&[2]))], &[vec![1.0, 3.0], vec![2.0, 4.0]]), vec![0.5, 0.75]);
        grad_check("div", &[("a", t(&[3])), ("b", t(&[]))]);
    }

    #[test]
    fn manual_backward_matches_autograd() {
        manual_backward_check("div", &[("a", t(&[2, 3])), ("b", t(&[2, 3]))]);
        manual_backward_check("div", &[("a", t(&[3])), ("b", shared(&[]))]);
        manual_backward_check("div", &[("a", shared(&[])), ("b", t(&[2, 3]))]);
        manual_backward_check("div", &[("a", t(&[2, 3])), ("b", t(&[3]))]);
    }
}
