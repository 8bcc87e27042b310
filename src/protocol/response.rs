//! OpenAI's response shapes that the hosts share: the `logprobs` object of a choice or a chunk.

use serde_json::{json, Map, Value};

use super::request::Kind;
use crate::generate::TokenLogprob;

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
