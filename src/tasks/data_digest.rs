//! What a task read from its data files, as one hash: part of its trials' identity
//! (`sweep::identity`), so that a trial on an edited data file is another trial (it runs,
//! and it does not resume a checkpoint made on the old data), as the path alone would not say.

use sha2::{Digest, Sha256};

/// The texts a task read, in the order it read them.
#[derive(Default)]
pub(super) struct DataDigest(Sha256);

impl DataDigest {
    /// Adds one file's text (its length first, so that two texts never read as another two).
    pub(super) fn add(&mut self, text: &str) {
        self.0.update((text.len() as u64).to_le_bytes());
        self.0.update(text.as_bytes());
    }

    /// The hash, 16 hex digits.
    pub(super) fn finish(self) -> String {
        self.0.finalize().iter().take(8).map(|b| format!("{b:02x}")).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::DataDigest;

    fn of(texts: &[&str]) -> String {
        let mut d = DataDigest::default();
        texts.iter().for_each(|t| d.add(t));
        d.finish()
    }

    #[test]
    fn the_digest_changes_with_any_text_and_with_where_the_texts_split() {
        assert_eq!(of(&["ab", "c"]), of(&["ab", "c"]));
        assert_ne!(of(&["ab", "c"]), of(&["ab", "d"]));
        assert_ne!(of(&["ab", "c"]), of(&["a", "bc"]));
        assert_eq!(of(&["ab"]).len(), 16);
    }
}
