//! The commit this memctl was built from (`build.rs`, by vergen), which every run record keeps
//! so that a results table can say which code produced its numbers.

/// `<sha>` of the commit built, with `+changes` when tracked files differed from it; empty
/// when built outside a git checkout.
pub fn commit() -> String {
    let sha = env!("VERGEN_GIT_SHA");
    // vergen's placeholder when git could not be read.
    if sha.is_empty() || sha.starts_with("VERGEN_") {
        return String::new();
    }
    if env!("VERGEN_GIT_DIRTY") == "true" { format!("{sha}+changes") } else { sha.to_string() }
}

#[cfg(test)]
mod tests {
    /// Whatever the checkout: the commit recorded is the one `git` says was built, or none
    /// when the sources are not a git checkout.
    #[test]
    fn the_commit_recorded_is_the_checkout_s_head() {
        let head = std::process::Command::new("git")
            .args(["rev-parse", "HEAD"])
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string());
        let commit = super::commit();
        match head {
            Some(head) => assert_eq!(commit.trim_end_matches("+changes"), head),
            None => assert_eq!(commit, ""),
        }
    }
}
