//! Tool calls (`tools`, `tool_choice`; `edgellm::tools`) on both real models through the host
//! driver, from OpenAI bodies (the protocol's rules applied): with `required` or a named
//! function every answer is calls whose arguments parse and validate against the function's
//! schema, greedy or sampled; with `auto` an answer is either valid calls or plain text, never a
//! broken call; `none` never calls; the streamed `delta.tool_calls` pieces add up to the
//! result's calls; the next turn (the call and its result in the history) reuses the KV cache
//! past the call, because the fallback renders a call exactly as the model wrote it.

mod common;

use edgellm::host::{GenerateRequest, GenerateResult, Host};
use edgellm::protocol::{parse_request, Kind, RequestLimits};
use edgellm::tools::{ToolCall, ToolCallDelta};
use serde_json::{json, Value};

fn tools() -> Value {
    json!([
        {"type": "function", "function": {"name": "get_weather", "description": "The current weather in a city",
            "parameters": {"type": "object", "properties": {
                "city": {"type": "string", "maxLength": 20},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}
            }, "required": ["city", "unit"], "additionalProperties": false}}},
        {"type": "function", "function": {"name": "get_time", "description": "The time now in a timezone",
            "parameters": {"type": "object", "properties": {"zone": {"type": "string", "maxLength": 12}}, "required": ["zone"], "additionalProperties": false}}}
    ])
}

/// The call's arguments parse and follow its function's schema.
fn valid(call: &ToolCall) {
    let args: Value = serde_json::from_str(&call.function.arguments).unwrap_or_else(|e| panic!("not JSON ({e}): {:?}", call.function.arguments));
    let o = args.as_object().unwrap_or_else(|| panic!("not an object: {args}"));
    match call.function.name.as_str() {
        "get_weather" => {
            assert_eq!(o.len(), 2, "{args}");
            assert!(o["city"].as_str().is_some_and(|c| c.chars().count() <= 20), "{args}");
            assert!(["celsius", "fahrenheit"].contains(&o["unit"].as_str().unwrap()), "{args}");
        }
        "get_time" => {
            assert_eq!(o.len(), 1, "{args}");
            assert!(o["zone"].as_str().is_some_and(|z| z.chars().count() <= 12), "{args}");
        }
        other => panic!("a call of an unknown function {other:?}"),
    }
    assert!(call.id.starts_with("call_") && call.kind == "function");
}

fn request(body: Value) -> GenerateRequest {
    parse_request(Kind::Chat, &body, RequestLimits::default()).unwrap().gen
}

/// Runs a request; returns the result, the streamed content and the streamed call pieces.
fn run(h: &mut Host, req: &GenerateRequest) -> (GenerateResult, String, Vec<ToolCallDelta>, usize) {
    let started = h.generate_begin(req, 0.0).unwrap();
    while !h.prefill_chunk().unwrap().done {}
    let (mut text, mut deltas) = (String::new(), Vec::new());
    for _ in 0..1000 {
        let ev = h.decode_step().unwrap();
        text.push_str(&ev.text);
        deltas.extend(ev.tool_calls);
        if ev.finish_reason.is_some() {
            break;
        }
    }
    (h.generate_end(1.0).unwrap(), text, deltas, started.cached_tokens)
}

/// The pieces gathered as an OpenAI client does (by index: id, name, then arguments).
fn gather(deltas: &[ToolCallDelta]) -> Vec<ToolCall> {
    let mut calls: Vec<ToolCall> = Vec::new();
    for d in deltas {
        if d.index == calls.len() {
            calls.push(ToolCall::new(d.id.clone().unwrap(), d.function.name.clone().unwrap(), String::new()));
        }
        calls[d.index].function.arguments.push_str(&d.function.arguments);
    }
    calls
}

fn body(user: &str, extra: Value) -> Value {
    let mut b = json!({"messages": [{"role": "user", "content": user}], "tools": tools(), "max_tokens": 48});
    for (k, v) in extra.as_object().unwrap() {
        b[k] = v.clone();
    }
    b
}

/// Every check on one model (loaded once: the models load in parallel, one test each).
fn check(name: &str, h: &mut Host) {
    // required / named: always calls, valid, greedy or sampled; the pieces add up.
    for (choice, temperature, seed) in [(json!("required"), 1.3, 2), (json!({"type": "function", "function": {"name": "get_time"}}), 1.0, 3)] {
        let named = choice.is_object();
        let user = if named { "What time is it in Tokyo?" } else { "What is the weather in Paris?" };
        let req = request(body(user, json!({"tool_choice": choice, "temperature": temperature, "seed": seed})));
        let (r, text, deltas, _) = run(h, &req);
        let calls = r.tool_calls.clone().unwrap_or_else(|| panic!("{name}: no call: {:?}", r.text));
        assert_eq!((r.finish_reason, r.text.as_str(), text.as_str(), calls.len()), ("tool_calls", "", "", 1), "{name}: {calls:?}");
        calls.iter().for_each(valid);
        if named {
            assert_eq!(calls[0].function.name, "get_time");
        }
        assert_eq!(gather(&deltas), calls, "{name}: the streamed pieces add up to the calls");
    }
    // auto: valid calls or plain text, never a broken call.
    for (user, temperature, seed) in [("What is the weather in Paris? Use the tool.", 0.0, 1), ("Say hello.", 1.0, 2)] {
        let req = request(body(user, json!({"temperature": temperature, "seed": seed, "max_tokens": 20})));
        let (r, text, deltas, _) = run(h, &req);
        match &r.tool_calls {
            Some(calls) => {
                assert_eq!((r.finish_reason, r.text.as_str()), ("tool_calls", ""), "{name}: {user}");
                calls.iter().for_each(valid);
                assert_eq!(&gather(&deltas), calls);
            }
            None => {
                assert!(!r.text.starts_with("<tool_call>"), "{name}: a broken call: {:?}", r.text);
                assert_eq!(text, r.text);
                assert!(deltas.is_empty());
            }
        }
    }
    // parallel_tool_calls: true lets more calls follow; whatever the model does, each is valid.
    let req = request(body("Weather in Paris, and the time in Tokyo?", json!({"tool_choice": "required", "parallel_tool_calls": true, "temperature": 0, "max_tokens": 36})));
    let (r, _, deltas, _) = run(h, &req);
    let calls = r.tool_calls.clone().unwrap();
    let complete = if r.finish_reason == "length" { calls.len() - 1 } else { calls.len() };
    calls[..complete].iter().for_each(valid);
    assert_eq!(gather(&deltas), calls);

    // The next turn: the call and its result in the history, `none` (never a call). The
    // rendered call is what the model wrote, so the KV cache is reused past the first prompt.
    let first = body("What is the weather in Paris?", json!({"tool_choice": "required", "temperature": 0}));
    let (r, _, _, _) = run(h, &request(first.clone()));
    let prompt_tokens = r.prompt_tokens;
    let call = r.tool_calls.unwrap().remove(0);
    let mut next = first;
    let msgs = next["messages"].as_array_mut().unwrap();
    msgs.push(json!({"role": "assistant", "content": null, "tool_calls": [serde_json::to_value(&call).unwrap()]}));
    msgs.push(json!({"role": "tool", "tool_call_id": call.id, "content": "{\"temperature\": 21, \"sky\": \"clear\"}"}));
    next["tool_choice"] = json!("none");
    next["max_tokens"] = json!(12);
    let (r, _, _, cached) = run(h, &request(next));
    assert!(cached > prompt_tokens, "{name}: cached {cached}, first prompt {prompt_tokens}");
    assert!(r.completion_tokens > 0 && r.tool_calls.is_none() && r.finish_reason != "tool_calls", "{name}");
}

#[test]
fn gemma_3_calls_tools() {
    let Some(p) = common::real_model() else { return };
    check("gemma-3-270m", &mut common::load_host(&p));
}

#[test]
fn smollm2_calls_tools() {
    let Some(p) = common::chat_model() else { return };
    check("smollm2-135m", &mut common::load_host(&p));
}

#[test]
fn a_schema_the_engine_cannot_use_is_a_typed_error() {
    let Some(p) = common::chat_model() else { return };
    let mut h = common::load_host(&p);
    let bad = json!([{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {"x": {"type": "nonsense"}}}}}]);
    let req = request(json!({"messages": [{"role": "user", "content": "x"}], "tools": bad, "tool_choice": "required"}));
    let e = h.generate_begin(&req, 0.0).unwrap_err();
    assert_eq!(e.code, "INVALID_REQUEST");
    assert!(e.message.contains("tools"), "{}", e.message);
}
