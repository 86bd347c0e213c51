//! Reading a task's data files: a path from the spec, resolved against the spec file's
//! directory, read whole as UTF-8 text and taken line by line. Every problem is a [`DataError`]
//! naming the file and, where there is one, the line (`qa3_train.txt:17: expected a line
//! number, found "John"`); the task turns it into a [`PrimError`] on its `path` option, so
//! `memctl check` shows it at the path in the spec.

use std::fmt;
use std::path::{Path, PathBuf};

use super::prelude::*;

/// What is wrong with a data file.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum DataError {
    /// Nothing at `path`; `what` says what should be there ("a bAbI folder").
    Missing { path: PathBuf, what: &'static str },
    /// Something at `path` that cannot be read as what it should be (a folder for a file).
    Unreadable { path: PathBuf, reason: String },
    /// A file without data; `expected` says what it should hold.
    Empty { path: PathBuf, expected: &'static str },
    /// A line that is not UTF-8 text.
    NotUtf8 { path: PathBuf, line: usize },
    /// A line that does not fit the format.
    Line { path: PathBuf, line: usize, expected: String, found: String },
    /// A file that is well formed but cannot serve (too short, no examples).
    File { path: PathBuf, problem: String },
}

impl DataError {
    /// A malformed line: what was `expected` there, and what was `found` (quoted and shortened).
    pub(super) fn line(path: &Path, line: usize, expected: impl Into<String>, found: &str) -> DataError {
        DataError::Line { path: path.to_path_buf(), line, expected: expected.into(), found: quote(found) }
    }

    /// The error as the checker shows it, at the task's `path` option.
    pub(super) fn on_path(self) -> PrimError {
        PrimError::task(self.to_string()).on("path")
    }
}

impl fmt::Display for DataError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DataError::Missing { path, what } => {
                write!(f, "`{}` does not exist; expected {what} there", path.display())
            }
            DataError::Unreadable { path, reason } => write!(f, "cannot read `{}`: {reason}", path.display()),
            DataError::Empty { path, expected } => {
                write!(f, "{}: the file is empty; expected {expected}", path.display())
            }
            DataError::NotUtf8 { path, line } => {
                write!(f, "{}:{line}: expected UTF-8 text, found other bytes", path.display())
            }
            DataError::Line { path, line, expected, found } => {
                write!(f, "{}:{line}: expected {expected}, found {found}", path.display())
            }
            DataError::File { path, problem } => write!(f, "{}: {problem}", path.display()),
        }
    }
}

/// `text` as a message shows it: quoted, escaped (a tab shows as `\t`), at most 40 characters.
pub(super) fn quote(text: &str) -> String {
    if text.is_empty() {
        return "nothing".into();
    }
    const MOST: usize = 40;
    match text.char_indices().nth(MOST) {
        Some((cut, _)) => format!("{:?}…", &text[..cut]),
        None => format!("{text:?}"),
    }
}

/// `path` relative to `dir` unless it is absolute, with `.` and `a/..` pairs taken out (so
/// messages show `data/x`, not `specs/paper/../../data/x`).
pub fn resolve(dir: &Path, path: &str) -> PathBuf {
    use std::path::Component;
    let p = Path::new(path);
    let joined = if p.is_absolute() { p.to_path_buf() } else { dir.join(p) };
    let mut out = PathBuf::new();
    for c in joined.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir if matches!(out.components().next_back(), Some(Component::Normal(_))) => {
                out.pop();
            }
            c => out.push(c),
        }
    }
    if out.as_os_str().is_empty() { PathBuf::from(".") } else { out }
}

/// Whether `path` is a folder (`false` for a file); [`DataError::Missing`] if nothing is there.
pub(super) fn is_dir(path: &Path, what: &'static str) -> Result<bool, DataError> {
    match std::fs::metadata(path) {
        Ok(m) => Ok(m.is_dir()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            Err(DataError::Missing { path: path.to_path_buf(), what })
        }
        Err(e) => Err(DataError::Unreadable { path: path.to_path_buf(), reason: e.to_string() }),
    }
}

/// A whole file as UTF-8 text; `what` says what it should hold (for a missing or empty file).
/// Only a regular file (or a link to one) is read: a named pipe would wait forever for a
/// writer, and a device (`/dev/zero`) never ends.
pub(super) fn read_text(path: &Path, what: &'static str) -> Result<String, DataError> {
    let unreadable = |reason: &str| DataError::Unreadable { path: path.to_path_buf(), reason: reason.into() };
    if is_dir(path, what)? {
        return Err(unreadable("it is a folder, not a file"));
    }
    if !std::fs::metadata(path).is_ok_and(|m| m.is_file()) {
        return Err(unreadable("it is not a regular file (a pipe or a device, say)"));
    }
    let bytes =
        std::fs::read(path).map_err(|e| DataError::Unreadable { path: path.to_path_buf(), reason: e.to_string() })?;
    let text = String::from_utf8(bytes).map_err(|e| {
        let valid = &e.as_bytes()[..e.utf8_error().valid_up_to()];
        DataError::NotUtf8 { path: path.to_path_buf(), line: valid.iter().filter(|b| **b == b'\n').count() + 1 }
    })?;
    if text.trim().is_empty() {
        return Err(DataError::Empty { path: path.to_path_buf(), expected: what });
    }
    Ok(text)
}

/// The lines of `text`, numbered from 1, without their line ends (`\n` or `\r\n`).
pub(super) fn numbered_lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.lines().enumerate().map(|(i, l)| (i + 1, l))
}

#[cfg(test)]
pub(super) mod testing {
    /// A temporary folder holding `train.{extension}`, `valid.…` and `test.…`: the layout of
    /// split files that `corpus` and `jsonl` read.
    pub(crate) fn split_folder(extension: &str, train: &str, valid: &str, test: &str) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for (split, text) in [("train", train), ("valid", valid), ("test", test)] {
            std::fs::write(dir.path().join(format!("{split}.{extension}")), text).unwrap();
        }
        dir
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A named pipe with no writer, or a device that never ends, is refused, not read.
    #[cfg(unix)]
    #[test]
    fn a_pipe_or_a_device_is_refused_not_read() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("d.jsonl");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status().unwrap();
        assert!(made.success());
        for path in [fifo.as_path(), Path::new("/dev/zero")] {
            let err = read_text(path, "examples").unwrap_err().to_string();
            assert!(err.contains("it is not a regular file"), "{err}");
        }
    }

    #[test]
    fn problems_name_the_file_and_line() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("nope.txt");
        assert_eq!(
            read_text(&missing, "a corpus").unwrap_err().to_string(),
            format!("`{}` does not exist; expected a corpus there", missing.display())
        );
        let empty = dir.path().join("empty.txt");
        std::fs::write(&empty, "\n  \n").unwrap();
        assert_eq!(
            read_text(&empty, "a corpus").unwrap_err().to_string(),
            format!("{}: the file is empty; expected a corpus", empty.display())
        );
        let bad = dir.path().join("bad.txt");
        std::fs::write(&bad, b"fine\nalso fine\nnot \xff fine\n").unwrap();
        assert_eq!(
            read_text(&bad, "a corpus").unwrap_err().to_string(),
            format!("{}:3: expected UTF-8 text, found other bytes", bad.display())
        );
        assert_eq!(
            read_text(dir.path(), "a corpus").unwrap_err().to_string(),
            format!("cannot read `{}`: it is a folder, not a file", dir.path().display())
        );
        let e = DataError::line(Path::new("qa3_train.txt"), 17, "a line number", "John");
        assert_eq!(e.to_string(), "qa3_train.txt:17: expected a line number, found \"John\"");
        assert_eq!(e.on_path().arg, Some("path"));
    }

    #[test]
    fn quotes_escape_and_shorten() {
        assert_eq!(quote("a\tb"), "\"a\\tb\"");
        assert_eq!(quote(""), "nothing");
        assert_eq!(quote(&"x".repeat(50)), format!("\"{}\"…", "x".repeat(40)));
    }

    #[test]
    fn relative_paths_resolve_against_the_directory() {
        assert_eq!(resolve(Path::new("specs/paper"), "../data/x"), PathBuf::from("specs/data/x"));
        assert_eq!(resolve(Path::new("specs/paper"), "../../data/./x"), PathBuf::from("data/x"));
        assert_eq!(resolve(Path::new("specs"), "../../x"), PathBuf::from("../x"));
        assert_eq!(resolve(Path::new(""), "data/x"), PathBuf::from("data/x"));
        assert_eq!(resolve(Path::new("specs"), ".."), PathBuf::from("."));
        assert_eq!(resolve(Path::new("specs"), "/abs/../x"), PathBuf::from("/x"));
    }
}
