//! The README's tables follow the registries: the primitives' table is exactly what
//! `memctl prims --markdown` prints, and the tasks' table has one row per registered task.

use std::collections::BTreeSet;
use std::process::Command;

fn readme() -> String {
    std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap()
}

#[test]
fn the_readme_primitive_table_is_the_registry_s() {
    let out = Command::new(env!("CARGO_BIN_EXE_memctl")).args(["prims", "--markdown"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let generated = String::from_utf8(out.stdout).unwrap();
    for p in memctl::prims::PRIMS {
        assert!(generated.contains(&format!("{}(", p.name())), "{} is not in the generated table", p.name());
    }
    let text = readme();
    let start = text.find("<!-- prims:start -->\n").expect("README has a prims:start marker") + 21;
    let end = text.find("<!-- prims:end -->").expect("README has a prims:end marker");
    assert!(
        text[start..end] == generated,
        "README.md's primitive table differs from the registry; regenerate it with \
         `memctl prims --markdown` between the prims markers"
    );
}

#[test]
fn the_readme_task_table_has_a_row_per_registered_task() {
    let text = readme();
    let table = &text[text.find("| Task | Paper").expect("README has the task table")..];
    let table = &table[..table.find("\n\n").unwrap_or(table.len())];
    // A row's first cell names one or more tasks: `| \`convexHull\`, \`tsp\` | …`.
    let documented: BTreeSet<String> = table
        .lines()
        .skip(2)
        .filter_map(|row| row.split('|').nth(1))
        .flat_map(|cell| cell.split('`').skip(1).step_by(2).map(str::to_string).collect::<Vec<_>>())
        .collect();
    let registered: BTreeSet<String> = memctl::tasks::TASKS.iter().map(|t| t.name().to_string()).collect();
    let missing: Vec<_> = registered.difference(&documented).collect();
    let unknown: Vec<_> = documented.difference(&registered).collect();
    assert!(
        missing.is_empty() && unknown.is_empty(),
        "README task table: missing {missing:?}, not registered {unknown:?}"
    );
}
