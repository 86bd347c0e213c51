//! Vocabularies of data sets read from files. Tokens get provisional ids in order of first
//! sight while the files are read (training files first); the final vocabulary is the reserved
//! tokens, then the training files' tokens in sorted order, so that ids depend neither on the
//! order of the lines nor on the held-out files. A token first seen in a held-out file maps to
//! the unknown token.

use std::borrow::Borrow;
use std::collections::HashMap;
use std::hash::Hash;

/// Tokens seen so far, with provisional ids `0, 1, …` in order of first sight.
#[derive(Debug)]
pub(super) struct Interner<K> {
    ids: HashMap<K, u32>,
    tokens: Vec<K>,
}

impl<K> std::default::Default for Interner<K> {
    fn default() -> Self {
        Interner { ids: HashMap::new(), tokens: vec![] }
    }
}

impl<K: Hash + Eq + Ord + Clone + ToString> Interner<K> {
    /// The provisional id of `key`, new if it was not seen yet.
    pub(super) fn id<Q>(&mut self, key: &Q) -> u32
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        if let Some(&id) = self.ids.get(key) {
            return id;
        }
        let id = self.tokens.len() as u32;
        self.tokens.push(key.to_owned());
        self.ids.insert(key.to_owned(), id);
        id
    }

    /// How many tokens have been seen (after the training files: the training vocabulary).
    pub(super) fn len(&self) -> usize {
        self.tokens.len()
    }

    /// The vocabulary: `reserved` first, then the first `known` tokens seen, sorted. Tokens seen
    /// later map to `reserved[unknown]`.
    pub(super) fn finish(&self, reserved: &[&str], known: usize, unknown: usize) -> Vocab {
        let mut order: Vec<usize> = (0..known.min(self.tokens.len())).collect();
        order.sort_by(|a, b| self.tokens[*a].cmp(&self.tokens[*b]));
        let mut remap = vec![unknown as u32; self.tokens.len()];
        let mut words: Vec<String> = reserved.iter().map(|r| r.to_string()).collect();
        for (rank, &i) in order.iter().enumerate() {
            remap[i] = (reserved.len() + rank) as u32;
            words.push(self.tokens[i].to_string());
        }
        Vocab { words, remap }
    }
}

/// A final vocabulary, and the map from provisional ids to its ids.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Vocab {
    words: Vec<String>,
    remap: Vec<u32>,
}

impl Vocab {
    pub(super) fn len(&self) -> usize {
        self.words.len()
    }

    /// The final id of a provisional one.
    pub(super) fn map(&self, provisional: u32) -> u32 {
        self.remap[provisional as usize]
    }

    /// Maps provisional ids to final ones in place.
    pub(super) fn map_all(&self, ids: &mut [u32]) {
        for id in ids {
            *id = self.map(*id);
        }
    }

    #[cfg(test)]
    pub(super) fn words(&self) -> &[String] {
        &self.words
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reserved_first_then_training_tokens_sorted_and_later_ones_unknown() {
        let mut i: Interner<String> = Interner::default();
        let ids: Vec<u32> = ["the", "cat", "the", "sat"].iter().map(|w| i.id(*w)).collect();
        assert_eq!(ids, vec![0, 1, 0, 2]);
        let known = i.len();
        let dog = i.id("dog");
        let v = i.finish(&["<pad>", "<unk>"], known, 1);
        assert_eq!(v.words(), &["<pad>", "<unk>", "cat", "sat", "the"]);
        assert_eq!([v.map(0), v.map(1), v.map(2), v.map(dog)], [4, 2, 3, 1]);
    }
}
