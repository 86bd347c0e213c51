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

/// What starts each section of a run's stored spec text, before the section's path
/// (`cli::load::spec_source`: every file, and each `KEY=VALUES` override as `<command line>`).
pub const SECTION_HEADER: &str = "// ---- ";

/// The header of a command-line override's section.
const COMMAND_LINE_SECTION: &str = "// ---- <command line>\n";

/// The version of the experiment a run's spec text defined: [`spec_version`] of the text
/// without the command-line overrides of the swept axes `swept` (`seed=2..3`, `k=5,10`).
/// Such an override chooses which trials run, not what any trial is, so runs of one spec
/// swept in parts (seed 1 in one sweep, seeds 2–3 in a later one) share a version. Any other
/// override (`steps=100`) is part of the version.
pub fn experiment_version(spec_text: &str, swept: &[&str]) -> String {
    let mut kept = String::with_capacity(spec_text.len());
    let mut rest = spec_text;
    while let Some(at) = rest.find(COMMAND_LINE_SECTION) {
        // A section starts the text or a line.
        if at > 0 && !rest[..at].ends_with('\n') {
            kept.push_str(&rest[..at + COMMAND_LINE_SECTION.len()]);
            rest = &rest[at + COMMAND_LINE_SECTION.len()..];
            continue;
        }
        let body_start = at + COMMAND_LINE_SECTION.len();
        let body_len = rest[body_start..].find(&format!("\n{SECTION_HEADER}")).unwrap_or(rest.len() - body_start);
        let body = &rest[body_start..body_start + body_len];
        let key = body.split_once('=').map_or("", |(k, _)| k.trim());
        if swept.contains(&key) {
            kept.push_str(&rest[..at]);
        } else {
            kept.push_str(&rest[..body_start + body_len]);
        }
        rest = &rest[body_start + body_len..];
    }
    kept.push_str(rest);
    spec_version(&kept)
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

    /// `SPEC` stored with its model file and the overrides `overrides`, as `spec_source` does.
    fn stored(overrides: &[&str]) -> String {
        let mut sections = vec![format!("// ---- specs/e.mem\n{SPEC}"), "// ---- models/m.mem\nmodel m { }".into()];
        sections.extend(overrides.iter().map(|o| format!("{COMMAND_LINE_SECTION}{o}")));
        sections.join("\n")
    }

    #[test]
    fn the_command_line_header_is_a_section_header() {
        assert_eq!(COMMAND_LINE_SECTION, format!("{SECTION_HEADER}<command line>\n"));
    }

    #[test]
    fn choosing_swept_values_on_the_command_line_is_not_a_new_version() {
        let swept = ["seed", "k"];
        let whole = experiment_version(&stored(&[]), &swept);
        for overrides in [&["seed=1"][..], &["seed=3", "k=[15,10,6,5]"], &["k=2"]] {
            assert_eq!(experiment_version(&stored(overrides), &swept), whole, "{overrides:?}");
        }
        // Nothing but overrides of swept axes is left out.
        assert_eq!(experiment_version(&stored(&["seed=1"]), &swept), spec_version(&stored(&[])));
    }

    #[test]
    fn other_overrides_are_part_of_the_version() {
        let swept = ["seed"];
        let whole = experiment_version(&stored(&[]), &swept);
        let steps = experiment_version(&stored(&["steps=100"]), &swept);
        assert_ne!(steps, whole);
        assert_ne!(experiment_version(&stored(&["steps=200"]), &swept), steps);
        // `k` is not swept here: setting it defines other trials.
        assert_ne!(experiment_version(&stored(&["seed=2", "k=5"]), &swept), whole);
        assert_eq!(experiment_version(&stored(&["seed=2", "steps=100"]), &swept), steps);
    }

    #[test]
    fn any_text_has_a_version() {
        for text in ["", "/* never closed", "\"never closed", "α β", "}{"] {
            assert_eq!(spec_version(text).len(), 64, "{text}");
        }
        assert_ne!(spec_version("/* never closed"), spec_version(""));
    }
}
