//! `relu(x)` = max(x, 0), element-wise.
use super::unary::vector_and_matrix_examples as examples;
super::unary::unary_elementwise!(Relu, "relu", "element-wise max(x, 0)", 1, |x| x.relu(), |y: T| if y > T::zero() {
    T::one()
} else {
    T::zero()
});

#[cfg(test)]
mod tests {
    use crate::prims::contract::testing::*;

    #[test]
    fn values() {
        assert_eq!(run("relu", &[("x", t(&[2]))], &[vec![-1.0, 2.0]]), vec![0.0, 2.0]);
    }
}
