//! Independent random streams of one trial's seed: training data, its sampling order, the
//! validation set and each test split get a ChaCha stream of their own, so changing one set's
//! size or drawing more training batches never changes another set's contents.

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

/// Which data a random stream is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Stream {
    /// Training data (fresh batches or a fixed training set).
    Train,
    /// The order training examples are drawn in (fixed training sets).
    Order,
    Validation,
    /// The `i`-th of [`super::Task::test_splits`].
    Test(usize),
}

/// The random stream `which` of `seed`.
pub(super) fn stream(seed: u64, which: Stream) -> ChaCha8Rng {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    rng.set_stream(match which {
        Stream::Train => 0,
        Stream::Order => 1,
        Stream::Validation => 2,
        Stream::Test(i) => 16 + i as u64,
    });
    rng
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::Rng;

    #[test]
    fn streams_differ_and_repeat() {
        let draw = |w| stream(7, w).random::<u64>();
        assert_eq!(draw(Stream::Train), draw(Stream::Train));
        let all = [Stream::Train, Stream::Order, Stream::Validation, Stream::Test(0), Stream::Test(1)].map(draw);
        for i in 0..all.len() {
            for j in 0..i {
                assert_ne!(all[i], all[j]);
            }
        }
        assert_ne!(stream(7, Stream::Train).random::<u64>(), stream(8, Stream::Train).random::<u64>());
    }
}
