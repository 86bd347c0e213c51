//! What a tag may hold. Tags are listed joined by commas (`runs`, `show`) and by semicolons
//! (CSV), one per line of a table: a tag with a comma, a semicolon or a line break would read
//! as several, or break the table.

/// Why a text is not a tag.
#[derive(Debug, PartialEq, thiserror::Error)]
pub enum BadTag {
    #[error("a tag is a non-empty word or phrase on one line")]
    BlankOrMultiline,
    #[error("a tag holds no comma or semicolon (`{0}` would read as several tags); tag the run once per tag")]
    Separator(String),
}

/// `tag` trimmed, if it is a tag.
pub fn checked(tag: &str) -> Result<&str, BadTag> {
    let tag = tag.trim();
    if tag.is_empty() || tag.contains(['\n', '\r', '\t']) {
        return Err(BadTag::BlankOrMultiline);
    }
    if tag.contains([',', ';']) {
        return Err(BadTag::Separator(tag.to_string()));
    }
    Ok(tag)
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
    }
}
