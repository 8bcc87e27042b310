//! Server-sent events: a response body fed by the inference thread's events.
//!
//! Each event becomes one `data: <json>\n\n` frame; the stream ends with `data: [DONE]\n\n`.
//! A chat choice's first chunk carries its `role` (`crate::protocol::ChunkStream`); a chunk carries each choice's `finish_reason`; `usage` comes, exactly as OpenAI sends it, only with
//! `stream_options.include_usage` and only on one more chunk with `choices: []` (so code that
//! sums usage over the chunks counts it once). An error after the stream started is
//! sent as `data: {"error": {...}}` before `[DONE]` (OpenAI-compatible servers do the same).
//!
//! Dropping this body (hyper does when the client disconnects) drops the event receiver, which
//! the inference thread notices between steps.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use hyper::body::{Body, Frame};
use serde_json::Value;
use tokio::sync::mpsc;

use super::errors::ApiError;
use super::openai::{usage, Envelope};
use super::queue::Event;
use crate::protocol::ChunkStream;

/// One SSE frame.
pub fn frame(data: &Value) -> Bytes {
    Bytes::from(format!("data: {data}\n\n"))
}

pub fn done_frame() -> Bytes {
    Bytes::from_static(b"data: [DONE]\n\n")
}

pub struct SseBody {
    rx: mpsc::Receiver<Event>,
    /// The chunks, as the protocol shapes them (`crate::protocol::ChunkStream`).
    chunks: ChunkStream,
    out: VecDeque<Bytes>,
    finished: bool,
}

impl SseBody {
    /// Called after the `Started` event was received (the first chunk comes with the first
    /// step that has something to send).
    pub fn new(rx: mpsc::Receiver<Event>, env: Envelope, include_usage: bool) -> SseBody {
        let chunks = ChunkStream::new(env, include_usage);
        SseBody { rx, chunks, out: VecDeque::new(), finished: false }
    }

    fn render(&mut self, ev: Option<Event>) {
        match ev {
            Some(Event::Started { .. }) => {}
            Some(Event::Text(step)) => {
                for c in self.chunks.step(&step) {
                    self.out.push_back(frame(&c));
                }
            }
            Some(Event::Done { result, queue_ms }) => {
                for c in self.chunks.end(usage(&result, queue_ms)) {
                    self.out.push_back(frame(&c));
                }
                self.end();
            }
            Some(Event::Failed(e)) => {
                self.out.push_back(frame(&e.body()));
                self.end();
            }
            None => {
                // The inference thread dropped the job without a last word (it stopped).
                self.out.push_back(frame(&ApiError::internal("the generation ended without a result").body()));
                self.end();
            }
        }
    }

    fn end(&mut self) {
        self.out.push_back(done_frame());
        self.finished = true;
        self.rx.close();
    }
}

impl Body for SseBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        loop {
            if let Some(b) = self.out.pop_front() {
                return Poll::Ready(Some(Ok(Frame::data(b))));
            }
            if self.finished {
                return Poll::Ready(None);
            }
            match self.rx.poll_recv(cx) {
                Poll::Ready(ev) => self.render(ev),
                Poll::Pending => return Poll::Pending,
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.finished && self.out.is_empty()
    }
}
