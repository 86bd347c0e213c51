//! `tanh(x)`, element-wise.
super::unary::unary_elementwise!(Tanh, "tanh", "element-wise hyperbolic tangent", 4, |x| x.tanh(), |y: T| T::one()
    - y * y);

fn examples() -> Vec<super::Example> {
    use crate::signature::example_args::*;
    vec![super::Example::new([("x", t(&[3]))]), super::Example::new([("x", t(&[2, 3]))])]
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;

    #[test]
    fn values() {
        assert_eq!(run("tanh", &[("x", t(&[2]))], &[vec![0.0, 100.0]]), vec![0.0, 1.0]);
    }
}
