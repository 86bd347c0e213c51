//! `sigmoid(x)`: σ(x) = 1 / (1 + e^-x), element-wise.
super::unary::unary_elementwise!(
    Sigmoid,
    "sigmoid",
    "element-wise logistic σ(x)",
    4,
    |x| { candle_nn::ops::sigmoid(x) },
    |y: T| y * (T::one() - y)
);

#[cfg(test)]
mod tests {
    use super::super::testing::*;

    #[test]
    fn values_and_gradients() {
        assert_eq!(run("sigmoid", &[("x", t(&[2]))], &[vec![0.0, 100.0]]), vec![0.5, 1.0]);
        grad_check("sigmoid", &[("x", t(&[3]))]);
        manual_backward_check("sigmoid", &[("x", t(&[2, 3]))]);
    }
}
