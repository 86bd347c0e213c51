//! Deterministic parameter initialisation.
//!
//! Each parameter draws from its own RNG stream, keyed by (trial seed, parameter name), and is
//! generated on the host then moved to the device: the same trial gets the same initial
//! weights on every device, and an ablation that removes one call site leaves every other
//! parameter's initial value unchanged.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use sha2::{Digest, Sha256};

use crate::graph::Init;

/// The RNG for one parameter of one trial.
pub fn param_rng(seed: u64, name: &str) -> ChaCha8Rng {
    let mut h = Sha256::new();
    h.update(seed.to_le_bytes());
    h.update(name.as_bytes());
    let digest = h.finalize();
    let mut key = [0u8; 32];
    key.copy_from_slice(&digest);
    ChaCha8Rng::from_seed(key)
}

/// `n` initial values drawn according to `init`.
pub fn values(init: &Init, n: usize, rng: &mut ChaCha8Rng) -> Vec<f64> {
    match *init {
        Init::Uniform(bound) => (0..n).map(|_| rng.random_range(-bound..=bound)).collect(),
        Init::Normal(std) => (0..n).map(|_| rng.sample::<f64, _>(rand_distr::StandardNormal) * std).collect(),
        Init::Constant(c) => vec![c; n],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_depend_on_seed_and_name_only() {
        let a = values(&Init::Uniform(1.0), 4, &mut param_rng(1, "x.weight"));
        assert_eq!(a, values(&Init::Uniform(1.0), 4, &mut param_rng(1, "x.weight")));
        assert_ne!(a, values(&Init::Uniform(1.0), 4, &mut param_rng(2, "x.weight")));
        assert_ne!(a, values(&Init::Uniform(1.0), 4, &mut param_rng(1, "y.weight")));
        assert!(a.iter().all(|v| v.abs() <= 1.0));
    }
}
