//! `edgellm serve` keeps the last conversation's KV cache: an OpenAI client that resends the
//! growing message list gets the earlier turns back as `usage.prompt_tokens_details.
//! cached_tokens` (streamed and not), and the answer is the one a cold cache gives. Its own
//! server (one slot: other tests' requests would take it over), on 127.0.0.1.

mod common;
mod server_common;

use serde_json::{json, Value};
use server_common::*;

fn chat(addr: std::net::SocketAddr, messages: &Value, stream: bool) -> (String, Value) {
    let mut body = json!({"messages": messages, "max_tokens": 6, "temperature": 0});
    if stream {
        body["stream"] = json!(true);
        body["stream_options"] = json!({"include_usage": true});
    }
    let r = post_json(addr, "/v1/chat/completions", &[], &body);
    assert_eq!(r.status, 200, "{}", r.text());
    if !stream {
        let v = r.json();
        return (v["choices"][0]["message"]["content"].as_str().unwrap().to_string(), v["usage"].clone());
    }
    let ev = r.sse();
    let chunks: Vec<Value> = ev[..ev.len() - 1].iter().map(|e| serde_json::from_str(e).unwrap()).collect();
    let text = chunks.iter().filter_map(|c| c["choices"][0]["delta"]["content"].as_str()).collect();
    let usage = chunks.last().unwrap()["usage"].clone();
    assert!(chunks[chunks.len() - 2]["usage"].is_null(), "usage only on the include_usage chunk, null on the others (OpenAI)");
    (text, usage)
}

fn cached(u: &Value) -> u64 {
    u["prompt_tokens_details"]["cached_tokens"].as_u64().unwrap()
}

#[test]
fn the_server_reuses_the_last_conversation() {
    let Some(model) = common::real_model() else { return };
    let s = start_server(&model, |c| c.max_tokens = 16);
    let q1 = json!({"role": "user", "content": "Name one planet."});
    let (a1, u1) = chat(s.addr(), &json!([q1]), false);
    assert_eq!(cached(&u1), 0, "a cold cache");
    let turn2 = json!([q1, {"role": "assistant", "content": a1}, {"role": "user", "content": "And a moon?"}]);
    let (a2, u2) = chat(s.addr(), &turn2, true);
    let p1 = u1["prompt_tokens"].as_u64().unwrap();
    assert!(cached(&u2) >= p1, "turn 2 reuses at least turn 1's prompt: {u2}");
    assert!(cached(&u2) < u2["prompt_tokens"].as_u64().unwrap());

    // Another conversation takes the slot; then turn 2 again, from a cold cache (only the
    // template's first tokens are shared): the same answer.
    let (_, u3) = chat(s.addr(), &json!([{"role": "user", "content": "Say hi."}]), false);
    assert!(cached(&u3) < p1);
    let (a2_cold, u4) = chat(s.addr(), &turn2, false);
    assert!(cached(&u4) < p1, "{u4}");
    assert_eq!(a2, a2_cold, "reused and cold caches give the same answer");
    s.stop();
}
