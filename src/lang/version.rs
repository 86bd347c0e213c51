//! A spec's version, as results tables compare them: its tokens, without comments and blanks,
//! so that editing a comment or the layout is not a new version, while any other edit is.
//! Runs store their spec's whole text (`RunRecord::spec_text`) and its SHA-256 (`spec_hash`,
//! which changes with a comment); a table keeps runs of one version per row
//! (`report::selection`), and a comment edit between two GPU slices of one table must not split
//! its seeds.

use pest::Parser;
use sha2::{Digest, Sha256};

use super::parser::{MemParser, Rule};

/// A hex digest of `text`'s tokens (the grammar's `tokens` rule: strings, words of letters,
/// digits, `_` and `.`, and single other characters), comments and blanks left out.
pub fn spec_version(text: &str) -> String {
    let mut hash = Sha256::new();
    match MemParser::parse(Rule::tokens, text) {
        Ok(pairs) => {
            for token in pairs.flatten().filter(|p| p.as_rule() != Rule::tokens && p.as_rule() != Rule::EOI) {
                hash.update(token.as_str().as_bytes());
                // A separator no token holds: `a b` and `ab` stay apart.
                hash.update([0u8]);
            }
        }
        // The rule accepts any text; should it ever refuse one, the whole text is the version.
        Err(_) => hash.update(text.as_bytes()),
    }
    hash.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const SPEC: &str = "experiment e { // the first\n  task t\n  sweep { seed in 1..3 }\n}\n";

    #[test]
    fn comments_and_layout_are_not_a_new_version() {
        let edited = "/* a note */ experiment e {\n  // the first, reworded\n  task t\n\n  sweep {seed in 1..3}\n}";
        assert_eq!(spec_version(SPEC), spec_version(edited));
    }

    #[test]
    fn any_other_edit_is_a_new_version() {
        for edited in [SPEC.replace("1..3", "1..4"), SPEC.replace("task t", "task tt"), SPEC.replace("task t", "taskt")]
        {
            assert_ne!(spec_version(SPEC), spec_version(&edited), "{edited}");
        }
        // A comment's marker inside a string is part of the string, not a comment.
        assert_ne!(spec_version("task \"a // b\""), spec_version("task \"a // c\""));
        assert_ne!(spec_version("task \"a /* b\" */"), spec_version("task \"a /* c\" */"));
    }

    #[test]
    fn any_text_has_a_version() {
        for text in ["", "/* never closed", "\"never closed", "α β", "}{"] {
            assert_eq!(spec_version(text).len(), 64, "{text}");
        }
        assert_ne!(spec_version("/* never closed"), spec_version(""));
    }
}
