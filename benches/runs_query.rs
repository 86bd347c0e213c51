//! `cargo bench --bench runs_query`: `memctl runs --where ... --group-by ...` over 10 000 runs,
//! each with 200-point curves, must take well under 200 ms.
//!
//! Fills a temporary store with synthetic runs (configs from a real checked spec), then times
//! (a) opening the store and reading every summary, (b) the whole query in-process (open,
//! read, filter, group, render), and (c) the `memctl runs` process end to end.

use std::time::Instant;

use memctl::store::Store;

#[path = "support/synthetic_runs.rs"]
mod synthetic_runs;
use synthetic_runs::RUNS;

const REPEATS: usize = 11;

/// `median X ms (min Y)`: on a busy machine the minimum is the better estimate.
fn median(mut v: Vec<f64>) -> String {
    v.sort_by(f64::total_cmp);
    format!("{:.1} ms (min {:.1})", v[v.len() / 2], v[0])
}

/// CPU seconds (user + system) used by finished child processes so far.
fn children_cpu() -> f64 {
    // SAFETY: getrusage only writes the struct it is given.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut u) };
    let t = |v: libc::timeval| v.tv_sec as f64 + v.tv_usec as f64 * 1e-6;
    t(u.ru_utime) + t(u.ru_stime)
}

fn main() {
    // RUNS_QUERY_STORE=PATH keeps the filled store there (for timing `memctl` by hand).
    let dir = tempfile::tempdir().expect("temporary directory");
    let path = std::env::var_os("RUNS_QUERY_STORE").map_or_else(|| dir.path().join("store"), std::path::PathBuf::from);
    let _ = std::fs::remove_dir_all(&path);
    let t0 = Instant::now();
    synthetic_runs::fill(&path);
    eprintln!("filled {RUNS} runs in {:.1} s", t0.elapsed().as_secs_f64());

    let filter = "d in [48, 96] and (status == \"done\" or accuracy > 0.9) and not \"ablation\" in tags";
    let group_by = "d,gates";

    // (a) Opening the store and reading every summary.
    let mut open_read = vec![];
    for _ in 0..REPEATS {
        let t = Instant::now();
        let store = Store::open(&path).expect("store opens");
        let s = store.summaries().expect("summaries");
        assert_eq!(s.len(), RUNS);
        open_read.push(t.elapsed().as_secs_f64() * 1e3);
    }
    println!("open store + read {RUNS} summaries: median {}", median(open_read));

    // (b) The whole query in-process, as `memctl runs --where ... --group-by ...` does it.
    let mut query = vec![];
    let mut stages = [vec![], vec![], vec![], vec![], vec![], vec![]];
    let mut table = String::new();
    for _ in 0..REPEATS {
        let t = Instant::now();
        let store = Store::open(&path).expect("store opens");
        let t1 = t.elapsed().as_secs_f64();
        let runs = store.summaries().expect("summaries");
        let t2 = t.elapsed().as_secs_f64();
        let q = memctl::query::prepare(filter, &runs).unwrap_or_else(|e| panic!("{}", e.0.render(&e.1, false)));
        let t3 = t.elapsed().as_secs_f64();
        let view = memctl::report::view::View {
            filter: Some(q),
            group_by: Some(group_by.split(',').map(String::from).collect()),
            ..Default::default()
        };
        let sheet = memctl::report::view::build(&runs, &view).expect("sheet");
        let t4 = t.elapsed().as_secs_f64();
        table = memctl::report::table::render(&sheet);
        let t5 = t.elapsed().as_secs_f64();
        query.push(t5 * 1e3);
        drop(store);
        let t6 = t.elapsed().as_secs_f64();
        for (i, d) in [t1, t2 - t1, t3 - t2, t4 - t3, t5 - t4, t6 - t5].into_iter().enumerate() {
            stages[i].push(d * 1e3);
        }
    }
    println!("in-process query (open, read, filter, group, render): median {}", median(query));
    let names =
        ["open", "read summaries", "parse + check filter", "filter + group", "render", "close (not in the total)"];
    for (n, v) in names.iter().zip(stages) {
        println!("    {n}: median {}", median(v));
    }
    println!("{table}");

    // (c) The `memctl runs` process end to end.
    let mut process = vec![];
    let cpu0 = children_cpu();
    for _ in 0..REPEATS {
        let t = Instant::now();
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_memctl"))
            .arg("--store")
            .arg(&path)
            .args(["runs", "--where", filter, "--group-by", group_by])
            .output()
            .expect("memctl runs");
        process.push(t.elapsed().as_secs_f64() * 1e3);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }
    println!("`memctl runs --where ... --group-by {group_by}` process: median {}", median(process));
    println!("    CPU time (user + system) per process: {:.1} ms", (children_cpu() - cpu0) * 1e3 / REPEATS as f64);

    // For comparison: ungrouped, every matching row as a table.
    let mut rows = vec![];
    for _ in 0..REPEATS {
        let t = Instant::now();
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_memctl"))
            .arg("--store")
            .arg(&path)
            .args(["runs", "--where", filter, "--format", "csv"])
            .output()
            .expect("memctl runs");
        rows.push(t.elapsed().as_secs_f64() * 1e3);
        assert!(out.status.success());
    }
    println!("`memctl runs --where ... --format csv` (all matching rows) process: median {}", median(rows));
    println!("store size {:.0} MB", walk(&path) as f64 / 1e6);
}

fn walk(p: &std::path::Path) -> u64 {
    std::fs::read_dir(p).map_or(0, |d| {
        d.filter_map(|e| e.ok())
            .map(|e| if e.path().is_dir() { walk(&e.path()) } else { e.metadata().map_or(0, |m| m.len()) })
            .sum()
    })
}
