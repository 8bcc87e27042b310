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
/// in characters for a whole response; further on for a later chunk), and moves past `entries`.
pub fn logprobs_json(kind: Kind, entries: &[TokenLogprob], offset: &mut TextOffset) -> Value {
    match kind {
        Kind::Chat => json!({ "content": entries, "refusal": null }),
        Kind::Completion => {
            let mut text_offset = Vec::with_capacity(entries.len());
            for e in entries {
                text_offset.push(offset.at());
                offset.push(&e.bytes);
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

/// A position in characters of the text that tokens' bytes decode to (completions'
/// `text_offset`). A token may hold part of a character: its text starts where that character
/// does, and the character counts once it is whole (an invalid sequence counts as the one
/// U+FFFD it decodes to, as in the text).
#[derive(Clone, Debug, Default)]
pub struct TextOffset {
    chars: usize,
    /// The bytes of a character not yet whole.
    pending: Vec<u8>,
}

impl TextOffset {
    pub fn new(start: usize) -> TextOffset {
        TextOffset { chars: start, pending: Vec::new() }
    }

    pub fn at(&self) -> usize {
        self.chars
    }

    pub fn push(&mut self, bytes: &[u8]) {
        self.pending.extend_from_slice(bytes);
        loop {
            match std::str::from_utf8(&self.pending) {
                Ok(s) => {
                    self.chars += s.chars().count();
                    self.pending.clear();
                    return;
                }
                Err(e) => {
                    let valid = e.valid_up_to();
                    self.chars += std::str::from_utf8(&self.pending[..valid]).map_or(0, |s| s.chars().count());
                    match e.error_len() {
                        Some(bad) => {
                            self.chars += 1;
                            self.pending.drain(..valid + bad);
                        }
                        None => {
                            self.pending.drain(..valid);
                            return;
                        }
                    }
                }
            }
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
    /// The whole (non-streamed) response for a result (`host::GenerateResult` as JSON): its
    /// `choices` (OpenAI's `n`), or the result itself as the one choice.
    pub fn completion(&self, result: &Value, usage: Value) -> Value {
        let choices: Vec<Value> = match result.get("choices").and_then(Value::as_array) {
            Some(cs) => cs.iter().enumerate().map(|(i, c)| self.choice(c, i)).collect(),
            None => vec![self.choice(result, 0)],
        };
        json!({
            "id": self.id,
            "object": self.kind.object(),
            "created": self.created,
            "model": self.model,
            "choices": choices,
            "usage": usage,
        })
    }

    /// `choices[index]` of a whole response, from a choice's text, finish_reason, logprobs and
    /// tool_calls.
    fn choice(&self, c: &Value, index: usize) -> Value {
        let text = c.get("text").and_then(Value::as_str).unwrap_or("");
        let finish_reason = c.get("finish_reason").cloned().unwrap_or(Value::Null);
        let logprobs = match c.get("logprobs").filter(|l| !l.is_null()) {
            Some(l) => serde_json::from_value::<Vec<TokenLogprob>>(l.clone()).map_or(Value::Null, |e| logprobs_json(self.kind, &e, &mut TextOffset::new(self.prompt_chars))),
            None => Value::Null,
        };
        match self.kind {
            Kind::Chat => {
                // With calls: `tool_calls`, and `content: null` unless there was text too.
                let mut message = json!({ "role": "assistant", "content": text });
                if let Some(calls) = c.get("tool_calls").filter(|c| !c.is_null()) {
                    message["tool_calls"] = calls.clone();
                    if text.is_empty() {
                        message["content"] = Value::Null;
                    }
                }
                json!({ "index": index, "message": message, "logprobs": logprobs, "finish_reason": finish_reason })
            }
            Kind::Completion => json!({ "index": index, "text": text, "logprobs": logprobs, "finish_reason": finish_reason }),
        }
    }

    /// One stream chunk of choice `index`. `content`: chat, `delta.content` (absent, a string,
    /// or null), completions, `text` ("" unless a string); `role`: the chat stream's first
    /// chunk of a choice announces the assistant; `tool_calls`: the `delta.tool_calls` pieces;
    /// `logprobs`: the chunk's `logprobs` object.
    fn chunk(&self, index: usize, content: Option<Value>, tool_calls: &[ToolCallDelta], role: bool, finish_reason: Option<&str>, logprobs: Option<Value>) -> Value {
        let logprobs = logprobs.unwrap_or(Value::Null);
        let choice = match self.kind {
            Kind::Chat => {
                let mut delta = Map::new();
                if role {
                    delta.insert("role".into(), "assistant".into());
                }
                if let Some(c) = content {
                    delta.insert("content".into(), c);
                }
                if !tool_calls.is_empty() {
                    delta.insert("tool_calls".into(), json!(one_per_call(tool_calls)));
                }
                json!({ "index": index, "delta": delta, "logprobs": logprobs, "finish_reason": finish_reason })
            }
            Kind::Completion => json!({ "index": index, "text": content.as_ref().and_then(Value::as_str).unwrap_or(""), "logprobs": logprobs, "finish_reason": finish_reason }),
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

/// A streamed response's chunks, in order: [`step`](Self::step) per decode step — a chat
/// choice's first chunk carries its role, a choice's last step closes with its `finish_reason`
/// chunk — then [`end`](Self::end): with `include_usage`, exactly one more chunk with
/// `choices: []` and `usage` (as OpenAI: every other chunk then has `usage: null`).
///
/// The role goes out with a choice's first step that has something to send, as OpenAI's: an
/// answer that opens with text gets `{role, content: ""}` first, one that opens with a tool
/// call gets `{role, content: null, tool_calls}` (so an SDK that adds the deltas up ends with
/// `content: null`, as the whole response has).
#[derive(Clone, Debug)]
pub struct ChunkStream {
    env: Envelope,
    include_usage: bool,
    /// The choice of the last step (OpenAI's `n`: the choices come one after the other).
    choice: usize,
    /// Whether that choice's first chunk went out.
    opened: bool,
    /// Characters of prompt + the choice's text so far (completions' `logprobs.text_offset`).
    offset: TextOffset,
}

/// One decode step as a stream reads it: `host::StepEvent`'s fields (JSON from the worker).
#[derive(Clone, Debug, Default, serde::Deserialize)]
pub struct StepChunk {
    #[serde(default)]
    pub choice: usize,
    #[serde(default)]
    pub text: String,
    #[serde(default)]
    pub logprobs: Vec<TokenLogprob>,
    #[serde(default)]
    pub tool_calls: Vec<ToolCallDelta>,
    /// Set on the choice's last step: its OpenAI `finish_reason`.
    #[serde(default, rename = "choice_finish_reason")]
    pub finish_reason: Option<String>,
}

impl ChunkStream {
    pub fn new(env: Envelope, include_usage: bool) -> ChunkStream {
        let offset = TextOffset::new(env.prompt_chars);
        ChunkStream { env, include_usage, choice: 0, opened: false, offset }
    }

    pub fn envelope(&self) -> &Envelope {
        &self.env
    }

    /// With `include_usage`, OpenAI's chunks before the usage chunk carry `usage: null`.
    fn usage_null(&self, mut chunk: Value) -> Value {
        if self.include_usage {
            chunk["usage"] = Value::Null;
        }
        chunk
    }

    /// The chunks of one step (none when it has nothing to send): the step's text, log
    /// probabilities and call pieces — on a chat choice's first chunk, with its role (before
    /// text, a chunk of its own) — and the choice's `finish_reason` chunk on its last step.
    pub fn step(&mut self, s: &StepChunk) -> Vec<Value> {
        let mut out = Vec::new();
        if s.choice != self.choice {
            self.choice = s.choice;
            self.opened = false;
            self.offset = TextOffset::new(self.env.prompt_chars);
        }
        let body = !(s.text.is_empty() && s.logprobs.is_empty() && s.tool_calls.is_empty());
        if !body && s.finish_reason.is_none() {
            return out;
        }
        let role = self.env.kind == Kind::Chat && !self.opened;
        self.opened = true;
        // A call answer's first chunk: the role, `content: null` and the calls, in one.
        let calls_first = role && s.text.is_empty() && !s.tool_calls.is_empty();
        if role && !calls_first {
            out.push(self.usage_null(self.env.chunk(s.choice, Some("".into()), &[], true, None, None)));
        }
        if body {
            let lp = (!s.logprobs.is_empty()).then(|| logprobs_json(self.env.kind, &s.logprobs, &mut self.offset));
            let content = if calls_first { Some(Value::Null) } else { (!s.text.is_empty() || s.tool_calls.is_empty()).then(|| s.text.as_str().into()) };
            out.push(self.usage_null(self.env.chunk(s.choice, content, &s.tool_calls, calls_first, None, lp)));
        }
        if let Some(f) = s.finish_reason.as_deref() {
            out.push(self.usage_null(self.env.chunk(s.choice, None, &[], false, Some(f), None)));
        }
        out
    }

    /// The last chunk, with `include_usage`: `choices: []` and `usage`.
    pub fn end(&self, usage: Value) -> Vec<Value> {
        if self.include_usage {
            vec![self.env.usage_chunk(usage)]
        } else {
            Vec::new()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::FunctionDelta;

    fn env(kind: &str) -> Envelope {
        serde_json::from_value(json!({"kind": kind, "id": "x-1", "created": 7, "model": "m", "prompt_chars": 3})).unwrap()
    }

    fn text(choice: usize, t: &str, finish: Option<&str>) -> StepChunk {
        StepChunk { choice, text: t.into(), finish_reason: finish.map(str::to_string), ..Default::default() }
    }

    #[test]
    fn a_chat_stream_is_role_steps_finish_and_one_usage_chunk() {
        let mut s = ChunkStream::new(env("chat"), true);
        assert!(s.step(&text(0, "", None)).is_empty(), "nothing to send");
        let mut c = s.step(&text(0, "Hi", None));
        assert_eq!(c.len(), 2, "the role chunk, then the text");
        assert_eq!(c[0]["choices"][0]["delta"], json!({"role": "assistant", "content": ""}));
        let c = c.remove(1);
        assert_eq!((c["object"].as_str(), &c["choices"][0]["delta"]), (Some("chat.completion.chunk"), &json!({"content": "Hi"})));
        let call = ToolCallDelta { index: 0, id: Some("call_1".into()), kind: Some("function".into()), function: FunctionDelta { name: Some("f".into()), arguments: String::new() } };
        let args = |a: &str| ToolCallDelta { index: 0, id: None, kind: None, function: FunctionDelta { name: None, arguments: a.into() } };
        // A call's opening and its first arguments in one step: one entry, as OpenAI's chunks.
        let c = s.step(&StepChunk { tool_calls: vec![call, args("{\"a\""), args(": 1")], ..Default::default() }).remove(0);
        assert_eq!(c["choices"][0]["delta"], json!({"tool_calls": [{"index": 0, "id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{\"a\": 1"}}]}));
        assert_eq!(c["usage"], Value::Null, "with include_usage, every other chunk has usage: null");
        assert!(c.as_object().unwrap().contains_key("usage"));
        let last = s.step(&text(0, "", Some("tool_calls")));
        assert_eq!(last.len(), 1, "the finish chunk alone");
        assert_eq!((&last[0]["choices"][0]["finish_reason"], last[0].get("usage")), (&json!("tool_calls"), Some(&Value::Null)));
        let end = s.end(json!({"total_tokens": 3}));
        assert_eq!((end.len(), &end[0]["choices"], &end[0]["usage"]["total_tokens"]), (1, &json!([]), &json!(3)));
        assert!(ChunkStream::new(env("chat"), false).end(json!({})).is_empty(), "usage only with include_usage");
        let mut plain = ChunkStream::new(env("chat"), false);
        assert!(plain.step(&text(0, "x", Some("stop")))[2].get("usage").is_none(), "no usage key without include_usage");
        // Completions: no role chunk, `text` per chunk.
        let mut s = ChunkStream::new(env("completion"), false);
        let c = s.step(&text(0, "abc", None));
        assert_eq!((c.len(), &c[0]["choices"][0]["text"]), (1, &json!("abc")));
    }

    /// An answer that opens with a call: its first chunk is the role, `content: null` and the
    /// call, as OpenAI's (an SDK adding the deltas up gets `content: null`, as the whole
    /// response has); one that ends before any text still opens with its role.
    #[test]
    fn a_call_answer_opens_with_role_null_content_and_the_call() {
        let call = ToolCallDelta { index: 0, id: Some("call_1".into()), kind: Some("function".into()), function: FunctionDelta { name: Some("f".into()), arguments: "{}".into() } };
        let mut s = ChunkStream::new(env("chat"), false);
        assert!(s.step(&text(0, "", None)).is_empty());
        let c = s.step(&StepChunk { tool_calls: vec![call.clone()], ..Default::default() });
        assert_eq!(c.len(), 1);
        assert_eq!(c[0]["choices"][0]["delta"], json!({"role": "assistant", "content": null, "tool_calls": [{"index": 0, "id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}));
        let next = s.step(&StepChunk { tool_calls: vec![ToolCallDelta { index: 1, ..call }], ..Default::default() });
        assert!(next[0]["choices"][0]["delta"].get("role").is_none() && next[0]["choices"][0]["delta"].get("content").is_none(), "{}", next[0]);
        let shape = |v: Vec<Value>| v.iter().map(|c| (c["choices"][0]["delta"].clone(), c["choices"][0]["finish_reason"].clone())).collect::<Vec<_>>();
        // An empty answer: the role, then the finish.
        let mut s = ChunkStream::new(env("chat"), false);
        assert_eq!(shape(s.step(&text(0, "", Some("length")))), vec![(json!({"role": "assistant", "content": ""}), Value::Null), (json!({}), json!("length"))]);
    }

    #[test]
    fn choices_stream_one_after_the_other_each_with_its_index() {
        let mut s = ChunkStream::new(env("chat"), false);
        let mut all: Vec<Value> = Vec::new();
        for (choice, t) in [(0, "a"), (0, "b"), (1, ""), (1, "c"), (2, "d")] {
            all.extend(s.step(&text(choice, t, None)));
            if t == "b" || t == "c" {
                all.extend(s.step(&text(choice, "", Some("stop"))));
            }
        }
        let shape: Vec<(u64, Value, Value)> = all.iter().map(|c| (c["choices"][0]["index"].as_u64().unwrap(), c["choices"][0]["delta"].clone(), c["choices"][0]["finish_reason"].clone())).collect();
        let role = json!({"role": "assistant", "content": ""});
        assert_eq!(
            shape,
            vec![
                (0, role.clone(), Value::Null),
                (0, json!({"content": "a"}), Value::Null),
                (0, json!({"content": "b"}), Value::Null),
                (0, json!({}), json!("stop")),
                (1, role.clone(), Value::Null),
                (1, json!({"content": "c"}), Value::Null),
                (1, json!({}), json!("stop")),
                (2, role, Value::Null),
                (2, json!({"content": "d"}), Value::Null),
            ]
        );
        // Completions' text_offset starts at the prompt again for each choice.
        let lp = |t: &str| TokenLogprob { token: t.into(), logprob: -1.0, bytes: t.as_bytes().to_vec(), top_logprobs: vec![] };
        let mut s = ChunkStream::new(env("completion"), false);
        let a = s.step(&StepChunk { choice: 0, text: "ab".into(), logprobs: vec![lp("ab")], ..Default::default() });
        let b = s.step(&StepChunk { choice: 1, text: "c".into(), logprobs: vec![lp("c")], ..Default::default() });
        assert_eq!((&a[0]["choices"][0]["logprobs"]["text_offset"], &b[0]["choices"][0]["logprobs"]["text_offset"]), (&json!([3]), &json!([3])));
        // A whole response: one entry per choice, in order.
        let r = json!({"text": "x", "finish_reason": "stop", "choices": [{"text": "x", "finish_reason": "stop"}, {"text": "y", "finish_reason": "length"}]});
        let c = env("chat").completion(&r, json!({}));
        let got: Vec<(Value, Value, Value)> = c["choices"].as_array().unwrap().iter().map(|c| (c["index"].clone(), c["message"]["content"].clone(), c["finish_reason"].clone())).collect();
        assert_eq!(got, vec![(json!(0), json!("x"), json!("stop")), (json!(1), json!("y"), json!("length"))]);
    }

    #[test]
    fn text_offsets_count_characters_of_the_decoded_text() {
        let lp = |b: &[u8]| TokenLogprob { token: String::from_utf8_lossy(b).into_owned(), logprob: -1.0, bytes: b.to_vec(), top_logprobs: vec![] };
        // "a", then "日" (3 bytes) split over two tokens, then "b", then a stray continuation
        // byte (one U+FFFD in the text), then "c".
        let entries = [lp(b"a"), lp(&[0xe6, 0x97]), lp(&[0xa5]), lp(b"b"), lp(&[0x80]), lp(b"c")];
        let mut at = TextOffset::new(3);
        let v = logprobs_json(Kind::Completion, &entries, &mut at);
        assert_eq!(v["text_offset"], json!([3, 4, 4, 5, 6, 7]));
        assert_eq!(at.at(), 8);
        // The same in chunks, the character split across them.
        let mut s = ChunkStream::new(env("completion"), false);
        let mut offsets = Vec::new();
        for e in &entries {
            let c = s.step(&StepChunk { text: "x".into(), logprobs: vec![e.clone()], ..Default::default() });
            offsets.push(c[0]["choices"][0]["logprobs"]["text_offset"][0].clone());
        }
        assert_eq!(offsets, [3, 4, 4, 5, 6, 7].map(|o| json!(o)));
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
