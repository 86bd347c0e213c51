//! What a tag may hold. Tags are listed joined by commas (`runs`, `show`) and by semicolons
//! (CSV), one per line of a table: a tag with a comma, a semicolon or a line break would read
//! as several, or break the table, and a control character (a terminal's escape) would print
//! as something else than it is.

/// Why a text is not a tag.
#[derive(Debug, PartialEq, thiserror::Error)]
pub enum BadTag {
    #[error("a tag is a non-empty word or phrase on one line, without control characters")]
    BlankOrMultiline,
    #[error("a tag is a word or phrase of at most {MAX_TAG_CHARS} characters, not {0}")]
    TooLong(usize),
    #[error("a tag holds no comma or semicolon (`{0}` would read as several tags); tag the run once per tag")]
    Separator(String),
}

/// The longest tag `memctl tag` takes: a label, not a note.
pub const MAX_TAG_CHARS: usize = 200;

/// `tag` trimmed, if it is a tag.
pub fn checked(tag: &str) -> Result<&str, BadTag> {
    let tag = tag.trim();
    if tag.is_empty() || tag.contains(char::is_control) {
        return Err(BadTag::BlankOrMultiline);
    }
    let chars = tag.chars().count();
    if chars > MAX_TAG_CHARS {
        return Err(BadTag::TooLong(chars));
    }
    if tag.contains([',', ';']) {
        return Err(BadTag::Separator(tag.to_string()));
    }
    Ok(tag)
}

/// `tags` as `memctl tag` would have written them, for a record from elsewhere (an export of an
/// older memctl, a file edited by hand): each split at commas and semicolons, on one line,
/// trimmed, without blanks or repeats.
pub fn normalised(tags: &[String]) -> Vec<String> {
    let mut kept: Vec<String> = vec![];
    for part in tags.iter().flat_map(|t| t.split([',', ';'])) {
        let tag = part.replace(char::is_control, " ").trim().to_string();
        if !tag.is_empty() && !kept.contains(&tag) {
            kept.push(tag);
        }
    }
    kept
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tag_is_one_trimmed_line_without_separators() {
        assert_eq!(checked("  best run "), Ok("best run"));
        assert_eq!(checked(""), Err(BadTag::BlankOrMultiline));
        assert_eq!(checked("line\nbreak"), Err(BadTag::BlankOrMultiline));
        assert_eq!(checked("a,b"), Err(BadTag::Separator("a,b".into())));
        assert_eq!(checked("a;b"), Err(BadTag::Separator("a;b".into())));
        assert_eq!(checked("a\u{1b}[31mred"), Err(BadTag::BlankOrMultiline));
        assert_eq!(checked(&"x".repeat(201)), Err(BadTag::TooLong(201)));
        assert_eq!(checked(&"x".repeat(200)).map(str::len), Ok(200));
    }

    #[test]
    fn tags_from_elsewhere_are_normalised_to_ones_tag_accepts() {
        let from = |t: &[&str]| normalised(&t.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        assert_eq!(from(&["a,b", "", " a ", "line\nbreak", "c;", "\u{1b}[2Jx"]), ["a", "b", "line break", "c", "[2Jx"]);
        assert!(from(&["a,b", " x ", "line\nbreak"]).iter().all(|t| checked(t) == Ok(t.as_str())));
    }
}
