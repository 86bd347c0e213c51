//! Writing the dashboard's responses so that a client that does not read its own holds up no
//! one else.
//!
//! tiny_http hands the workers every request of a connection as it reads it, pipelined ones
//! included, and writing a response waits for the response before it on that connection and
//! then for the client to take it. A client that sent requests and stopped reading would hold
//! every worker. So the workers only compute responses, and each response is written by a
//! thread of its own. A socket gives up on a write after [`WRITE_TIMEOUT`] (set on the
//! listener: Linux copies it to each accepted socket). A connection whose write failed, or
//! that leaves [`MAX_UNREAD`] responses unread, has the rest of its requests dropped
//! unanswered.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// How long a write waits for a client to read.
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(10);
/// The most responses a connection may leave unread (a browser waits for each answer before
/// it asks again on the same connection; only a client pipelining requests gets near this).
const MAX_UNREAD: usize = 16;
/// How long a dropped connection's address is remembered, to drop requests it still sends.
const FORGET_AFTER: Duration = Duration::from_secs(60);

/// The connections with responses being written.
#[derive(Clone, Default)]
pub struct Replies {
    connections: Arc<Mutex<HashMap<SocketAddr, Connection>>>,
}

#[derive(Default)]
struct Connection {
    unwritten: usize,
    /// When it was given up on (a write failed, or too many responses were left unread).
    dropped: Option<Instant>,
}

impl Replies {
    /// Writes `response` to `request`'s connection, on a thread of its own (tiny_http keeps a
    /// connection's responses in order).
    pub fn send(&self, request: tiny_http::Request, response: tiny_http::ResponseBox) {
        let Some(addr) = request.remote_addr().copied() else {
            let _ = request.respond(response);
            return;
        };
        {
            let mut connections = self.connections.lock().unwrap_or_else(PoisonError::into_inner);
            connections.retain(|_, c| c.dropped.is_none_or(|at| at.elapsed() < FORGET_AFTER));
            let connection = connections.entry(addr).or_default();
            if connection.dropped.is_none() && connection.unwritten >= MAX_UNREAD {
                connection.dropped = Some(Instant::now());
            }
            if connection.dropped.is_some() {
                drop(connections);
                unanswered(request);
                return;
            }
            connection.unwritten += 1;
        }
        let replies = self.clone();
        std::thread::spawn(move || {
            // A client that went away, or does not read, is not the server's problem.
            let failed = request.respond(response).is_err();
            let mut connections = replies.connections.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some(connection) = connections.get_mut(&addr) {
                connection.unwritten -= 1;
                if failed && connection.dropped.is_none() {
                    connection.dropped = Some(Instant::now());
                }
                if connection.unwritten == 0 && connection.dropped.is_none() {
                    connections.remove(&addr);
                }
            }
        });
    }
}

/// Lets a request go without writing to its connection (dropping a `Request` writes a 500,
/// which would wait on the client).
fn unanswered(request: tiny_http::Request) {
    drop(request.into_writer());
}
