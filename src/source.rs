//! Source files and byte spans into them.
//!
//! Every AST node carries a [`Span`]; diagnostics turn spans into `file:line:col` with the
//! source line underlined. Columns count characters (not bytes), starting at 1.

use std::path::{Path, PathBuf};

/// Index of a file in a [`SourceMap`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct FileId(pub u32);

/// A byte range `start..end` in one source file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct Span {
    pub file: FileId,
    pub start: usize,
    pub end: usize,
}

impl Span {
    pub fn new(file: FileId, start: usize, end: usize) -> Span {
        Span { file, start, end }
    }

    /// The smallest span covering both.
    pub fn to(self, other: Span) -> Span {
        Span { file: self.file, start: self.start.min(other.start), end: self.end.max(other.end) }
    }
}

/// One loaded source file.
#[derive(Debug, Clone)]
pub struct SourceFile {
    /// The path as the user named it (shown in diagnostics).
    pub path: PathBuf,
    pub text: String,
}

impl SourceFile {
    /// 1-based line and character column of a byte offset (clamped to the text).
    pub fn line_col(&self, offset: usize) -> (usize, usize) {
        let offset = floor_char_boundary(&self.text, offset.min(self.text.len()));
        let before = &self.text[..offset];
        let line = before.bytes().filter(|&b| b == b'\n').count() + 1;
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        let col = before[line_start..].chars().count() + 1;
        (line, col)
    }

    /// Byte range of the line holding `offset`, without its newline.
    pub fn line_range(&self, offset: usize) -> std::ops::Range<usize> {
        let offset = floor_char_boundary(&self.text, offset.min(self.text.len()));
        let start = self.text[..offset].rfind('\n').map_or(0, |i| i + 1);
        let end = self.text[offset..].find('\n').map_or(self.text.len(), |i| offset + i);
        start..end
    }
}

/// The largest char boundary `<= i` (str::floor_char_boundary is unstable).
pub fn floor_char_boundary(s: &str, mut i: usize) -> usize {
    while i > 0 && !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// The name of the pseudo-file each command-line override `KEY=VALUES` is parsed from (shown
/// in its diagnostics).
pub const COMMAND_LINE: &str = "<command line>";

/// All files a spec was loaded from (the main file and everything it `use`s), then its
/// command-line overrides.
#[derive(Debug, Default, Clone)]
pub struct SourceMap {
    files: Vec<SourceFile>,
}

impl SourceMap {
    /// The spec's own file: the first one added, before the files it `use`s.
    pub fn main(&self) -> Option<&SourceFile> {
        self.files.first()
    }

    /// Whether `id` is a command-line override rather than a file.
    pub fn is_command_line(&self, id: FileId) -> bool {
        self.get(id).path == Path::new(COMMAND_LINE)
    }

    pub fn add(&mut self, path: impl AsRef<Path>, text: String) -> FileId {
        self.files.push(SourceFile { path: path.as_ref().to_path_buf(), text });
        FileId((self.files.len() - 1) as u32)
    }

    pub fn get(&self, id: FileId) -> &SourceFile {
        &self.files[id.0 as usize]
    }

    pub fn files(&self) -> impl Iterator<Item = (FileId, &SourceFile)> {
        self.files.iter().enumerate().map(|(i, f)| (FileId(i as u32), f))
    }

    /// The text a span covers.
    pub fn text(&self, span: Span) -> &str {
        let text = &self.get(span.file).text;
        let start = floor_char_boundary(text, span.start.min(text.len()));
        let end = floor_char_boundary(text, span.end.min(text.len())).max(start);
        &text[start..end]
    }

    /// `path:line:col` of the start of a span.
    pub fn location(&self, span: Span) -> String {
        let file = self.get(span.file);
        let (line, col) = file.line_col(span.start);
        format!("{}:{line}:{col}", file.path.display())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_col_counts_characters_from_one() {
        let f = SourceFile { path: "x".into(), text: "ab\nc⊗d\n".into() };
        assert_eq!(f.line_col(0), (1, 1));
        assert_eq!(f.line_col(3), (2, 1));
        // 'd' is after the 3-byte '⊗': byte 7, character column 3.
        assert_eq!(f.line_col(7), (2, 3));
        assert_eq!(f.line_range(4), 3..8);
        // Offsets inside a multi-byte character or past the end are clamped.
        assert_eq!(f.line_col(5), (2, 2));
        assert_eq!(f.line_col(100), (3, 1));
    }
}
