//! `relu(x)` = max(x, 0), element-wise.
super::unary::unary_elementwise!(Relu, "relu", "element-wise max(x, 0)", 1, |x| x.relu(), |y: T| if y > T::zero() {
    T::one()
} else {
    T::zero()
});

#[cfg(test)]
mod tests {
    use super::super::testing::*;

    #[test]
    fn values_and_gradients() {
        assert_eq!(run("relu", &[("x", t(&[2]))], &[vec![-1.0, 2.0]]), vec![0.0, 2.0]);
        grad_check("relu", &[("x", t(&[3]))]);
        manual_backward_check("relu", &[("x", t(&[2, 3]))]);
    }
}
