//! Measurement only (the `boundary-bench` feature; `node bench/wasm_boundary.mjs` builds and runs
//! it): the same values handed to JS as JSON text (what every export of `wasm/mod.rs` does) and
//! as JS values built by serde-wasm-bindgen, for a decode step's event and for `usage`.

use crate::generate::{StepEvent, TokenLogprob, TopLogprob};
use serde::Serialize;
use wasm_bindgen::prelude::*;

/// A decode step's event: a plain token (`logprobs: false`), or one with its log probability and
/// five alternatives (`logprobs: true`, OpenAI's `top_logprobs: 5`).
fn step(logprobs: bool) -> StepEvent {
    let top = |t: &str, l: f32| TopLogprob { token: t.into(), logprob: l, bytes: t.as_bytes().to_vec() };
    StepEvent {
        token: Some(12345),
        text: " Paris".into(),
        finish_reason: None,
        logprobs: if logprobs {
            vec![TokenLogprob {
                token: " Paris".into(),
                logprob: -0.105_360_51,
                bytes: b" Paris".to_vec(),
                top_logprobs: vec![top(" Paris", -0.105_360_51), top(" the", -2.302_585), top(" a", -3.1), top(" Lyon", -4.7), top(" France", -5.2)],
            }]
        } else {
            vec![]
        },
        tool_calls: vec![],
        choice: 0,
        choice_finish_reason: None,
        done: false,
    }
}

fn to_js<T: Serialize>(v: &T) -> JsValue {
    // json_compatible: None as null and maps as plain objects, as JSON.parse gives them.
    v.serialize(&serde_wasm_bindgen::Serializer::json_compatible()).unwrap_or(JsValue::NULL)
}

#[wasm_bindgen]
pub fn bench_step_json(logprobs: bool) -> String {
    serde_json::to_string(&step(logprobs)).unwrap_or_default()
}

#[wasm_bindgen]
pub fn bench_step_value(logprobs: bool) -> JsValue {
    to_js(&step(logprobs))
}

/// `openai_usage` as it is: a `GenerateResult` in as JSON text, the usage out as JSON text.
#[wasm_bindgen]
pub fn bench_usage_json(result_json: &str) -> String {
    let v: serde_json::Value = serde_json::from_str(result_json).unwrap_or_default();
    serde_json::to_string(&crate::protocol::usage(&v)).unwrap_or_default()
}

/// The same with JS values both ways.
#[wasm_bindgen]
pub fn bench_usage_value(result: JsValue) -> JsValue {
    let v: serde_json::Value = serde_wasm_bindgen::from_value(result).unwrap_or_default();
    to_js(&crate::protocol::usage(&v))
}
