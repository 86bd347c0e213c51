//! `sigmoid(x)`: σ(x) = 1 / (1 + e^-x), element-wise.
use super::unary::vector_and_matrix_examples as examples;
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
    use crate::prims::contract::testing::*;

    #[test]
    fn values() {
        assert_eq!(run("sigmoid", &[("x", t(&[2]))], &[vec![0.0, 100.0]]), vec![0.5, 1.0]);
    }
}
