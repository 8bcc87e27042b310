//! A write timeout for each connection: a client that stops reading its response (the socket's
//! buffers full, every write pending) is disconnected after `timeout` without progress.
//!
//! Without it such a connection stays *busy* (see `conns`) for ever once its response is larger
//! than the socket buffers, and enough of them would hold every connection slot. A write that
//! makes any progress resets the clock, so a slow but reading client is never cut, and a long
//! generation that simply has nothing to send yet is not a pending write at all.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::{sleep, Sleep};

pub struct SendTimeout<S> {
    inner: S,
    timeout: Duration,
    /// Armed while a write or flush is pending; cleared by any progress.
    stalled: Option<Pin<Box<Sleep>>>,
}

impl<S> SendTimeout<S> {
    pub fn new(inner: S, timeout: Duration) -> SendTimeout<S> {
        SendTimeout { inner, timeout, stalled: None }
    }

    /// The one rule for every write and flush: progress (ready, ok or not) clears the clock; a
    /// pending one starts it and becomes a timeout error once the stall outlasts `timeout`.
    fn watch<T>(&mut self, cx: &mut Context<'_>, p: Poll<io::Result<T>>) -> Poll<io::Result<T>> {
        if p.is_ready() {
            self.stalled = None;
            return p;
        }
        let timeout = self.timeout;
        let deadline = self.stalled.get_or_insert_with(|| Box::pin(sleep(timeout)));
        match deadline.as_mut().poll(cx) {
            Poll::Ready(()) => {
                self.stalled = None;
                Poll::Ready(Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("the client read nothing of its response for {} s", timeout.as_secs_f64()),
                )))
            }
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for SendTimeout<S> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for SendTimeout<S> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let p = Pin::new(&mut self.inner).poll_write(cx, buf);
        self.watch(cx, p)
    }

    fn poll_write_vectored(mut self: Pin<&mut Self>, cx: &mut Context<'_>, bufs: &[io::IoSlice<'_>]) -> Poll<io::Result<usize>> {
        let p = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        self.watch(cx, p)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let p = Pin::new(&mut self.inner).poll_flush(cx);
        self.watch(cx, p)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{duplex, AsyncReadExt, AsyncWriteExt};

    fn rt() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap()
    }

    #[test]
    fn a_reader_that_stops_reading_is_cut_after_the_timeout() {
        rt().block_on(async {
            let (server, _client) = duplex(64); // the client never reads
            let mut w = SendTimeout::new(server, Duration::from_millis(50));
            let t0 = std::time::Instant::now();
            let err = w.write_all(&[7u8; 4096]).await.unwrap_err();
            assert_eq!(err.kind(), io::ErrorKind::TimedOut);
            assert!(t0.elapsed() >= Duration::from_millis(50));
        });
    }

    #[test]
    fn a_slow_reader_that_keeps_reading_is_never_cut() {
        // On tokio's paused clock: the reader's 10 ms gaps and the 40 ms timeout are virtual
        // time, so a loaded machine cannot stretch a gap past the timeout.
        let paused = tokio::runtime::Builder::new_current_thread().enable_time().start_paused(true).build().unwrap();
        paused.block_on(async {
            let (server, mut client) = duplex(64);
            let mut w = SendTimeout::new(server, Duration::from_millis(40));
            let reader = tokio::spawn(async move {
                let mut got = Vec::new();
                let mut buf = [0u8; 16];
                loop {
                    // 16 bytes every 10 ms: the whole 2 KiB takes far longer than the timeout.
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    let n = client.read(&mut buf).await.unwrap();
                    if n == 0 {
                        return got;
                    }
                    got.extend_from_slice(&buf[..n]);
                }
            });
            let data: Vec<u8> = (0..2048u32).map(|i| i as u8).collect();
            w.write_all(&data).await.unwrap();
            w.shutdown().await.unwrap();
            drop(w);
            assert_eq!(reader.await.unwrap(), data);
        });
    }
}
