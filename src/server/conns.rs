//! Open connections, and which may be closed to make room: slow clients cannot lock everyone
//! out.
//!
//! A connection is *busy* from the moment its request body has been read until its response
//! body has been sent (queued, generating, streaming); otherwise — sending headers, dribbling a
//! body, idle between keep-alive requests — it is *idle* and may be evicted. When all
//! `max_connections` slots are taken, a new connection evicts the oldest idle one; it is
//! refused only when every slot is busy, and busy connections are bounded by the queue. So 256
//! connections holding half-sent bodies cost an honest client one eviction, not a lock-out.
//! A refused connection is answered 503 `too_many_connections` with `Retry-After`
//! ([`answer_refused`]), so a client can tell "busy, retry" from a dead server.

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use http_body_util::{BodyExt, Limited};
use hyper::body::{Body, Frame, Incoming, SizeHint};
use hyper::header::{HeaderValue, CONNECTION};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::Notify;

use super::access::{allowed_origin, cors_headers};
use super::errors::ApiError;
use super::routes::error_response;

/// Refused connections being answered at once; past it a refused socket is closed unanswered.
/// Each answer is bounded in time and bytes, so refusals cannot hold more than this.
pub const MAX_REFUSALS: usize = 64;
/// The longest a refused connection is kept: its request head, a little of its body, the 503.
const REFUSAL_TIME: Duration = Duration::from_secs(5);
/// Request body read (and dropped) before the 503: closing a socket with unread bytes resets
/// the connection, and a reset can discard the answer before the client has read it.
const REFUSAL_DRAIN_BYTES: usize = 64 << 10;
const REFUSAL_DRAIN_TIME: Duration = Duration::from_secs(1);

#[derive(Debug, Default)]
pub struct Conn {
    /// Requests of this connection whose body was read and whose response is not yet sent.
    busy: AtomicUsize,
    closed: AtomicBool,
    evict: Notify,
}

impl Conn {
    /// Resolves when the registry evicts this connection.
    pub async fn evicted(&self) {
        self.evict.notified().await
    }

    pub fn close(&self) {
        self.closed.store(true, Ordering::Relaxed);
    }
}

/// The open connections, oldest first.
#[derive(Debug)]
pub struct Conns {
    max: usize,
    open: Mutex<VecDeque<Arc<Conn>>>,
}

impl Conns {
    pub fn new(max: usize) -> Conns {
        Conns { max: max.max(1), open: Mutex::new(VecDeque::new()) }
    }

    /// Registers a new connection, evicting the oldest idle one when all slots are taken;
    /// `None` when every slot is busy (the caller closes the socket).
    pub fn admit(&self) -> Option<Arc<Conn>> {
        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        open.retain(|c| !c.closed.load(Ordering::Relaxed));
        if open.len() >= self.max {
            let idle = open.iter().position(|c| c.busy.load(Ordering::Relaxed) == 0)?;
            if let Some(victim) = open.remove(idle) {
                victim.close();
                victim.evict.notify_one();
            }
        }
        let c = Arc::new(Conn::default());
        open.push_back(c.clone());
        Some(c)
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        let open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        open.iter().filter(|c| !c.closed.load(Ordering::Relaxed)).count()
    }
}

/// One request's mark on its connection (in the request's extensions): `read` marks the
/// connection busy once the body is in; the response body's [`Tracked`] wrapper unmarks it
/// when dropped (sent, or the connection gone).
#[derive(Debug)]
pub struct RequestMark {
    conn: Arc<Conn>,
    marked: AtomicBool,
}

impl RequestMark {
    pub fn new(conn: Arc<Conn>) -> Arc<RequestMark> {
        Arc::new(RequestMark { conn, marked: AtomicBool::new(false) })
    }

    /// The request is complete: from now on its connection is working, not idle.
    pub fn read(&self) {
        if !self.marked.swap(true, Ordering::Relaxed) {
            self.conn.busy.fetch_add(1, Ordering::Relaxed);
        }
    }
}

impl Drop for RequestMark {
    fn drop(&mut self) {
        if *self.marked.get_mut() {
            self.conn.busy.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

/// A response body that keeps its request's mark alive until it is dropped.
pub struct Tracked<B> {
    inner: B,
    _mark: Arc<RequestMark>,
}

impl<B> Tracked<B> {
    pub fn new(inner: B, mark: Arc<RequestMark>) -> Tracked<B> {
        Tracked { inner, _mark: mark }
    }
}

impl<B: Body + Unpin> Body for Tracked<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<B::Data>, B::Error>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// Answers one request on a refused connection with 503 `too_many_connections`
/// (`Retry-After`, `Connection: close`) and closes it; bounded by [`REFUSAL_TIME`]. An allowed
/// browser origin gets the CORS headers every answer carries, so the page sees the 503 and its
/// `Retry-After` instead of a network error.
pub async fn answer_refused<I>(io: I, max: usize, header_timeout: Duration, cors_origins: Arc<[String]>)
where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let svc = service_fn(move |req: hyper::Request<Incoming>| {
        let origin = allowed_origin(req.headers(), &cors_origins);
        async move {
            let _ = tokio::time::timeout(REFUSAL_DRAIN_TIME, Limited::new(req.into_body(), REFUSAL_DRAIN_BYTES).collect()).await;
            let mut r = error_response(&ApiError::too_many_connections(max));
            r.headers_mut().insert(CONNECTION, HeaderValue::from_static("close"));
            if let Some(o) = origin {
                cors_headers(r.headers_mut(), o);
            }
            Ok::<_, std::convert::Infallible>(r)
        }
    });
    let serve = http1::Builder::new().timer(TokioTimer::new()).header_read_timeout(header_timeout.min(REFUSAL_TIME)).keep_alive(false).serve_connection(TokioIo::new(io), svc);
    let _ = tokio::time::timeout(REFUSAL_TIME, serve).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_oldest_idle_connection_makes_room() {
        let c = Conns::new(2);
        let a = c.admit().unwrap();
        let b = c.admit().unwrap();
        let mark = RequestMark::new(a.clone());
        mark.read();
        // a is busy: b (idle) is evicted for the third.
        let _third = c.admit().unwrap();
        assert!(b.closed.load(Ordering::Relaxed) && !a.closed.load(Ordering::Relaxed));
        assert_eq!(c.len(), 2);
        // Both busy: refused.
        let m2 = RequestMark::new(_third.clone());
        m2.read();
        assert!(c.admit().is_none());
        // The mark dropped with its response: a is idle again.
        drop(mark);
        assert!(c.admit().is_some());
        assert!(a.closed.load(Ordering::Relaxed));
    }

    #[test]
    fn a_refused_connection_is_told_to_retry() {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            use tokio::io::{AsyncReadExt, AsyncWriteExt};
            let (server, mut client) = tokio::io::duplex(1 << 16);
            let task = tokio::spawn(answer_refused(server, 3, Duration::from_secs(10), Arc::from(vec!["http://app.test".to_string()])));
            let body = "{\"messages\":[]}";
            let req = format!("POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nOrigin: http://app.test\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}", body.len());
            client.write_all(req.as_bytes()).await.unwrap();
            let mut got = String::new();
            client.read_to_string(&mut got).await.unwrap();
            task.await.unwrap();
            let (head, json) = got.split_once("\r\n\r\n").unwrap();
            let head = head.to_ascii_lowercase();
            assert!(head.starts_with("http/1.1 503"), "{got}");
            assert!(head.contains("retry-after: 1") && head.contains("connection: close"), "{got}");
            assert!(head.contains("access-control-allow-origin: http://app.test") && head.contains("access-control-expose-headers: retry-after"), "{got}");
            let v: serde_json::Value = serde_json::from_str(json).unwrap();
            assert_eq!(v["error"]["code"], "too_many_connections");
            assert_eq!(v["error"]["type"], "server_error");
        });
    }
}
