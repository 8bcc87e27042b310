//! OpenAI's `n`: a request's choices, generated one after the other over one session.
//!
//! Choice 0 is the plain request. When a choice ends, the next one starts from the same prompt
//! with its own seed (`GenerateRequest::choice_seed`): the session still holds the prompt
//! (followed by the last choice's tokens, which the prefix match drops), so a later choice
//! prefills only the prompt's last token again. Each choice has its own grammar state and
//! tool-call reader; the finished ones are kept here as [`ChoiceResult`]s and their metrics
//! merged, so the request's `usage` covers all of them.

use serde::Serialize;

use crate::generate::{FinishReason, Generation, TokenLogprob};
use crate::metrics::GenerationMetrics;
use crate::tools::output::CallStream;
use crate::tools::ToolCall;

/// One finished choice, as OpenAI's `choices[index]` reads it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ChoiceResult {
    pub index: usize,
    pub text: String,
    pub finish_reason: &'static str,
    /// Generated ids (a final end-of-generation token included).
    pub ids: Vec<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub logprobs: Option<Vec<TokenLogprob>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<Vec<ToolCall>>,
}

/// A choice's `finish_reason` as OpenAI reports it: with tools, calls that all closed make it
/// "tool_calls" (one cut by max_tokens stays "length", as OpenAI; one a stop string cut inside
/// its arguments stays "stop": its arguments are not a whole JSON). `calls` must be finished.
pub fn finish_reason(reason: FinishReason, calls: Option<&CallStream>) -> &'static str {
    match calls {
        Some(c) if c.calls_complete() && reason == FinishReason::Stop => "tool_calls",
        _ => reason.as_str(),
    }
}

/// A finished generation as choice `index`: with tools, the text is the content besides the
/// calls.
pub fn choice_result(index: usize, g: Generation, logprobs: Option<Vec<TokenLogprob>>, calls: Option<CallStream>) -> (ChoiceResult, GenerationMetrics) {
    let reason = finish_reason(g.finish_reason, calls.as_ref());
    let (text, tool_calls) = match calls {
        None => (g.text, None),
        Some(c) => {
            let calls = c.calls().to_vec();
            (c.content().to_string(), (!calls.is_empty()).then_some(calls))
        }
    };
    (ChoiceResult { index, text, finish_reason: reason, ids: g.ids, logprobs, tool_calls }, g.metrics)
}

/// Choice `index` ended before it ran (a cut: `Host::generate_cut`): empty, "length", no
/// tokens, and no metrics to merge (it used no model time).
pub fn unrun_choice(index: usize, logprobs: bool) -> ChoiceResult {
    let logprobs = logprobs.then(Vec::new);
    ChoiceResult { index, text: String::new(), finish_reason: FinishReason::Length.as_str(), ids: Vec::new(), logprobs, tool_calls: None }
}

/// Adds a later choice's metrics to the request's. The prompt's prefill and the first token's
/// time are the first choice's; a later choice's own prefill (the prompt's last token again)
/// produced its first token, so it counts as decoding, with the tokens, bytes and head steps.
pub fn merge_metrics(total: &mut GenerationMetrics, later: &GenerationMetrics) {
    total.generated_tokens += later.generated_tokens;
    total.decode_ms += later.prefill_ms + later.decode_ms;
    total.decode_kv_bytes_total += later.decode_kv_bytes_total;
    total.decode_weight_bytes_total += later.decode_weight_bytes_total;
    if later.generated_tokens > 1 {
        total.decode_kv_bytes_last_token = later.decode_kv_bytes_last_token;
    }
    total.head_screened_steps += later.head_screened_steps;
    total.head_full_steps += later.head_full_steps;
    total.head_fallback_steps += later.head_fallback_steps;
    total.head_candidates.extend_from_slice(&later.head_candidates);
    let steps = (total.head_full_steps + total.head_screened_steps) as u64;
    if steps > 0 {
        total.decode_weight_bytes_per_token = (total.decode_weight_bytes_total / steps) as usize;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn later_choices_add_their_tokens_time_and_bytes() {
        let first = GenerationMetrics { prompt_tokens: 10, generated_tokens: 5, prefill_ms: 40.0, ttft_ms: 45.0, decode_ms: 20.0, decode_weight_bytes_total: 400, head_screened_steps: 4, head_candidates: vec![1, 2, 3, 4], ..Default::default() };
        let later = GenerationMetrics { prompt_tokens: 10, generated_tokens: 3, prefill_ms: 6.0, ttft_ms: 7.0, decode_ms: 10.0, decode_weight_bytes_total: 300, decode_kv_bytes_last_token: 9, head_full_steps: 2, head_candidates: vec![], ..Default::default() };
        let mut t = first.clone();
        merge_metrics(&mut t, &later);
        assert_eq!((t.prompt_tokens, t.prefill_ms, t.ttft_ms), (10, 40.0, 45.0), "the prompt's prefill is the first choice's");
        assert_eq!((t.generated_tokens, t.decode_ms), (8, 36.0));
        assert_eq!((t.head_screened_steps, t.head_full_steps, t.head_path()), (4, 2, "mixed"));
        assert_eq!((t.decode_weight_bytes_total, t.decode_weight_bytes_per_token, t.decode_kv_bytes_last_token), (700, 116, 9));
    }
}
