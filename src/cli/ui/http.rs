//! The dashboard's HTTP/1.1 server. Each connection is served by a thread of its own, which
//! reads its requests and answers them in order (keep-alive, and pipelined requests answered
//! in the order sent, every one). What a client can claim is bounded:
//!
//! - Connections: at most [`Limits::connections`] are served at once; one more is answered
//!   503 and closed.
//! - The store: at most [`Limits::answering`] answers are computed at once (the others wait
//!   their turn); writing an answer holds no such place.
//! - Memory: a request head (request line and headers) is at most [`Limits::head_bytes`]
//!   long, with at most [`MAX_HEADERS`] headers, else it is answered 431 and the connection
//!   closed; nothing more than one head is ever held for a connection.
//! - Time: a head must arrive within [`Limits::head_deadline`] of its first byte, and the next
//!   request within [`Limits::idle`] of an answer, else the connection is closed unanswered;
//!   an answer must be written within [`Limits::write_timeout`] and a second more per 64 KiB,
//!   else the connection is closed, so a client that does not read its answers, or reads them
//!   a few bytes at a time, holds only its own connection's thread, and not for long.
//!
//! The server only reads: a GET or HEAD with a body (`Content-Length` above 0, or any
//! `Transfer-Encoding`) is answered 400, and a request of another method gets the service's
//! answer (405), the connection closed after it if it has a body (never read). Malformed
//! requests (anything httparse refuses, non-UTF-8 bytes in the request line included), a
//! second `Host` header or one that is not UTF-8 are answered 400 and closed. Bare-LF line
//! endings and empty lines before a request are accepted. A HEAD is answered with its GET's
//! head (`Content-Length` included), its errors too. A panic computing an answer is answered
//! 500, and the connection goes on. Every answer carries `Content-Type` and
//! `Content-Length`, and `Connection: close` when the server closes after it.

mod head;
mod semaphore;

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use head::{Head, Refused};
use semaphore::Semaphore;

/// The most headers a request may have (httparse's array).
pub const MAX_HEADERS: usize = 64;

/// What the server lets each client and all of them claim.
#[derive(Clone, Debug)]
pub struct Limits {
    /// Connections served at once.
    pub connections: usize,
    /// Answers computed at once.
    pub answering: usize,
    /// Bytes of a request head.
    pub head_bytes: usize,
    /// From a head's first byte to its last.
    pub head_deadline: Duration,
    /// From an answer (or the connection) to the next request's first byte.
    pub idle: Duration,
    /// How long an answer's write waits for a client to read, besides a second per
    /// `write_rate` bytes of it.
    pub write_timeout: Duration,
    pub write_rate: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            connections: 256,
            // A few, so that the page's table and curves are read and encoded side by side
            // (each read is its own short store session).
            answering: 4,
            head_bytes: 16 * 1024,
            head_deadline: Duration::from_secs(10),
            idle: Duration::from_secs(30),
            write_timeout: Duration::from_secs(10),
            write_rate: 64 * 1024,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Method {
    Get,
    Head,
    /// Any other (the dashboard answers them 405).
    Other(String),
}

/// A well-formed request, without a body.
#[derive(Clone, Debug)]
pub struct Request {
    pub method: Method,
    /// The request target as sent (`/api/runs?where=…`), not percent-decoded.
    pub target: String,
    /// The `Host` header (`None`: none, as HTTP/1.0 allows).
    pub host: Option<String>,
}

/// An answer: the server adds `Content-Length` and `Connection`, and leaves the body out of
/// an answer to HEAD.
#[derive(Clone, Debug)]
pub struct Response {
    pub status: u16,
    pub content_type: &'static str,
    pub body: Vec<u8>,
    /// Any other headers (`Allow` of a 405).
    pub headers: Vec<(&'static str, &'static str)>,
}

/// What the server serves.
pub trait Service: Sync {
    /// The answer to a well-formed request.
    fn answer(&self, request: &Request) -> Response;
    /// The answer to a request the server answers itself; `path` is the request target when
    /// it was read.
    fn failure(&self, path: Option<&str>, failure: &Failure) -> Response;
}

/// Why the server answers a request itself rather than the service.
#[derive(Debug, thiserror::Error)]
pub enum Failure {
    #[error("the dashboard is serving {0} connections, its most; try again shortly")]
    Busy(usize),
    #[error("the request's head (request line and headers) is over {0} bytes")]
    HeadTooLarge(usize),
    #[error("the request has more than {MAX_HEADERS} headers")]
    TooManyHeaders,
    #[error("malformed request: {0}")]
    Malformed(httparse::Error),
    #[error("malformed request: its Host header is not UTF-8")]
    HostNotUtf8,
    #[error("the request has more than one Host header")]
    TwoHosts,
    #[error("the request's Content-Length is not a length")]
    BadLength,
    #[error("the dashboard only reads: a request with a body is refused")]
    Body,
    #[error("internal error (panic) answering this request: {0}")]
    Panic(String),
}

impl Failure {
    pub fn status(&self) -> u16 {
        match self {
            Failure::Busy(_) => 503,
            Failure::HeadTooLarge(_) | Failure::TooManyHeaders => 431,
            Failure::Panic(_) => 500,
            Failure::Malformed(_) | Failure::HostNotUtf8 | Failure::TwoHosts | Failure::BadLength | Failure::Body => {
                400
            }
        }
    }
}

/// Connections over the cap waiting for their 503; one more is closed unanswered.
const REFUSALS_QUEUED: usize = 64;
/// What a 503 reads and drops of its request before closing (see [`refuse_busy`]).
const REFUSAL_DRAINED: usize = 64 * 1024;
/// After its last answer, how long and how much of what a client still sends is read and
/// dropped before the socket is closed (see [`close`]).
const LINGER: Duration = Duration::from_secs(2);
const LINGER_BYTES: usize = 1 << 20;
/// After a failed accept (out of file descriptors), the pause before the next.
const ACCEPT_RETRY: Duration = Duration::from_millis(50);

/// Serves `service` on `listener` until the process ends.
pub fn serve(listener: TcpListener, limits: &Limits, service: &impl Service) {
    let open = AtomicUsize::new(0);
    let answering = Semaphore::new(limits.answering);
    let (refuse, refused) = mpsc::sync_channel::<TcpStream>(REFUSALS_QUEUED);
    std::thread::scope(|scope| {
        // One thread answers the connections over the cap, so that accepting never waits on a
        // client.
        scope.spawn(move || {
            for stream in refused {
                refuse_busy(stream, limits, service);
            }
        });
        loop {
            let stream = match listener.accept() {
                Ok((stream, _)) => stream,
                Err(_) => {
                    std::thread::sleep(ACCEPT_RETRY);
                    continue;
                }
            };
            // Only this thread adds, so the count cannot pass the cap between the two.
            if open.load(Ordering::SeqCst) >= limits.connections {
                let _ = refuse.try_send(stream);
                continue;
            }
            open.fetch_add(1, Ordering::SeqCst);
            let counted = Counted(&open);
            let connection = Connection { stream, buf: Vec::new(), limits, answering: &answering, service };
            // A thread that cannot start drops its connection (and its count) unanswered.
            let _ = std::thread::Builder::new().name("memctl-ui-connection".into()).spawn_scoped(scope, move || {
                let _counted = counted;
                connection.serve();
            });
        }
    });
}

/// A connection counted open until dropped.
struct Counted<'a>(&'a AtomicUsize);

impl Drop for Counted<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A 503 to a connection over the cap, without waiting on its client: the answer is small
/// enough for the socket's buffer, and what the client sent before is dropped (closing a
/// socket with unread bytes would reset the connection, and the answer with it); the one
/// thread that refuses then never falls behind.
fn refuse_busy(mut stream: TcpStream, limits: &Limits, service: &impl Service) {
    let response = service.failure(None, &Failure::Busy(limits.connections));
    if stream.set_nonblocking(true).is_err() || write(&mut stream, &response, false, Some("close")).is_err() {
        return;
    }
    let _ = stream.shutdown(Shutdown::Write);
    let (mut sink, mut dropped) = ([0; 8192], 0);
    while dropped < REFUSAL_DRAINED {
        match stream.read(&mut sink) {
            Ok(n) if n > 0 => dropped += n,
            _ => return,
        }
    }
}

struct Connection<'a, S> {
    stream: TcpStream,
    /// Bytes read and not yet answered: at most one head (and what was pipelined after it).
    buf: Vec<u8>,
    limits: &'a Limits,
    answering: &'a Semaphore,
    service: &'a S,
}

/// What reading the next request gave.
enum Next {
    /// A request whose head is the first `len` bytes of the buffer.
    Request(Head, usize),
    /// A request the server answers itself, and then closes.
    Refused(Refused),
    /// The client closed, went quiet, or the socket failed: nothing to answer.
    Gone,
}

impl<S: Service> Connection<'_, S> {
    fn serve(mut self) {
        // Requests are answered whole, so a small answer waits for no more of it.
        let _ = self.stream.set_nodelay(true);
        if self.stream.set_write_timeout(Some(self.limits.write_timeout)).is_err() {
            return;
        }
        loop {
            match self.next() {
                Next::Gone => return,
                Next::Refused(refused) => {
                    let response = self.service.failure(refused.path.as_deref(), &refused.failure);
                    if self.write(&response, refused.head_only, Some("close")).is_ok() {
                        close(self.stream);
                    }
                    return;
                }
                Next::Request(head, len) => {
                    self.buf.drain(..len);
                    let response = self.answer(&head.request);
                    let head_only = head.request.method == Method::Head;
                    // An HTTP/1.0 client that asked to keep the connection is told it is kept.
                    let connection = match (head.keep_alive, head.http10) {
                        (false, _) => Some("close"),
                        (true, true) => Some("keep-alive"),
                        (true, false) => None,
                    };
                    if self.write(&response, head_only, connection).is_err() {
                        return;
                    }
                    if !head.keep_alive {
                        close(self.stream);
                        return;
                    }
                }
            }
        }
    }

    /// Writes `response` within [`Limits::write_timeout`] and a second more per
    /// [`Limits::write_rate`] bytes: a client that reads, however slowly, cannot hold its
    /// connection much longer than one reading at a modest rate would.
    fn write(&mut self, response: &Response, head_only: bool, connection: Option<&str>) -> io::Result<()> {
        let size = if head_only { 0 } else { response.body.len() };
        let allowed = self.limits.write_timeout + Duration::from_secs((size / self.limits.write_rate.max(1)) as u64);
        let deadline = Instant::now() + allowed;
        let mut out = Deadlined { stream: &mut self.stream, deadline };
        write(&mut out, response, head_only, connection)
    }

    /// The next request's head, read within the limits.
    fn next(&mut self) -> Next {
        let waiting = Instant::now();
        // Empty lines before a request are ignored (RFC 9112 §2.2): a client's stray line end
        // after a body does not start the next head's deadline.
        let blank = self.buf.iter().take_while(|&&b| b == b'\r' || b == b'\n').count();
        self.buf.drain(..blank);
        // Bytes already here (pipelined) started the head.
        let mut started = (!self.buf.is_empty()).then_some(waiting);
        let mut fresh = true;
        let mut chunk = [0; 8192];
        loop {
            // A head can only end at a line's end, and only grows past the limit with new
            // bytes: parsing again only then keeps a head sent a byte at a time cheap.
            if fresh {
                match head::parse(&self.buf, self.limits.head_bytes) {
                    Ok(Some((head, len))) => return Next::Request(head, len),
                    Ok(None) => {}
                    Err(refused) => return Next::Refused(refused),
                }
            }
            let deadline = match started {
                Some(at) => at + self.limits.head_deadline,
                None => waiting + self.limits.idle,
            };
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() || self.stream.set_read_timeout(Some(left)).is_err() {
                return Next::Gone;
            }
            // One byte past the limit is enough to refuse the head: never more is held.
            let room = (self.limits.head_bytes + 1).saturating_sub(self.buf.len()).clamp(1, chunk.len());
            match self.stream.read(&mut chunk[..room]) {
                Ok(0) => return Next::Gone,
                Ok(n) => {
                    // A head's first bytes are parsed at once, so that a request line that is
                    // no request is refused before any line end.
                    fresh = self.buf.is_empty() || chunk[..n].contains(&b'\n');
                    self.buf.extend_from_slice(&chunk[..n]);
                    started.get_or_insert_with(Instant::now);
                    fresh |= self.buf.len() > self.limits.head_bytes;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => fresh = false,
                // A timeout (WouldBlock or TimedOut) or a failed socket.
                Err(_) => return Next::Gone,
            }
        }
    }

    /// The service's answer, computed in turn with the other connections'; a panic is
    /// answered 500.
    fn answer(&self, request: &Request) -> Response {
        let _turn = self.answering.acquire();
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.service.answer(request))).unwrap_or_else(
            |panic| {
                let why = crate::train::panic_message(panic.as_ref());
                self.service.failure(Some(&request.target), &Failure::Panic(why))
            },
        )
    }
}

/// A socket whose writes end at `deadline`, however they progress.
struct Deadlined<'a> {
    stream: &'a mut TcpStream,
    deadline: Instant,
}

impl Write for Deadlined<'_> {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        let left = self.deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::Error::new(io::ErrorKind::TimedOut, "the client read its answer too slowly"));
        }
        self.stream.set_write_timeout(Some(left))?;
        self.stream.write(bytes)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.stream.flush()
    }
}

/// Writes `response` (its head alone if `head_only`), with a `Connection` header if given:
/// the head, then the body as it is, uncopied.
fn write(out: &mut impl Write, response: &Response, head_only: bool, connection: Option<&str>) -> io::Result<()> {
    let mut head = Vec::with_capacity(256);
    write!(
        head,
        "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\n",
        response.status,
        reason(response.status),
        response.content_type,
        response.body.len()
    )?;
    for (name, value) in &response.headers {
        write!(head, "{name}: {value}\r\n")?;
    }
    if let Some(connection) = connection {
        write!(head, "Connection: {connection}\r\n")?;
    }
    head.extend_from_slice(b"\r\n");
    out.write_all(&head)?;
    if !head_only {
        out.write_all(&response.body)?;
    }
    out.flush()
}

/// Closes `stream` after its last answer. Closing a socket with unread bytes resets the
/// connection, which can destroy the answer before the client reads it (a client still
/// sending an oversized head, pipelined requests after a `Connection: close`). So the server
/// ends its side first, then reads and drops what the client still sends, until the client
/// closes or for at most [`LINGER`] and [`LINGER_BYTES`].
fn close(mut stream: TcpStream) {
    if stream.shutdown(Shutdown::Write).is_err() {
        return;
    }
    let until = Instant::now() + LINGER;
    let (mut sink, mut dropped) = ([0; 8192], 0);
    while dropped < LINGER_BYTES {
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() || stream.set_read_timeout(Some(left)).is_err() {
            return;
        }
        match stream.read(&mut sink) {
            Ok(0) => return,
            Ok(n) => dropped += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return,
        }
    }
}

/// The reason phrase of the statuses the dashboard answers with.
fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        _ => "",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{BufRead, BufReader};
    use std::net::SocketAddr;

    /// A service that answers a request with its target; `/big` with 1 MiB, `/huge` with
    /// 64 MiB (more than a socket's buffers hold), `/panic` with a panic.
    struct Echo;

    const BIG: usize = 1 << 20;

    impl Service for Echo {
        fn answer(&self, request: &Request) -> Response {
            let body = match request.target.as_str() {
                "/big" => vec![b'x'; BIG],
                "/huge" => vec![b'x'; 64 * BIG],
                "/panic" => panic!("a bug answering /panic"),
                target => target.as_bytes().to_vec(),
            };
            Response { status: 200, content_type: "text/plain", body, headers: vec![("X-Echo", "1")] }
        }
        fn failure(&self, _path: Option<&str>, failure: &Failure) -> Response {
            let body = failure.to_string().into_bytes();
            Response { status: failure.status(), content_type: "text/plain", body, headers: vec![] }
        }
    }

    /// A server of [`Echo`] on a free port of 127.0.0.1, serving until the tests end.
    fn start(limits: Limits) -> SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        std::thread::spawn(move || serve(listener, &limits, &Echo));
        addr
    }

    fn connect(addr: SocketAddr) -> TcpStream {
        let stream = TcpStream::connect(addr).unwrap();
        stream.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        stream
    }

    /// A response read off a connection.
    #[derive(Debug)]
    struct Answer {
        status: u16,
        headers: Vec<(String, String)>,
        body: Vec<u8>,
    }

    impl Answer {
        fn header(&self, name: &str) -> Option<&str> {
            self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
        }
        fn text(&self) -> String {
            String::from_utf8_lossy(&self.body).into_owned()
        }
    }

    /// The next response on `reader` (`None` at the end of the connection), its body as long
    /// as its `Content-Length`, none if `head_only`.
    fn read_answer(reader: &mut impl BufRead, head_only: bool) -> Option<Answer> {
        let mut line = String::new();
        if reader.read_line(&mut line).ok()? == 0 {
            return None;
        }
        let status = line.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or_else(|| panic!("{line:?}"));
        let mut headers = vec![];
        loop {
            line.clear();
            reader.read_line(&mut line).unwrap();
            let line = line.trim_end();
            if line.is_empty() {
                break;
            }
            let (name, value) = line.split_once(": ").unwrap_or_else(|| panic!("{line:?}"));
            headers.push((name.to_string(), value.to_string()));
        }
        let mut answer = Answer { status, headers, body: vec![] };
        let len: usize = answer.header("Content-Length").expect("a Content-Length").parse().unwrap();
        if !head_only {
            answer.body.resize(len, 0);
            reader.read_exact(&mut answer.body).unwrap();
        }
        Some(answer)
    }

    /// Sends `request` on a new connection: its answer, and whether the server closed the
    /// connection after it.
    fn exchange(addr: SocketAddr, request: &[u8]) -> (Answer, bool) {
        let mut stream = connect(addr);
        stream.write_all(request).unwrap();
        let mut reader = BufReader::new(stream);
        let answer = read_answer(&mut reader, false).expect("an answer");
        let closed = ends(reader.get_mut());
        (answer, closed)
    }

    /// Whether the server ends the connection (rather than leaving it open a second).
    fn ends(stream: &mut TcpStream) -> bool {
        stream.set_read_timeout(Some(Duration::from_secs(1))).unwrap();
        // A reset after the end (bytes the server did not read) is an end too.
        !matches!(stream.read(&mut [0; 1]), Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut))
    }

    /// A client streams a header line with no end (as much as 64 MiB): it is answered 431 after
    /// 16 KiB, and the server closes the connection while it is still sending, having held no
    /// more than the head (the rest of the 64 MiB never leaves the client).
    #[test]
    fn a_head_over_16_kib_gets_431_and_is_closed_while_the_client_still_sends() {
        let addr = start(Limits::default());
        let stream = connect(addr);
        let mut writer = stream.try_clone().unwrap();
        let sending = std::thread::spawn(move || {
            writer.write_all(b"GET /api/runs HTTP/1.1\r\nX-Long: ").unwrap();
            let line = [b'a'; 64 * 1024];
            let mut sent = 0;
            while sent < 64 << 20 {
                match writer.write(&line) {
                    Ok(n) => sent += n,
                    Err(_) => return (sent, true),
                }
            }
            (sent, false)
        });
        let mut reader = BufReader::new(stream);
        let answer = read_answer(&mut reader, false).expect("an answer while the client sends");
        assert_eq!(answer.status, 431, "{}", answer.text());
        assert_eq!(answer.header("Connection"), Some("close"));
        let (sent, stopped) = sending.join().unwrap();
        assert!(stopped && sent < 64 << 20, "the server closed after {sent} bytes sent");
    }

    #[test]
    fn sixty_five_headers_get_431() {
        let addr = start(Limits::default());
        let request = format!("GET / HTTP/1.1\r\n{}\r\n", "X-A: b\r\n".repeat(MAX_HEADERS + 1));
        let (answer, closed) = exchange(addr, request.as_bytes());
        assert_eq!((answer.status, closed), (431, true), "{}", answer.text());
    }

    /// Forty GETs sent at once on one connection: forty answers, in the order asked, and the
    /// connection stays open for more.
    #[test]
    fn forty_pipelined_gets_get_forty_answers_in_order() {
        let addr = start(Limits::default());
        let mut stream = connect(addr);
        let requests: String = (0..40).map(|i| format!("GET /{i} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")).collect();
        stream.write_all(requests.as_bytes()).unwrap();
        let mut reader = BufReader::new(stream);
        for i in 0..40 {
            let answer = read_answer(&mut reader, false).unwrap_or_else(|| panic!("answer {i} of 40"));
            assert_eq!((answer.status, answer.text()), (200, format!("/{i}")));
            assert_eq!(answer.header("Connection"), None, "kept");
        }
        reader.get_mut().write_all(b"GET /again HTTP/1.1\r\n\r\n").unwrap();
        assert_eq!(read_answer(&mut reader, false).unwrap().text(), "/again");
    }

    #[test]
    fn a_second_host_header_gets_400_and_is_closed() {
        let addr = start(Limits::default());
        let (answer, closed) = exchange(addr, b"GET /api/runs HTTP/1.1\r\nHost: 127.0.0.1\r\nHost: evil.com\r\n\r\n");
        assert_eq!((answer.status, closed), (400, true));
        assert!(answer.text().contains("more than one Host"), "{}", answer.text());
        assert_eq!(answer.header("Connection"), Some("close"));
    }

    #[test]
    fn bare_lf_line_endings_are_answered() {
        let addr = start(Limits::default());
        let (answer, closed) = exchange(addr, b"GET /lf HTTP/1.1\nHost: 127.0.0.1\nConnection: close\n\n");
        assert_eq!((answer.status, answer.text(), closed), (200, "/lf".to_string(), true));
    }

    #[test]
    fn non_utf8_bytes_in_the_path_get_400() {
        let addr = start(Limits::default());
        let (answer, closed) = exchange(addr, b"GET /api/run/\xff\xfe HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
        assert_eq!((answer.status, closed), (400, true), "{}", answer.text());
        assert!(answer.text().starts_with("malformed request"), "{}", answer.text());
    }

    #[test]
    fn a_get_with_a_body_gets_400_and_another_method_its_answer_and_both_are_closed() {
        let addr = start(Limits::default());
        let (answer, closed) = exchange(addr, b"GET /x HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc");
        assert_eq!((answer.status, closed), (400, true));
        let (answer, closed) =
            exchange(addr, b"POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n");
        assert_eq!((answer.status, answer.text(), closed), (200, "/x".to_string(), true), "the service's answer");
    }

    #[test]
    fn head_answers_with_the_gets_head_and_no_body() {
        let addr = start(Limits::default());
        let mut stream = connect(addr);
        stream.write_all(b"HEAD /big HTTP/1.1\r\n\r\nGET /after HTTP/1.1\r\n\r\n").unwrap();
        let mut reader = BufReader::new(stream);
        let head = read_answer(&mut reader, true).unwrap();
        assert_eq!((head.status, head.header("Content-Length")), (200, Some(BIG.to_string().as_str())));
        assert_eq!((head.header("Content-Type"), head.header("X-Echo")), (Some("text/plain"), Some("1")));
        // The next answer follows the head at once: no body was sent.
        assert_eq!(read_answer(&mut reader, false).unwrap().text(), "/after");
    }

    #[test]
    fn connection_close_and_http10_close_after_the_answer_and_http10_keep_alive_keeps() {
        let addr = start(Limits::default());
        let (answer, closed) = exchange(addr, b"GET /a HTTP/1.1\r\nConnection: close\r\n\r\n");
        assert_eq!((answer.text(), answer.header("Connection"), closed), ("/a".into(), Some("close"), true));
        let (answer, closed) = exchange(addr, b"GET /b HTTP/1.0\r\n\r\n");
        assert_eq!((answer.text(), answer.header("Connection"), closed), ("/b".into(), Some("close"), true));
        let (answer, closed) = exchange(addr, b"GET /c HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
        assert_eq!((answer.text(), answer.header("Connection"), closed), ("/c".into(), Some("keep-alive"), false));
    }

    /// A panic answering one request is a 500, and the next request on the same connection
    /// is answered.
    #[test]
    fn a_panic_is_answered_500_and_the_connection_keeps_serving() {
        let addr = start(Limits::default());
        let mut stream = connect(addr);
        stream.write_all(b"GET /panic HTTP/1.1\r\n\r\nGET /after HTTP/1.1\r\n\r\n").unwrap();
        let mut reader = BufReader::new(stream);
        let answer = read_answer(&mut reader, false).unwrap();
        assert_eq!(answer.status, 500);
        assert!(answer.text().contains("a bug answering /panic"), "{}", answer.text());
        assert_eq!(read_answer(&mut reader, false).unwrap().text(), "/after");
    }

    /// One client pipelines requests for 1 MiB answers and never reads them, behind a 4 KiB
    /// receive buffer; with one answer computed at a time and a minute's write timeout,
    /// another client is still answered at once: the stuck one holds its own thread only.
    #[test]
    fn a_client_that_never_reads_does_not_stop_another_being_answered() {
        let limits = Limits { answering: 1, write_timeout: Duration::from_secs(60), ..Limits::default() };
        let addr = start(limits);
        let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
        socket.set_recv_buffer_size(4096).unwrap();
        socket.connect(&addr.into()).unwrap();
        let mut stuck = TcpStream::from(socket);
        stuck.write_all(b"GET /big HTTP/1.1\r\n\r\n".repeat(50).as_slice()).unwrap();
        // Long enough for the stuck connection's answers to fill every buffer on the way.
        std::thread::sleep(Duration::from_millis(500));
        let started = Instant::now();
        let (answer, _) = exchange(addr, b"GET /other HTTP/1.1\r\nConnection: close\r\n\r\n");
        assert_eq!((answer.status, answer.text()), (200, "/other".to_string()));
        assert!(started.elapsed() < Duration::from_secs(5), "answered after {:?}", started.elapsed());
        drop(stuck);
    }

    /// With room for two connections, a third is answered 503 and closed; once one of the
    /// two goes, a new one is served.
    #[test]
    fn a_connection_over_the_cap_gets_503() {
        let addr = start(Limits { connections: 2, ..Limits::default() });
        let mut held: Vec<BufReader<TcpStream>> = (0..2)
            .map(|i| {
                let mut stream = connect(addr);
                // Answered, so its thread is running and counted.
                write!(stream, "GET /held{i} HTTP/1.1\r\n\r\n").unwrap();
                let mut reader = BufReader::new(stream);
                assert_eq!(read_answer(&mut reader, false).unwrap().status, 200);
                reader
            })
            .collect();
        let (answer, closed) = exchange(addr, b"GET /third HTTP/1.1\r\n\r\n");
        assert_eq!((answer.status, closed), (503, true), "{}", answer.text());
        assert_eq!(answer.header("Connection"), Some("close"));
        held.pop();
        let started = Instant::now();
        loop {
            let (answer, _) = exchange(addr, b"GET /later HTTP/1.1\r\nConnection: close\r\n\r\n");
            if answer.status == 200 {
                break;
            }
            assert!(started.elapsed() < Duration::from_secs(10), "the freed place was never given: {}", answer.status);
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// A head sent a byte every 50 ms (each read in time) is closed unanswered once its
    /// deadline passes; a connection that sends nothing is closed after the idle time.
    #[test]
    fn a_head_slower_than_its_deadline_and_an_idle_connection_are_closed_unanswered() {
        let limits =
            Limits { head_deadline: Duration::from_millis(300), idle: Duration::from_millis(300), ..Limits::default() };
        let addr = start(limits);
        let mut slow = connect(addr);
        let started = Instant::now();
        let mut closed_after = None;
        for byte in b"GET / HTTP/1.1\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa" {
            if slow.write_all(&[*byte]).is_err() {
                closed_after = Some(started.elapsed());
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let mut rest = vec![];
        let _ = slow.read_to_end(&mut rest);
        assert!(rest.is_empty(), "unanswered: {}", String::from_utf8_lossy(&rest));
        let elapsed = closed_after.unwrap_or_else(|| started.elapsed());
        assert!(elapsed < Duration::from_secs(3), "still open after {elapsed:?}");

        let mut idle = connect(addr);
        let started = Instant::now();
        let mut rest = vec![];
        let _ = idle.read_to_end(&mut rest);
        assert!(rest.is_empty() && started.elapsed() < Duration::from_secs(5), "{:?}", started.elapsed());
        assert!(started.elapsed() >= Duration::from_millis(250), "closed before its idle time");
    }

    /// A client that reads a 64 MiB answer a little at a time (more than the sockets'
    /// buffers hold) is cut off once the answer's time is spent (here 200 ms, with no
    /// allowance for its size), though every read makes progress.
    #[test]
    fn a_client_reading_its_answer_too_slowly_is_cut_off_at_the_answers_deadline() {
        let limits = Limits { write_timeout: Duration::from_millis(200), write_rate: usize::MAX, ..Limits::default() };
        let addr = start(limits);
        let mut slow = connect(addr);
        slow.write_all(b"GET /huge HTTP/1.1\r\n\r\n").unwrap();
        let started = Instant::now();
        let (mut got, mut chunk) = (0, vec![0; 256 * 1024]);
        loop {
            match slow.read(&mut chunk) {
                Ok(0) | Err(_) => break,
                Ok(n) => got += n,
            }
            assert!(started.elapsed() < Duration::from_secs(60), "still served after {got} bytes");
            std::thread::sleep(Duration::from_millis(20));
        }
        // At 256 KiB every 20 ms (12.8 MiB/s at most) the whole would take 5 s.
        assert!(got < 64 * BIG, "read it all in {:?}", started.elapsed());
    }

    /// The server's own answer to a HEAD (a refusal) has no body either.
    #[test]
    fn a_refused_head_gets_its_status_without_a_body() {
        let addr = start(Limits::default());
        let mut stream = connect(addr);
        stream.write_all(b"HEAD / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n").unwrap();
        let mut rest = vec![];
        stream.read_to_end(&mut rest).unwrap();
        let text = String::from_utf8_lossy(&rest);
        let (head, body) = text.split_once("\r\n\r\n").unwrap_or_else(|| panic!("{text}"));
        assert!(head.starts_with("HTTP/1.1 400") && head.contains("Content-Length: "), "{head}");
        assert!(body.is_empty(), "{body:?}");
    }

    /// A request line that is no request is refused as soon as it arrives, before any line end.
    #[test]
    fn bytes_that_are_no_request_get_400_without_waiting_for_a_line_end() {
        let addr = start(Limits::default());
        let mut stream = connect(addr);
        let started = Instant::now();
        stream.write_all(b"GAR\x01BAGE-NO-NEWLINE").unwrap();
        let mut reader = BufReader::new(stream);
        let answer = read_answer(&mut reader, false).expect("an answer");
        assert_eq!(answer.status, 400, "{}", answer.text());
        assert!(started.elapsed() < Duration::from_secs(5), "{:?}", started.elapsed());
    }
}
