//! Values that one op of a model's run computed and a later op of the same run, given the same
//! inputs, takes instead of computing them again: common subexpressions between primitives.
//!
//! PKM's step reads its memory (`kanervaRead(R, z)`) and writes it (`kanervaUpdate(R, V, z)`)
//! with the same `R` and `z`, and both begin with the same addressing (a Gram matrix, a
//! Cholesky solve, the readout). On the candle path that is some forty kernels forward and
//! backward a time step computed twice (`kanerva::shared_address`).
//!
//! The memo lives for one run ([`Scope`], which `compile::Cell` opens around a forward) on the
//! thread that runs it, and is keyed by the identities of the input tensors (candle's
//! `TensorId`s are never reused), so a value can only be found by an op that reads the very
//! tensors it came from. Dropping the scope drops what it kept: on a GPU a capture of a CUDA
//! graph must see every allocation of the step it records freed before it ends.

use std::cell::RefCell;

use candle_core::{Result, Tensor, TensorId};

/// What a value is (the computation's name and its settings, as bits) and which tensors it
/// was computed from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Key {
    pub what: &'static str,
    pub settings: Vec<u64>,
    pub inputs: Vec<TensorId>,
}

/// A scope's values, each under its key.
type Kept = Vec<(Key, Vec<Tensor>)>;

thread_local! {
    /// The open scope's values; `None` outside a scope (nothing is kept).
    static MEMO: RefCell<Option<Kept>> = const { RefCell::new(None) };
}

/// A run's memo, open until dropped; a scope opened inside another keeps its own values and
/// gives the outer one back when it ends.
pub struct Scope {
    outer: Option<Kept>,
}

impl Scope {
    pub fn open() -> Scope {
        Scope { outer: MEMO.with(|m| m.borrow_mut().replace(Vec::new())) }
    }
}

impl Drop for Scope {
    fn drop(&mut self) {
        let kept = MEMO.with(|m| std::mem::replace(&mut *m.borrow_mut(), self.outer.take()));
        drop(kept);
    }
}

/// The values under `key` when an op of the open scope computed them; otherwise `compute`'s,
/// kept for the ops after it (kept only inside a scope).
pub fn reuse_or(key: Key, compute: impl FnOnce() -> Result<Vec<Tensor>>) -> Result<Vec<Tensor>> {
    let found = MEMO.with(|m| m.borrow().as_ref().and_then(|kept| kept.iter().find(|(k, _)| *k == key).cloned()));
    if let Some((_, values)) = found {
        return Ok(values);
    }
    let values = compute()?;
    MEMO.with(|m| {
        if let Some(kept) = m.borrow_mut().as_mut() {
            kept.push((key, values.clone()));
        }
    });
    Ok(values)
}

#[cfg(test)]
mod tests {
    use candle_core::Device;

    use super::*;

    fn key(t: &Tensor) -> Key {
        Key { what: "double", settings: vec![2], inputs: vec![t.id()] }
    }

    /// Computes `2 t`, counting the computations in `count`.
    fn double(t: &Tensor, count: &mut usize) -> Result<Tensor> {
        let values = reuse_or(key(t), || {
            *count += 1;
            Ok(vec![(t * 2.0)?])
        })?;
        Ok(values[0].clone())
    }

    #[test]
    fn a_value_is_computed_once_per_scope_and_inputs() -> Result<()> {
        let (a, b) = (Tensor::new(&[1f32, 2.0], &Device::Cpu)?, Tensor::new(&[1f32, 2.0], &Device::Cpu)?);
        let mut count = 0;
        {
            let _scope = Scope::open();
            let first = double(&a, &mut count)?;
            let again = double(&a.clone(), &mut count)?;
            assert_eq!(count, 1, "the same tensor (a clone shares its identity) is computed once");
            assert_eq!(first.id(), again.id());
            double(&b, &mut count)?;
            assert_eq!(count, 2, "equal values in another tensor are another input");
        }
        double(&a, &mut count)?;
        double(&a, &mut count)?;
        assert_eq!(count, 4, "outside a scope nothing is kept");
        Ok(())
    }

    #[test]
    fn a_scope_drops_its_values_and_an_inner_scope_gives_the_outer_one_back() -> Result<()> {
        let a = Tensor::new(&[3f32], &Device::Cpu)?;
        let mut count = 0;
        let outer = Scope::open();
        double(&a, &mut count)?;
        {
            let _inner = Scope::open();
            double(&a, &mut count)?;
            assert_eq!(count, 2, "an inner scope does not see the outer one's values");
        }
        double(&a, &mut count)?;
        assert_eq!(count, 2, "the outer scope's value is back");
        drop(outer);
        assert!(MEMO.with(|m| m.borrow().is_none()), "no scope is open");
        Ok(())
    }
}
