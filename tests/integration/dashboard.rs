//! `memctl ui` end to end: the real binary serving a store of synthetic runs, asked over HTTP
//! (its API and its refusals) and driven in headless Chromium over the DevTools protocol (a
//! filter and a group-by typed into the page, the rows and curves it renders; hover, zoom,
//! log axes, smoothing and several charts; the parameters view; a run's own page; CSV and PNG
//! export; and the screenshots in `docs/` that the README shows).
//!
//! The browser test needs Chromium (Debian's `chromium`; `MEMCTL_CHROMIUM` names another
//! binary). Without it, it fails under CI or with `MEMCTL_REQUIRE_BROWSER` set (as `.ci/run`
//! does), and skips elsewhere, saying so.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value as Json;

use crate::synthetic::{config, fill, one_point_run, open, record};

#[path = "../../benches/support/chromium.rs"]
mod chromium;

/// A `memctl ui` process on a free port, stopped when dropped.
struct Dashboard {
    child: Child,
    /// `127.0.0.1:PORT`
    addr: String,
    stderr: std::process::ChildStderr,
}

impl Dashboard {
    fn start(store: &Path, extra: &[&str]) -> Dashboard {
        let mut child = Command::new(env!("CARGO_BIN_EXE_memctl"))
            .arg("--store")
            .arg(store)
            .arg("ui")
            .args(["--port", "0"])
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("memctl ui starts");
        let mut first = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut first).unwrap();
        let stderr = child.stderr.take().unwrap();
        let addr = first
            .strip_prefix("memctl ui: http://")
            .and_then(|rest| rest.split('/').next())
            .unwrap_or_else(|| panic!("the first line names the address: {first:?}"))
            .to_string();
        Dashboard { child, addr, stderr }
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// A raw HTTP request: (status, body). Raw, so that paths reach the server unnormalised.
    fn request(&self, method: &str, path: &str) -> (u16, String) {
        let (status, _, body) = self.exchange(&format!("{method} {path} HTTP/1.1\r\nHost: {}\r\n", self.addr));
        (status, body)
    }

    /// Sends `start` (the request line and headers, each ending in CRLF) and closes the request:
    /// (status, head, body) of the response.
    fn exchange(&self, start: &str) -> (u16, String, String) {
        let mut s = TcpStream::connect(&self.addr).unwrap();
        write!(s, "{start}Connection: close\r\nContent-Length: 0\r\n\r\n").unwrap();
        let mut response = String::new();
        s.read_to_string(&mut response).unwrap();
        let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
        let status = head.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or_else(|| panic!("{head}"));
        (status, head.to_string(), body.to_string())
    }

    fn get_json(&self, path: &str) -> (u16, Json) {
        let (status, body) = self.request("GET", path);
        (status, serde_json::from_str(&body).unwrap_or_else(|e| panic!("{path}: {e}: {body}")))
    }

    fn ok_json(&self, path: &str) -> Json {
        let (status, body) = self.get_json(path);
        assert_eq!(status, 200, "{path}: {body}");
        body
    }
}

impl Drop for Dashboard {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn filled_store() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    fill(dir.path());
    dir
}

/// A dashboard on a filled store with the runs `extra` added, and the store's folder, which
/// must outlive it.
fn filled_dashboard(extra: &[memctl::store::RunRecord]) -> (tempfile::TempDir, Dashboard) {
    let dir = filled_store();
    if !extra.is_empty() {
        open(dir.path()).put_many(extra).unwrap();
    }
    let ui = Dashboard::start(dir.path(), &[]);
    (dir, ui)
}

fn encode(s: &str) -> String {
    form_urlencoded::byte_serialize(s.as_bytes()).collect()
}

fn close(a: &Json, b: f64) -> bool {
    a.as_f64().is_some_and(|a| (a - b).abs() < 1e-9)
}

#[test]
fn the_api_filters_groups_and_draws_the_runs_as_the_cli_does() {
    let (_dir, ui) = filled_dashboard(&[]);

    // Every run, newest first, with few columns (to fit a laptop); the CLI's default ones to
    // pick from; wall time in seconds, which the page shows as the CLI does.
    let all = ui.ok_json("/api/runs");
    assert_eq!(all["matched"], 7);
    let ids: Vec<u64> = all["rows"].as_array().unwrap().iter().map(|r| r["id"].as_u64().unwrap()).collect();
    assert_eq!(ids, [7, 6, 5, 4, 3, 2, 1]);
    let compact = ["id", "status", "experiment", "model", "d", "gates", "seed", "accuracy", "steps_run", "wall"];
    assert_eq!(all["columns"], serde_json::json!(compact));
    let available = all["available"].as_array().unwrap();
    assert!(available.len() > compact.len() && available.contains(&"steps_to_converge".into()), "{available:?}");
    assert_eq!(all["durations"], serde_json::json!(["wall"]));

    // The filter, sort and columns of `memctl runs`; `id` is always there to pick runs by.
    let q = format!("/api/runs?where={}&sort=-accuracy&columns=accuracy", encode("status == \"done\" and d == 48"));
    let some = ui.ok_json(&q);
    assert_eq!(some["columns"], serde_json::json!(["id", "accuracy"]));
    let rows: Vec<(u64, f64)> = some["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["id"].as_u64().unwrap(), r["accuracy"].as_f64().unwrap()))
        .collect();
    assert_eq!(rows, [(3, 0.9), (2, 0.7), (1, 0.5)]);

    // Group-by: mean ± sample std (n), as `memctl runs --group-by`.
    let groups = ui.ok_json(&format!("/api/runs?where={}&group_by=d", encode("status == \"done\" and gates")));
    let rows = groups["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 2, "{groups}");
    let d48 = rows.iter().find(|r| r["d"] == 48).unwrap();
    assert!(close(&d48["accuracy"]["mean"], 0.7) && close(&d48["accuracy"]["std"], 0.2), "{d48}");
    assert_eq!(d48["accuracy"]["n"], 3);

    // Curves of picked runs: one series each, all their points, the metric `plot` picks.
    let curves = ui.ok_json("/api/curves?ids=1,4");
    assert_eq!(curves["metric"], "val_accuracy");
    assert_eq!(curves["x"], "training step");
    let series = curves["series"].as_array().unwrap();
    assert_eq!(series.len(), 2);
    assert_eq!(series[0]["points"], serde_json::json!([[10.0, 0.125], [20.0, 0.25], [30.0, 0.5]]));
    // By wall time: each run trained 30 steps in 50 s.
    let by_time = ui.ok_json("/api/curves?ids=1&x=seconds");
    assert_eq!(by_time["x"], "training seconds");
    let last = &by_time["series"][0]["points"][2];
    assert!(close(&last[0], 50.0) && close(&last[1], 0.5), "{last}");

    // Curves of groups: the mean over seeds with a band (± sample std).
    let grouped = ui.ok_json(&format!("/api/curves?where={}&group_by=d", encode("gates and status == \"done\"")));
    let series = grouped["series"].as_array().unwrap();
    assert_eq!(series.len(), 2, "{grouped}");
    let done_gated =
        ui.ok_json(&format!("/api/runs?where={}", encode("gates and status == \"done\"")))["matched"].clone();
    assert_eq!((&grouped["matched"], &grouped["drawn"]), (&done_gated, &done_gated), "every run the filter keeps");
    let d48 = series.iter().find(|s| s["label"].as_str().unwrap().contains("48")).unwrap();
    let end = &d48["band"][2];
    assert!(close(&end[0], 30.0) && close(&end[1], 0.5) && close(&end[2], 0.9), "final accuracy 0.7 ± 0.2: {end}");

    // The ablation table of `memctl ablate`, from the runs in the store.
    let ablation = ui.ok_json("/api/ablation?experiment=tiny_stm");
    let variants: Vec<(&str, &str)> = ablation["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["variant"].as_str().unwrap(), r["with"].as_str().unwrap()))
        .collect();
    assert_eq!(variants, [("full", "d=48"), ("full", "d=96"), ("w/o gates", "d=96")], "{ablation}");

    // A run's page and a two-run diff, as `memctl show` and `memctl diff` print them.
    let run = ui.ok_json("/api/run/6");
    assert!(run["show"].as_str().unwrap().contains("gates: false"), "{run}");
    assert!(run["spec"].as_str().unwrap().contains("experiment tiny_stm"), "{run}");
    let diff = ui.ok_json("/api/diff?a=5&b=6");
    assert!(diff["text"].as_str().unwrap().contains("gates"), "{diff}");
}

#[test]
fn a_run_that_stops_on_a_metric_shows_and_draws_that_metric() {
    let (_dir, ui) = filled_dashboard(&[one_point_run(8)]);
    let runs = ui.ok_json("/api/runs?where=id%20%3D%3D%208");
    assert_eq!(
        runs["columns"],
        serde_json::json!([
            "id",
            "status",
            "experiment",
            "model",
            "d",
            "gates",
            "seed",
            "seq_accuracy",
            "steps_run",
            "wall"
        ])
    );
    let curves = ui.ok_json("/api/curves?ids=8");
    assert_eq!(curves["metric"], "val_seq_accuracy");
    assert_eq!(curves["series"][0]["points"], serde_json::json!([[250.0, 0.096]]));
}

#[test]
fn only_the_running_runs_the_filter_keeps_count() {
    let (_dir, ui) = filled_dashboard(&[running_run(8)]);
    assert_eq!(ui.ok_json("/api/runs")["running"], 1);
    let gated = ui.ok_json(&format!("/api/runs?where={}", encode("gates")));
    assert_eq!((gated["matched"].as_u64(), gated["running"].as_u64()), (Some(5), Some(0)));
    let grouped = ui.ok_json(&format!("/api/runs?where={}&group_by=d", encode("not gates")));
    assert_eq!(grouped["running"], 1);
}

#[test]
fn a_malformed_filter_gets_the_clis_located_error() {
    let dir = filled_store();
    let filter = "d >= 48 and";
    let cli = Command::new(env!("CARGO_BIN_EXE_memctl"))
        .arg("--store")
        .arg(dir.path())
        .args(["runs", "--where", filter])
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    assert_eq!(cli.status.code(), Some(2), "the CLI refuses the filter");
    let cli_error = String::from_utf8_lossy(&cli.stderr).trim_end().to_string();
    assert!(cli_error.contains("<--where>:1:12"), "{cli_error}");

    let ui = Dashboard::start(dir.path(), &[]);
    for route in ["runs", "curves", "ablation"] {
        let (status, body) =
            ui.get_json(&format!("/api/{route}?where={}&group_by=d&experiment=tiny_stm", encode(filter)));
        assert_eq!(status, 400, "{route}");
        assert_eq!(body["error"].as_str().unwrap().trim_end(), cli_error, "{route}");
    }
    let (status, body) = ui.get_json("/api/runs?group_by=nonsense.d");
    assert_eq!(status, 400);
    assert!(body["error"].as_str().unwrap().contains("nonsense"), "{body}");
    // A field no run has groups nothing: refused by every view, as `runs` and `plot` refuse it.
    for route in ["runs", "curves", "scatter"] {
        let (status, body) = ui.get_json(&format!("/api/{route}?group_by=gate"));
        assert_eq!(status, 400, "{route}: {body}");
        let error = body["error"].as_str().unwrap();
        assert!(error.contains("no run has a field `gate`; did you mean `gates`?"), "{route}: {error}");
    }
    // A run id that is no number is refused, not left out.
    let (status, body) = ui.get_json("/api/curves?ids=1,abc");
    assert_eq!(status, 400, "{body}");
    assert!(body["error"].as_str().unwrap().contains("`abc` is not a run id"), "{body}");
}

#[test]
fn it_serves_only_its_own_pages_and_never_writes() {
    let (_dir, ui) = filled_dashboard(&[]);
    let (status, page) = ui.request("GET", "/");
    assert_eq!(status, 200);
    assert!(page.contains("<script src=\"/app.js\">") && !page.contains("http"), "no CDN, nothing external");
    for path in [
        "/../Cargo.toml",
        "/../../../../etc/passwd",
        "/%2e%2e/%2e%2e/etc/passwd",
        "/..%2fCargo.toml",
        "/src/cli/ui/mod.rs",
        "/db",
        "/store/conf",
    ] {
        let (status, body) = ui.request("GET", path);
        assert_eq!(status, 404, "{path}: {body}");
        assert!(!body.contains("root:") && !body.contains("[package]"), "{path}");
    }
    for method in ["POST", "PUT", "DELETE", "PATCH"] {
        assert_eq!(ui.request(method, "/api/runs").0, 405, "{method}");
    }
    assert_eq!(ui.request("DELETE", "/api/run/1").0, 405);
    assert_eq!(ui.ok_json("/api/runs")["matched"], 7, "nothing was deleted");
}

#[test]
fn a_filter_nested_past_the_cap_is_refused_and_the_server_keeps_answering() {
    let (_dir, ui) = filled_dashboard(&[]);
    // 1 500 `not`s (6 KB) are deep enough to overflow a worker's stack, were their tree built;
    // 3 500 (14 KB) is about the most a request head (16 KiB) holds.
    for nots in [1_500, 3_500] {
        let (status, body) =
            ui.get_json(&format!("/api/runs?where={}", encode(&format!("{}gates", "not ".repeat(nots)))));
        assert_eq!(status, 400, "{nots}: {body}");
        let error = body["error"].as_str().unwrap();
        assert!(error.contains("error[Q011]") && error.contains("<--where>:1:257"), "{nots}: {error}");
    }
    // 5 000 (20 KB) are refused before the filter is read: the head is too long.
    let (status, body) = ui.get_json(&format!("/api/runs?where={}gates", "not+".repeat(5_000)));
    assert_eq!(status, 431, "{body}");
    assert!(body["error"].as_str().unwrap().contains("over 16384 bytes"), "{body}");
    assert_eq!(ui.ok_json("/api/runs")["matched"], 7, "the server still answers");
}

#[test]
fn only_requests_addressed_to_this_machine_are_answered() {
    let (_dir, ui) = filled_dashboard(&[]);
    let port = ui.addr.rsplit(':').next().unwrap();
    // A page on another site that re-points its name at 127.0.0.1 (DNS rebinding) sends its name.
    for host in [
        "evil.example.com".to_string(),
        format!("evil.example.com:{port}"),
        format!("localhost.evil.example.com:{port}"),
    ] {
        let (status, head, body) = ui.exchange(&format!("GET /api/runs HTTP/1.1\r\nHost: {host}\r\n"));
        assert_eq!(status, 403, "{host}: {body}");
        // Under /api/ the refusal is JSON, as every answer there is (the page reads them so).
        assert!(head.contains("application/json") && !body.contains("rows"), "{body}");
        let error: Json = serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}: {body}"));
        assert!(error["error"].as_str().is_some_and(|e| e.starts_with("refused: Host")), "{body}");
        let (status, head, body) = ui.exchange(&format!("GET / HTTP/1.1\r\nHost: {host}\r\n"));
        assert_eq!(status, 403, "{host}: {body}");
        assert!(head.contains("text/plain") && body.starts_with("refused: Host"), "{body}");
    }
    for host in [format!("localhost:{port}"), "localhost".to_string(), ui.addr.clone(), format!("127.0.0.2:{port}")] {
        let (status, _, body) = ui.exchange(&format!("GET /api/runs HTTP/1.1\r\nHost: {host}\r\n"));
        assert_eq!(status, 200, "{host}: {body}");
    }
    let (status, _, body) = ui.exchange("GET /api/runs HTTP/1.0\r\n");
    assert_eq!(status, 200, "HTTP/1.0 without a Host: {body}");
}

/// Clients that send requests and never read the answers (six connections, each pipelining
/// 200 requests for the 42 kB script behind a 4 kB receive buffer) hold up no one else.
#[test]
fn clients_that_never_read_their_answers_do_not_stop_the_dashboard_answering_others() {
    let (_dir, ui) = filled_dashboard(&[]);
    let addr: std::net::SocketAddr = ui.addr.parse().unwrap();
    let request = format!("GET /app.js HTTP/1.1\r\nHost: {}\r\n\r\n", ui.addr);
    let stuck: Vec<TcpStream> = (0..6)
        .map(|_| {
            let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
            socket.set_recv_buffer_size(4096).unwrap();
            socket.connect(&addr.into()).unwrap();
            let mut stream = TcpStream::from(socket);
            stream.write_all(request.repeat(200).as_bytes()).unwrap();
            stream
        })
        .collect();
    // The stuck connections' first answers fill their buffers.
    std::thread::sleep(Duration::from_secs(1));
    let mut s = TcpStream::connect(&ui.addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    write!(s, "GET /api/runs HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n", ui.addr).unwrap();
    let mut response = String::new();
    s.read_to_string(&mut response).expect("an answer while other clients do not read theirs");
    assert!(response.starts_with("HTTP/1.1 200"), "{}", &response[..response.len().min(200)]);
    // Each stuck connection holds its own thread, waiting to write one answer (of 200 asked):
    // the rest are not read, so neither computed nor queued.
    let status = std::fs::read_to_string(format!("/proc/{}/status", ui.child.id())).unwrap_or_default();
    if let Some(threads) = status.lines().find_map(|l| l.strip_prefix("Threads:")) {
        let threads: usize = threads.trim().parse().unwrap();
        assert!(threads < 6 + 40, "{threads} threads");
    }
    drop(stuck);
}

/// The tester's requests (2026-12-01): each answered, and the dashboard still answers after.
#[test]
fn malformed_and_ambiguous_requests_are_answered_400_and_api_errors_are_json() {
    let (_dir, ui) = filled_dashboard(&[]);
    let raw = |request: &[u8]| {
        let mut s = TcpStream::connect(&ui.addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        s.write_all(request).unwrap();
        let mut response = vec![];
        let _ = s.read_to_end(&mut response);
        String::from_utf8_lossy(&response).into_owned()
    };
    let two_hosts = raw(b"GET /api/runs HTTP/1.1\r\nHost: 127.0.0.1\r\nHost: evil.com\r\n\r\n");
    assert!(two_hosts.starts_with("HTTP/1.1 400") && two_hosts.contains("more than one Host"), "{two_hosts}");
    let not_utf8 = raw(b"GET /api/runs?where=\xff HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
    assert!(not_utf8.starts_with("HTTP/1.1 400"), "{not_utf8}");
    let bare_lf = raw(format!("GET /api/runs HTTP/1.1\nHost: {}\nConnection: close\n\n", ui.addr).as_bytes());
    assert!(bare_lf.starts_with("HTTP/1.1 200"), "{}", &bare_lf[..bare_lf.len().min(200)]);
    let (status, head, body) = ui.exchange(&format!("GET /api/run/%ff HTTP/1.1\r\nHost: {}\r\n", ui.addr));
    assert!(status == 400 && head.contains("application/json"), "{head}");
    let error: Json = serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}: {body}"));
    assert!(error["error"].as_str().is_some_and(|e| e.contains("not UTF-8")), "{body}");
    let (status, body) = ui.request("GET", &format!("/{}", "a".repeat(10_000)));
    assert!(status == 404 && body.len() < 300, "{status}: {} bytes", body.len());
    assert_eq!(ui.ok_json("/api/runs")["matched"], 7, "still answering");
}

#[test]
fn head_answers_as_get_without_the_body() {
    let (_dir, ui) = filled_dashboard(&[]);
    let (_, page) = ui.request("GET", "/");
    for path in ["/", "/app.js", "/api/runs"] {
        let (status, head, body) = ui.exchange(&format!("HEAD {path} HTTP/1.1\r\nHost: {}\r\n", ui.addr));
        assert_eq!(status, 200, "{path}: {head}");
        assert!(body.is_empty(), "{path}: {body}");
        assert!(head.contains("Content-Type:"), "{path}: {head}");
    }
    let (_, head, _) = ui.exchange(&format!("HEAD / HTTP/1.1\r\nHost: {}\r\n", ui.addr));
    assert!(head.contains(&format!("Content-Length: {}", page.len())), "the GET's length: {head}");
    let (status, head, _) = ui.exchange(&format!("POST / HTTP/1.1\r\nHost: {}\r\n", ui.addr));
    assert_eq!(status, 405);
    assert!(head.contains("Allow: GET, HEAD"), "{head}");
}

#[test]
fn an_unknown_metric_or_experiment_is_a_404_naming_it() {
    let (_dir, ui) = filled_dashboard(&[]);
    let (status, body) = ui.get_json("/api/curves?ids=1,4&metric=val_acuracy");
    assert_eq!(status, 404, "{body}");
    let error = body["error"].as_str().unwrap();
    assert!(error.contains("`val_acuracy`") && error.contains("did you mean `val_accuracy`?"), "{error}");
    assert_eq!(body["known"], serde_json::json!(["train_loss", "val_accuracy"]));
    let (status, body) = ui.get_json("/api/curves?ids=1&metric=nosuch");
    assert_eq!(status, 404, "{body}");
    assert!(body["error"].as_str().unwrap().contains("`nosuch`"), "{body}");
    // No runs picked: nothing to know a metric by, and nothing drawn.
    assert_eq!(ui.ok_json("/api/curves?ids=&metric=nosuch")["series"], serde_json::json!([]));

    let (status, body) = ui.get_json("/api/ablation?experiment=tiny_stn");
    assert_eq!(status, 404, "{body}");
    let error = body["error"].as_str().unwrap();
    assert!(error.contains("experiment `tiny_stn`") && error.contains("did you mean `tiny_stm`?"), "{error}");
    let (status, body) = ui.get_json("/api/ablation?experiment=nosuch");
    assert_eq!(status, 404, "{body}");
    assert!(body["error"].as_str().unwrap().contains("`nosuch`"), "{body}");
    let (status, body) = ui.get_json("/api/ablation?experiment=tiny_stm&metric=acuracy");
    assert_eq!(status, 404, "{body}");
    assert!(body["error"].as_str().unwrap().contains("did you mean `accuracy`?"), "{body}");
    // Known names still answer.
    assert_eq!(ui.ok_json("/api/ablation?experiment=tiny_stm&metric=loss")["metric"], "loss");
    assert_eq!(ui.ok_json("/api/curves?ids=1&metric=train_loss")["metric"], "train_loss");
}

#[test]
fn it_reads_the_store_while_another_process_writes_it() {
    let (dir, ui) = filled_dashboard(&[]);
    assert_eq!(ui.ok_json("/api/runs")["matched"], 7);
    // The dashboard does not hold the store: this process writes a run while it serves.
    open(dir.path()).put_many(&[record(8, config(48, false, 1), 0.3, None)]).unwrap();
    let runs = ui.ok_json("/api/runs?where=gates%20%3D%3D%20false%20and%20d%20%3D%3D%2048");
    assert_eq!(runs["matched"], 1);
    assert_eq!(runs["rows"][0]["id"], 8);
}

#[test]
fn listening_beyond_localhost_warns() {
    let dir = filled_store();
    let mut ui = Dashboard::start(dir.path(), &["--host", "0.0.0.0"]);
    let mut line = String::new();
    BufReader::new(&mut ui.stderr).read_line(&mut line).unwrap();
    assert!(line.starts_with("warning: listening on 0.0.0.0") && line.contains("no login"), "{line}");
    let local = Dashboard::start(dir.path(), &[]);
    assert!(local.addr.starts_with("127.0.0.1:"), "{}", local.addr);
}

/// Run 8, training in this process (alive to the dashboard): d=48, no gates, one evaluation
/// of 30 steps so far.
fn running_run(id: u64) -> memctl::store::RunRecord {
    let mut running = record(id, config(48, false, 1), 0.3, None);
    running.status = memctl::store::Status::Running;
    running.ended_at = None;
    running.final_metrics.clear();
    running.environment.process = Some(memctl::store::owner::this_process().clone());
    for curve in running.curves.values_mut() {
        curve.truncate(1);
    }
    running.steps_run = 10;
    running.progress = Some(memctl::store::Progress {
        steps_total: 30,
        updated_at: memctl::store::now(),
        resumed_from: None,
        checkpoint_step: None,
        max_time: None,
        deaths: 0,
    });
    running
}

/// Headless Chromium on a profile of its own, both gone when this is dropped; it derefs to its
/// one tab.
struct Browser {
    tab: std::sync::Arc<headless_chrome::Tab>,
    _chromium: headless_chrome::Browser,
    _profile: tempfile::TempDir,
}

impl Browser {
    /// Loads `url` and waits until it has.
    fn go(&self, url: &str) {
        self.tab.navigate_to(url).unwrap().wait_until_navigated().unwrap();
    }
}

impl std::ops::Deref for Browser {
    type Target = headless_chrome::Tab;
    fn deref(&self) -> &headless_chrome::Tab {
        &self.tab
    }
}

/// A browser, and a dashboard over the filled store with `extra` runs added, for `test`;
/// `None` (the test skipped) where no Chromium is found and none is required.
fn browser_on_dashboard(
    test: &str,
    extra: &[memctl::store::RunRecord],
) -> Option<(Browser, tempfile::TempDir, Dashboard)> {
    let browser = browser_or_skip(test)?;
    let (dir, ui) = filled_dashboard(extra);
    Some((browser, dir, ui))
}

/// Chromium started for `test`, or `None` (the test skips) where there is none and none is
/// required.
fn browser_or_skip(test: &str) -> Option<Browser> {
    let Some(chromium) = chromium::find() else {
        let required =
            ["CI", "MEMCTL_REQUIRE_BROWSER"].iter().any(|v| std::env::var_os(v).is_some_and(|s| !s.is_empty()));
        assert!(
            !required,
            "{test} needs Chromium and none was found (apt-get install chromium, or set MEMCTL_CHROMIUM)"
        );
        eprintln!("skipping {test}: no Chromium found (apt-get install chromium, or set MEMCTL_CHROMIUM)");
        return None;
    };
    let profile = tempfile::tempdir().unwrap();
    let (browser, tab) = chromium::launch(chromium, profile.path());
    Some(Browser { tab, _chromium: browser, _profile: profile })
}

/// Evaluates `js` in the page until it returns `want`, or panics with what it last returned.
fn wait_for(tab: &headless_chrome::Tab, js: &str, want: &Json) {
    let start = Instant::now();
    loop {
        let got = tab.evaluate(js, false).unwrap().value.unwrap_or(Json::Null);
        if &got == want {
            return;
        }
        assert!(start.elapsed() < Duration::from_secs(20), "`{js}` stayed {got}, not {want}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn in_a_browser_a_filter_and_a_group_by_show_their_rows_and_curves() {
    let Some((tab, _dir, ui)) =
        browser_on_dashboard("in_a_browser_a_filter_and_a_group_by_show_their_rows_and_curves", &[])
    else {
        return;
    };
    tab.go(&ui.url("/"));

    // Every run, and the curves of the first ten.
    let rows = "document.querySelectorAll('#runs tbody tr').length";
    wait_for(&tab, rows, &Json::from(7));
    wait_for(&tab, "document.querySelectorAll('#charts polyline.curve').length", &Json::from(7));

    // A filter and a group-by, typed in and submitted as a researcher would.
    tab.find_element("input[name=where]").unwrap().click().unwrap();
    tab.type_str("status == \"done\" and gates").unwrap();
    tab.find_element("input[name=group_by]").unwrap().click().unwrap();
    tab.type_str("d").unwrap();
    tab.find_element("button[type=submit]").unwrap().click().unwrap();

    wait_for(&tab, rows, &Json::from(2));
    let table = tab
        .evaluate(
            "JSON.stringify([...document.querySelectorAll('#runs tr')].map(tr => [...tr.cells].map(c => c.textContent)))",
            false,
        )
        .unwrap()
        .value
        .unwrap();
    let table: Vec<Vec<String>> = serde_json::from_str(table.as_str().unwrap()).unwrap();
    let column = |name: &str| table[0].iter().position(|c| c == name).unwrap_or_else(|| panic!("{name}: {table:?}"));
    let (d, accuracy) = (column("d"), column("accuracy"));
    let mut shown: Vec<(&str, &str)> = table[1..].iter().map(|r| (r[d].as_str(), r[accuracy].as_str())).collect();
    shown.sort();
    assert_eq!(shown, [("48", "0.700 ± 0.200 (3)"), ("96", "0.900 ± 0.141 (2)")]);

    // One mean curve per group, each over its three evaluations, with its band over seeds.
    wait_for(&tab, "document.querySelectorAll('#charts polyline.curve').length", &Json::from(2));
    wait_for(
        &tab,
        "[...document.querySelectorAll('#charts polyline.curve')].every(l => l.points.length === 3)",
        &Json::Bool(true),
    );
    wait_for(&tab, "document.querySelectorAll('#charts polygon.band').length", &Json::from(2));
    // The view is in the address bar, to be shared.
    let url = tab.get_url();
    assert!(url.contains("where=status") && url.contains("group_by=d"), "{url}");

    // Each group's row has its curve's colour.
    let colours = "JSON.stringify([...document.querySelectorAll('#runs tbody tr')].map(tr => [tr.cells[0].textContent, \
                   tr.style.getPropertyValue('--curve'), [...document.querySelectorAll('#charts polyline.curve')] \
                   .filter(l => l.getAttribute('stroke') === tr.style.getPropertyValue('--curve')).length]))";
    let colours: Vec<(String, String, u64)> = serde_json::from_str(eval_str(&tab, colours).as_str()).unwrap();
    let mut distinct: Vec<&String> = colours.iter().map(|(_, c, _)| c).collect();
    distinct.dedup();
    assert!(colours.iter().all(|(_, c, n)| c.starts_with('#') && *n == 1) && distinct.len() == 2, "{colours:?}");
    screenshot(&tab, "docs/ui-groups.png");
}

/// The string `js` evaluates to in the page.
fn eval_str(tab: &headless_chrome::Tab, js: &str) -> String {
    let v = tab.evaluate(js, false).unwrap().value.unwrap_or(Json::Null);
    v.as_str().unwrap_or_else(|| panic!("`{js}` gave {v}")).to_string()
}

/// What the promise `js` resolves to (JSON-encoded by the page).
fn eval_async(tab: &headless_chrome::Tab, js: &str) -> Json {
    let v = tab.evaluate(&format!("({js}).then(v => JSON.stringify(v))"), true).unwrap().value.unwrap_or(Json::Null);
    serde_json::from_str(v.as_str().unwrap_or_else(|| panic!("`{js}` gave {v}"))).unwrap()
}

/// Saves the page as it is now under `path` (in the repository), for the README.
fn screenshot(tab: &headless_chrome::Tab, path: &str) {
    let png = tab
        .capture_screenshot(headless_chrome::protocol::cdp::Page::CaptureScreenshotFormatOption::Png, None, None, true)
        .unwrap();
    assert!(png.starts_with(b"\x89PNG"));
    std::fs::write(Path::new(env!("CARGO_MANIFEST_DIR")).join(path), png).unwrap();
}

/// JavaScript that fires mouse event `kind` on the first chart at the point of the chart's
/// coordinates `(vx, vy)` (its viewBox, 640 × 300).
fn mouse(kind: &str, vx: f64, vy: f64) -> String {
    format!(
        "(() => {{ const svg = document.querySelector('#charts svg'); \
           const p = new DOMPoint({vx}, {vy}).matrixTransform(svg.getScreenCTM()); \
           svg.dispatchEvent(new MouseEvent('{kind}', {{ clientX: p.x, clientY: p.y, bubbles: true }})); return true; }})()"
    )
}

/// JavaScript giving the viewBox position `[x, y]` of the marker of run `colour`'s last point
/// on the first chart.
fn last_marker(colour: &str) -> String {
    format!(
        "JSON.stringify([...document.querySelectorAll('#charts figure:first-child circle.marker')] \
           .filter(c => c.getAttribute('fill') === '{colour}') \
           .map(c => [+c.getAttribute('cx'), +c.getAttribute('cy')]).sort((a, b) => b[0] - a[0])[0])"
    )
}

/// The labels of the first chart's x ticks (`end`: its y ticks).
fn tick_labels(tab: &headless_chrome::Tab, anchor: &str) -> Vec<String> {
    let js = format!(
        "JSON.stringify([...document.querySelectorAll('#charts figure:first-child text.tick[text-anchor={anchor}]')] \
           .map(t => t.textContent))"
    );
    serde_json::from_str(&eval_str(tab, &js)).unwrap()
}

#[test]
fn in_a_browser_charts_read_exact_values_zoom_go_log_smooth_and_multiply() {
    let Some((tab, _dir, ui)) =
        browser_on_dashboard("in_a_browser_charts_read_exact_values_zoom_go_log_smooth_and_multiply", &[])
    else {
        return;
    };
    tab.go(&ui.url("/?picked=1,4"));
    wait_for(&tab, "document.querySelectorAll('#charts polyline.curve').length", &Json::from(2));

    // Rows take their curve's colour; rows not drawn have none.
    let colour = |id: u64| {
        eval_str(
            &tab,
            &format!("document.querySelector('#runs tr[data-id=\"{id}\"]').style.getPropertyValue('--curve')"),
        )
    };
    let (blue, red) = (colour(1), colour(4));
    assert_eq!((blue.as_str(), red.as_str()), ("#1f77b4", "#d62728"));
    assert_eq!(
        tab.evaluate("document.querySelectorAll('#runs tr.drawn').length", false).unwrap().value,
        Some(Json::from(2))
    );
    for c in [&blue, &red] {
        let js = format!(
            "[...document.querySelectorAll('#charts polyline.curve')].filter(l => l.getAttribute('stroke') === '{c}').length"
        );
        assert_eq!(tab.evaluate(&js, false).unwrap().value, Some(Json::from(1)), "{c}");
    }

    // Hover: the nearest point's run, step and value.
    let readout = "document.querySelector('#charts .readout').textContent";
    let at: (f64, f64) = serde_json::from_str(&eval_str(&tab, &last_marker(&red))).unwrap();
    tab.evaluate(&mouse("mousemove", at.0 + 2.0, at.1 + 3.0), false).unwrap();
    wait_for(&tab, readout, &Json::from("4: tiny_stm d=96 gates=true seed=1 · step 30 · val_accuracy 1"));
    let at: (f64, f64) = serde_json::from_str(&eval_str(&tab, &last_marker(&blue))).unwrap();
    tab.evaluate(&mouse("mousemove", at.0, at.1), false).unwrap();
    wait_for(&tab, readout, &Json::from("1: tiny_stm d=48 gates=true seed=1 · step 30 · val_accuracy 0.5"));

    // More ticks than the axis ends: steps 10 to 30 every 2.
    assert!(tick_labels(&tab, "middle").len() >= 8, "{:?}", tick_labels(&tab, "middle"));

    // Zoom: a drag across steps 20 to 30 (chart x = 58 + (step - 10) / 20 * 572); a double click resets.
    let vx = |step: f64| 58.0 + (step - 10.0) / 20.0 * 572.0;
    for (kind, step) in [("mousedown", 20.0), ("mousemove", 25.0), ("mouseup", 30.0)] {
        tab.evaluate(&mouse(kind, vx(step), 150.0), false).unwrap();
    }
    wait_for(&tab, "location.search.includes('zoom=')", &Json::Bool(true));
    let zoomed: Vec<f64> = tick_labels(&tab, "middle").iter().map(|t| t.parse().unwrap()).collect();
    assert!(zoomed.len() >= 5 && zoomed.iter().all(|t| (19.9..=30.1).contains(t)), "{zoomed:?}");
    tab.evaluate(
        "document.querySelector('#charts svg').dispatchEvent(new MouseEvent('dblclick', { bubbles: true }))",
        false,
    )
    .unwrap();
    wait_for(&tab, "location.search.includes('zoom=')", &Json::Bool(false));
    assert!(tick_labels(&tab, "middle").contains(&"10".to_string()));

    // A log y axis: ticks at 1, 2 and 5 × 10^k over 0.125 to 1.
    tab.evaluate(
        "const y = document.getElementById('y'); y.value = 'log'; y.dispatchEvent(new Event('change'))",
        false,
    )
    .unwrap();
    wait_for(&tab, "location.search.includes('y=log')", &Json::Bool(true));
    assert_eq!(tick_labels(&tab, "end"), ["0.1", "0.2", "0.5", "1"]);

    // Smoothing: the smoothed curve over the raw one, kept faint; hover gives both values.
    // TensorBoard's debiased EMA of 0.25, 0.5, 1 with weight 0.5 ends at 0.75.
    tab.evaluate(
        "const s = document.getElementById('smooth'); s.value = '0.5'; s.dispatchEvent(new Event('input'))",
        false,
    )
    .unwrap();
    wait_for(&tab, "document.querySelectorAll('#charts polyline.raw').length", &Json::from(2));
    assert!(tab.get_url().contains("smooth=0.5"), "{}", tab.get_url());
    let at: (f64, f64) = serde_json::from_str(&eval_str(&tab, &last_marker(&red))).unwrap();
    tab.evaluate(&mouse("mousemove", at.0, at.1), false).unwrap();
    wait_for(&tab, &format!("{readout}.endsWith('val_accuracy 1 (smoothed 0.75)')"), &Json::Bool(true));

    // Another chart, for the next metric, with the same runs in the same colours.
    tab.find_element("#add-chart").unwrap().click().unwrap();
    wait_for(&tab, "document.querySelectorAll('#charts figure').length", &Json::from(2));
    wait_for(&tab, "document.querySelectorAll('#charts figure:nth-child(2) polyline.curve').length", &Json::from(2));
    let second = "JSON.stringify([document.querySelector('#charts figure:nth-child(2) select.metric').value, \
                  [...document.querySelectorAll('#charts figure:nth-child(2) polyline.curve')].map(l => l.getAttribute('stroke'))])";
    let second: (String, Vec<String>) = serde_json::from_str(&eval_str(&tab, second)).unwrap();
    assert_eq!(second, ("train_loss".to_string(), vec![blue.clone(), red.clone()]));
    assert!(tab.get_url().contains("metric=val_accuracy%2Ctrain_loss"), "{}", tab.get_url());

    // The whole view comes back from its address.
    let shared = tab.get_url();
    tab.go(&shared);
    wait_for(&tab, "document.querySelectorAll('#charts polyline.raw').length", &Json::from(4));
    assert_eq!(tick_labels(&tab, "end"), ["0.1", "0.2", "0.5", "1"]);
    let at: (f64, f64) = serde_json::from_str(&eval_str(&tab, &last_marker(&red))).unwrap();
    tab.evaluate(&mouse("mousemove", at.0, at.1), false).unwrap();
    wait_for(&tab, &format!("{readout}.startsWith('4: tiny_stm')"), &Json::Bool(true));
    screenshot(&tab, "docs/ui.png");
}

#[test]
fn in_a_browser_the_parameters_view_plots_a_final_metric_against_each_swept_parameter() {
    let Some((tab, _dir, ui)) =
        browser_on_dashboard("in_a_browser_the_parameters_view_plots_a_final_metric_against_each_swept_parameter", &[])
    else {
        return;
    };
    // The API: the six finished runs' accuracy against d and gates (the seed is no setting).
    let scatter = ui.ok_json("/api/scatter");
    assert_eq!(scatter["metric"], "accuracy");
    let panels = scatter["panels"].as_array().unwrap();
    assert_eq!(panels.iter().map(|p| p["name"].as_str().unwrap()).collect::<Vec<_>>(), ["d", "gates"]);
    assert_eq!(panels[0]["axis"], "linear");
    assert_eq!(panels[0]["points"][0], serde_json::json!([48.0, 0.5, 1]));
    assert_eq!(panels[1]["categories"], serde_json::json!(["true", "false"]));
    let (status, body) = ui.get_json("/api/scatter?metric=acuracy");
    assert_eq!(status, 404, "{body}");
    assert!(body["error"].as_str().unwrap().contains("did you mean `accuracy`?"), "{body}");

    // Every finished run in each panel; then those of a filter.
    tab.go(&ui.url("/?tab=params"));
    let counts = "JSON.stringify([...document.querySelectorAll('#panels figure')].map(f => f.querySelectorAll('circle.dot').length))";
    wait_for(&tab, counts, &Json::from("[6,6]"));
    let d_ticks = "JSON.stringify([...document.querySelectorAll('#panels figure[data-name=d] text.tick[text-anchor=middle]')].map(t => t.textContent))";
    assert_eq!(eval_str(&tab, d_ticks), r#"["48","96"]"#, "a grid's values are its ticks");
    screenshot(&tab, "docs/ui-params.png");
    tab.go(&ui.url(&format!("/?tab=params&where={}", encode("d == 96"))));
    wait_for(&tab, "document.querySelectorAll('#panels figure').length", &Json::from(2));
    let dots = "JSON.stringify([...document.querySelectorAll('#panels figure')].map(f => [f.dataset.name, \
                [...f.querySelectorAll('circle.dot')].map(c => +c.dataset.id).sort()]))";
    let dots: Vec<(String, Vec<u64>)> = serde_json::from_str(&eval_str(&tab, dots)).unwrap();
    assert_eq!(dots, [("d".to_string(), vec![4, 5, 6]), ("gates".to_string(), vec![4, 5, 6])]);
    let gates = "JSON.stringify([...document.querySelectorAll('#panels figure[data-name=gates] text.tick[text-anchor=middle]')].map(t => t.textContent))";
    assert_eq!(eval_str(&tab, gates), r#"["true","false"]"#);
    // Hovering a point reads it; the metric is in the address.
    tab.evaluate(
        "document.querySelector('#panels circle.dot[data-id=\"6\"]').dispatchEvent(new MouseEvent('mouseenter'))",
        false,
    )
    .unwrap();
    wait_for(
        &tab,
        "document.getElementById('params-readout').textContent",
        &Json::from("run 6 · d 96 · accuracy 0.25"),
    );
    // Another final metric.
    tab.evaluate(
        "const m = document.getElementById('scatter-metric'); m.value = 'loss'; m.dispatchEvent(new Event('change'))",
        false,
    )
    .unwrap();
    wait_for(
        &tab,
        "document.querySelector('#panels figcaption').textContent.startsWith('loss by d')",
        &Json::Bool(true),
    );
    assert!(tab.get_url().contains("smetric=loss") && tab.get_url().contains("tab=params"), "{}", tab.get_url());
    // A point opens its run's page.
    tab.evaluate(
        "document.querySelector('#panels circle.dot[data-id=\"6\"]').dispatchEvent(new MouseEvent('click'))",
        false,
    )
    .unwrap();
    wait_for(&tab, "location.hash", &Json::from("#/run/6"));
    wait_for(&tab, "document.getElementById('run-title').textContent.startsWith('run 6: tiny_stm')", &Json::Bool(true));
}

#[test]
fn in_a_browser_the_parameters_view_groups_and_draws_parallel_coordinates() {
    let Some((tab, _dir, ui)) =
        browser_on_dashboard("in_a_browser_the_parameters_view_groups_and_draws_parallel_coordinates", &[])
    else {
        return;
    };
    // The API, grouped: the d panel has each group's mean at its value; a line per group.
    let scatter = ui.ok_json(&format!("/api/scatter?group_by=d&where={}", encode("gates")));
    assert_eq!(scatter["grouped"], true);
    let d = &scatter["panels"][0];
    assert_eq!(d["name"], "d");
    let points = d["points"].as_array().unwrap();
    assert_eq!(points.len(), 2, "{d}");
    assert!(
        close(&points[0][0], 48.0) && close(&points[0][1], 0.7) && points[0][2] == "d=48" && points[0][3] == 3,
        "{d}"
    );
    assert!(
        close(&points[1][0], 96.0) && close(&points[1][1], 0.9) && points[1][2] == "d=96" && points[1][3] == 2,
        "{d}"
    );
    let parallel = &scatter["parallel"];
    assert_eq!(parallel["axes"][0]["name"], "d");
    assert_eq!(parallel["lines"].as_array().unwrap().len(), 2, "{parallel}");
    assert!(close(&parallel["lines"][1]["y"], 0.9) && parallel["lines"][1]["group"] == "d=96", "{parallel}");
    let (status, body) = ui.get_json("/api/scatter?group_by=nosuch.d");
    assert_eq!(status, 400, "{body}");

    // Ungrouped: an axis per swept parameter and the metric's last, a line per finished run.
    tab.go(&ui.url("/?tab=params"));
    let lines = "document.querySelectorAll('#parallel polyline.pc-line').length";
    wait_for(&tab, lines, &Json::from(6));
    let axes = "JSON.stringify([...document.querySelectorAll('#parallel g.pc-axis')].map(g => g.dataset.name))";
    assert_eq!(eval_str(&tab, axes), r#"["d","gates","accuracy"]"#);
    // On the metric axis (the last point of each line), runs 4, 1 and 6 (accuracy 1.0, 0.5,
    // 0.25) sit in proportion: 0.5 is two thirds of the way down from 1.0 to 0.25.
    let metric_y = |id: u64| -> f64 {
        let js = format!(
            "(() => {{ const p = document.querySelector('#parallel polyline.pc-line[data-id=\"{id}\"]').points; \
               return p.getItem(p.numberOfItems - 1).y; }})()"
        );
        tab.evaluate(&js, false).unwrap().value.and_then(|v| v.as_f64()).unwrap_or_else(|| panic!("{js}"))
    };
    let (y4, y1, y6) = (metric_y(4), metric_y(1), metric_y(6));
    assert!(y4 < y1 && y1 < y6, "{y4} {y1} {y6}");
    assert!(((y1 - y4) / (y6 - y4) - 2.0 / 3.0).abs() < 0.01, "{y4} {y1} {y6}");
    // Hovering a line brings it forward and reads it.
    tab.evaluate(
        "document.querySelector('#parallel polyline.pc-line[data-id=\"6\"]').dispatchEvent(new MouseEvent('mouseenter'))",
        false,
    )
    .unwrap();
    wait_for(
        &tab,
        "document.getElementById('params-readout').textContent",
        &Json::from("run 6 · d 96 · gates false · accuracy 0.25"),
    );
    let on = "JSON.stringify([...document.querySelectorAll('#parallel polyline.on')].map(l => l.dataset.id))";
    assert_eq!(eval_str(&tab, on), r#"["6"]"#);

    // Grouped by d: a point per group and value, and a line per group, each in its group's
    // colour (its row's and its curve's).
    let view = format!("/?tab=params&group_by=d&where={}", encode("status == \"done\" and gates"));
    tab.go(&ui.url(&view));
    wait_for(&tab, lines, &Json::from(2));
    let rows = "JSON.stringify(Object.fromEntries([...document.querySelectorAll('#runs tbody tr')] \
                .map(tr => ['d=' + tr.cells[0].textContent, tr.style.getPropertyValue('--curve')])))";
    let rows: std::collections::BTreeMap<String, String> = serde_json::from_str(&eval_str(&tab, rows)).unwrap();
    assert_eq!(rows.keys().collect::<Vec<_>>(), ["d=48", "d=96"]);
    assert_ne!(rows["d=48"], rows["d=96"]);
    let coloured = |selector: &str, colour: &str| {
        format!(
            "JSON.stringify([...document.querySelectorAll('{selector}')].map(e => [e.dataset.group, e.getAttribute('{colour}')]))"
        )
    };
    let pc: Vec<(String, String)> =
        serde_json::from_str(&eval_str(&tab, &coloured("#parallel polyline.pc-line", "stroke"))).unwrap();
    assert_eq!(pc.len(), 2);
    assert!(pc.iter().all(|(g, c)| rows.get(g) == Some(c)), "{pc:?} {rows:?}");
    let dots: Vec<(String, String)> =
        serde_json::from_str(&eval_str(&tab, &coloured("#panels figure[data-name=d] circle.dot", "fill"))).unwrap();
    let mut groups: Vec<&str> = dots.iter().map(|(g, _)| g.as_str()).collect();
    groups.sort();
    assert_eq!(groups, ["d=48", "d=96"]);
    assert!(dots.iter().all(|(g, c)| rows.get(g) == Some(c)), "{dots:?} {rows:?}");
    tab.evaluate(
        "document.querySelector('#panels figure[data-name=d] circle.dot[data-group=\"d=96\"]').dispatchEvent(new MouseEvent('mouseenter'))",
        false,
    )
    .unwrap();
    wait_for(
        &tab,
        "document.getElementById('params-readout').textContent",
        &Json::from("d=96 (2 runs) · d 96 · mean accuracy 0.9"),
    );
    let legend = "JSON.stringify([...document.querySelectorAll('#params-legend li')].map(l => l.textContent).sort())";
    assert_eq!(eval_str(&tab, legend), r#"["d=48 (3 runs)","d=96 (2 runs)"]"#);
    // A panel's PNG carries the same legend.
    let panel_legend = "JSON.stringify([...exportable(document.querySelector('#panels figure[data-name=d] svg')).svg \
                        .querySelectorAll('g.legend text')].map(t => t.textContent).sort())";
    assert_eq!(eval_str(&tab, panel_legend), r#"["d=48 (3 runs)","d=96 (2 runs)"]"#);
}

#[test]
fn in_a_browser_a_run_has_its_own_page_with_all_its_curves() {
    let Some((tab, _dir, ui)) = browser_on_dashboard("in_a_browser_a_run_has_its_own_page_with_all_its_curves", &[])
    else {
        return;
    };
    tab.go(&ui.url("/#/run/6"));
    let charts = "JSON.stringify([...document.querySelectorAll('#run-charts figure')].map(f => [f.dataset.metric, \
                  f.querySelectorAll('polyline.curve').length, f.querySelectorAll('circle.marker').length]))";
    wait_for(&tab, &format!("{charts} !== '[]'"), &Json::Bool(true));
    assert_eq!(eval_str(&tab, charts), r#"[["train_loss",1,3],["val_accuracy",1,3]]"#);
    let config = eval_str(&tab, "document.getElementById('run-config').textContent");
    assert!(config.contains("gates: false") && config.contains("experiment tiny_stm"), "{config}");
    assert!(eval_str(&tab, "document.getElementById('run-title').textContent").contains("(done)"));
    assert_eq!(
        tab.evaluate("document.getElementById('list-view').hidden", false).unwrap().value,
        Some(Json::Bool(true))
    );
    screenshot(&tab, "docs/ui-run.png");

    // Addresses that name no run say so.
    for (hash, says) in [("#/run/999", "no run with id 999"), ("#/run/x%3Cb%3E", "`x<b>` is not a run id")] {
        tab.evaluate(&format!("location.hash = '{hash}'"), false).unwrap();
        wait_for(&tab, "document.getElementById('run-title').textContent", &Json::from(says));
        assert_eq!(
            tab.evaluate("document.querySelectorAll('#run-title *').length", false).unwrap().value,
            Some(Json::from(0))
        );
    }

    // Back to the table; a row's id links to its page.
    tab.find_element("#run-view a").unwrap().click().unwrap();
    wait_for(&tab, "document.querySelectorAll('#runs tbody tr').length", &Json::from(7));
    let shown = |id: &str| format!("getComputedStyle(document.getElementById('{id}')).display !== 'none'");
    wait_for(&tab, &shown("run-view"), &Json::Bool(false));
    wait_for(&tab, &shown("list-view"), &Json::Bool(true));
    tab.find_element("#runs tr[data-id=\"3\"] a").unwrap().click().unwrap();
    wait_for(&tab, "document.getElementById('run-title').textContent.startsWith('run 3: tiny_stm')", &Json::Bool(true));
    assert!(tab.get_url().ends_with("#/run/3"), "{}", tab.get_url());
}

#[test]
fn in_a_browser_the_table_exports_as_csv_and_a_chart_as_png() {
    let Some((tab, _dir, ui)) = browser_on_dashboard("in_a_browser_the_table_exports_as_csv_and_a_chart_as_png", &[])
    else {
        return;
    };
    let view = format!("/?where={}&group_by=d&columns=accuracy,wall&sort=d", encode("status == \"done\" and gates"));
    tab.go(&ui.url(&view));
    wait_for(&tab, "document.querySelectorAll('#charts polyline.curve').length", &Json::from(2));

    // The table shown, values unrounded, each statistic as mean, std and n.
    tab.find_element("#csv").unwrap().click().unwrap();
    wait_for(&tab, "document.getElementById('download').download", &Json::from("memctl-runs.csv"));
    let csv = eval_async(&tab, "fetch(document.getElementById('download').href).then(r => r.text())");
    let csv = csv.as_str().unwrap();
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines[0], "d,runs,accuracy_mean,accuracy_std,accuracy_n,wall_mean,wall_std,wall_n", "{csv}");
    assert_eq!(lines.len(), 3, "{csv}");
    let numbers = |line: &str| -> Vec<f64> { line.split(',').map(|v| v.parse().unwrap()).collect() };
    let want = [[48.0, 3.0, 0.7, 0.2, 3.0, 60.0, 0.0, 3.0], [96.0, 2.0, 0.9, 0.02f64.sqrt(), 2.0, 60.0, 0.0, 2.0]];
    for (line, want) in lines[1..].iter().zip(want) {
        let got = numbers(line);
        assert!(got.len() == 8 && got.iter().zip(want).all(|(g, w)| (g - w).abs() < 1e-9), "{line}: {csv}");
    }

    // A chart as a PNG: twice the chart's size, its curves in their colours.
    tab.find_element("#charts button.png").unwrap().click().unwrap();
    wait_for(&tab, "document.getElementById('download').download.endsWith('.png')", &Json::Bool(true));
    let png = eval_async(
        &tab,
        "fetch(document.getElementById('download').href).then(r => r.blob()).then(async b => {
           const head = [...new Uint8Array(await b.slice(0, 8).arrayBuffer())];
           const image = await createImageBitmap(b);
           const c = new OffscreenCanvas(image.width, image.height);
           const ctx = c.getContext('2d');
           ctx.drawImage(image, 0, 0);
           const px = ctx.getImageData(0, 0, image.width, image.height).data;
           const near = (i, [r, g, b]) => Math.abs(px[i] - r) < 30 && Math.abs(px[i + 1] - g) < 30 && Math.abs(px[i + 2] - b) < 30;
           // Under the chart (600 pixels high), the legend: a swatch per group, and its name.
           let blue = 0, white = 0, legendBlue = 0, legendRed = 0, legendText = 0;
           for (let i = 0; i < px.length; i += 4) {
             const below = i / 4 >= 600 * image.width;
             if (near(i, [31, 119, 180])) { blue++; if (below) legendBlue++; }
             if (below && near(i, [214, 39, 40])) legendRed++;
             if (below && px[i] < 80 && px[i + 1] < 80 && px[i + 2] < 80) legendText++;
             if (px[i] === 255 && px[i + 1] === 255 && px[i + 2] === 255) white++;
           }
           return { head, width: image.width, height: image.height, blue, white, pixels: px.length / 4, legendBlue, legendRed, legendText };
         })",
    );
    assert_eq!(png["head"], serde_json::json!([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]), "{png}");
    // Twice the chart (640 × 300) and its legend's row under it.
    assert_eq!(png["width"].as_u64(), Some(1280), "{png}");
    assert!(png["height"].as_u64().is_some_and(|h| h > 600 && h < 700), "{png}");
    let (blue, white, pixels) =
        (png["blue"].as_u64().unwrap(), png["white"].as_u64().unwrap(), png["pixels"].as_u64().unwrap());
    assert!(blue > 500 && white > pixels / 2, "{png}");
    // The legend: each group's swatch (16 × 6, so 384 pixels at twice the size) and its name.
    let count = |k: &str| png[k].as_u64().unwrap();
    assert!(count("legendBlue") >= 300 && count("legendRed") >= 300 && count("legendText") > 100, "{png}");
    let legend = "JSON.stringify([...exportable(document.querySelector('#charts svg')).svg.querySelectorAll('g.legend text')] \
                  .map(t => t.textContent).sort())";
    assert_eq!(eval_str(&tab, legend), r#"["d=48 (3 runs)","d=96 (2 runs)"]"#);
}

/// The cells of the runs table, the header first.
fn table_cells(tab: &headless_chrome::Tab) -> Vec<Vec<String>> {
    let js =
        "JSON.stringify([...document.querySelectorAll('#runs tr')].map(tr => [...tr.cells].map(c => c.textContent)))";
    let text = tab.evaluate(js, false).unwrap().value.unwrap();
    serde_json::from_str(text.as_str().unwrap()).unwrap()
}

#[test]
fn in_a_browser_a_one_point_curve_is_drawn_and_cells_read_as_in_the_cli() {
    let Some((tab, _dir, ui)) = browser_on_dashboard(
        "in_a_browser_a_one_point_curve_is_drawn_and_cells_read_as_in_the_cli",
        &[one_point_run(8)],
    ) else {
        return;
    };
    tab.go(&ui.url("/?picked=8"));

    // Its one point is a marker, on axes whose tick labels differ.
    wait_for(&tab, "document.querySelectorAll('#charts circle.marker').length", &Json::from(1));
    wait_for(&tab, "document.querySelector('#charts select.metric').value", &Json::from("val_seq_accuracy"));
    let ticks = tab
        .evaluate("JSON.stringify([...document.querySelectorAll('#charts text.tick')].map(t => t.textContent))", false)
        .unwrap()
        .value
        .unwrap();
    let ticks: Vec<String> = serde_json::from_str(ticks.as_str().unwrap()).unwrap();
    let mut distinct = ticks.clone();
    distinct.sort();
    distinct.dedup();
    assert!(ticks.len() >= 6 && distinct.len() == ticks.len(), "{ticks:?}");

    // Wall time as the CLI prints it (60 s).
    wait_for(&tab, "document.querySelectorAll('#runs tbody tr').length", &Json::from(8));
    let table = table_cells(&tab);
    let wall = table[0].iter().position(|c| c == "wall").unwrap();
    assert!(table[1..].iter().all(|r| r[wall] == "1m00s"), "{table:?}");

    // A column ticked in the picker joins the table and the address.
    tab.find_element("#column-picker summary").unwrap().click().unwrap();
    tab.find_element("#column-list input[value=steps_to_converge]").unwrap().click().unwrap();
    wait_for(
        &tab,
        "[...document.querySelectorAll('#runs th')].some(th => th.textContent === 'steps_to_converge')",
        &Json::Bool(true),
    );
    assert!(tab.get_url().contains("columns="), "{}", tab.get_url());

    // A group of one run has no spread: `0.250 (1)`, as `memctl runs --group-by` prints it.
    tab.go(&ui.url(&format!("/?where={}&group_by=d,gates", encode("status == \"done\" and id < 8"))));
    wait_for(&tab, "document.querySelectorAll('#runs tbody tr').length", &Json::from(3));
    let table = table_cells(&tab);
    let accuracy = table[0].iter().position(|c| c == "accuracy").unwrap();
    assert!(table[1..].iter().any(|r| r[accuracy] == "0.250 (1)"), "{table:?}");
}

#[test]
fn in_a_browser_a_running_trial_refreshes_until_it_finishes() {
    let Some((tab, dir, ui)) =
        browser_on_dashboard("in_a_browser_a_running_trial_refreshes_until_it_finishes", &[running_run(8)])
    else {
        return;
    };
    let summary = "document.getElementById('summary').textContent";
    // A filter that leaves the running run out: nothing on the page changes, nothing refreshes.
    tab.go(&ui.url(&format!("/?where={}", encode("d == 96"))));
    wait_for(&tab, summary, &Json::from("4 runs"));

    tab.go(&ui.url("/?picked=8,1"));
    wait_for(&tab, summary, &Json::from("8 runs; 1 running, refreshing"));
    let points = "document.querySelector('#charts polyline.curve').points.length";
    wait_for(&tab, points, &Json::from(1));
    // The diff of the two picked stays open through the refreshes.
    wait_for(&tab, "document.getElementById('diff').disabled", &Json::Bool(false));
    tab.find_element("#diff").unwrap().click().unwrap();
    let detail = "document.getElementById('detail').textContent";
    let is_diff = format!("{detail}.includes('gates') && !{detail}.includes('--- spec')");
    wait_for(&tab, &is_diff, &Json::Bool(true));
    let drawn = "performance.getEntriesByName('memctl:drawn').length";
    let before = tab.evaluate(drawn, false).unwrap().value.unwrap().as_u64().unwrap();
    wait_for(&tab, &format!("{drawn} >= {}", before + 2), &Json::Bool(true));
    wait_for(&tab, &is_diff, &Json::Bool(true));
    assert!(tab.get_url().contains("pane=diff"), "{}", tab.get_url());

    // It finishes: the page shows it within a refresh (every 2 s), then stops refreshing.
    open(dir.path()).put_many(&[record(8, config(48, false, 1), 0.3, None)]).unwrap();
    wait_for(&tab, summary, &Json::from("8 runs"));
    wait_for(&tab, points, &Json::from(3));
    wait_for(&tab, "document.querySelector('#runs tr[data-id=\"8\"] .status-done') !== null", &Json::Bool(true));
}

/// A trial run again to the end (`--force`) counts once in every grouped view, by its latest
/// run, as `memctl runs --group-by` counts it; `all=1` counts every run.
#[test]
fn grouped_views_count_a_trial_run_again_once_and_all_counts_every_run() {
    let dir = filled_store();
    let first = open(dir.path()).get(1).unwrap();
    let again = memctl::store::RunRecord { id: 8, started_at: first.started_at + 1000.0, ..first };
    open(dir.path()).put(&again).unwrap();
    let ui = Dashboard::start(dir.path(), &[]);
    let gated = encode("gates and status == \"done\"");
    for (all, n) in [("", 3), ("&all=1", 4)] {
        let runs = ui.ok_json(&format!("/api/runs?where={gated}&group_by=d{all}"));
        let d48 = runs["rows"].as_array().unwrap().iter().find(|r| r["d"] == 48).cloned().unwrap();
        assert_eq!(d48["accuracy"]["n"], n, "runs{all}: {d48}");
        let curves = ui.ok_json(&format!("/api/curves?where={gated}&group_by=d{all}"));
        let label =
            curves["series"].as_array().unwrap().iter().find_map(|s| s["label"].as_str().filter(|l| l.contains("48")));
        assert!(label.is_some_and(|l| l.contains(&format!("({n} runs)"))), "curves{all}: {curves}");
        let scatter = ui.ok_json(&format!("/api/scatter?where={gated}&group_by=d&metric=accuracy{all}"));
        let points = scatter["panels"][0]["points"].as_array().unwrap().clone();
        let d48 = points.iter().find(|p| p[0].as_f64() == Some(48.0)).unwrap_or_else(|| panic!("{scatter}"));
        assert_eq!(d48[3], n, "scatter{all}: {scatter}");
    }
}
