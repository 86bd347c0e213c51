//! `memctl ui`: a local, read-only dashboard of the store — the runs table with the same
//! `--where` filters, sorting, columns and group-by as `memctl runs`, learning curves of the
//! runs picked (one chart per metric), a final metric against each swept parameter, a run's
//! page with all its curves, its record and spec, and the diff of two runs — refreshed while
//! trials train. Everything it serves is inside the binary (clusters are often offline), and it
//! serves nothing else: requests name an asset or an API route, never a file.

mod allowed_host;
mod api;
mod assets;
mod replies;
mod unknown_name;

use std::net::{IpAddr, SocketAddr};

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
    let server = listen(SocketAddr::new(args.host, args.port))
        .map_err(|e| anyhow::anyhow!("cannot listen on {}:{}: {e}", args.host, args.port))?;
    let replies = replies::Replies::default();
    let addr = server.server_addr().to_ip().map_or_else(|| "?".to_string(), |a| a.to_string());
    // The first line says where to look (tests and scripts read it).
    println!("memctl ui: http://{addr}/  (store {}; Ctrl-C stops)", ctx.store.display());
    // A few workers, so that the page's table and curves are read and encoded side by side
    // (each read is its own short store session; decoding happens outside it).
    std::thread::scope(|scope| {
        for _ in 0..WORKERS {
            scope.spawn(|| {
                while let Ok(request) = server.recv() {
                    let Some((request, admitted)) = replies.admit(request) else { continue };
                    // A panic (a bug) answers its request with a 500 and leaves the worker
                    // serving: the dashboard outlives any one request.
                    let reply = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        reply(&store, args.host, &addr, &request)
                    }));
                    let response = reply.unwrap_or_else(|panic| {
                        let why = crate::train::panic_message(panic.as_ref());
                        let body = format!("internal error (panic) answering this request: {why}\n");
                        let text = tiny_http::Header::from_bytes("Content-Type", TEXT).expect("a valid header");
                        tiny_http::Response::from_data(body.into_bytes())
                            .with_status_code(500)
                            .with_header(text)
                            .boxed()
                    });
                    admitted.send(request, response);
                }
            });
        }
    });
    Ok(0)
}

const WORKERS: usize = 4;

/// The server on `addr`, its sockets giving up on a client that does not read after
/// [`replies::WRITE_TIMEOUT`].
fn listen(addr: SocketAddr) -> Result<tiny_http::Server, Box<dyn std::error::Error + Send + Sync>> {
    let listener = std::net::TcpListener::bind(addr)?;
    socket2::SockRef::from(&listener).set_write_timeout(Some(replies::WRITE_TIMEOUT))?;
    tiny_http::Server::from_listener(listener, None)
}
const TEXT: &str = "text/plain; charset=utf-8";

/// The response to `request` to a server listening on `bound` (at `addr`): refused (403) unless
/// its `Host` names this machine (see [`allowed_host`]).
fn reply(store: &Store, bound: IpAddr, addr: &str, request: &tiny_http::Request) -> tiny_http::ResponseBox {
    let host = request.headers().iter().find(|h| h.field.equiv("Host")).map(|h| h.value.as_str());
    let (status, content_type, body) = if allowed_host::allowed(host, bound) {
        answer(store, request.method(), request.url())
    } else {
        let host = host.unwrap_or_default();
        let body = format!(
            "refused: Host `{host}` is neither a loopback name nor this dashboard's address (http://{addr}/)\n"
        );
        (403, TEXT, body.into_bytes())
    };
    let header = |name: &str, value: &str| tiny_http::Header::from_bytes(name, value).expect("a valid header");
    let mut response =
        tiny_http::Response::from_data(body).with_status_code(status).with_header(header("Content-Type", content_type));
    if status == 405 {
        response.add_header(header("Allow", "GET, HEAD"));
    }
    response.boxed()
}

/// The status, content type and body for a request. A `HEAD` gets a `GET`'s answer, whose body
/// tiny_http leaves out.
fn answer(store: &Store, method: &tiny_http::Method, url: &str) -> (u16, &'static str, Vec<u8>) {
    const JSON: &str = "application/json; charset=utf-8";
    if !matches!(method, tiny_http::Method::Get | tiny_http::Method::Head) {
        return (405, TEXT, b"the dashboard only reads: GET or HEAD".to_vec());
    }
    let (path, query) = url.split_once('?').unwrap_or((url, ""));
    // A browser may percent-encode any byte of a path (`/api/run/%31` is run 1).
    let Ok(path) = percent_encoding::percent_decode_str(path).decode_utf8() else {
        return (400, TEXT, format!("the path `{path}` is not UTF-8 once percent-decoded").into_bytes());
    };
    let path = path.as_ref();
    let q = api::Params::parse(query);
    let json = |a: api::Answer| (a.status, JSON, a.body.into_bytes());
    match path {
        "/api/runs" => json(api::runs(store, &q)),
        "/api/curves" => json(api::curves(store, &q)),
        "/api/diff" => json(api::diff(store, &q)),
        "/api/ablation" => json(api::ablation(store, &q)),
        "/api/scatter" => json(api::scatter(store, &q)),
        _ if path.starts_with("/api/run/") => json(api::run(store, &path["/api/run/".len()..])),
        _ => match assets::get(path) {
            Some((content_type, body)) => (200, content_type, body.to_vec()),
            None => (404, TEXT, format!("no page {path}").into_bytes()),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_embedded_assets_and_the_api_are_served_and_only_to_get_and_head() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let get = tiny_http::Method::Get;
        assert_eq!(answer(&store, &get, "/").0, 200);
        assert_eq!(answer(&store, &get, "/app.js").0, 200);
        for path in ["/../../etc/passwd", "/assets/..%2f..%2fCargo.toml", "/Cargo.toml", "//etc/passwd", "/src/main.rs"]
        {
            assert_eq!(answer(&store, &get, path).0, 404, "{path}");
        }
        let head = tiny_http::Method::Head;
        assert_eq!(answer(&store, &head, "/"), answer(&store, &get, "/"), "HEAD answers as GET");
        assert_eq!(answer(&store, &head, "/api/runs").0, 200);
        assert_eq!(answer(&store, &head, "/nosuch").0, 404);
        assert_eq!(answer(&store, &tiny_http::Method::Post, "/api/runs").0, 405);
        assert_eq!(answer(&store, &tiny_http::Method::Delete, "/api/run/1").0, 405);
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
        let get = tiny_http::Method::Get;
        assert_eq!(answer(&store, &get, "/api/run/7").0, 200);
        assert_eq!(answer(&store, &get, "/api/run/%37"), answer(&store, &get, "/api/run/7"));
        assert_eq!(answer(&store, &get, "/app%2Ejs"), answer(&store, &get, "/app.js"));
        let (status, _, body) = answer(&store, &get, "/api/run/%FF");
        assert_eq!((status, String::from_utf8(body).unwrap().contains("not UTF-8")), (400, true));
    }

    /// Curves of runs the page lists, one deleted since: the others are drawn, each once, and
    /// the deleted one is named.
    #[test]
    fn curves_leave_out_a_deleted_run_and_draw_a_run_once() {
        let (_dir, store) = store_with_run(1);
        let (status, _, body) = answer(&store, &tiny_http::Method::Get, "/api/curves?ids=1,99,1");
        let body: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["missing"], serde_json::json!([99]));
        assert_eq!(body["drawn"], 1);
        assert_eq!(body["series"].as_array().map(Vec::len), Some(1), "{body}");
    }
}
