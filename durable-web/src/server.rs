//! The standalone server: the dashboard on hyper's HTTP/1.1, on a tokio
//! runtime of its own (one thread that accepts connections and reads them,
//! and blocking threads that build pages from the store).
//!
//! A client is hostile until its request is whole, so what it can hold,
//! and for how long, is bounded:
//!
//! * **A connection** carries one request (no keep-alive: nothing a client
//!   sends after its request is read as another). Its head must arrive
//!   within [`HEADER_TIMEOUT`] and fit [`MAX_HEAD`] bytes (hyper answers
//!   431 otherwise); a `POST`'s body within [`BODY_TIMEOUT`] and
//!   [`MAX_BODY`] bytes (413 unread for a larger `Content-Length`, 408 for
//!   one that never comes); the whole exchange within
//!   [`CONNECTION_TIMEOUT`] (a client that never reads its answer). A body
//!   is never read beyond the limit, nor drained: the connection closes.
//! * **At most [`MAX_CONNECTIONS`]** connections are open at once; more
//!   wait in the system's listen backlog. A failed accept (out of file
//!   descriptors: `EMFILE`) is waited out, never the end of the server.
//! * **At most [`MAX_PAGES`]** pages are built at once (a page is the
//!   store's queries, on a blocking thread); one more is answered 503 at
//!   once. A panic in a page (a bug) is answered 500.

use std::convert::Infallible;
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use http_body_util::{BodyExt, Full, LengthLimitError, Limited};
use hyper::body::{Bytes, Incoming};
use hyper::header::{HeaderName, HeaderValue, CONTENT_LENGTH};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::sync::{watch, Semaphore};

use crate::dashboard::Dashboard;
use crate::http::{Request, Response};

/// The largest form body read (a verb's form is a few hundred bytes).
pub(crate) const MAX_BODY: usize = 64 * 1024;

/// The largest request head (the request line and the headers).
pub(crate) const MAX_HEAD: usize = 64 * 1024;

/// How long a client may take to send its request's head.
pub(crate) const HEADER_TIMEOUT: Duration = Duration::from_secs(5);

/// How long a client may take to send a `POST`'s body.
pub(crate) const BODY_TIMEOUT: Duration = Duration::from_secs(5);

/// How long a connection may stay open, its answer read included.
pub(crate) const CONNECTION_TIMEOUT: Duration = Duration::from_secs(60);

/// The most connections open at once.
pub(crate) const MAX_CONNECTIONS: usize = 512;

/// The most pages built at once.
pub(crate) const MAX_PAGES: usize = 16;

/// How long a failed accept (`EMFILE`, say) is waited out before the next.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);

/// A dashboard being served ([`Dashboard::serve`]); dropping it stops the
/// server.
pub struct Server {
    addr: SocketAddr,
    /// Dropped to stop the server.
    stop: Option<watch::Sender<()>>,
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
        drop(self.stop.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Dashboard {
    /// Serves the dashboard on `addr` (localhost, unless the application
    /// chooses otherwise: give it a [`token`](Dashboard::token) then), on
    /// threads of its own, with every client bounded in what it can hold
    /// and for how long (at most 512 connections, 16 pages built at once,
    /// a request's head within 5 s and 64 KiB, a form's body within 5 s and
    /// 64 KiB).
    ///
    /// # Errors
    ///
    /// The error of the bind (the address in use, say), or of making the
    /// server's runtime and thread.
    pub fn serve(self, addr: impl ToSocketAddrs) -> std::io::Result<Server> {
        let listener = std::net::TcpListener::bind(addr)?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .enable_time()
            .max_blocking_threads(MAX_PAGES)
            .thread_name("chronopool-durable-web-page")
            .build()?;
        let listener = {
            let _entered = runtime.enter();
            tokio::net::TcpListener::from_std(listener)?
        };
        let (stop, stopped) = watch::channel(());
        let dashboard = Arc::new(self);
        let thread = std::thread::Builder::new()
            .name("chronopool-durable-web".into())
            .spawn(move || {
                runtime.block_on(accept(listener, dashboard, stopped));
                // The connections still open are dropped with the runtime;
                // a page still waiting for the store ends on its own
                // thread, not waited for here.
                runtime.shutdown_background();
            })?;
        Ok(Server {
            addr,
            stop: Some(stop),
            thread: Some(thread),
        })
    }
}

/// Accepts connections until `stopped`'s sender is dropped, each served
/// on a task of its own.
async fn accept(
    listener: tokio::net::TcpListener,
    dashboard: Arc<Dashboard>,
    mut stopped: watch::Receiver<()>,
) {
    let connections = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let pages = Arc::new(Semaphore::new(MAX_PAGES));
    let mut http = http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(HEADER_TIMEOUT)
        .max_buf_size(MAX_HEAD)
        .keep_alive(false);
    loop {
        let permit = tokio::select! {
            permit = Arc::clone(&connections).acquire_owned() => match permit {
                Ok(permit) => permit,
                Err(_) => return,
            },
            _ = stopped.changed() => return,
        };
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(_) => {
                    // Out of file descriptors, or a connection reset
                    // before it was accepted: the listener is still good.
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                    continue;
                }
            },
            _ = stopped.changed() => return,
        };
        let (dashboard, pages) = (Arc::clone(&dashboard), Arc::clone(&pages));
        let connection = http.serve_connection(
            TokioIo::new(stream),
            service_fn(move |request| answer(request, Arc::clone(&dashboard), Arc::clone(&pages))),
        );
        tokio::spawn(async move {
            let _ = tokio::time::timeout(CONNECTION_TIMEOUT, connection).await;
            drop(permit);
        });
    }
}

/// Answers one request: its body read within the limits, its page built
/// on a blocking thread.
async fn answer(
    request: hyper::Request<Incoming>,
    dashboard: Arc<Dashboard>,
    pages: Arc<Semaphore>,
) -> Result<hyper::Response<Full<Bytes>>, Infallible> {
    let (parts, body) = request.into_parts();
    // Only a POST has a body worth reading, and only a small one: any
    // other is left unread, and the connection closes after the answer.
    let body = if parts.method == Method::POST {
        let declared = parts
            .headers
            .get(CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok());
        if declared.is_some_and(|n| n > MAX_BODY as u64) {
            return Ok(plain(413, "the body is too large"));
        }
        match tokio::time::timeout(BODY_TIMEOUT, Limited::new(body, MAX_BODY).collect()).await {
            Ok(Ok(collected)) => collected.to_bytes().to_vec(),
            Ok(Err(e)) if e.is::<LengthLimitError>() => {
                return Ok(plain(413, "the body is too large"))
            }
            Ok(Err(_)) => return Ok(plain(400, "the body was cut short")),
            Err(_) => return Ok(plain(408, "the body came too slowly")),
        }
    } else {
        Vec::new()
    };
    let Ok(page) = pages.try_acquire_owned() else {
        return Ok(plain(503, "busy"));
    };
    let ours = Request {
        method: parts.method.as_str().to_owned(),
        path: parts.uri.path().to_owned(),
        query: parts.uri.query().unwrap_or("").to_owned(),
        headers: parts
            .headers
            .iter()
            .map(|(name, value)| {
                (
                    name.as_str().to_owned(),
                    String::from_utf8_lossy(value.as_bytes()).into_owned(),
                )
            })
            .collect(),
        body,
    };
    let built = tokio::task::spawn_blocking(move || {
        let response = dashboard.handle(&ours);
        drop(page);
        response
    })
    .await;
    // A panic in a page (a bug) answers 500 instead of ending the server.
    Ok(match built {
        Ok(response) => reply(response),
        Err(_) => plain(500, "internal error"),
    })
}

/// The dashboard's `response`, for hyper.
fn reply(response: Response) -> hyper::Response<Full<Bytes>> {
    let mut reply = hyper::Response::new(Full::new(Bytes::from(response.body)));
    *reply.status_mut() =
        StatusCode::from_u16(response.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    for (name, value) in &response.headers {
        if let (Ok(name), Ok(value)) = (
            HeaderName::from_bytes(name.as_bytes()),
            HeaderValue::from_str(value),
        ) {
            reply.headers_mut().append(name, value);
        }
    }
    reply
}

/// A plain-text answer of the server's own.
fn plain(status: u16, text: &'static str) -> hyper::Response<Full<Bytes>> {
    reply(Response {
        status,
        headers: vec![("Content-Type".into(), "text/plain; charset=utf-8".into())],
        body: text.as_bytes().to_vec(),
    })
}
