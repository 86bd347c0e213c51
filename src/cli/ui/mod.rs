//! `memctl ui`: a local, read-only dashboard of the store — the runs table with the same
//! `--where` filters, sorting, columns and group-by as `memctl runs`, learning curves of the
//! runs picked (one chart per metric), a final metric against each swept parameter, a run's
//! page with all its curves, its record and spec, and the diff of two runs — refreshed while
//! trials train. Everything it serves is inside the binary (clusters are often offline), and it
//! serves nothing else: requests name an asset or an API route, never a file.

mod allowed_host;
mod api;
mod assets;
mod http;
mod unknown_name;

use std::borrow::Cow;
use std::net::{IpAddr, SocketAddr, TcpListener};

use crate::cli::context::Context;
use crate::store::Store;

/// Serve a live dashboard of the store on a local port (read-only).
#[derive(clap::Args)]
pub struct Args {
    /// Port to listen on (default: a free one).
    #[arg(long, default_value_t = 0)]
    port: u16,
    /// Address to listen on (an IP address, or `localhost`); anything but a loopback address
    /// shows the store to the network.
    #[arg(long, default_value = "127.0.0.1", value_parser = host_address)]
    host: IpAddr,
}

/// `--host`: an IP address, or `localhost` for 127.0.0.1.
fn host_address(text: &str) -> Result<IpAddr, &'static str> {
    if text.eq_ignore_ascii_case("localhost") {
        return Ok(IpAddr::from([127, 0, 0, 1]));
    }
    text.parse().map_err(|_| "an IP address (127.0.0.1, ::1, 0.0.0.0) or `localhost`")
}

pub fn run(args: Args, ctx: &Context) -> anyhow::Result<i32> {
    let store = Store::open_existing(&ctx.store)?;
    if !args.host.is_loopback() {
        eprintln!(
            "warning: listening on {}: anyone who can reach this address can read the store (runs, specs, \
             hostnames); the dashboard has no login",
            args.host
        );
    }
    let listener = TcpListener::bind(SocketAddr::new(args.host, args.port))
        .map_err(|e| anyhow::anyhow!("cannot listen on {}:{}: {e}", args.host, args.port))?;
    let addr = listener.local_addr().map_or_else(|_| "?".to_string(), |a| a.to_string());
    // The first line says where to look (tests and scripts read it).
    println!("memctl ui: http://{addr}/  (store {}; Ctrl-C stops)", ctx.store.display());
    let dashboard = Dashboard { store: &store, bound: args.host, addr };
    http::serve(listener, &http::Limits::default(), &dashboard);
    Ok(0)
}

/// The dashboard as the server serves it: the store, and the address it listens on.
struct Dashboard<'a> {
    store: &'a Store,
    bound: IpAddr,
    /// `IP:PORT`, as the startup line names it.
    addr: String,
}

impl http::Service for Dashboard<'_> {
    fn answer(&self, request: &http::Request) -> http::Response {
        reply(self.store, self.bound, &self.addr, request)
    }

    /// A request not read (a connection over the cap) is answered as the API answers: the
    /// page's own requests, which read every answer as JSON, are what a busy dashboard gets.
    fn failure(&self, target: Option<&str>, failure: &http::Failure) -> http::Response {
        let path = target.map_or("/api/", |t| t.split_once('?').map_or(t, |(path, _)| path));
        response(error(path, failure.status(), shown(&failure.to_string()).into_owned()))
    }
}

const TEXT: &str = "text/plain; charset=utf-8";
const JSON: &str = "application/json; charset=utf-8";

/// The response to `request` to a server listening on `bound` (at `addr`): refused (403) unless
/// its `Host` names this machine (see [`allowed_host`]).
fn reply(store: &Store, bound: IpAddr, addr: &str, request: &http::Request) -> http::Response {
    let host = request.host.as_deref();
    if allowed_host::allowed(host, bound) {
        return response(answer(store, &request.method, &request.target));
    }
    let path = request.target.split_once('?').map_or(request.target.as_str(), |(path, _)| path);
    let host = shown(host.unwrap_or_default());
    let message =
        format!("refused: Host `{host}` is neither a loopback name nor this dashboard's address (http://{addr}/)");
    response(error(path, 403, message))
}

/// An answer as the server sends it (a 405 says which methods are answered).
fn response((status, content_type, body): (u16, &'static str, Vec<u8>)) -> http::Response {
    let headers = if status == 405 { vec![("Allow", "GET, HEAD")] } else { vec![] };
    http::Response { status, content_type, body, headers }
}

/// The status, content type and body for a request. A `HEAD` gets a `GET`'s answer, whose body
/// the server leaves out.
fn answer(store: &Store, method: &http::Method, url: &str) -> (u16, &'static str, Vec<u8>) {
    let url = origin_form(url);
    let (path, query) = url.split_once('?').unwrap_or((url, ""));
    if !matches!(method, http::Method::Get | http::Method::Head) {
        return error(path, 405, "the dashboard only reads: GET or HEAD".into());
    }
    // A browser may percent-encode any byte of a path (`/api/run/%31` is run 1).
    let Ok(decoded) = percent_encoding::percent_decode_str(path).decode_utf8() else {
        return error(path, 400, format!("the path `{}` is not UTF-8 once percent-decoded", shown(path)));
    };
    let decoded = decoded.as_ref();
    let q = api::Params::parse(query);
    let json = |a: api::Answer| (a.status, JSON, a.body.into_bytes());
    match decoded {
        "/api/runs" => json(api::runs(store, &q)),
        "/api/curves" => json(api::curves(store, &q)),
        "/api/diff" => json(api::diff(store, &q)),
        "/api/ablation" => json(api::ablation(store, &q)),
        "/api/scatter" => json(api::scatter(store, &q)),
        _ if decoded.starts_with("/api/run/") => json(api::run(store, &decoded["/api/run/".len()..])),
        _ => match assets::get(decoded) {
            Some((content_type, body)) => (200, content_type, body.to_vec()),
            None => error(path, 404, format!("no page {}", shown(decoded))),
        },
    }
}

/// The path and query of a request target: a target in absolute form
/// (`http://127.0.0.1:8000/api/runs`, as a proxy sends it) is read as its path
/// (RFC 9112 §3.2.2; the `Host` header is still what the host check reads).
fn origin_form(target: &str) -> &str {
    let scheme =
        ["http://", "https://"].iter().find(|s| target.get(..s.len()).is_some_and(|t| t.eq_ignore_ascii_case(s)));
    let Some(scheme) = scheme else { return target };
    let after_authority = &target[scheme.len()..];
    match after_authority.find(['/', '?']) {
        Some(at) if after_authority[at..].starts_with('/') => &after_authority[at..],
        // `http://host` or `http://host?q`: the root.
        _ => "/",
    }
}

/// An error answer to a request for `path` (as sent): JSON under `/api/`, as the API's own
/// errors are (the page reads every answer there as JSON), plain text elsewhere.
fn error(path: &str, status: u16, message: String) -> (u16, &'static str, Vec<u8>) {
    if percent_encoding::percent_decode_str(path).decode_utf8_lossy().starts_with("/api/") {
        (status, JSON, api::Answer::error(status, &message).body.into_bytes())
    } else {
        (status, TEXT, format!("{message}\n").into_bytes())
    }
}

/// Most characters of a path or name an answer echoes.
const MOST_ECHOED: usize = 200;

/// `text`, cut to [`MOST_ECHOED`] characters with an ellipsis.
fn shown(text: &str) -> Cow<'_, str> {
    match text.char_indices().nth(MOST_ECHOED) {
        Some((cut, _)) => Cow::Owned(format!("{}…", &text[..cut])),
        None => Cow::Borrowed(text),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_embedded_assets_and_the_api_are_served_and_only_to_get_and_head() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let get = http::Method::Get;
        assert_eq!(answer(&store, &get, "/").0, 200);
        assert_eq!(answer(&store, &get, "/app.js").0, 200);
        for path in ["/../../etc/passwd", "/assets/..%2f..%2fCargo.toml", "/Cargo.toml", "//etc/passwd", "/src/main.rs"]
        {
            assert_eq!(answer(&store, &get, path).0, 404, "{path}");
        }
        let head = http::Method::Head;
        assert_eq!(answer(&store, &head, "/"), answer(&store, &get, "/"), "HEAD answers as GET");
        assert_eq!(answer(&store, &head, "/api/runs").0, 200);
        assert_eq!(answer(&store, &head, "/nosuch").0, 404);
        assert_eq!(answer(&store, &http::Method::Other("POST".into()), "/api/runs").0, 405);
        assert_eq!(answer(&store, &http::Method::Other("DELETE".into()), "/api/run/1").0, 405);
        let (status, _, body) = answer(&store, &get, "/api/runs?where=d%20%3D%2016");
        assert_eq!(status, 400);
        let body = String::from_utf8(body).unwrap();
        assert!(body.contains("error[Q014]: syntax error") && body.contains("<--where>:1:3"), "{body}");
        assert_eq!(answer(&store, &get, "/api/run/7").0, 404);
        let (status, _, body) = answer(&store, &get, "/api/curves?ids=1&x=hours");
        assert_eq!(status, 400);
        assert!(String::from_utf8(body).unwrap().contains("x is one of `step`, `seconds`, not `hours`"));
    }

    #[test]
    fn host_is_an_ip_address_or_localhost() {
        assert_eq!(host_address("localhost"), Ok(IpAddr::from([127, 0, 0, 1])));
        assert_eq!(host_address("::1"), Ok("::1".parse().unwrap()));
        assert!(host_address("example.org").unwrap_err().contains("or `localhost`"));
    }

    /// A store holding the fixture run as run `id`.
    fn store_with_run(id: u64) -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let mut run =
            crate::store::record::decode(include_bytes!("../../../tests/fixtures/run_record_v1.json")).unwrap();
        run.id = id;
        store.put(&run).unwrap();
        (dir, store)
    }

    /// A path means what it means percent-decoded, as a browser may encode any byte of it; one
    /// that is not UTF-8 then is refused.
    #[test]
    fn a_path_is_percent_decoded() {
        let (_dir, store) = store_with_run(7);
        let get = http::Method::Get;
        assert_eq!(answer(&store, &get, "/api/run/7").0, 200);
        assert_eq!(answer(&store, &get, "/api/run/%37"), answer(&store, &get, "/api/run/7"));
        assert_eq!(answer(&store, &get, "/app%2Ejs"), answer(&store, &get, "/app.js"));
        let (status, _, body) = answer(&store, &get, "/api/run/%FF");
        assert_eq!((status, String::from_utf8(body).unwrap().contains("not UTF-8")), (400, true));
    }

    /// Every answer under `/api/` is JSON with an `error`, the server's own refusals and a
    /// panic's 500 included; elsewhere errors are plain text.
    #[test]
    fn errors_under_api_are_json_and_elsewhere_text() {
        let (_dir, store) = store_with_run(7);
        let error_of = |(status, content_type, body): (u16, &str, Vec<u8>)| {
            assert_eq!(content_type, JSON, "{status}");
            let body: serde_json::Value = serde_json::from_slice(&body).unwrap();
            (status, body["error"].as_str().unwrap().to_string())
        };
        let get = http::Method::Get;
        let (status, error) = error_of(answer(&store, &get, "/api/run/%ff"));
        assert!(status == 400 && error.contains("not UTF-8"), "{error}");
        assert_eq!(error_of(answer(&store, &get, "/api/nosuch")).0, 404);
        assert_eq!(error_of(answer(&store, &http::Method::Other("PUT".into()), "/api/runs")).0, 405);
        let ui = Dashboard { store: &store, bound: IpAddr::from([127, 0, 0, 1]), addr: "127.0.0.1:1".into() };
        let evil = http::Request {
            method: get.clone(),
            target: "/api/runs?where=1".into(),
            host: Some("evil.example.com".into()),
        };
        let refused = http::Service::answer(&ui, &evil);
        let (status, error) = error_of((refused.status, refused.content_type, refused.body));
        assert!(status == 403 && error.starts_with("refused: Host `evil.example.com`"), "{error}");
        for failure in [http::Failure::TwoHosts, http::Failure::Panic("a bug".into())] {
            let r = http::Service::failure(&ui, Some("/api/runs?x=1"), &failure);
            let (status, error) = error_of((r.status, r.content_type, r.body));
            assert_eq!((status, error), (failure.status(), failure.to_string()));
        }
        let r = http::Service::failure(&ui, Some("/"), &http::Failure::TwoHosts);
        assert_eq!((r.status, r.content_type), (400, TEXT));
        // A request not read (a connection over the cap) is answered as the page's requests
        // read it, in JSON.
        let r = http::Service::failure(&ui, None, &http::Failure::Busy(256));
        assert_eq!((r.status, r.content_type), (503, JSON));
        let (status, content_type, _) = answer(&store, &get, "/nosuch");
        assert_eq!((status, content_type), (404, TEXT));
        // A target in absolute form (as a proxy sends it) is read as its path.
        assert_eq!(answer(&store, &get, "http://127.0.0.1:8000/api/run/7").0, 200);
        assert_eq!(answer(&store, &get, "HTTP://localhost/app.js"), answer(&store, &get, "/app.js"));
        assert_eq!(answer(&store, &get, "http://localhost"), answer(&store, &get, "/"));
    }

    /// A long path is echoed cut to 200 characters (a 10 000-character one answers a short 404).
    #[test]
    fn an_answer_echoes_at_most_200_characters_of_a_path() {
        let (_dir, store) = store_with_run(7);
        let long = format!("/{}", "é".repeat(10_000));
        let (status, _, body) = answer(&store, &http::Method::Get, &long);
        let body = String::from_utf8(body).unwrap();
        assert_eq!(status, 404);
        assert!(body.starts_with("no page /éé") && body.trim_end().ends_with('…'), "{body}");
        assert_eq!(body.trim_end().chars().count(), "no page ".len() + MOST_ECHOED + 1);
        let (_, _, body) = answer(&store, &http::Method::Get, &format!("/api/run/{}%ff", "1".repeat(5_000)));
        assert!(body.len() < 400, "{}", body.len());
        assert_eq!(shown("/short"), "/short");
    }

    /// Curves of runs the page lists, one deleted since: the others are drawn, each once, and
    /// the deleted one is named.
    #[test]
    fn curves_leave_out_a_deleted_run_and_draw_a_run_once() {
        let (_dir, store) = store_with_run(1);
        let (status, _, body) = answer(&store, &http::Method::Get, "/api/curves?ids=1,99,1");
        let body: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["missing"], serde_json::json!([99]));
        assert_eq!(body["drawn"], 1);
        assert_eq!(body["series"].as_array().map(Vec::len), Some(1), "{body}");
    }
}
