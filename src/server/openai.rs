//! OpenAI's shapes for the server: parsing a `/v1/chat/completions` or `/v1/completions` body
//! with the protocol's rules (`crate::protocol`, shared with the JS engine), and building `chat.completion` / `text_completion` objects, stream chunks
//! and `usage` (extended with timings).

use serde_json::{json, Map, Value};

use super::errors::ApiError;
use crate::host::GenerateResult;
use crate::protocol::{logprobs_json, RequestLimits};

pub use crate::protocol::Kind;

impl Kind {
    pub fn object(self) -> &'static str {
        match self {
            Kind::Chat => "chat.completion",
            Kind::Completion => "text_completion",
        }
    }

    pub fn chunk_object(self) -> &'static str {
        match self {
            Kind::Chat => "chat.completion.chunk",
            Kind::Completion => "text_completion",
        }
    }

    pub fn id_prefix(self) -> &'static str {
        match self {
            Kind::Chat => "chatcmpl-",
            Kind::Completion => "cmpl-",
        }
    }
}

/// A validated request (the rules: `crate::protocol`).
pub type Parsed = crate::protocol::OpenAiRequest;

/// Limits a request must respect.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Most `max_tokens` a request may ask for (also the default when it asks for none).
    pub max_tokens: usize,
}

/// Parses and checks a request body with the protocol's rules; the server's `max_tokens` cap
/// is also the default.
pub fn parse(kind: Kind, body: &[u8], limits: Limits) -> Result<Parsed, ApiError> {
    let mut r = crate::protocol::parse_request_json(kind, body, RequestLimits { max_tokens: Some(limits.max_tokens) })?;
    r.gen.max_tokens = Some(r.gen.max_tokens.unwrap_or(limits.max_tokens));
    Ok(r)
}

/// `usage`, OpenAI's counts plus the engine's timings. `queue_ms`: time spent waiting for the
/// inference thread (not part of `ttft_ms`, which starts at the prompt's first forward pass).
/// `prompt_tokens_details.cached_tokens`: prompt tokens the server's KV cache already held
/// from the previous request (not prefilled again).
pub fn usage(r: &GenerateResult, queue_ms: f64) -> Value {
    json!({
        "prompt_tokens": r.prompt_tokens,
        "completion_tokens": r.completion_tokens,
        "total_tokens": r.prompt_tokens + r.completion_tokens,
        "prompt_tokens_details": { "cached_tokens": r.cached_tokens },
        "ttft_ms": r.ttft_ms,
        "tpot_ms": r.tpot_ms,
        "prefill_tokens_per_s": r.prefill_tokens_per_s,
        "decode_tokens_per_s": r.decode_tokens_per_s,
        "decode_weight_bytes_per_token": r.decode_weight_bytes_per_token,
        "decode_kv_bytes_last_token": r.decode_kv_bytes_last_token,
        "decode_bytes_per_token": r.decode_bytes_per_token,
        "decode_gb_s": r.decode_gb_s,
        "head": r.head,
        "queue_ms": queue_ms,
        // edgellm's extension (OpenAI's fields above are untouched): CPU time per phase from the
        // process's CPU clock and the energy estimate of the server's power model (crate::work).
        "compute": r.compute,
    })
}

/// What every object of one response shares.
#[derive(Clone, Debug)]
pub struct Envelope {
    pub kind: Kind,
    pub id: String,
    pub created: u64,
    pub model: String,
    /// The prompt's length in characters (completions: where `logprobs.text_offset` starts).
    pub prompt_chars: usize,
}

impl Envelope {
    /// The whole (non-streamed) response.
    pub fn completion(&self, r: &GenerateResult, usage: Value) -> Value {
        let (text, finish_reason) = (&r.text, r.finish_reason);
        let logprobs = r.logprobs.as_deref().map_or(Value::Null, |e| logprobs_json(self.kind, e, self.prompt_chars));
        let choice = match self.kind {
            Kind::Chat => json!({
                "index": 0,
                "message": { "role": "assistant", "content": text },
                "logprobs": logprobs,
                "finish_reason": finish_reason,
            }),
            Kind::Completion => json!({ "index": 0, "text": text, "logprobs": logprobs, "finish_reason": finish_reason }),
        };
        json!({
            "id": self.id,
            "object": self.kind.object(),
            "created": self.created,
            "model": self.model,
            "choices": [choice],
            "usage": usage,
        })
    }

    /// One stream chunk. `role`: the chat stream's first chunk announces the assistant;
    /// `logprobs`: the chunk's `logprobs` object (see `crate::protocol::logprobs_json`).
    pub fn chunk(&self, text: Option<&str>, role: bool, finish_reason: Option<&str>, logprobs: Option<Value>) -> Value {
        let logprobs = logprobs.unwrap_or(Value::Null);
        let choice = match self.kind {
            Kind::Chat => {
                let mut delta = Map::new();
                if role {
                    delta.insert("role".into(), "assistant".into());
                }
                if let Some(t) = text {
                    delta.insert("content".into(), t.into());
                }
                json!({ "index": 0, "delta": delta, "logprobs": logprobs, "finish_reason": finish_reason })
            }
            Kind::Completion => json!({ "index": 0, "text": text.unwrap_or(""), "logprobs": logprobs, "finish_reason": finish_reason }),
        };
        json!({
            "id": self.id,
            "object": self.kind.chunk_object(),
            "created": self.created,
            "model": self.model,
            "choices": [choice],
        })
    }

    /// The `stream_options.include_usage` chunk: no choices, only `usage`.
    pub fn usage_chunk(&self, usage: Value) -> Value {
        json!({
            "id": self.id,
            "object": self.kind.chunk_object(),
            "created": self.created,
            "model": self.model,
            "choices": [],
            "usage": usage,
        })
    }
}
