//! `softmax(x)` over the last axis, in the composed form candle differentiates
//! (`softmax_last_dim` produces no gradient in candle 0.11).
super::unary::unary_elementwise!(Softmax, "softmax", "softmax over the last axis", 5, |x| {
    candle_nn::ops::softmax(x, candle_core::D::Minus1)
});

fn examples() -> Vec<super::Example> {
    use crate::signature::example_args::*;
    vec![super::Example::new([("x", t(&[2, 3]))])]
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;

    #[test]
    fn values() {
        assert_eq!(run("softmax", &[("x", t(&[2]))], &[vec![1.0, 1.0]]), vec![0.5, 0.5]);
    }
}
