//! `sigmoid(x)`: σ(x) = 1 / (1 + e^-x), element-wise.
super::unary::unary_elementwise!(
    Sigmoid,
    "sigmoid",
    "element-wise logistic σ(x)",
    4,
    |x| { candle_nn::ops::sigmoid(x) },
    |y: T| y * (T::one() - y)
);

fn examples() -> Vec<super::Example> {
    use crate::signature::example_args::*;
    vec![super::Example::new([("x", t(&[3]))]), super::Example::new([("x", t(&[2, 3]))])]
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;

    #[test]
    fn values() {
        assert_eq!(run("sigmoid", &[("x", t(&[2]))], &[vec![0.0, 100.0]]), vec![0.5, 1.0]);
    }
}
