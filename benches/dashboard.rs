//! `cargo bench --bench dashboard`: `memctl ui` on a store of 10 000 runs with 200-point
//! curves (targets: first paint under 0.5 s, filtering under 200 ms).
//!
//! 1. The API over HTTP: the runs table as the page first asks for it, the same with a filter
//!    and a group-by, and the curves of ten runs.
//! 2. In headless Chromium (`MEMCTL_CHROMIUM`, else `chromium` on PATH): first paint, from
//!    navigation start to the runs table and the curves drawn; then filtering, from submitting
//!    a filter and group-by to the new table and curves drawn. Times are read in the page
//!    (`performance.now()`), so the DevTools round trips are not in them.
//!
//! `DASHBOARD_BENCH_STORE=PATH` keeps the filled store there and reuses it on the next run.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::Instant;

#[path = "support/chromium.rs"]
mod chromium;
#[path = "support/synthetic_runs.rs"]
mod synthetic_runs;
use synthetic_runs::RUNS;

const REPEATS: usize = 11;

/// `median X ms (min Y)`: on a busy machine the minimum is the better estimate.
fn median(mut v: Vec<f64>) -> String {
    v.sort_by(f64::total_cmp);
    format!("{:.1} ms (min {:.1})", v[v.len() / 2], v[0])
}

fn get(addr: &str, path: &str) -> (u16, usize) {
    let mut s = TcpStream::connect(addr).unwrap();
    write!(s, "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").unwrap();
    let mut response = vec![];
    s.read_to_end(&mut response).unwrap();
    let head = String::from_utf8_lossy(&response[..response.len().min(64)]).into_owned();
    (head.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or(0), response.len())
}

fn encode(s: &str) -> String {
    form_urlencoded::byte_serialize(s.as_bytes()).collect()
}

/// Runs `js` (an expression giving a promise of a number of milliseconds) in the page.
fn timed(tab: &headless_chrome::Tab, js: &str) -> f64 {
    tab.evaluate(js, true).unwrap().value.and_then(|v| v.as_f64()).unwrap_or_else(|| panic!("`{js}` gave no time"))
}

/// A promise that resolves once `done()` holds (checked every 5 ms).
const WHEN: &str =
    "(done) => new Promise(resolve => { const tick = () => done() ? resolve() : setTimeout(tick, 5); tick(); })";

fn main() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let path =
        std::env::var_os("DASHBOARD_BENCH_STORE").map_or_else(|| dir.path().join("store"), std::path::PathBuf::from);
    if !path.join("db").exists() {
        let t0 = Instant::now();
        synthetic_runs::fill(&path);
        eprintln!("filled {RUNS} runs in {:.1} s", t0.elapsed().as_secs_f64());
    }

    let mut ui = Command::new(env!("CARGO_BIN_EXE_memctl"))
        .arg("--store")
        .arg(&path)
        .args(["ui", "--port", "0"])
        .stdout(Stdio::piped())
        .spawn()
        .expect("memctl ui starts");
    let mut first = String::new();
    BufReader::new(ui.stdout.take().unwrap()).read_line(&mut first).unwrap();
    let addr = first.trim_start_matches("memctl ui: http://").split('/').next().unwrap().to_string();

    // 1. The API.
    let filter = "d in [48, 96] and (status == \"done\" or accuracy > 0.9) and not \"ablation\" in tags";
    let grouped = format!("/api/runs?where={}&group_by=d,gates", encode(filter));
    let curves = format!("/api/curves?ids={}", (1..=10).map(|i| i.to_string()).collect::<Vec<_>>().join(","));
    let group_curves = format!("/api/curves?where={}&group_by=d,gates", encode("d == 48 and seed <= 2"));
    for (name, route) in [
        ("runs table, first view (newest 500 of 10 000 rows)", "/api/runs"),
        ("runs table, filter + group-by d,gates", grouped.as_str()),
        ("curves of 10 runs", curves.as_str()),
        ("curves of 4 groups (over 1334 runs, capped at 500)", group_curves.as_str()),
    ] {
        let mut times = vec![];
        let mut bytes = 0;
        for _ in 0..REPEATS {
            let t = Instant::now();
            let (status, n) = get(&addr, route);
            times.push(t.elapsed().as_secs_f64() * 1e3);
            assert_eq!(status, 200, "{route}");
            bytes = n;
        }
        println!("GET {name}: median {} ({} kB)", median(times), bytes / 1000);
    }

    // 2. In a browser.
    let Some(chromium) = chromium::find() else {
        println!("no Chromium: the browser timings were not taken");
        let _ = ui.kill();
        let _ = ui.wait();
        return;
    };
    let profile = tempfile::tempdir().unwrap();
    let (_browser, tab) = chromium::launch(chromium, profile.path());

    // The page marks `memctl:drawn` once a view's table and curves are painted.
    let mut paint = vec![];
    for _ in 0..5 {
        tab.navigate_to(&format!("http://{addr}/")).unwrap().wait_until_navigated().unwrap();
        let js = format!(
            "({WHEN})(() => performance.getEntriesByName('memctl:drawn').length > 0)
               .then(() => performance.getEntriesByName('memctl:drawn')[0].startTime)"
        );
        paint.push(timed(&tab, &js));
        if std::env::var_os("DASHBOARD_BENCH_TRACE").is_some() {
            let js = "JSON.stringify(performance.getEntries().map(e => [e.name, Math.round(e.startTime), \
                      Math.round(e.responseEnd || e.duration)]))";
            println!("{}", tab.evaluate(js, false).unwrap().value.unwrap());
        }
    }
    println!("first paint (navigation start to 500 rows and 10 curves painted): median {}", median(paint));

    // Filtering: two views in turn, so that each submit changes the page; timed from the
    // submit to the page's next `memctl:drawn`.
    let views = [(filter, "d,gates", 4), ("d == 24 and gates and seed <= 3", "seed", 3)];
    let mut filtering = vec![];
    for i in 0..10 {
        let (filter, group_by, groups) = views[i % 2];
        let js = format!(
            "(() => {{
               const marks = () => performance.getEntriesByName('memctl:drawn');
               const before = marks().length;
               const f = document.getElementById('view');
               f.elements.where.value = {filter:?};
               f.elements.group_by.value = {group_by:?};
               const t0 = performance.now();
               f.requestSubmit();
               return ({WHEN})(() => marks().length > before).then(() => {{
                 const shown = document.querySelectorAll('#runs tbody tr').length === {groups} &&
                   document.querySelectorAll('#charts polyline.curve').length === {groups};
                 return shown ? marks()[before].startTime - t0 : -1;
               }});
             }})()"
        );
        let t = timed(&tab, &js);
        assert!(t >= 0.0, "the view {filter} by {group_by} was not drawn");
        filtering.push(t);
    }
    println!("filtering (submit to the grouped table and its curves painted): median {}", median(filtering));
    let _ = ui.kill();
    let _ = ui.wait();
}
