//! The `.mem` language front end: loading files (with `use`), parsing, and the syntax tree.
//! Nothing here depends on candle.

pub mod ast;
pub mod declared;
pub mod error_kind;
pub mod limits;
pub mod parser;
pub mod syntax_error;
pub mod version;

use std::path::{Path, PathBuf};

use crate::diag::{Diagnostic, Diagnostics};
use crate::source::{FileId, SourceMap, Span};
use error_kind::SpecErrorKind;
use limits::{MAX_SPEC_BYTES, MAX_USE_DEPTH};

/// A parsed spec: its files and their merged items.
#[derive(Debug, Clone)]
pub struct Spec {
    pub sources: SourceMap,
    pub ast: ast::File,
    /// The file named on the command line.
    pub main: FileId,
}

/// A spec that did not load or parse; `sources` lets the diagnostics be rendered.
#[derive(Debug)]
pub struct SpecError {
    pub sources: SourceMap,
    pub diagnostics: Diagnostics,
}

impl SpecError {
    pub fn render(&self, color: bool) -> String {
        self.diagnostics.render(&self.sources, color)
    }
}

/// Where spec files are read from: the disk, or a snapshot taken earlier (a Slurm manifest
/// carries the spec files so that workers check exactly what was submitted).
pub trait SourceReader {
    /// The file's bytes and its canonical path (the key under which it is loaded once).
    fn read(&self, path: &Path) -> std::io::Result<(PathBuf, Vec<u8>)>;
}

/// Reads from the file system.
pub struct Disk;

impl SourceReader for Disk {
    /// At most one byte past [`MAX_SPEC_BYTES`], which the loader refuses: a larger file (or an
    /// endless one, a device) is never read whole.
    fn read(&self, path: &Path) -> std::io::Result<(PathBuf, Vec<u8>)> {
        use std::io::Read;
        let mut bytes = vec![];
        std::fs::File::open(path)?.take(MAX_SPEC_BYTES + 1).read_to_end(&mut bytes)?;
        Ok((path.canonicalize().unwrap_or_else(|_| path.to_path_buf()), bytes))
    }
}

/// Loads `path` and, recursively, every file it `use`s (each once).
pub fn load(path: &Path) -> Result<Spec, SpecError> {
    load_with(path, &Disk)
}

/// Like [`load`], reading files through `reader`.
pub fn load_with(path: &Path, reader: &dyn SourceReader) -> Result<Spec, SpecError> {
    let mut sources = SourceMap::default();
    let mut ast = ast::File::default();
    let mut loaded: Vec<PathBuf> = vec![];
    let main = match load_into(reader, path, None, &mut sources, &mut ast, &mut loaded, 0) {
        Ok(id) => id,
        Err(d) => {
            return Err(SpecError { sources, diagnostics: d.into() });
        }
    };
    Ok(Spec { sources, ast, main })
}

/// Parses one in-memory text as a spec named `name` (`use` is resolved relative to the
/// current directory).
pub fn parse_str(name: &str, text: &str) -> Result<Spec, SpecError> {
    let mut sources = SourceMap::default();
    let main = sources.add(name, text.to_string());
    let mut ast = match parser::parse_file(main, text) {
        Ok(ast) => ast,
        Err(d) => {
            return Err(SpecError { sources, diagnostics: d.into() });
        }
    };
    let mut loaded = vec![];
    let uses = std::mem::take(&mut ast.uses);
    for u in &uses {
        let target = Path::new(&u.path);
        if let Err(d) = load_into(&Disk, target, Some(u.span), &mut sources, &mut ast, &mut loaded, 1) {
            return Err(SpecError { sources, diagnostics: d.into() });
        }
    }
    ast.uses = uses;
    Ok(Spec { sources, ast, main })
}

fn load_into(
    reader: &dyn SourceReader,
    path: &Path,
    used_at: Option<Span>,
    sources: &mut SourceMap,
    ast: &mut ast::File,
    loaded: &mut Vec<PathBuf>,
    depth: usize,
) -> Result<FileId, Diagnostic> {
    let locate = |d: Diagnostic| match used_at {
        Some(span) => d.at(span, "used here"),
        None => d,
    };
    if depth > MAX_USE_DEPTH {
        return Err(locate(SpecErrorKind::UseTooDeep.error()));
    }
    let (canonical, bytes) = reader.read(path).map_err(|e| {
        let d = locate(SpecErrorKind::CannotRead { path: path.display().to_string(), reason: io_reason(&e) }.error());
        // The file named on the command line is relative to the working directory.
        match used_at {
            Some(_) => d.hint("check the path; `use` paths are relative to the file that uses them"),
            None => d.hint("check the path; it is relative to the folder memctl runs in"),
        }
    })?;
    if bytes.len() as u64 > MAX_SPEC_BYTES {
        return Err(locate(SpecErrorKind::TooLarge { path: path.display().to_string() }.error())
            .hint("spec files are plain text; is this the file you meant?"));
    }
    if loaded.contains(&canonical) {
        // Already loaded (a diamond or a cycle): its items are in scope once.
        return Ok(FileId(0));
    }
    loaded.push(canonical);
    // Editors on Windows may start a UTF-8 file with a byte-order mark; it is not text.
    let bytes = match bytes.strip_prefix(b"\xEF\xBB\xBF") {
        Some(rest) => rest.to_vec(),
        None => bytes,
    };
    let (text, bad_utf8) = match String::from_utf8(bytes) {
        Ok(t) => (t, None),
        Err(e) => {
            let at = e.utf8_error().valid_up_to();
            (String::from_utf8_lossy(e.as_bytes()).into_owned(), Some(at))
        }
    };
    let id = sources.add(path, text);
    if let Some(at) = bad_utf8 {
        return Err(SpecErrorKind::NotUtf8
            .error()
            .at(Span::new(id, at, at + 1), "not valid UTF-8 here")
            .hint("is this a binary file? .mem specs are plain text"));
    }
    let mut file = parser::parse_file(id, &sources.get(id).text)?;
    let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
    for u in &file.uses {
        load_into(reader, &dir.join(&u.path), Some(u.span), sources, ast, loaded, depth + 1)?;
    }
    ast.uses.append(&mut file.uses);
    ast.models.append(&mut file.models);
    ast.tasks.append(&mut file.tasks);
    if depth == 0 {
        // A used file lends its models and tasks, not its experiments.
        ast.experiments.append(&mut file.experiments);
    }
    Ok(id)
}

fn io_reason(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::NotFound => "no such file".to_string(),
        std::io::ErrorKind::PermissionDenied => "permission denied".to_string(),
        _ => e.to_string(),
    }
}
