//! `memctl results FILE.yaml [-o OUT.md] [--data-dir DIR]`: the paper-reproduction tables,
//! from the store, and the data behind each as JSON.

use std::collections::BTreeSet;
use std::path::{Component, Path, PathBuf};

use crate::cli::context::Context;
use crate::report::selection::select;
use crate::report::{results, table_curves, table_data};
use crate::store::{RunRecord, Store};

/// Write the reproduction tables described in a YAML file from the runs in the store.
#[derive(clap::Args)]
pub struct Args {
    /// The tables' description (e.g. specs/paper/results.yaml).
    description: PathBuf,
    /// Write the Markdown here instead of printing it.
    #[arg(long, short)]
    output: Option<PathBuf>,
    /// Also write the data behind every table here, one JSON file per table (`<table-slug>.json`),
    /// and the learning curves of the tables that name one (`<table-slug>.svg`), linked from the
    /// Markdown by their path relative to its folder.
    #[arg(long)]
    data_dir: Option<PathBuf>,
}

pub fn run(args: Args, ctx: &Context) -> anyhow::Result<i32> {
    let text = std::fs::read_to_string(&args.description)
        .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", args.description.display()))?;
    let source = args.description.display().to_string();
    let report = results::load_named(&text, &source).map_err(|e| match e {
        // A YAML error names the file in its own snippet header.
        results::DescriptionError::Yaml(rendered) => anyhow::anyhow!("{rendered}"),
        other => anyhow::anyhow!("{source}: {other}"),
    })?;
    if let Some(p) = &args.output {
        super::output::writable(p, &[&args.description])?;
    }
    let store = Store::open_existing(&ctx.store)?;
    let runs: Vec<_> = store.all()?.into_iter().map(crate::store::as_seen).collect();
    results::check_names(&report, &runs).map_err(|e| anyhow::anyhow!("{}: {e}", args.description.display()))?;
    let mut known = results::known_experiments(&runs);
    known.extend(declared_beside(&args.description));
    for t in report.all_tables() {
        for typo in results::unknown_experiments(t, &known) {
            eprintln!("warning: table `{}`: {typo}", t.title);
        }
        for mixed in results::mixed_rows(t, &select(&runs, &t.experiments, &t.rows)) {
            eprintln!("warning: table `{}`: {mixed}", t.title);
        }
    }
    let figures = match &args.data_dir {
        Some(dir) => write_data(dir, &report, &runs, args.output.as_deref())?,
        None => vec![],
    };
    let md = results::render_with_figures(&report, &runs, &figures);
    match &args.output {
        Some(p) => {
            super::output::write(p, md, &[&args.description])?;
            eprintln!("wrote {}", p.display());
        }
        None => print!("{md}"),
    }
    Ok(0)
}

/// One JSON file per table, named by its title (a second table of the same name gets `-2`), and
/// a figure of its curves where the table names one. Returns each table's figure link, relative
/// to the document's folder when `document` is given.
fn write_data(
    dir: &Path,
    report: &results::Report,
    runs: &[RunRecord],
    document: Option<&Path>,
) -> anyhow::Result<Vec<Option<String>>> {
    std::fs::create_dir_all(dir).map_err(|e| anyhow::anyhow!("cannot create {}: {e}", dir.display()))?;
    let mut used = BTreeSet::new();
    let mut figures = vec![];
    for t in report.all_tables() {
        let base = table_data::slug(&t.title);
        let name = (1..)
            .map(|i| if i == 1 { base.clone() } else { format!("{base}-{i}") })
            .find(|n| used.insert(n.clone()))
            .unwrap_or(base);
        let selection = select(runs, &t.experiments, &t.rows);
        let path = dir.join(format!("{name}.json"));
        let json = table_data::render(t, &selection)?;
        std::fs::write(&path, json + "\n").map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))?;
        let figure = dir.join(format!("{name}.svg"));
        let drawn = match &t.curves {
            Some(metric) => table_curves::draw(t, metric, &selection, &figure)
                .map_err(|e| anyhow::anyhow!("cannot draw {}: {e}", figure.display()))?,
            None => false,
        };
        figures.push(drawn.then(|| link(&figure, document)));
    }
    let drawn = figures.iter().flatten().count();
    eprintln!(
        "wrote {} table data files and {drawn} figure{} to {}",
        report.all_tables().count(),
        if drawn == 1 { "" } else { "s" },
        dir.display()
    );
    Ok(figures)
}

/// `figure`'s path as a link from `document`'s folder, as a Markdown viewer resolves it
/// (`../data/x.svg` where the figure is outside that folder). Printed (no document), or with
/// no relative path between them (another drive), the path as given.
fn link(figure: &Path, document: Option<&Path>) -> String {
    let relative = document.and_then(|d| {
        let folder = lexical(&std::path::absolute(d).ok()?).parent()?.to_path_buf();
        relative_to(&lexical(&std::path::absolute(figure).ok()?), &folder)
    });
    relative.unwrap_or_else(|| figure.to_path_buf()).to_string_lossy().replace('\\', "/")
}

/// An absolute path with `.` and `..` resolved by name, as a viewer resolves a link from the
/// path it opened (not through symbolic links).
fn lexical(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

/// `path` relative to `folder`, both absolute and lexical; none across roots or drives.
fn relative_to(path: &Path, folder: &Path) -> Option<PathBuf> {
    let path: Vec<Component> = path.components().collect();
    let folder: Vec<Component> = folder.components().collect();
    if path.first() != folder.first() {
        return None;
    }
    let common = path.iter().zip(&folder).take_while(|(a, b)| a == b).count();
    let up = std::iter::repeat_n(Component::ParentDir, folder.len() - common);
    Some(up.chain(path[common..].iter().copied()).collect())
}

/// The experiments the specs beside a description declare (`.mem` files in its folder and the
/// folders below, a few levels down): a table may name an experiment that has not run yet.
fn declared_beside(description: &Path) -> BTreeSet<String> {
    fn walk(dir: &Path, depth: usize, known: &mut BTreeSet<String>) {
        let Ok(entries) = std::fs::read_dir(dir) else { return };
        for path in entries.filter_map(Result::ok).map(|e| e.path()) {
            if path.is_dir() && depth > 0 {
                walk(&path, depth - 1, known);
            } else if path.extension().is_some_and(|x| x == "mem")
                && std::fs::metadata(&path).is_ok_and(|m| m.len() <= crate::lang::limits::MAX_SPEC_BYTES)
                && let Ok(text) = std::fs::read_to_string(&path)
            {
                known.extend(crate::lang::declared::declared_experiments(&text));
            }
        }
    }
    let mut known = BTreeSet::new();
    let folder = description.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    walk(folder, 2, &mut known);
    known
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_figure_is_linked_from_the_documents_folder() {
        let figure = Path::new("docs/results/sam-table-2.svg");
        assert_eq!(link(figure, Some(Path::new("docs/results.md"))), "results/sam-table-2.svg");
        assert_eq!(link(figure, Some(Path::new("README.md"))), "docs/results/sam-table-2.svg");
        // Printed to the terminal (no document): the path as given.
        assert_eq!(link(figure, None), "docs/results/sam-table-2.svg");
        // A figure outside the document's folder is reached through `..`.
        assert_eq!(link(Path::new("data3/t.svg"), Some(Path::new("sub/out2.md"))), "../data3/t.svg");
        assert_eq!(link(Path::new("./a/../data/t.svg"), Some(Path::new("sub/./deeper/out.md"))), "../../data/t.svg");
        // Absolute paths, on either side.
        assert_eq!(link(Path::new("/tmp/x.svg"), Some(Path::new("/srv/docs/results.md"))), "../../tmp/x.svg");
        let here = std::env::current_dir().unwrap();
        assert_eq!(link(&here.join("data/t.svg"), Some(Path::new("sub/out.md"))), "../data/t.svg");
        assert_eq!(link(Path::new("data/t.svg"), Some(&here.join("out.md"))), "data/t.svg");
    }

    /// The shipped description names bAbI's experiments, whose spec sits beside it and may
    /// never have run: known, so not called misspelt.
    #[test]
    fn the_specs_beside_a_description_declare_experiments_not_run_yet() {
        let known = declared_beside(Path::new("specs/paper/results.yaml"));
        assert!(known.contains("sam_table4_stm") && known.contains("sam_table1_l30_gpu"), "{known:?}");
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("deeper")).unwrap();
        std::fs::write(dir.path().join("deeper/later.mem"), "experiment later { task t }\n").unwrap();
        std::fs::write(dir.path().join("notes.txt"), "experiment not_a_spec { }\n").unwrap();
        let known = declared_beside(&dir.path().join("tables.yaml"));
        assert_eq!(known.into_iter().collect::<Vec<_>>(), ["later"]);
    }
}
