//! A request's head (request line and headers) read from the bytes a connection has sent:
//! complete, not yet complete, or refused (malformed, over the limits, ambiguous, or carrying
//! a body the dashboard does not read).

use super::{Failure, MAX_HEADERS, Method, Request};

/// A complete request head.
#[derive(Debug)]
pub struct Head {
    pub request: Request,
    /// HTTP/1.0 (which closes after the answer unless it asks to keep the connection).
    pub http10: bool,
    /// Whether the connection stays for another request after the answer: not when the
    /// client asks to close it, nor after a body (never read).
    pub keep_alive: bool,
}

/// A request the server answers itself, with its path when the request line was read.
#[derive(Debug)]
pub struct Refused {
    pub failure: Failure,
    pub path: Option<String>,
    /// A HEAD: its answer has no body.
    pub head_only: bool,
}

/// The head at the front of `buf` and its length in bytes; `None` while it is incomplete and
/// within `limit` bytes.
pub fn parse(buf: &[u8], limit: usize) -> Result<Option<(Head, usize)>, Refused> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut request = httparse::Request::new(&mut headers);
    let parsed = request.parse(buf);
    // httparse fills in the method and path as it reads them, so a refusal can name the path;
    // a request line too long to read whole still names the start of its target.
    let refused = |failure, request: &httparse::Request| Refused {
        failure,
        path: request.path.map(str::to_string).or_else(|| target_start(buf)),
        head_only: request.method == Some("HEAD"),
    };
    match parsed {
        Ok(httparse::Status::Complete(len)) if len <= limit => match head(&request) {
            Ok(head) => Ok(Some((head, len))),
            Err(failure) => Err(refused(failure, &request)),
        },
        Ok(httparse::Status::Complete(_)) => Err(refused(Failure::HeadTooLarge(limit), &request)),
        Ok(httparse::Status::Partial) if buf.len() > limit => Err(refused(Failure::HeadTooLarge(limit), &request)),
        Ok(httparse::Status::Partial) => Ok(None),
        Err(httparse::Error::TooManyHeaders) => Err(refused(Failure::TooManyHeaders, &request)),
        Err(e) => Err(refused(Failure::Malformed(e), &request)),
    }
}

/// Most bytes of a target [`target_start`] keeps: enough to tell which part of the site a
/// request was for.
const TARGET_START: usize = 256;

/// The start of the target in a request line not read whole (`/api/runs?where=` of
/// `GET /api/runs?where=not+not+…`), its bytes that are not UTF-8 replaced.
fn target_start(buf: &[u8]) -> Option<String> {
    let after_method = &buf[buf.iter().position(|&b| b == b' ')? + 1..];
    let end = after_method.iter().position(|&b| b == b' ' || b == b'\r' || b == b'\n').unwrap_or(after_method.len());
    let target = &after_method[..end.min(TARGET_START)];
    (!target.is_empty()).then(|| String::from_utf8_lossy(target).into_owned())
}

/// The head of a request httparse read whole.
fn head(request: &httparse::Request) -> Result<Head, Failure> {
    // Complete, httparse has all three; a missing one is refused rather than trusted.
    let (Some(method), Some(path), Some(version)) = (request.method, request.path, request.version) else {
        return Err(Failure::Malformed(httparse::Error::Token));
    };
    let method = match method {
        "GET" => Method::Get,
        "HEAD" => Method::Head,
        other => Method::Other(other.to_string()),
    };
    let (mut host, mut hosts, mut body, mut close, mut keep) = (None, 0, false, false, false);
    for header in request.headers.iter() {
        let name = header.name;
        if name.eq_ignore_ascii_case("host") {
            hosts += 1;
            host = Some(std::str::from_utf8(header.value).map_err(|_| Failure::HostNotUtf8)?.trim().to_string());
        } else if name.eq_ignore_ascii_case("content-length") {
            // Digits only (no sign, no list): compared with 0 without parsing, so any length
            // is read without overflow.
            let length = header.value.trim_ascii();
            if length.is_empty() || !length.iter().all(u8::is_ascii_digit) {
                return Err(Failure::BadLength);
            }
            body |= length.iter().any(|&b| b != b'0');
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            body = true;
        } else if name.eq_ignore_ascii_case("connection") {
            for option in header.value.split(|&b| b == b',').map(<[u8]>::trim_ascii) {
                close |= option.eq_ignore_ascii_case(b"close");
                keep |= option.eq_ignore_ascii_case(b"keep-alive");
            }
        }
    }
    // Which of two Hosts the check reads would be a guess; a proxy may have read the other.
    if hosts > 1 {
        return Err(Failure::TwoHosts);
    }
    let http10 = version == 0;
    let reads = matches!(method, Method::Get | Method::Head);
    if body && reads {
        return Err(Failure::Body);
    }
    let keep_alive = !body && !close && (!http10 || keep);
    Ok(Head { request: Request { method, target: path.to_string(), host }, http10, keep_alive })
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMIT: usize = 16 * 1024;

    fn complete(text: &[u8]) -> (Head, usize) {
        match parse(text, LIMIT) {
            Ok(Some(head)) => head,
            Ok(None) => panic!("incomplete: {}", String::from_utf8_lossy(text)),
            Err(r) => panic!("refused ({}): {}", r.failure, String::from_utf8_lossy(text)),
        }
    }

    fn refused(text: &[u8]) -> Refused {
        match parse(text, LIMIT) {
            Err(r) => r,
            Ok(h) => panic!("not refused ({h:?}): {}", String::from_utf8_lossy(text)),
        }
    }

    #[test]
    fn a_head_is_read_with_its_length_and_what_follows_is_left() {
        let text = b"GET /api/runs?x=1 HTTP/1.1\r\nHost: 127.0.0.1:8\r\n\r\nGET /next";
        let (head, len) = complete(text);
        assert_eq!(&text[len..], b"GET /next");
        assert_eq!(head.request.method, Method::Get);
        assert_eq!(head.request.target, "/api/runs?x=1");
        assert_eq!(head.request.host.as_deref(), Some("127.0.0.1:8"));
        assert!(head.keep_alive && !head.http10);
        assert!(parse(b"GET /api/runs HTTP/1.1\r\nHost: a\r\n", LIMIT).unwrap().is_none(), "incomplete");
    }

    #[test]
    fn bare_lf_line_endings_are_read() {
        let (head, len) = complete(b"HEAD /x HTTP/1.1\nHost: localhost\n\n");
        assert_eq!((head.request.method, head.request.target.as_str(), len), (Method::Head, "/x", 34));
    }

    #[test]
    fn connection_options_and_the_version_decide_whether_the_connection_stays() {
        let keeps = |text: &[u8]| complete(text).0.keep_alive;
        assert!(!keeps(b"GET / HTTP/1.1\r\nConnection: Close\r\n\r\n"));
        assert!(!keeps(b"GET / HTTP/1.1\r\nConnection: upgrade, close\r\n\r\n"));
        assert!(!keeps(b"GET / HTTP/1.0\r\n\r\n"), "HTTP/1.0 closes by default");
        assert!(keeps(b"GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"));
        assert!(keeps(b"GET / HTTP/1.1\r\nContent-Length: 000\r\n\r\n"), "an empty body is no body");
    }

    #[test]
    fn a_head_over_the_limit_or_with_too_many_headers_is_refused_431_naming_its_path() {
        let mut long = b"GET /api/runs HTTP/1.1\r\nX: ".to_vec();
        long.resize(LIMIT + 1, b'a');
        let r = refused(&long);
        assert_eq!((r.failure.status(), r.path.as_deref()), (431, Some("/api/runs")));
        // A request line too long to read whole names the start of its target.
        let mut long_line = b"GET /api/runs?where=".to_vec();
        long_line.resize(LIMIT + 1, b'n');
        let r = refused(&long_line);
        assert!(r.path.as_deref().is_some_and(|p| p.starts_with("/api/runs?where=nnn") && p.len() == 256), "{r:?}");
        // Whole but over the limit: refused all the same.
        long.extend(b"\r\n\r\n");
        assert_eq!(refused(&long).failure.status(), 431);
        let many = format!("GET / HTTP/1.1\r\n{}\r\n", "A: b\r\n".repeat(MAX_HEADERS + 1));
        assert!(matches!(refused(many.as_bytes()).failure, Failure::TooManyHeaders));
        let enough = format!("GET / HTTP/1.1\r\n{}\r\n", "A: b\r\n".repeat(MAX_HEADERS));
        complete(enough.as_bytes());
    }

    #[test]
    fn malformed_ambiguous_and_bodied_requests_are_refused_400() {
        for (text, why) in [
            (&b"GET /caf\xc3\xa9\xff HTTP/1.1\r\n\r\n"[..], "a path that is not UTF-8"),
            (b"GET /a b HTTP/1.1\r\n\r\n", "a space in the path"),
            (b"G\x01T / HTTP/1.1\r\n\r\n", "a method that is not a token"),
            (b"GET / HTTP/2.0\r\n\r\n", "another version"),
            (b"GET / HTTP/1.1\r\nHo st: a\r\n\r\n", "a header name that is not a token"),
            (b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nHost: evil.com\r\n\r\n", "two Hosts"),
            (b"GET / HTTP/1.1\r\nHost: \xff\r\n\r\n", "a Host that is not UTF-8"),
            (b"GET / HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello", "a body"),
            (b"GET / HTTP/1.1\r\nContent-Length: -1\r\n\r\n", "a negative length"),
            (b"GET / HTTP/1.1\r\nContent-Length: 99999999999999999999999\r\n\r\n", "a huge length"),
            (b"HEAD / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", "a chunked body"),
        ] {
            let r = refused(text);
            assert_eq!(r.failure.status(), 400, "{why}: {}", r.failure);
        }
        let r = refused(b"GET /api/runs HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n");
        assert_eq!(r.path.as_deref(), Some("/api/runs"), "a refusal names the path it read");
    }

    /// Only a GET or HEAD is refused for its body: another method's answer (405) is the
    /// service's, and its connection closes after it.
    #[test]
    fn another_method_with_a_body_is_read_and_closes_after_its_answer() {
        let (head, _) = complete(b"POST /api/runs HTTP/1.1\r\nContent-Length: 2\r\n\r\n{}");
        assert_eq!(head.request.method, Method::Other("POST".into()));
        assert!(!head.keep_alive, "its body is never read");
    }
}
