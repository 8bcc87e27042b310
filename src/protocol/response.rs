//! OpenAI's response shapes, once for every host: the `chat.completion` / `text_completion`
//! object ([`Envelope::completion`]), the stream's chunks ([`ChunkStream`]: the role chunk, one
//! per step with text / `logprobs` / `delta.tool_calls`, the finish chunk and the
//! `include_usage` chunk), `usage` ([`usage`]) and the `logprobs` object ([`logprobs_json`]).
//! `edgellm serve` (src/server) builds its responses with them natively, the JS worker through
//! the wasm exports `OpenAiStream`, `openai_usage` and `openai_completion`; each host only adds
//! its own `usage` extensions (the server's `queue_ms`; the JS engine's `kv`, `memory`,
//! `compute.sustained` / `pressure`).
//!
//! They read a generation's result as JSON (`host::GenerateResult` serialized, the form the
//! worker has it in), so both hosts hand them the same thing.

use serde_json::{json, Map, Value};

use super::request::Kind;
use crate::generate::TokenLogprob;
use crate::tools::ToolCallDelta;

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Chat => "chat",
            Kind::Completion => "completion",
        }
    }

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

/// A choice's `logprobs` for `entries` (the tokens of the choice, or of one chunk).
///
/// Chat: `{content: [{token, logprob, bytes, top_logprobs: [{token, logprob, bytes}]}],
/// refusal: null}`. Completions (OpenAI's legacy shape): `{tokens, token_logprobs,
/// top_logprobs: [{token: logprob}], text_offset}`, where `text_offset` counts characters from
/// the start of the prompt: `offset` is where the first entry's text starts (the prompt's length
/// in characters for a whole response; further on for a later chunk).
pub fn logprobs_json(kind: Kind, entries: &[TokenLogprob], offset: usize) -> Value {
    match kind {
        Kind::Chat => json!({ "content": entries, "refusal": null }),
        Kind::Completion => {
            let mut at = offset;
            let mut text_offset = Vec::with_capacity(entries.len());
            for e in entries {
                text_offset.push(at);
                at += e.token.chars().count();
            }
            let top: Vec<Value> = entries
                .iter()
                .map(|e| Value::Object(e.top_logprobs.iter().map(|t| (t.token.clone(), json!(t.logprob))).collect::<Map<_, _>>()))
                .collect();
            json!({
                "tokens": entries.iter().map(|e| e.token.as_str()).collect::<Vec<_>>(),
                "token_logprobs": entries.iter().map(|e| e.logprob).collect::<Vec<_>>(),
                "top_logprobs": top,
                "text_offset": text_offset,
            })
        }
    }
}

/// OpenAI's usage fields, then the engine's timings and memory traffic, then `compute` (CPU
/// time and the energy estimate, edgellm's extension in one sub-object), from a result.
const USAGE_FIELDS: &[&str] = &[
    "ttft_ms",
    "tpot_ms",
    "prefill_tokens_per_s",
    "decode_tokens_per_s",
    "decode_weight_bytes_per_token",
    "decode_kv_bytes_last_token",
    "decode_bytes_per_token",
    "decode_gb_s",
    // Which output head the decode steps used (screened / full) and the candidate counts.
    "head",
    "compute",
];

/// `usage` of a result (`host::GenerateResult` as JSON): OpenAI's counts — `prompt_tokens`,
/// `completion_tokens`, `total_tokens`, `prompt_tokens_details.cached_tokens` (prompt tokens the
/// KV cache already held from the previous request) — plus [`USAGE_FIELDS`].
pub fn usage(result: &Value) -> Map<String, Value> {
    let n = |k: &str| result.get(k).and_then(Value::as_u64).unwrap_or(0);
    let mut u = Map::new();
    u.insert("prompt_tokens".into(), n("prompt_tokens").into());
    u.insert("completion_tokens".into(), n("completion_tokens").into());
    u.insert("total_tokens".into(), (n("prompt_tokens") + n("completion_tokens")).into());
    u.insert("prompt_tokens_details".into(), json!({ "cached_tokens": n("cached_tokens") }));
    for k in USAGE_FIELDS {
        if let Some(v) = result.get(*k) {
            u.insert((*k).into(), v.clone());
        }
    }
    u
}

/// What every object of one response shares.
#[derive(Clone, Debug, serde::Deserialize)]
pub struct Envelope {
    #[serde(deserialize_with = "kind_by_name")]
    pub kind: Kind,
    pub id: String,
    pub created: u64,
    pub model: String,
    /// The prompt's length in characters (completions: where `logprobs.text_offset` starts).
    #[serde(default)]
    pub prompt_chars: usize,
}

fn kind_by_name<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Kind, D::Error> {
    let s = <String as serde::Deserialize>::deserialize(d)?;
    Kind::from_name(&s).ok_or_else(|| serde::de::Error::custom(format!("unknown request kind {s:?}")))
}

impl Envelope {
    /// The whole (non-streamed) response for a result (`host::GenerateResult` as JSON).
    pub fn completion(&self, result: &Value, usage: Value) -> Value {
        let text = result.get("text").and_then(Value::as_str).unwrap_or("");
        let finish_reason = result.get("finish_reason").cloned().unwrap_or(Value::Null);
        let logprobs = match result.get("logprobs").filter(|l| !l.is_null()) {
            Some(l) => serde_json::from_value::<Vec<TokenLogprob>>(l.clone()).map_or(Value::Null, |e| logprobs_json(self.kind, &e, self.prompt_chars)),
            None => Value::Null,
        };
        let choice = match self.kind {
            Kind::Chat => {
                // With calls: `tool_calls`, and `content: null` unless there was text too.
                let mut message = json!({ "role": "assistant", "content": text });
                if let Some(calls) = result.get("tool_calls").filter(|c| !c.is_null()) {
                    message["tool_calls"] = calls.clone();
                    if text.is_empty() {
                        message["content"] = Value::Null;
                    }
                }
                json!({ "index": 0, "message": message, "logprobs": logprobs, "finish_reason": finish_reason })
            }
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
    /// `tool_calls`: the `delta.tool_calls` pieces; `logprobs`: the chunk's `logprobs` object.
    fn chunk(&self, text: Option<&str>, tool_calls: &[ToolCallDelta], role: bool, finish_reason: Option<&str>, logprobs: Option<Value>) -> Value {
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
                if !tool_calls.is_empty() {
                    delta.insert("tool_calls".into(), json!(one_per_call(tool_calls)));
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
    fn usage_chunk(&self, usage: Value) -> Value {
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

/// A step's call pieces with one entry per call (OpenAI's chunks never repeat an `index`): a
/// call's opening piece (id, name) and its first arguments, read in the same step, are one.
fn one_per_call(deltas: &[ToolCallDelta]) -> Vec<ToolCallDelta> {
    let mut out: Vec<ToolCallDelta> = Vec::with_capacity(deltas.len());
    for d in deltas {
        match out.iter_mut().find(|o| o.index == d.index) {
            Some(o) => {
                o.function.arguments.push_str(&d.function.arguments);
                o.id = o.id.take().or_else(|| d.id.clone());
                o.kind = o.kind.take().or_else(|| d.kind.clone());
                o.function.name = o.function.name.take().or_else(|| d.function.name.clone());
            }
            None => out.push(d.clone()),
        }
    }
    out
}

/// A streamed response's chunks, in order: [`start`](Self::start) (chat: the role chunk), one
/// [`step`](Self::step) per decode step that has something to send, then [`end`](Self::end):
/// the chunk with `finish_reason` and, with `include_usage`, exactly one more with
/// `choices: []` and `usage` (as OpenAI: every other chunk then has `usage: null`).
#[derive(Clone, Debug)]
pub struct ChunkStream {
    env: Envelope,
    include_usage: bool,
    /// Characters of prompt + text so far (completions' `logprobs.text_offset`).
    offset: usize,
}

impl ChunkStream {
    pub fn new(env: Envelope, include_usage: bool) -> ChunkStream {
        let offset = env.prompt_chars;
        ChunkStream { env, include_usage, offset }
    }

    pub fn envelope(&self) -> &Envelope {
        &self.env
    }

    /// The chat stream's first chunk (`delta: {role: 'assistant', content: ''}`); none for completions.
    pub fn start(&self) -> Option<Value> {
        (self.env.kind == Kind::Chat).then(|| self.usage_null(self.env.chunk(Some(""), &[], true, None, None)))
    }

    /// With `include_usage`, OpenAI's chunks before the usage chunk carry `usage: null`.
    fn usage_null(&self, mut chunk: Value) -> Value {
        if self.include_usage {
            chunk["usage"] = Value::Null;
        }
        chunk
    }

    /// The chunk of one step's text, log probabilities and call pieces (`None`: nothing to send).
    pub fn step(&mut self, text: &str, logprobs: &[TokenLogprob], tool_calls: &[ToolCallDelta]) -> Option<Value> {
        if text.is_empty() && logprobs.is_empty() && tool_calls.is_empty() {
            return None;
        }
        let lp = (!logprobs.is_empty()).then(|| logprobs_json(self.env.kind, logprobs, self.offset));
        self.offset += logprobs.iter().map(|e| e.token.chars().count()).sum::<usize>();
        let content = (!text.is_empty() || tool_calls.is_empty()).then_some(text);
        Some(self.usage_null(self.env.chunk(content, tool_calls, false, None, lp)))
    }

    /// The last chunks: `finish_reason`, then (with include_usage) the usage chunk.
    pub fn end(&self, finish_reason: &str, usage: Value) -> Vec<Value> {
        let mut out = vec![self.usage_null(self.env.chunk(None, &[], false, Some(finish_reason), None))];
        if self.include_usage {
            out.push(self.env.usage_chunk(usage));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::FunctionDelta;

    fn env(kind: &str) -> Envelope {
        serde_json::from_value(json!({"kind": kind, "id": "x-1", "created": 7, "model": "m", "prompt_chars": 3})).unwrap()
    }

    #[test]
    fn a_chat_stream_is_role_steps_finish_and_one_usage_chunk() {
        let mut s = ChunkStream::new(env("chat"), true);
        assert_eq!(s.start().unwrap()["choices"][0]["delta"], json!({"role": "assistant", "content": ""}));
        assert!(s.step("", &[], &[]).is_none(), "nothing to send");
        let c = s.step("Hi", &[], &[]).unwrap();
        assert_eq!((c["object"].as_str(), &c["choices"][0]["delta"]), (Some("chat.completion.chunk"), &json!({"content": "Hi"})));
        let call = ToolCallDelta { index: 0, id: Some("call_1".into()), kind: Some("function".into()), function: FunctionDelta { name: Some("f".into()), arguments: String::new() } };
        let args = |a: &str| ToolCallDelta { index: 0, id: None, kind: None, function: FunctionDelta { name: None, arguments: a.into() } };
        // A call's opening and its first arguments in one step: one entry, as OpenAI's chunks.
        let c = s.step("", &[], &[call, args("{\"a\""), args(": 1")]).unwrap();
        assert_eq!(c["choices"][0]["delta"], json!({"tool_calls": [{"index": 0, "id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{\"a\": 1"}}]}));
        assert_eq!(c["usage"], Value::Null, "with include_usage, every other chunk has usage: null");
        assert!(c.as_object().unwrap().contains_key("usage"));
        let end = s.end("tool_calls", json!({"total_tokens": 3}));
        assert_eq!(end.len(), 2);
        assert_eq!((&end[0]["choices"][0]["finish_reason"], end[0].get("usage")), (&json!("tool_calls"), Some(&Value::Null)));
        assert_eq!((&end[1]["choices"], &end[1]["usage"]["total_tokens"]), (&json!([]), &json!(3)));
        assert_eq!(ChunkStream::new(env("chat"), false).end("stop", json!({})).len(), 1, "usage only with include_usage");
        assert!(ChunkStream::new(env("chat"), false).end("stop", json!({}))[0].get("usage").is_none(), "no usage key without include_usage");
        // Completions: no role chunk, `text` per chunk.
        let mut s = ChunkStream::new(env("completion"), false);
        assert!(s.start().is_none());
        assert_eq!(s.step("abc", &[], &[]).unwrap()["choices"][0]["text"], "abc");
    }

    #[test]
    fn a_response_with_calls_has_null_content() {
        let r = json!({"text": "", "finish_reason": "tool_calls", "prompt_tokens": 5, "completion_tokens": 2, "cached_tokens": 1,
            "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}}], "compute": {"cpu_ms": {}}});
        let u = usage(&r);
        assert_eq!((&u["total_tokens"], &u["prompt_tokens_details"]), (&json!(7), &json!({"cached_tokens": 1})));
        let c = env("chat").completion(&r, Value::Object(u));
        let m = &c["choices"][0]["message"];
        assert_eq!((&m["content"], &m["tool_calls"][0]["function"]["name"]), (&Value::Null, &json!("f")));
        assert_eq!((&c["object"], &c["choices"][0]["finish_reason"]), (&json!("chat.completion"), &json!("tool_calls")));
        let t = env("completion").completion(&json!({"text": "ok", "finish_reason": "stop"}), json!({}));
        assert_eq!((&t["choices"][0]["text"], &t["choices"][0]["logprobs"]), (&json!("ok"), &Value::Null));
    }
}
