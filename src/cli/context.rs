//! What every verb is given: the store it works on and how it prints.

use std::path::PathBuf;

/// Shared by every verb.
pub struct Context {
    pub store: PathBuf,
    /// Colour diagnostics on stderr.
    pub color: bool,
}
