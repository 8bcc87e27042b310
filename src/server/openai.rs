//! OpenAI's request and response shapes: parsing a `/v1/chat/completions` or `/v1/completions`
//! body into the engine's [`GenerateRequest`] (with every rule checked and a typed error for the
//! first one broken), and building `chat.completion` / `text_completion` objects, stream chunks
//! and `usage` (extended with timings).

use serde_json::{json, Map, Value};

use super::errors::ApiError;
use crate::host::{GenerateRequest, GenerateResult};
use crate::tokenizer::ChatMessage;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Chat,
    Completion,
}

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

/// A validated request.
#[derive(Clone, Debug)]
pub struct Parsed {
    pub kind: Kind,
    pub gen: GenerateRequest,
    pub stream: bool,
    /// `stream_options.include_usage`: a last chunk with `choices: []` and `usage`.
    pub include_usage: bool,
}

/// Limits a request must respect.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Most `max_tokens` a request may ask for (also the default when it asks for none).
    pub max_tokens: usize,
}

fn bad(msg: impl Into<String>) -> ApiError {
    ApiError::invalid("invalid_value", msg)
}

fn number(o: &Map<String, Value>, name: &str, lo: f64, hi: f64) -> Result<Option<f64>, ApiError> {
    match o.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => {
            let v = n.as_f64().unwrap_or(f64::NAN);
            if v.is_finite() && v >= lo && v <= hi {
                Ok(Some(v))
            } else {
                Err(bad(format!("{name} must be in [{lo}, {hi}], got {v}")))
            }
        }
        Some(other) => Err(bad(format!("{name} must be a number, got {other}"))),
    }
}

fn integer(o: &Map<String, Value>, name: &str, lo: i64, hi: i64) -> Result<Option<i64>, ApiError> {
    match o.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => match n.as_i64() {
            Some(v) if v >= lo && v <= hi => Ok(Some(v)),
            _ => Err(bad(format!("{name} must be an integer in [{lo}, {hi}], got {n}"))),
        },
        Some(other) => Err(bad(format!("{name} must be an integer, got {other}"))),
    }
}

fn boolean(o: &Map<String, Value>, name: &str) -> Result<bool, ApiError> {
    match o.get(name) {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(other) => Err(bad(format!("{name} must be a boolean, got {other}"))),
    }
}

/// A message's `content`: a string, an array of `{type: "text", text}` parts, or null.
fn content_text(v: Option<&Value>, i: usize) -> Result<String, ApiError> {
    match v {
        None | Some(Value::Null) => Ok(String::new()),
        Some(Value::String(s)) => Ok(s.clone()),
        Some(Value::Array(parts)) => {
            let mut out = String::new();
            for (j, p) in parts.iter().enumerate() {
                match (p.get("type").and_then(Value::as_str), p.get("text").and_then(Value::as_str)) {
                    (Some("text"), Some(t)) => out.push_str(t),
                    _ => {
                        return Err(ApiError::invalid(
                            "unsupported_content",
                            format!("messages[{i}].content[{j}]: only text parts are supported"),
                        ))
                    }
                }
            }
            Ok(out)
        }
        Some(_) => Err(ApiError::invalid("invalid_messages", format!("messages[{i}].content must be a string or an array of text parts"))),
    }
}

/// Parses and checks a request body.
pub fn parse(kind: Kind, body: &[u8], limits: Limits) -> Result<Parsed, ApiError> {
    let v: Value = serde_json::from_slice(body).map_err(|e| ApiError::invalid("invalid_json", format!("the body is not valid JSON: {e}")))?;
    let o = v.as_object().ok_or_else(|| ApiError::invalid("invalid_json", "the body must be a JSON object"))?;
    let mut gen = GenerateRequest::default();
    match kind {
        Kind::Chat => {
            let msgs = o
                .get("messages")
                .and_then(Value::as_array)
                .filter(|m| !m.is_empty())
                .ok_or_else(|| ApiError::invalid("invalid_messages", "messages must be a non-empty array"))?;
            let mut out = Vec::with_capacity(msgs.len());
            for (i, m) in msgs.iter().enumerate() {
                let role = m
                    .get("role")
                    .and_then(Value::as_str)
                    .ok_or_else(|| ApiError::invalid("invalid_messages", format!("messages[{i}].role must be a string")))?;
                out.push(ChatMessage::new(role, &content_text(m.get("content"), i)?));
            }
            gen.kind = Some("chat".into());
            gen.messages = Some(out);
        }
        Kind::Completion => {
            let prompt = match o.get("prompt") {
                Some(Value::String(s)) => s.clone(),
                Some(Value::Array(a)) if a.len() == 1 && a[0].is_string() => a[0].as_str().unwrap().to_string(),
                Some(Value::Array(_)) => {
                    return Err(ApiError::invalid("unsupported_parameter", "prompt: only a string (or an array of one string) is supported"))
                }
                _ => return Err(ApiError::invalid("invalid_prompt", "prompt must be a string")),
            };
            gen.kind = Some("completion".into());
            gen.prompt = Some(prompt);
        }
    }
    if let Some(n) = integer(o, "n", 0, i64::MAX)? {
        if n != 1 {
            return Err(ApiError::invalid("unsupported_parameter", "n: only 1 choice per request is supported"));
        }
    }
    let max_tokens = match integer(o, "max_tokens", 1, i64::MAX)? {
        Some(v) => Some(v),
        None => integer(o, "max_completion_tokens", 1, i64::MAX)?,
    };
    if let Some(m) = max_tokens {
        if m as u64 > limits.max_tokens as u64 {
            return Err(ApiError::invalid(
                "max_tokens_exceeded",
                format!("max_tokens is {m}; this server allows at most {}", limits.max_tokens),
            ));
        }
    }
    gen.max_tokens = Some(max_tokens.map_or(limits.max_tokens, |m| m as usize));
    gen.temperature = number(o, "temperature", 0.0, 100.0)?.map(|v| v as f32);
    gen.top_p = number(o, "top_p", 0.0, 1.0)?.map(|v| v as f32);
    gen.top_k = integer(o, "top_k", 0, 1 << 20)?.map(|v| v as usize);
    gen.min_p = number(o, "min_p", 0.0, 1.0)?.map(|v| v as f32);
    gen.repetition_penalty = number(o, "repetition_penalty", 0.0, 10.0)?
        .or(number(o, "repeat_penalty", 0.0, 10.0)?)
        .map(|v| v as f32);
    gen.presence_penalty = number(o, "presence_penalty", -2.0, 2.0)?.map(|v| v as f32);
    gen.frequency_penalty = number(o, "frequency_penalty", -2.0, 2.0)?.map(|v| v as f32);
    gen.seed = integer(o, "seed", i64::MIN, i64::MAX)?.map(|v| v as u64);
    gen.stop = match o.get("stop") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(vec![s.clone()]),
        Some(Value::Array(a)) if a.len() <= 16 && a.iter().all(Value::is_string) => {
            Some(a.iter().map(|s| s.as_str().unwrap().to_string()).collect())
        }
        Some(_) => return Err(bad("stop must be a string or an array of at most 16 strings")),
    };
    // Extension: parse special-token text in user/tool contents (default: literal text).
    gen.raw_special_tokens = Some(boolean(o, "raw_special_tokens")?);
    let stream = boolean(o, "stream")?;
    let include_usage = match o.get("stream_options") {
        None | Some(Value::Null) => false,
        Some(Value::Object(so)) => boolean(so, "include_usage")?,
        Some(_) => return Err(bad("stream_options must be an object")),
    };
    Ok(Parsed { kind, gen, stream, include_usage })
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
}

impl Envelope {
    /// The whole (non-streamed) response.
    pub fn completion(&self, text: &str, finish_reason: &str, usage: Value) -> Value {
        let choice = match self.kind {
            Kind::Chat => json!({
                "index": 0,
                "message": { "role": "assistant", "content": text },
                "logprobs": null,
                "finish_reason": finish_reason,
            }),
            Kind::Completion => json!({ "index": 0, "text": text, "logprobs": null, "finish_reason": finish_reason }),
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

    /// One stream chunk. `role`: the chat stream's first chunk announces the assistant.
    pub fn chunk(&self, text: Option<&str>, role: bool, finish_reason: Option<&str>, usage: Option<Value>) -> Value {
        let choice = match self.kind {
            Kind::Chat => {
                let mut delta = Map::new();
                if role {
                    delta.insert("role".into(), "assistant".into());
                }
                if let Some(t) = text {
                    delta.insert("content".into(), t.into());
                }
                json!({ "index": 0, "delta": delta, "logprobs": null, "finish_reason": finish_reason })
            }
            Kind::Completion => json!({ "index": 0, "text": text.unwrap_or(""), "logprobs": null, "finish_reason": finish_reason }),
        };
        let mut c = json!({
            "id": self.id,
            "object": self.kind.chunk_object(),
            "created": self.created,
            "model": self.model,
            "choices": [choice],
        });
        if let Some(u) = usage {
            c["usage"] = u;
        }
        c
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
