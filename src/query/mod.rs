//! The filter language of `memctl runs --where`, and the run fields it (and sorting, columns
//! and grouping) names.
//!
//! ```text
//! d in [48, 96] and (status == "done" or accuracy > 0.9)
//! "ablation" in tags and not gates
//! started >= 2025-01-31 and experiment ~ "quickstart_*"
//! ```
//!
//! [`parse`] turns text into a [`Filter`] (grammar: `grammar/query.pest`), [`compile`] checks
//! it against the store's runs and resolves names, and [`Query::matches`] tests one run.
//! Errors are [`Diagnostic`](crate::diag::Diagnostic)s located in the filter's pseudo-file.

pub mod ast;
pub mod compile;
pub mod error_kind;
pub mod eval;
pub mod fields;
pub mod limits;
pub mod parser;

pub use ast::Filter;
pub use compile::{Query, compile};
pub use fields::{Field, Val};
pub use parser::parse;

use crate::diag::Diagnostic;
use crate::source::SourceMap;
use crate::store::RunSummary;

/// The pseudo-file name filter errors are reported in.
pub const WHERE_FILE: &str = "<--where>";

/// Parses and checks `text` against `runs`; on error, the diagnostic and the source map to
/// render it with.
pub fn prepare(text: &str, runs: &[RunSummary]) -> Result<Query, Box<(Diagnostic, SourceMap)>> {
    let mut sources = SourceMap::default();
    let file = sources.add(WHERE_FILE, text.to_string());
    match parse(file, text).and_then(|f| compile(&f, runs)) {
        Ok(q) => Ok(q),
        Err(d) => Err(Box::new((d, sources))),
    }
}

#[cfg(test)]
mod tests;
