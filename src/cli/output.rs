//! The files commands write (`results -o`, `bench --dump`): never over one of the command's
//! own inputs (a slip of `-o` would replace the spec or the tables' description), and an
//! error that names the file when writing fails.

use std::path::Path;

/// Fails when `output` is one of `inputs` (the same file, by any path to it).
fn not_an_input(output: &Path, inputs: &[&Path]) -> anyhow::Result<()> {
    // Only an existing file can be an input; canonical paths see through `./` and links.
    let Ok(out) = std::fs::canonicalize(output) else { return Ok(()) };
    for input in inputs {
        if std::fs::canonicalize(input).is_ok_and(|i| i == out) {
            anyhow::bail!(
                "not writing to {}: it is this command's input; choose another output file",
                output.display()
            );
        }
    }
    Ok(())
}

/// Fails, before any work is done for it, when `output` cannot be a file written later: it is
/// one of `inputs`, a folder, or under a file.
pub fn writable(output: &Path, inputs: &[&Path]) -> anyhow::Result<()> {
    not_an_input(output, inputs)?;
    if output.is_dir() {
        anyhow::bail!("cannot write {}: it is a folder; name a file in it", output.display());
    }
    // A file where a folder of the path should be: say which (the OS says "File exists").
    let folder = output.parent().unwrap_or(Path::new(""));
    if let Some(file) = folder.ancestors().find(|a| a.is_file()) {
        anyhow::bail!("cannot write {}: {} is a file, not a folder", output.display(), file.display());
    }
    Ok(())
}

/// Writes `bytes` to `output`, unless it is one of `inputs`, making its folder if need be.
pub fn write(output: &Path, bytes: impl AsRef<[u8]>, inputs: &[&Path]) -> anyhow::Result<()> {
    writable(output, inputs)?;
    let cannot = |e: std::io::Error| anyhow::anyhow!("cannot write {}: {e}", output.display());
    if let Some(folder) = output.parent().filter(|f| !f.as_os_str().is_empty()) {
        std::fs::create_dir_all(folder).map_err(cannot)?;
    }
    std::fs::write(output, bytes).map_err(cannot)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_output_that_is_an_input_is_refused_and_left_as_it_was() {
        let dir = tempfile::tempdir().unwrap();
        let spec = dir.path().join("a.mem");
        std::fs::write(&spec, "model m {}").unwrap();
        let same = dir.path().join(".").join("a.mem");
        let err = write(&same, "{}", &[&spec]).unwrap_err().to_string();
        assert!(err.contains("it is this command's input"), "{err}");
        assert_eq!(std::fs::read_to_string(&spec).unwrap(), "model m {}");
        write(&dir.path().join("b.json"), "{}", &[&spec]).unwrap();
        assert_eq!(std::fs::read_to_string(dir.path().join("b.json")).unwrap(), "{}");
    }

    #[test]
    fn a_failed_write_names_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("file");
        std::fs::write(&file, "").unwrap();
        let err = write(&file.join("x.json"), "{}", &[]).unwrap_err().to_string();
        assert!(err.contains(&format!("cannot write {}", file.join("x.json").display())), "{err}");
        let err = write(&file.join("deeper/x.json"), "{}", &[]).unwrap_err().to_string();
        assert!(err.ends_with(&format!("{} is a file, not a folder", file.display())), "{err}");
        let err = writable(dir.path(), &[]).unwrap_err().to_string();
        assert!(err.ends_with("it is a folder; name a file in it"), "{err}");
    }

    #[test]
    fn a_missing_folder_is_made() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out/tables/results.md");
        write(&out, "# t", &[]).unwrap();
        assert_eq!(std::fs::read_to_string(&out).unwrap(), "# t");
    }
}
