//! Inside a module, files import each other in short circles at most: no circle of imports
//! among the files of one folder is longer than three. A folder's `mod.rs` is the folder's own
//! file, and a subfolder counts as one file of its parent. A long circle is usually a `mod.rs`
//! that both holds what its children import and imports its children; the remedy is the one
//! `prims` and `tasks` use: the shared contract in a file of its own, the list of children in
//! a registry.
//!
//! Read with `layering`'s import reader (comments and test modules left out), plus the bare
//! paths that name a child module (`registry::TASKS` in a `mod.rs`) or, after `use super::*`,
//! a sibling.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use super::layering::{code_lines, declared_for_tests, full_imports, module_path};

/// The longest circle allowed.
const LONGEST: usize = 3;

/// The files of one folder and who imports whom among them, by name (`mod.rs` for the folder's
/// own file, a subfolder by its name).
type Graph = BTreeMap<String, BTreeSet<String>>;

/// The import graph of the files of every folder under `src/`, by the folder's module path.
fn folder_graphs(src: &Path) -> BTreeMap<Vec<String>, Graph> {
    let mut graphs: BTreeMap<Vec<String>, Graph> = BTreeMap::new();
    // Each folder's children, read once.
    let mut known: BTreeMap<Vec<String>, BTreeSet<String>> = BTreeMap::new();
    for file in crate::support::files_with_extension(src, "rs") {
        let rel = file.strip_prefix(src).unwrap();
        let module = module_path(rel);
        if module.is_empty() || module == ["lib"] || module == ["main"] || declared_for_tests(src, rel) {
            continue;
        }
        let text = std::fs::read_to_string(&file).unwrap();
        let own_folder = if rel.ends_with("mod.rs") { module.clone() } else { module[..module.len() - 1].to_vec() };
        let mut targets: Vec<Vec<String>> = full_imports(&text, &module).into_iter().map(|(p, _)| p).collect();
        targets
            .extend(bare_paths(&text, &children(src, &module)).into_iter().map(|c| [module.clone(), vec![c]].concat()));
        if code_lines(&text).iter().any(|(_, l)| l.trim() == "use super::*;") {
            let siblings = children(src, &own_folder);
            targets.extend(bare_paths(&text, &siblings).into_iter().map(|c| [own_folder.clone(), vec![c]].concat()));
        }
        for target in targets {
            // The folder the edge lies in: the longest common prefix of the two module paths.
            let common = module.iter().zip(&target).take_while(|(a, b)| a == b).count();
            let folder = &module[..common];
            let kids = known.entry(folder.to_vec()).or_insert_with(|| children(src, folder));
            if kids.is_empty() {
                continue; // not a folder: a file's own inline modules
            }
            let node = |path: &[String]| match path.get(common) {
                Some(child) if kids.contains(child) => child.clone(),
                _ => "mod.rs".to_string(),
            };
            let (from, to) = (node(&module), node(&target));
            if from != to {
                graphs.entry(folder.to_vec()).or_default().entry(from).or_default().insert(to);
            }
        }
    }
    graphs
}

/// The child modules of `module`: its folder's `.rs` files (but `mod.rs`) and subfolders.
fn children(src: &Path, module: &[String]) -> BTreeSet<String> {
    let Ok(entries) = std::fs::read_dir(src.join(module.join("/"))) else { return BTreeSet::new() };
    entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter_map(|p| {
            let name = p.file_name()?.to_str()?.to_string();
            if p.is_dir() { Some(name) } else { name.strip_suffix(".rs").filter(|n| *n != "mod").map(str::to_string) }
        })
        .collect()
}

/// The names in `names` that start a path (`name::…`, not after another `::`, or `self::name`)
/// in `text`'s code, read as `layering` reads it (no comments, strings or test items).
fn bare_paths(text: &str, names: &BTreeSet<String>) -> BTreeSet<String> {
    let is_ident = |c: char| c.is_alphanumeric() || c == '_';
    let mut found = BTreeSet::new();
    for (_, code) in code_lines(text) {
        for (i, _) in code.match_indices("::") {
            let before = &code[..i];
            let start = before.char_indices().rev().find(|&(_, c)| !is_ident(c)).map_or(0, |(p, c)| p + c.len_utf8());
            let (head, name) = before.split_at(start);
            // A path starts at `name`, or `name` follows a path's `self::`.
            let starts_a_path = !head.ends_with("::") || head.ends_with("self::");
            if starts_a_path && names.contains(name) {
                found.insert(name.to_string());
            }
        }
    }
    found
}

/// The longest simple circle in `graph`, its nodes in order; `None` without any. Gives up
/// (`Err`) after `budget` steps: a graph so tangled fails the test anyway.
fn longest_circle(graph: &Graph, budget: usize) -> Result<Option<Vec<String>>, String> {
    fn walk(
        graph: &Graph,
        path: &mut Vec<String>,
        best: &mut Option<Vec<String>>,
        steps: &mut usize,
    ) -> Result<(), String> {
        *steps = steps.checked_sub(1).ok_or("too many paths to search")?;
        let last = path.last().unwrap().clone();
        for next in graph.get(&last).into_iter().flatten() {
            if *next == path[0] {
                if best.as_ref().is_none_or(|b| path.len() > b.len()) {
                    *best = Some(path.clone());
                }
            } else if !path.contains(next) && next > &path[0] {
                // Each circle is searched from its smallest node only.
                path.push(next.clone());
                walk(graph, path, best, steps)?;
                path.pop();
            }
        }
        Ok(())
    }
    let (mut best, mut steps) = (None, budget);
    for start in graph.keys() {
        walk(graph, &mut vec![start.clone()], &mut best, &mut steps)?;
    }
    Ok(best)
}

#[test]
fn no_circle_of_files_inside_a_module_is_longer_than_three() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let graphs = folder_graphs(&src);
    let mut problems = vec![];
    for (folder, graph) in &graphs {
        match longest_circle(graph, 1_000_000) {
            Ok(Some(circle)) if circle.len() > LONGEST => problems.push(format!(
                "src/{}: a circle of {} files: {} → back",
                folder.join("/"),
                circle.len(),
                circle.join(" → ")
            )),
            Ok(_) => {}
            Err(e) => problems.push(format!("src/{}: {e}", folder.join("/"))),
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    // The reader sees real code: a registry that imports the tasks, a task that imports the
    // prelude, a dispatcher (bare paths in a `mod.rs`) that imports its verbs. A reader that
    // found nothing would pass.
    let tasks = &graphs[&vec!["tasks".to_string()]];
    assert!(tasks["registry"].contains("copy") && tasks["copy"].contains("prelude"), "{tasks:?}");
    assert!(graphs[&vec!["cli".to_string()]]["mod.rs"].contains("sweep"));
}

#[test]
fn the_circle_finder_finds_the_longest_circle() {
    let graph = |edges: &[(&str, &str)]| {
        let mut g = Graph::new();
        for (a, b) in edges {
            g.entry(a.to_string()).or_default().insert(b.to_string());
        }
        g
    };
    let hub = graph(&[("mod.rs", "a"), ("a", "mod.rs"), ("mod.rs", "b"), ("b", "mod.rs")]);
    assert_eq!(longest_circle(&hub, 100).unwrap().unwrap().len(), 2);
    let four = graph(&[("a", "b"), ("b", "c"), ("c", "d"), ("d", "a"), ("b", "a")]);
    assert_eq!(longest_circle(&four, 100).unwrap().unwrap(), ["a", "b", "c", "d"]);
    assert_eq!(longest_circle(&graph(&[("a", "b"), ("b", "c")]), 100).unwrap(), None);
}

#[test]
fn bare_paths_name_children_but_not_items_of_other_paths() {
    let names: BTreeSet<String> = ["registry", "copy"].map(String::from).into();
    let text = "pub use registry::{TASKS, get};\nuse crate::other::copy::X;\nlet y = self::copy::Y; // registry::Z\n#[cfg(test)]\nmod tests { use registry::W; }\n";
    assert_eq!(bare_paths(text, &names), names);
    assert!(bare_paths("use crate::other::copy::X;\n", &names).is_empty());
}
