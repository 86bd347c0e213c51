//! Loading and checking a spec for a verb, printing located errors.

use std::path::Path;

use crate::check::{self, Program};
use crate::cli::Context;
use crate::lang::{self, Spec};
use crate::sweep::SpecSource;

/// A checked spec, or `Err(exit code)` after printing its errors.
pub fn load_checked(path: &Path, ctx: &Context) -> Result<(Spec, Program), i32> {
    let spec = match lang::load(path) {
        Ok(s) => s,
        Err(e) => {
            eprint!("{}", e.render(ctx.color));
            return Err(2);
        }
    };
    match check::check(&spec) {
        Ok(p) => Ok((spec, p)),
        Err(d) => {
            eprint!("{}", d.render(&spec.sources, ctx.color));
            let n = d.0.len();
            eprintln!("{}: {n} error{}", path.display(), if n == 1 { "" } else { "s" });
            Err(2)
        }
    }
}

/// The spec text stored with each run: every file, each preceded by its path.
pub fn spec_source(path: &Path, spec: &Spec) -> SpecSource {
    let text = if spec.sources.files().count() == 1 {
        spec.sources.get(spec.main).text.clone()
    } else {
        spec.sources
            .files()
            .map(|(_, f)| format!("// ---- {}\n{}", f.path.display(), f.text))
            .collect::<Vec<_>>()
            .join("\n")
    };
    SpecSource { path: path.display().to_string(), text }
}
