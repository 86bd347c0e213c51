//! `mul(a, b)` = `a ⊙ b` (also written `a * b`), element-wise with broadcasting.
super::binary::binary_broadcast!(Mul, "mul", "element-wise a ⊙ b (the `*` and `⊙` operators)", Mul, |a, b| a
    .broadcast_mul(b));

fn examples() -> Vec<super::Example> {
    use crate::signature::example_args::*;
    vec![
        super::Example::new([("a", t(&[2, 3])), ("b", t(&[]))]),
        super::Example::new([("a", t(&[2, 3])), ("b", t(&[2, 3]))]),
        super::Example::new([("a", shared(&[])), ("b", t(&[2, 3]))]),
        super::Example::new([("a", t(&[4, 3])), ("b", shared(&[3]))]),
    ]
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;

    #[test]
    fn values() {
        assert_eq!(run("mul", &[("a", t(&[2])), ("b", t(&[]))], &[vec![1.0, 2.0], vec![3.0]]), vec![3.0, 6.0]);
    }
}
