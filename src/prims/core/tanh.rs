//! `tanh(x)`, element-wise.
use super::unary::vector_and_matrix_examples as examples;
super::unary::unary_elementwise!(Tanh, "tanh", "element-wise hyperbolic tangent", 4, |x| x.tanh(), |y: T| T::one()
    - y * y);

#[cfg(test)]
mod tests {
    use crate::prims::contract::testing::*;

    #[test]
    fn values() {
        assert_eq!(run("tanh", &[("x", t(&[2]))], &[vec![0.0, 100.0]]), vec![0.0, 1.0]);
    }
}
