//! Where a task's relative `path` option resolves, and the form a trial keeps it in.
//!
//! A path written in a spec file resolves against that file's folder, as `use` paths do, and
//! the trial keeps it as written. A path given on the command line is relative to the working
//! directory, as command-line paths are; it is rewritten relative to the spec's own folder, so
//! that the trial, and the identity it is stored under, are those the same file named in the
//! spec gives, wherever memctl runs.

use std::path::Path;

use crate::source::{FileId, SourceMap};
use crate::tasks;
use crate::value::Value;

/// The folder a relative `path` written in `file` resolves against: the spec's own for a
/// command-line override, which [`from_command_line`] made relative to it.
pub(super) fn folder_of(file: FileId, sources: &SourceMap) -> &Path {
    let written_in = if sources.is_command_line(file) { sources.main() } else { Some(sources.get(file)) };
    written_in.and_then(|f| f.path.parent()).unwrap_or(Path::new(""))
}

/// `value`, a path given on the command line (relative to the working directory), relative
/// to the spec's folder instead; an absolute path is kept, and so is any path while the
/// working directory cannot be read.
pub(super) fn from_command_line(value: Value, sources: &SourceMap) -> Value {
    let (Some(path), Some(spec), Ok(here)) = (value.as_str(), sources.main(), std::env::current_dir()) else {
        return value;
    };
    if Path::new(path).is_absolute() {
        return value;
    }
    let spec_folder = tasks::resolve_path(&here.join(spec.path.parent().unwrap_or(Path::new(""))), ".");
    let named = tasks::resolve_path(&here, path);
    match pathdiff::diff_paths(&named, &spec_folder).as_deref().and_then(Path::to_str) {
        Some("") => Value::Str(".".into()),
        Some(relative) => Value::Str(relative.into()),
        None => value,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::COMMAND_LINE;

    fn spec_at(spec: &str) -> (SourceMap, FileId, FileId) {
        let mut sources = SourceMap::default();
        let main = sources.add(spec, String::new());
        let override_ = sources.add(COMMAND_LINE, "path=\"x\"".into());
        (sources, main, override_)
    }

    fn str(s: &str) -> Value {
        Value::Str(s.into())
    }

    #[test]
    fn a_command_line_path_is_kept_relative_to_the_spec_folder() {
        let (sources, _, _) = spec_at("specs/paper/a.mem");
        assert_eq!(from_command_line(str("data/d.jsonl"), &sources), str("../../data/d.jsonl"));
        assert_eq!(from_command_line(str("./specs/paper/d.jsonl"), &sources), str("d.jsonl"));
        assert_eq!(from_command_line(str("specs/x/../paper"), &sources), str("."));
        assert_eq!(from_command_line(str("/abs/d.jsonl"), &sources), str("/abs/d.jsonl"));
        let (beside, _, _) = spec_at("a.mem");
        assert_eq!(from_command_line(str("data/d.jsonl"), &beside), str("data/d.jsonl"));
    }

    #[test]
    fn an_override_resolves_against_the_spec_folder_and_a_file_against_its_own() {
        let (mut sources, main, override_) = spec_at("specs/a.mem");
        let used = sources.add("specs/lib/tasks.mem", String::new());
        assert_eq!(folder_of(main, &sources), Path::new("specs"));
        assert_eq!(folder_of(override_, &sources), Path::new("specs"));
        assert_eq!(folder_of(used, &sources), Path::new("specs/lib"));
    }
}
