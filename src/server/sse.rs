//! Server-sent events: a response body fed by the inference thread's events.
//!
//! Each event becomes one `data: <json>\n\n` frame; the stream ends with `data: [DONE]\n\n`.
//! Chat streams start with a chunk whose delta holds only `role`; a chunk carries
//! `finish_reason`; `usage` comes, exactly as OpenAI sends it, only with
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
use super::openai::{usage, Envelope, Kind};
use crate::protocol::logprobs_json;
use super::queue::Event;

/// One SSE frame.
pub fn frame(data: &Value) -> Bytes {
    Bytes::from(format!("data: {data}\n\n"))
}

pub fn done_frame() -> Bytes {
    Bytes::from_static(b"data: [DONE]\n\n")
}

pub struct SseBody {
    rx: mpsc::UnboundedReceiver<Event>,
    env: Envelope,
    include_usage: bool,
    out: VecDeque<Bytes>,
    finished: bool,
    /// Characters of prompt + text sent so far (completions' `logprobs.text_offset`).
    offset: usize,
}

impl SseBody {
    /// Called after the `Started` event was received (it is rendered here as the first chunk).
    pub fn new(rx: mpsc::UnboundedReceiver<Event>, env: Envelope, include_usage: bool) -> SseBody {
        let mut out = VecDeque::new();
        if env.kind == Kind::Chat {
            out.push_back(frame(&env.chunk(Some(""), &[], true, None, None)));
        }
        let offset = env.prompt_chars;
        SseBody { rx, env, include_usage, out, finished: false, offset }
    }

    fn render(&mut self, ev: Option<Event>) {
        match ev {
            Some(Event::Started { .. }) => {}
            Some(Event::Text { text, logprobs, tool_calls }) => {
                let lp = (!logprobs.is_empty()).then(|| logprobs_json(self.env.kind, &logprobs, self.offset));
                self.offset += logprobs.iter().map(|e| e.token.chars().count()).sum::<usize>();
                let content = (!text.is_empty() || tool_calls.is_empty()).then_some(text.as_str());
                self.out.push_back(frame(&self.env.chunk(content, &tool_calls, false, None, lp)));
            }
            Some(Event::Done { result, queue_ms }) => {
                self.out.push_back(frame(&self.env.chunk(None, &[], false, Some(result.finish_reason), None)));
                if self.include_usage {
                    self.out.push_back(frame(&self.env.usage_chunk(usage(&result, queue_ms))));
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
