//! The standalone server: the dashboard on a `tiny_http` server of its
//! own, on threads of its own.

use std::io::Read;
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use crate::dashboard::Dashboard;
use crate::http::Request;

/// The largest form body read (a verb's form is a few hundred bytes).
const MAX_BODY: usize = 64 * 1024;

/// The most requests answered at once, each on a thread of its own: a
/// client that sends a body slowly holds its thread only, and one more
/// than this is answered 503 at once.
const MAX_AT_ONCE: usize = 16;

/// A dashboard being served ([`Dashboard::serve`]); dropping it stops the
/// server.
pub struct Server {
    server: Arc<tiny_http::Server>,
    addr: SocketAddr,
    thread: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

impl Server {
    /// The address it listens on (with the port the system chose, for a
    /// bind to port 0).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Serves until the process ends.
    pub fn join(mut self) {
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.server.unblock();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Dashboard {
    /// Serves the dashboard on `addr` (localhost, unless the application
    /// chooses otherwise: give it a [`token`](Dashboard::token) then), each
    /// request on a thread of its own, at most 16 at once.
    ///
    /// # Errors
    ///
    /// The error of the bind (the address in use, say).
    pub fn serve(self, addr: impl ToSocketAddrs) -> std::io::Result<Server> {
        let server = tiny_http::Server::http(addr).map_err(std::io::Error::other)?;
        let addr = server
            .server_addr()
            .to_ip()
            .ok_or_else(|| std::io::Error::other("not an IP address"))?;
        let server = Arc::new(server);
        let serving = Arc::clone(&server);
        let dashboard = Arc::new(self);
        let thread = std::thread::Builder::new()
            .name("chronopool-durable-web".into())
            .spawn(move || {
                let at_once = Arc::new(AtomicUsize::new(0));
                for request in serving.incoming_requests() {
                    if at_once.fetch_add(1, Ordering::SeqCst) >= MAX_AT_ONCE {
                        at_once.fetch_sub(1, Ordering::SeqCst);
                        let busy = tiny_http::Response::from_string("busy").with_status_code(503);
                        let _ = request.respond(busy);
                        continue;
                    }
                    let (dashboard, done) = (Arc::clone(&dashboard), Arc::clone(&at_once));
                    let spawned = std::thread::Builder::new()
                        .name("chronopool-durable-web-request".into())
                        .spawn(move || {
                            answer(&dashboard, request);
                            done.fetch_sub(1, Ordering::SeqCst);
                        });
                    if spawned.is_err() {
                        at_once.fetch_sub(1, Ordering::SeqCst);
                    }
                }
            })?;
        Ok(Server {
            server,
            addr,
            thread: Some(thread),
        })
    }
}

fn answer(dashboard: &Dashboard, mut request: tiny_http::Request) {
    let url = request.url().to_owned();
    let (path, query) = url.split_once('?').unwrap_or((&url, ""));
    // Only a POST has a body worth reading, and only a small one.
    let mut body = Vec::new();
    if request.method() == &tiny_http::Method::Post {
        if request.body_length().is_some_and(|n| n > MAX_BODY) {
            let _ = request.respond(tiny_http::Response::empty(413));
            return;
        }
        let _ = request
            .as_reader()
            .take(MAX_BODY as u64)
            .read_to_end(&mut body);
    }
    let ours = Request {
        method: request.method().as_str().to_owned(),
        path: path.to_owned(),
        query: query.to_owned(),
        headers: request
            .headers()
            .iter()
            .map(|h| {
                (
                    h.field.as_str().as_str().to_owned(),
                    h.value.as_str().to_owned(),
                )
            })
            .collect(),
        body,
    };
    // A panic in a page (a bug) answers 500 instead of ending the server.
    let response =
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| dashboard.handle(&ours)));
    let response = match response {
        Ok(r) => r,
        Err(_) => crate::http::Response {
            status: 500,
            headers: Vec::new(),
            body: b"internal error".to_vec(),
        },
    };
    let mut reply = tiny_http::Response::from_data(response.body).with_status_code(response.status);
    for (name, value) in &response.headers {
        if let Ok(h) = tiny_http::Header::from_bytes(name.as_bytes(), value.as_bytes()) {
            reply.add_header(h);
        }
    }
    let _ = request.respond(reply);
}
