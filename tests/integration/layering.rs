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

/// The module path of a file under `src/`: `prims/sam/item_write.rs` is `prims::sam::item_write`,
/// `prims/sam/mod.rs` is `prims::sam`.
pub(super) fn module_path(rel: &Path) -> Vec<String> {
    let mut path: Vec<String> = rel.components().map(|c| c.as_os_str().to_string_lossy().into_owned()).collect();
    if let Some(last) = path.last_mut() {
        *last = last.trim_end_matches(".rs").to_string();
    }
    if path.last().is_some_and(|l| l == "mod") {
        path.pop();
    }
    path
}

/// Whether the file's module is declared for tests only (`#[cfg(test)]` above its `mod` line in
/// its parent), like a test module written inline: it may import anything.
pub(super) fn declared_for_tests(src: &Path, rel: &Path) -> bool {
    let module = module_path(rel);
    let Some((name, parent)) = module.split_last() else { return false };
    let parent_file = if parent.is_empty() {
        src.join("lib.rs")
    } else {
        let dir = src.join(parent.join("/"));
        if dir.join("mod.rs").exists() { dir.join("mod.rs") } else { dir.with_extension("rs") }
    };
    let text = std::fs::read_to_string(parent_file).unwrap_or_default();
    let lines: Vec<&str> = text.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
    lines.windows(2).any(|w| {
        w[0] == "#[cfg(test)]" && w[1].ends_with(&format!("mod {name};")) && w[1].split_whitespace().any(|t| t == "mod")
    })
}

/// The first two segments of every module path `text` names, from the crate root, with their
/// line numbers: `crate::a::b…` and `crate::{a::b, c}`, and `super::…` chains resolved against
/// `module` (the file's own module path), so that a file in a nested folder that reaches up
/// with `super::super::…` is read like one that writes `crate::…`.
fn imports(text: &str, module: &[String]) -> Vec<(Vec<String>, usize)> {
    imports_to(text, module, 2)
}

/// Every module path `text` names, whole, as [`imports`] reads them.
pub(super) fn full_imports(text: &str, module: &[String]) -> Vec<(Vec<String>, usize)> {
    imports_to(text, module, usize::MAX)
}

/// [`imports`], each path cut to `depth` segments from the crate root.
fn imports_to(text: &str, module: &[String], depth: usize) -> Vec<(Vec<String>, usize)> {
    let mut out = vec![];
    for (n, code) in code_lines(text) {
        let mut at = 0;
        while let Some((start, base, rest)) = next_path(&code, at, module) {
            out.extend(paths(base, rest, depth).into_iter().map(|p| (p, n)));
            at = start + 1;
        }
    }
    out
}

/// The code of `text` by line (numbered from 1), as the readers here see it: comments and the
/// insides of string and char literals blanked, every item marked `#[cfg(test)]` (a test
/// module, a test-only function or `mod` line: tests may import anything) left out, and a `use`
/// that rustfmt spread over lines read as one line, its first's.
pub(super) fn code_lines(text: &str) -> Vec<(usize, String)> {
    let code = code_only(text);
    let mut out = vec![];
    let mut lines = code.lines().enumerate();
    while let Some((n, line)) = lines.next() {
        if let Some(rest) = line.trim_start().strip_prefix("#[cfg(test)]") {
            skip_item(rest, &mut lines);
            continue;
        }
        let mut line = line.to_string();
        let trimmed = line.trim_start();
        if trimmed.starts_with("use ") || trimmed.starts_with("pub") && trimmed.contains(" use ") {
            while !line.contains(';') {
                let Some((_, next)) = lines.next() else { break };
                line.push(' ');
                line.push_str(next);
            }
        }
        out.push((n + 1, line));
    }
    out
}

/// Passes over the item a `#[cfg(test)]` marks, `rest` being what follows the attribute on its
/// line: up to its `;` (a `mod x;`, a `use`) or its closing brace, whichever comes first.
fn skip_item<'a>(rest: &str, lines: &mut impl Iterator<Item = (usize, &'a str)>) {
    let (mut depth, mut opened) = (0usize, false);
    let mut ends = |code: &str| {
        for c in code.chars() {
            match c {
                ';' if !opened => return true,
                '{' => (depth, opened) = (depth + 1, true),
                '}' => depth = depth.saturating_sub(1),
                _ => {}
            }
            if opened && depth == 0 {
                return true;
            }
        }
        false
    };
    if ends(rest) {
        return;
    }
    for (_, line) in lines.by_ref() {
        if ends(line) {
            return;
        }
    }
}

/// `text` with its comments and the insides of its string and char literals (raw strings too)
/// blanked, newlines kept: braces and paths are then read from code only.
pub(super) fn code_only(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = bytes.to_vec();
    let blank = |out: &mut Vec<u8>, from: usize, to: usize| {
        for b in &mut out[from..to.min(bytes.len())] {
            if *b != b'\n' {
                *b = b' ';
            }
        }
    };
    let is_ident = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let mut i = 0;
    while i < bytes.len() {
        let rest = &text[i..];
        if rest.starts_with("//") {
            let end = rest.find('\n').map_or(bytes.len(), |e| i + e);
            blank(&mut out, i, end);
            i = end;
        } else if rest.starts_with("/*") {
            let end = rest.find("*/").map_or(bytes.len(), |e| i + e + 2);
            blank(&mut out, i, end);
            i = end;
        } else if let Some(hashes) = raw_hashes(rest).filter(|_| i == 0 || !is_ident(bytes[i - 1])) {
            let open = hashes + 2;
            let close = format!("\"{}", "#".repeat(hashes));
            let end = rest[open..].find(&close).map_or(bytes.len(), |e| i + open + e);
            blank(&mut out, i + open, end);
            i = end + close.len();
        } else if rest.starts_with('"') {
            let mut j = i + 1;
            while j < bytes.len() && bytes[j] != b'"' {
                j += if bytes[j] == b'\\' { 2 } else { 1 };
            }
            blank(&mut out, i + 1, j);
            i = j + 1;
        } else if let Some(inner) = rest.strip_prefix('\'') {
            // A char literal ('x', '\n', '→'); otherwise a lifetime.
            let len = if inner.starts_with('\\') {
                // The escaped character, then up to the closing quote ('\'', '\u{…}').
                inner.get(2..).and_then(|after| after.find('\'')).map(|e| e + 2)
            } else {
                inner.chars().next().map(char::len_utf8).filter(|&l| inner[l..].starts_with('\''))
            };
            match len {
                Some(len) => {
                    blank(&mut out, i + 1, i + 1 + len);
                    i += len + 2;
                }
                None => i += 1,
            }
        } else {
            i += rest.chars().next().map_or(1, char::len_utf8);
        }
    }
    String::from_utf8(out).expect("blanking whole characters keeps UTF-8")
}

/// At an `r`: how many `#` stand between it and a raw string's opening quote (`None`: no raw
/// string starts here).
fn raw_hashes(rest: &str) -> Option<usize> {
    let after_r = rest.strip_prefix('r')?;
    let hashes = after_r.bytes().take_while(|&b| b == b'#').count();
    after_r[hashes..].starts_with('"').then_some(hashes)
}

/// The next path in `code` from byte `from`: where it starts, the module it starts from (the
/// crate root, or a module `super::` reaches) and the text after its `crate::`/`super::`s.
fn next_path<'a>(code: &'a str, from: usize, module: &[String]) -> Option<(usize, Vec<String>, &'a str)> {
    let rest = &code[from..];
    let krate = rest.find("crate::");
    let sup = rest.match_indices("super::").map(|(i, _)| i).find(|&i| i == 0 || !rest[..i].ends_with("::"));
    let start = match (krate, sup) {
        (Some(k), Some(s)) => k.min(s),
        (Some(k), None) => k,
        (None, Some(s)) => s,
        (None, None) => return None,
    };
    let mut tail = &rest[start..];
    if let Some(t) = tail.strip_prefix("crate::") {
        return Some((from + start, vec![], t));
    }
    let mut ups = 0;
    while let Some(t) = tail.strip_prefix("super::") {
        tail = t;
        ups += 1;
    }
    // `super` from a file's module is its parent; more than the path has is a compile error.
    let base = module[..module.len().saturating_sub(ups)].to_vec();
    Some((from + start, base, tail))
}

/// `base` followed by what `rest` names: its first segments, or every item of a `{…}` group,
/// each cut to `depth` segments from the crate root.
fn paths(base: Vec<String>, rest: &str, depth: usize) -> Vec<Vec<String>> {
    let is_ident = |c: char| c.is_alphanumeric() || c == '_';
    let mut path = base;
    let mut rest = rest;
    while path.len() < depth {
        if let Some(group) = rest.strip_prefix('{') {
            return split_group(group)
                .into_iter()
                // rustfmt ends a group spread over lines with a comma: no item follows it.
                .filter(|item| !item.trim().is_empty())
                .flat_map(|item| paths(path.clone(), item.trim(), depth))
                .filter(|p| !p.is_empty() && p.iter().all(|s| s != "self"))
                .collect();
        }
        let name: String = rest.chars().take_while(|&c| is_ident(c)).collect();
        if name.is_empty() {
            break;
        }
        rest = &rest[name.len()..];
        path.push(name);
        match rest.strip_prefix("::") {
            Some(r) => rest = r,
            None => break,
        }
    }
    if path.is_empty() { vec![] } else { vec![path] }
}

/// The items of a `{…}` group (the text after its `{`), split at its own commas.
fn split_group(group: &str) -> Vec<&str> {
    let (mut items, mut depth, mut start) = (vec![], 0, 0);
    for (i, c) in group.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => {
                items.push(&group[start..i]);
                return items;
            }
            '}' => depth -= 1,
            ',' if depth == 0 => {
                items.push(&group[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    items.push(&group[start..]);
    items
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
        if module == "lib" || module == "main" || declared_for_tests(&src, rel) {
            continue;
        }
        let Some(own) = layer_of(&module) else {
            problems.push(format!("src/{first}: module `{module}` has no layer in LAYERS"));
            continue;
        };
        for (path, line) in imports(&std::fs::read_to_string(file).unwrap(), &module_path(rel)) {
            let target = path[0].clone();
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
    let found: Vec<String> = imports(text, &[]).into_iter().map(|(p, n)| format!("{}:{n}", p.join("::"))).collect();
    assert_eq!(found, ["graph::Ty:1", "prims:1", "value::Value:3"]);
}

#[test]
fn the_import_reader_reads_a_group_spread_over_lines_at_its_first_line() {
    let text = "use crate::{\n    graph::Ty,\n    prims, // crate::cli\n};\nuse crate::value::Value;\n";
    let found: Vec<String> = imports(text, &[]).into_iter().map(|(p, n)| format!("{}:{n}", p.join("::"))).collect();
    assert_eq!(found, ["graph::Ty:1", "prims:1", "value::Value:5"]);
}

#[test]
fn the_import_reader_reads_nested_groups_and_the_code_between_test_items() {
    let text = "use crate::{\n    graph::{Ty, StepGraph},\n    prims,\n};\n#[cfg(test)]\npub fn helper() -> &'static str {\n    \"}\"; crate::cli::x()\n}\nconst S: &str = \"crate::store {\";\nuse crate::value::Value;\n#[cfg(test)]\nmod only_tests;\nlet c = '{'; crate::train::x();\n";
    let found: Vec<String> = imports(text, &[]).into_iter().map(|(p, n)| format!("{}:{n}", p.join("::"))).collect();
    assert_eq!(found, ["graph::Ty:1", "graph::StepGraph:1", "prims:1", "value::Value:10", "train::x:13"]);
}

#[test]
fn a_module_declared_for_tests_is_left_out() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    assert!(declared_for_tests(&src, Path::new("prims/contract/testing.rs")));
    assert!(!declared_for_tests(&src, Path::new("prims/contract/op.rs")));
    assert!(!declared_for_tests(&src, Path::new("prims/registry.rs")));
}

#[test]
fn the_import_reader_resolves_super_in_nested_folders() {
    let module = module_path(Path::new("prims/sam/item_write.rs"));
    assert_eq!(module, ["prims", "sam", "item_write"]);
    assert_eq!(module_path(Path::new("prims/sam/mod.rs")), ["prims", "sam"]);
    let text = "use super::super::super::kernels::cpu::view;\nuse super::heads::x;\nuse super::super::{registry, core::add};\nuse super::*;\npub(super) fn f() {}\n";
    let found: Vec<String> = imports(text, &module).into_iter().map(|(p, n)| format!("{}:{n}", p.join("::"))).collect();
    assert_eq!(found, ["kernels::cpu:1", "prims::sam:2", "prims::registry:3", "prims::core:3", "prims::sam:4"]);
}

/// Inside `src/prims/`, bottom to top. A room may import rooms of strictly lower layers (and
/// itself); `mod.rs` at the top declares the rooms and is left out.
const PRIM_ROOMS: &[&[&str]] = &[
    // What every primitive implements; it imports no primitive.
    &["contract"],
    // What a primitive file imports.
    &["prelude"],
    // The families: tensor glue, then learned layers, then the memory models.
    &["core"],
    &["layers"],
    &["sam", "nam", "rmc", "kanerva"],
    // Across families: the fusions training runs as one op, and the list of every primitive.
    &["fusion", "registry"],
];

/// Inside `src/kernels/`, bottom to top: the plain-slice machinery, the fused ops (whose CPU
/// twins run on it), and the candle-level blocks that take a fused op where it runs.
const KERNEL_ROOMS: &[&[&str]] = &[&["cpu"], &["cuda"], &["blocks"]];

/// The imports inside `src/<top>/` that run from a room (`rooms`, bottom to top) to one of the
/// same layer or higher, as `file:line: ...` lines; and how many imports went downwards.
fn room_problems(top: &str, rooms: &[&[&str]]) -> (Vec<String>, usize) {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let layer = |room: &str| rooms.iter().position(|l| l.contains(&room));
    let mut problems = vec![];
    let mut edges = 0;
    for file in crate::support::files_with_extension(&src.join(top), "rs") {
        let rel = file.strip_prefix(&src).unwrap();
        let module = module_path(rel);
        let Some(room) = module.get(1) else { continue };
        if declared_for_tests(&src, rel) {
            continue;
        }
        let Some(own) = layer(room) else {
            problems.push(format!("src/{}: room `{room}` has no layer", rel.display()));
            continue;
        };
        for (path, line) in imports(&std::fs::read_to_string(&file).unwrap(), &module) {
            let [first, target, ..] = &path[..] else { continue };
            if first != top || target == room {
                continue;
            }
            match layer(target) {
                None => problems
                    .push(format!("src/{}:{line}: imports `{top}::{target}`, which has no layer", rel.display())),
                Some(l) if l >= own => problems.push(format!(
                    "src/{}:{line}: `{room}` (layer {own}) imports `{target}` (layer {l}): upward or sideways",
                    rel.display()
                )),
                Some(_) => edges += 1,
            }
        }
    }
    (problems, edges)
}

#[test]
fn the_prims_rooms_import_only_lower_rooms() {
    let (problems, edges) = room_problems("prims", PRIM_ROOMS);
    assert!(problems.is_empty(), "the prims rooms' layering broken:\n{}", problems.join("\n"));
    assert!(edges > 40, "expected the families to import the prelude ({edges} edges found)");
}

#[test]
fn the_kernels_rooms_import_only_lower_rooms() {
    let (problems, edges) = room_problems("kernels", KERNEL_ROOMS);
    assert!(problems.is_empty(), "the kernels rooms' layering broken:\n{}", problems.join("\n"));
    // The fused ops' CPU twins run on `cpu` and the blocks call `cuda`: a reader that found
    // nothing would pass.
    assert!(edges > 20, "expected `cuda` and `blocks` to import the rooms below ({edges} edges found)");
}
