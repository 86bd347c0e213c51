//! `div(a, b)` = `a / b`, element-wise with broadcasting.
use crate::signature::Example;
super::binary::binary_broadcast!(Div, "div", "element-wise a / b (the `/` operator)", Div, |a, b| a.broadcast_div(b));

fn examples() -> Vec<Example> {
    use crate::signature::example_args::*;
    vec![
        Example::new([("a", t(&[3])), ("b", t(&[]))]),
        Example::new([("a", t(&[2, 3])), ("b", t(&[2, 3]))]),
        Example::new([("a", t(&[3])), ("b", shared(&[]))]),
        Example::new([("a", shared(&[])), ("b", t(&[2, 3]))]),
        Example::new([("a", t(&[2, 3])), ("b", t(&[3]))]),
    ]
}

#[cfg(test)]
mod tests {
    use crate::prims::contract::testing::*;

    #[test]
    fn values() {
        assert_eq!(run("div", &[("a", t(&[2])), ("b", t(&[2]))], &[vec![1.0, 3.0], vec![2.0, 4.0]]), vec![0.5, 0.75]);
    }
}
