//! What a task read from its data files, as one hash: part of its trials' identity
//! (`sweep::identity`), so that a trial on an edited data file is another trial (it runs,
//! and it does not resume a checkpoint made on the old data), as the path alone would not say.
//! Only what the task reads counts: a file of lines is hashed line by line (`\r\n` or `\n`,
//! blank lines left out, as the readers skip them), words as words.

use sha2::{Digest, Sha256};

/// The texts a task read, in the order it read them.
#[derive(Default)]
pub(super) struct DataDigest(Sha256);

impl DataDigest {
    /// Adds one piece of text (its length first, so that two pieces never read as another two).
    pub(super) fn add(&mut self, text: &str) {
        self.0.update((text.len() as u64).to_le_bytes());
        self.0.update(text.as_bytes());
    }

    /// Adds a file read line by line: each line that is not blank, without its line end.
    pub(super) fn add_lines(&mut self, text: &str) {
        text.lines().filter(|l| !l.trim().is_empty()).for_each(|l| self.add(l));
    }

    /// Adds a file read as words: each word, whatever the spaces between.
    pub(super) fn add_words(&mut self, text: &str) {
        text.split_whitespace().for_each(|w| self.add(w));
    }

    /// The hash, 16 hex digits.
    pub(super) fn finish(self) -> String {
        self.0.finalize().iter().take(8).map(|b| format!("{b:02x}")).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::DataDigest;

    /// The digest of `texts`, each added by `add`.
    fn digest(add: fn(&mut DataDigest, &str), texts: &[&str]) -> String {
        let mut d = DataDigest::default();
        texts.iter().for_each(|t| add(&mut d, t));
        d.finish()
    }

    fn of(texts: &[&str]) -> String {
        digest(DataDigest::add, texts)
    }

    #[test]
    fn line_ends_blank_lines_and_spacing_between_words_do_not_count() {
        let lines = |t: &str| digest(DataDigest::add_lines, &[t]);
        assert_eq!(lines("a\nb\n"), lines("a\r\nb\r\n\n"));
        assert_ne!(lines("a\nb\n"), lines("a\nc\n"));
        let words = |t: &str| digest(DataDigest::add_words, &[t]);
        assert_eq!(words("the cat\n sat"), words("the  cat sat\r\n"));
        assert_ne!(words("the cat sat"), words("the cat sits"));
    }

    #[test]
    fn the_digest_changes_with_any_text_and_with_where_the_texts_split() {
        assert_eq!(of(&["ab", "c"]), of(&["ab", "c"]));
        assert_ne!(of(&["ab", "c"]), of(&["ab", "d"]));
        assert_ne!(of(&["ab", "c"]), of(&["a", "bc"]));
        assert_eq!(of(&["ab"]).len(), 16);
    }
}
