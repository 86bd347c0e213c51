//! The parameters a call site owns, declared by the primitive's shape inference.

use crate::ty::{Init, Shape};

/// A parameter one call site owns, named relative to the call site.
#[derive(Clone, Debug, PartialEq)]
pub struct ParamDecl {
    pub name: String,
    pub shape: Shape,
    pub init: Init,
}

impl ParamDecl {
    pub fn new(name: impl Into<String>, shape: Shape, init: Init) -> ParamDecl {
        ParamDecl { name: name.into(), shape, init }
    }
}

fn join(prefix: &str, leaf: &str) -> String {
    if prefix.is_empty() { leaf.to_string() } else { format!("{prefix}.{leaf}") }
}

/// Where one parameter sits among the parameters a call's op receives. A slot comes from the
/// same [`ParamList`] call that declared the parameter, so an op reads its parameters (and
/// their gradients) by name-bearing fields, and the order can never drift from the declaration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Slot(usize);

impl Slot {
    /// This parameter among the op's parameters (in declared order). The compiler hands an
    /// op exactly the parameters it declared (checked once, when the op is built), so an
    /// out-of-range slot is a bug in memctl.
    pub fn of<'a, T: ?Sized>(self, xs: &[&'a T]) -> &'a T {
        xs[self.0]
    }

    /// This parameter's entry in a list in declared order, mutably (e.g. its gradient).
    pub fn of_mut<T>(self, xs: &mut [T]) -> &mut T {
        &mut xs[self.0]
    }

    /// Two distinct parameters of `xs`, both mutable (e.g. a weight's and a bias's gradients).
    pub fn pair_mut<T>(a: Slot, b: Slot, xs: &mut [T]) -> (&mut T, &mut T) {
        assert_ne!(a, b, "a parameter slot paired with itself");
        if a.0 < b.0 {
            let (lo, hi) = xs.split_at_mut(b.0);
            (&mut lo[a.0], &mut hi[0])
        } else {
            let (lo, hi) = xs.split_at_mut(a.0);
            (&mut hi[0], &mut lo[b.0])
        }
    }

    /// The position among the declared parameters.
    pub fn index(self) -> usize {
        self.0
    }
}

/// A dense layer's parameters: `weight [fan_out, fan_in]` and `bias [fan_out]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Dense {
    pub weight: Slot,
    pub bias: Slot,
}

/// A normalisation's affine map: `weight [size]` (init 1) and `bias [size]` (init 0).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Norm {
    pub weight: Slot,
    pub bias: Slot,
}

/// Declares a call's parameters one by one, handing back the [`Slot`] of each.
#[derive(Debug, Default)]
pub struct ParamList {
    decls: Vec<ParamDecl>,
}

impl ParamList {
    pub fn new() -> ParamList {
        ParamList::default()
    }

    pub fn push(&mut self, name: impl Into<String>, shape: Shape, init: Init) -> Slot {
        self.decls.push(ParamDecl::new(name, shape, init));
        Slot(self.decls.len() - 1)
    }

    /// A `fan_in → fan_out` dense layer named `prefix` (`prefix.weight`, `prefix.bias`; plain
    /// `weight`, `bias` for an empty prefix), with PyTorch's default init U(±1/√fan_in), which the
    /// authors' code relies on.
    pub fn dense(&mut self, prefix: &str, fan_in: usize, fan_out: usize) -> Dense {
        let weight = self.dense_weight(prefix, fan_in, fan_out);
        let bound = 1.0 / (fan_in as f64).sqrt();
        let bias = self.push(join(prefix, "bias"), vec![fan_out], Init::Uniform(bound));
        Dense { weight, bias }
    }

    /// A dense layer's weight alone (a layer without a bias).
    pub fn dense_weight(&mut self, prefix: &str, fan_in: usize, fan_out: usize) -> Slot {
        let bound = 1.0 / (fan_in as f64).sqrt();
        self.push(join(prefix, "weight"), vec![fan_out, fan_in], Init::Uniform(bound))
    }

    /// The two dense layers of a PyTorch RNN cell with `gates` gates of `hidden` units on an input
    /// of `fan_in`: `w_ih, b_ih` on the input and `w_hh, b_hh` on the state, each `→ gates·hidden`,
    /// every one initialised U(±1/√hidden) as PyTorch's cells are.
    pub fn rnn_cell(&mut self, gates: usize, hidden: usize, fan_in: usize) -> (Dense, Dense) {
        let init = Init::Uniform(1.0 / (hidden as f64).sqrt());
        let mut layer = |suffix: &str, fan_in: usize| Dense {
            weight: self.push(format!("w_{suffix}"), vec![gates * hidden, fan_in], init.clone()),
            bias: self.push(format!("b_{suffix}"), vec![gates * hidden], init.clone()),
        };
        (layer("ih", fan_in), layer("hh", hidden))
    }

    /// A layer norm's affine map over `size` elements, named `prefix` like [`ParamList::dense`].
    pub fn norm(&mut self, prefix: &str, size: usize) -> Norm {
        let weight = self.push(join(prefix, "weight"), vec![size], Init::Constant(1.0));
        let bias = self.push(join(prefix, "bias"), vec![size], Init::Constant(0.0));
        Norm { weight, bias }
    }

    pub fn len(&self) -> usize {
        self.decls.len()
    }

    pub fn is_empty(&self) -> bool {
        self.decls.is_empty()
    }

    pub fn into_decls(self) -> Vec<ParamDecl> {
        self.decls
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_follow_the_declaration_order() {
        let mut ps = ParamList::new();
        let layer = ps.dense("gate", 3, 4);
        let scale = ps.push("scale", vec![1], Init::Constant(1.0));
        let names: Vec<String> = ps.into_decls().into_iter().map(|d| d.name).collect();
        assert_eq!(names, ["gate.weight", "gate.bias", "scale"]);
        let values = ["w", "b", "s"];
        assert_eq!((layer.weight.of(&values), layer.bias.of(&values), scale.of(&values)), ("w", "b", "s"));
        let mut grads = [0, 0, 0];
        let (gs, gw) = Slot::pair_mut(scale, layer.weight, &mut grads);
        (*gs, *gw) = (5, 7);
        assert_eq!(grads, [7, 0, 5]);
    }
}
