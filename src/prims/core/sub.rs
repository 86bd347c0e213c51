//! `sub(a, b)` = `a - b`, broadcasting.
use crate::signature::Example;
super::binary::binary_broadcast!(Sub, "sub", "element-wise a - b (the `-` operator)", Sub, |a, b| a.broadcast_sub(b));

fn examples() -> Vec<Example> {
    use crate::signature::example_args::*;
    vec![
        Example::new([("a", t(&[2, 3])), ("b", t(&[2, 1]))]),
        Example::new([("a", t(&[2, 3])), ("b", t(&[2, 3]))]),
        Example::new([("a", t(&[2, 3])), ("b", shared(&[]))]),
        // A number per example against the whole example (a gate).
        Example::new([("a", t(&[])), ("b", t(&[2, 3]))]),
    ]
}

#[cfg(test)]
mod tests {
    use crate::prims::contract::testing::*;

    #[test]
    fn values() {
        assert_eq!(run("sub", &[("a", t(&[2])), ("b", t(&[2]))], &[vec![1.0, 2.0], vec![3.0, 5.0]]), vec![-2.0, -3.0]);
    }
}
