//! The module layers form a DAG: a module imports only modules of lower layers. Reads every
//! file under `src/` (test modules and comments left out) for `crate::<module>` paths, so an
//! upward import fails here with the file and line that made it. docs/architecture.md draws
//! the same layers.

use std::collections::BTreeMap;
use std::path::Path;

/// Bottom to top. A module may import modules of strictly lower layers.
const LAYERS: &[&[&str]] = &[
    // Shared leaf types and helpers.
    &["ftz", "source", "ty", "value", "suggest", "kernels", "build_info"],
    // Diagnostics, the primitives' contract (shapes without candle), training settings, the
    // device (which sets up the kernels' CUDA changes when it opens one).
    &["diag", "pool", "signature", "train_config", "device"],
    &["graph"],
    &["prims"],
    // The language, the task generators, and the compiler of step graphs into candle.
    &["lang", "tasks", "compile"],
    &["check"],
    &["store"],
    &["train", "query", "search"],
    &["sweep", "bench", "report", "slurm"],
    &["cli"],
];

fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|l| l.contains(&module))
}

/// The top-level modules `text` names through `crate::…`, with their line numbers.
fn imports(text: &str) -> Vec<(String, usize)> {
    let mut out = vec![];
    for (n, line) in text.lines().enumerate() {
        // A file's test module comes last; it may import anything (test helpers).
        if line.starts_with("#[cfg(test)]") {
            break;
        }
        let code = line.split("//").next().unwrap_or("");
        let mut rest = code;
        while let Some(at) = rest.find("crate::") {
            rest = &rest[at + "crate::".len()..];
            let names: Vec<&str> = match rest.strip_prefix('{') {
                // `crate::{a::X, b}`: every item's first segment.
                Some(group) => group
                    .split('}')
                    .next()
                    .unwrap_or("")
                    .split(',')
                    .map(|item| item.trim().split("::").next().unwrap_or(""))
                    .collect(),
                None => vec![rest.split(|c: char| !(c.is_alphanumeric() || c == '_')).next().unwrap_or("")],
            };
            out.extend(names.into_iter().filter(|m| !m.is_empty()).map(|m| (m.to_string(), n + 1)));
        }
    }
    out
}

#[test]
fn no_module_imports_a_module_of_its_own_or_a_higher_layer() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let files = crate::support::files_with_extension(&src, "rs");
    let mut problems = vec![];
    let mut edges: BTreeMap<(String, String), usize> = BTreeMap::new();
    for file in &files {
        let rel = file.strip_prefix(&src).unwrap();
        let first = rel.components().next().unwrap().as_os_str().to_string_lossy().into_owned();
        let module = first.trim_end_matches(".rs").to_string();
        if module == "lib" || module == "main" {
            continue;
        }
        let Some(own) = layer_of(&module) else {
            problems.push(format!("src/{first}: module `{module}` has no layer in LAYERS"));
            continue;
        };
        for (target, line) in imports(&std::fs::read_to_string(file).unwrap()) {
            if target == module {
                continue;
            }
            match layer_of(&target) {
                None => problems.push(format!("{}:{line}: imports `{target}`, which has no layer", rel.display())),
                Some(l) if l >= own => problems.push(format!(
                    "{}:{line}: `{module}` (layer {own}) imports `{target}` (layer {l}): upward or sideways",
                    rel.display()
                )),
                Some(_) => *edges.entry((module.clone(), target)).or_default() += 1,
            }
        }
    }
    assert!(problems.is_empty(), "layering broken:\n{}", problems.join("\n"));
    // The reader sees real code: the main edges exist (a parser that found nothing would pass).
    for (a, b) in [("check", "lang"), ("train", "compile"), ("sweep", "store"), ("compile", "prims")] {
        assert!(edges.contains_key(&(a.to_string(), b.to_string())), "expected `{a}` to import `{b}`");
    }
}

#[test]
fn the_import_reader_sees_grouped_paths_and_skips_comments_and_tests() {
    let text = "use crate::{graph::Ty, prims};\n// crate::cli in a comment\nlet x = crate::value::Value::Int(1); // crate::store\n#[cfg(test)]\nmod tests { use crate::cli; }\n";
    let found: Vec<(String, usize)> = imports(text);
    assert_eq!(found, [("graph".to_string(), 1), ("prims".to_string(), 1), ("value".to_string(), 3)]);
}
