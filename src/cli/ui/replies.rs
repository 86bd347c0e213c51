//! Writing the dashboard's responses so that a client that does not read its own holds up no
//! one else.
//!
//! tiny_http hands the workers every request of a connection as it reads it, pipelined ones
//! included, and writing a response waits for the response before it on that connection and
//! then for the client to take it. A client that sent requests and stopped reading would hold
//! every worker. So a request is first admitted ([`Replies::admit`]), its response computed,
//! and then written by a thread of its own. A socket gives up on a write after
//! [`WRITE_TIMEOUT`] (set on the listener: Linux copies it to each accepted socket).
//!
//! A connection whose write failed, or that has [`MAX_UNREAD`] responses admitted and not yet
//! written, is given up on: its later requests are dropped unanswered, without being computed
//! (its socket stays open, and the responses admitted before are still attempted). A browser
//! waits for each answer before it asks again on a connection, so only a client pipelining
//! requests it does not read gets there.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// How long a write waits for a client to read.
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(10);
/// The most responses a connection may have admitted and not yet written.
const MAX_UNREAD: usize = 16;
/// How long a given-up connection's address is remembered after its last request (to drop
/// what it still sends), once nothing of it is being written.
const FORGET_AFTER: Duration = Duration::from_secs(60);

/// The connections with responses admitted and not yet written.
#[derive(Clone, Default)]
pub struct Replies {
    connections: Arc<Mutex<HashMap<SocketAddr, Connection>>>,
}

#[derive(Default)]
struct Connection {
    unwritten: usize,
    /// When it was given up on, or last sent a request after that.
    given_up: Option<Instant>,
}

/// A request admitted: its response is to be computed and sent.
pub struct Admitted {
    replies: Replies,
    addr: Option<SocketAddr>,
}

impl Replies {
    /// Whether `request`'s connection may have it answered; a request refused is dropped
    /// unanswered here.
    pub fn admit(&self, request: tiny_http::Request) -> Option<(tiny_http::Request, Admitted)> {
        let Some(addr) = request.remote_addr().copied() else {
            return Some((request, Admitted { replies: self.clone(), addr: None }));
        };
        let mut connections = self.lock();
        connections.retain(|_, c| c.unwritten > 0 || c.given_up.is_none_or(|at| at.elapsed() < FORGET_AFTER));
        let connection = connections.entry(addr).or_default();
        if connection.unwritten >= MAX_UNREAD || connection.given_up.is_some() {
            connection.given_up = Some(Instant::now());
            drop(connections);
            unanswered(request);
            return None;
        }
        connection.unwritten += 1;
        Some((request, Admitted { replies: self.clone(), addr: Some(addr) }))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<SocketAddr, Connection>> {
        self.connections.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Counts a response of `addr`'s written, or failed.
    fn written(&self, addr: SocketAddr, failed: bool) {
        let mut connections = self.lock();
        if let Some(connection) = connections.get_mut(&addr) {
            connection.unwritten = connection.unwritten.saturating_sub(1);
            if failed {
                connection.given_up = Some(Instant::now());
            }
            if connection.unwritten == 0 && connection.given_up.is_none() {
                connections.remove(&addr);
            }
        }
    }
}

impl Admitted {
    /// Writes `response` to `request`'s connection on a thread of its own (tiny_http keeps a
    /// connection's responses in order).
    pub fn send(self, request: tiny_http::Request, response: tiny_http::ResponseBox) {
        let Some(addr) = self.addr else {
            let _ = request.respond(response);
            return;
        };
        std::thread::spawn(move || {
            // A client that went away, or does not read, is not the server's problem.
            let failed = request.respond(response).is_err();
            self.replies.written(addr, failed);
        });
    }
}

/// Lets a request go without writing to its connection (dropping a `Request` writes a 500,
/// which would wait on the client).
fn unanswered(request: tiny_http::Request) {
    drop(request.into_writer());
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(port: u16) -> tiny_http::Request {
        tiny_http::TestRequest::new().with_remote_addr(SocketAddr::from(([127, 0, 0, 1], port))).into()
    }

    /// A connection with 16 responses unwritten is given up on, and stays given up; another
    /// connection is not; one whose responses were all written starts afresh.
    #[test]
    fn a_connection_that_leaves_its_answers_unread_is_given_up_on() {
        let replies = Replies::default();
        let admitted: Vec<_> = (0..MAX_UNREAD).map(|_| replies.admit(request(1000)).expect("admitted")).collect();
        assert!(replies.admit(request(1000)).is_none(), "the 17th unread");
        assert!(replies.admit(request(2000)).is_some(), "another connection");
        for (_, a) in admitted {
            replies.written(a.addr.unwrap(), false);
        }
        assert!(replies.admit(request(1000)).is_none(), "given up on, it stays so");
        assert_eq!(replies.lock()[&SocketAddr::from(([127, 0, 0, 1], 1000))].unwritten, 0);

        let (_, a) = replies.admit(request(3000)).unwrap();
        replies.written(a.addr.unwrap(), false);
        assert!(!replies.lock().contains_key(&SocketAddr::from(([127, 0, 0, 1], 3000))), "forgotten once written");
        let (_, a) = replies.admit(request(3000)).unwrap();
        replies.written(a.addr.unwrap(), true);
        assert!(replies.admit(request(3000)).is_none(), "a failed write gives it up");
    }

    /// An admitted response is written, and its connection forgotten after it.
    #[test]
    fn an_admitted_response_is_written_and_counted() {
        let replies = Replies::default();
        let (req, admitted) = replies.admit(request(4000)).unwrap();
        admitted.send(req, tiny_http::Response::empty(200).boxed());
        let addr = SocketAddr::from(([127, 0, 0, 1], 4000));
        let start = Instant::now();
        while replies.lock().contains_key(&addr) {
            assert!(start.elapsed() < Duration::from_secs(30), "the write to a sink never ended");
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}
