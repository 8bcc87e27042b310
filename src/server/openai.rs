//! The server's side of OpenAI's protocol: parsing a `/v1/chat/completions` or
//! `/v1/completions` body with the protocol's rules and the server's cap, and `usage` with the
//! server's `queue_ms`. The response shapes themselves are the protocol's
//! (`crate::protocol::response`, shared with the JS engine).

use serde_json::{json, Value};

use super::errors::ApiError;
use crate::host::GenerateResult;
use crate::protocol::RequestLimits;

pub use crate::protocol::{Envelope, Kind};

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

/// `usage` (the protocol's: OpenAI's counts, the engine's timings, `compute`) plus the server's
/// `queue_ms`: time spent waiting for the inference thread (not part of `ttft_ms`, which starts
/// at the prompt's first forward pass).
pub fn usage(r: &GenerateResult, queue_ms: f64) -> Value {
    let mut u = crate::protocol::usage(&result_json(r));
    u.insert("queue_ms".into(), json!(queue_ms));
    Value::Object(u)
}

/// A result as the protocol's response shapes read it (the form the JS worker has it in too).
pub fn result_json(r: &GenerateResult) -> Value {
    serde_json::to_value(r).unwrap_or_default()
}
