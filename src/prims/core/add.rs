//! `add(a, b)` = `a + b`, broadcasting.
use crate::signature::Example;
super::binary::binary_broadcast!(Add, "add", "element-wise a + b (the `+` operator)", Add, |a, b| a.broadcast_add(b));

fn examples() -> Vec<Example> {
    use crate::signature::example_args::*;
    vec![
        Example::new([("a", t(&[2, 3])), ("b", t(&[3]))]),
        Example::new([("a", t(&[2, 3])), ("b", t(&[2, 3]))]),
        Example::new([("a", shared(&[])), ("b", t(&[2, 3]))]),
        // A number per example against the whole example (a gate).
        Example::new([("a", t(&[2, 3])), ("b", t(&[1, 1]))]),
    ]
}

#[cfg(test)]
mod tests {
    use crate::prims::contract::testing::*;

    #[test]
    fn broadcasts_after_the_batch_axis() {
        assert_eq!(out_shapes("add", &[("a", t(&[2, 3])), ("b", t(&[3]))]), vec![vec![2, 3]]);
        assert_eq!(
            run("add", &[("a", t(&[2, 2])), ("b", t(&[2]))], &[vec![1.0, 2.0, 3.0, 4.0], vec![10.0, 20.0]]),
            vec![11.0, 22.0, 13.0, 24.0]
        );
        assert!(error("add", &[("a", t(&[2, 3])), ("b", t(&[2]))]).contains("do not broadcast"));
    }
}
