//! `edgellm serve --kv-*`: the server's one cache slot under a KV budget, as the worker's `kv`
//! option sets it. With `window-sinks` a conversation goes on past the budget (prompts longer
//! than it are taken, old tokens evicted); with `error` a prompt past it is OpenAI's
//! `context_length_exceeded` and an answer stops at the room it leaves; settings that cannot
//! work stop the server from starting. Tiny model, 127.0.0.1, every server stopped in its test.

mod common;
mod server_common;

use edgellm::kv::{KvOptions, KvPolicy};
use serde_json::{json, Value};
use server_common::{post_json, start_server};

fn model() -> std::path::PathBuf {
    common::data("tiny_llama.gguf")
}

fn complete(addr: std::net::SocketAddr, words: usize, max_tokens: usize) -> (u16, Value) {
    let prompt = "hello world ".repeat(words);
    let r = post_json(addr, "/v1/completions", &[], &json!({"prompt": prompt, "max_tokens": max_tokens, "temperature": 0}));
    (r.status, r.json())
}

#[test]
fn a_window_sinks_budget_takes_conversations_past_it() {
    let s = start_server(&model(), |c| c.kv = Some(KvOptions { tokens: Some(48), policy: Some(KvPolicy::WindowSinks), ..Default::default() }));
    // A prompt of ~120 tokens, past the budget, and an answer past it too.
    let (status, v) = complete(s.addr(), 10, 60);
    assert_eq!(status, 200, "{v}");
    assert!(v["usage"]["prompt_tokens"].as_u64().unwrap() > 48, "{v}");
    assert_eq!((v["usage"]["completion_tokens"].as_u64(), v["choices"][0]["finish_reason"].as_str()), (Some(60), Some("length")), "{v}");
    // The next request is served as well.
    let (status, v) = complete(s.addr(), 14, 4);
    assert_eq!(status, 200, "{v}");
    drop(s); // stops the server
}

#[test]
fn an_error_budget_refuses_a_prompt_past_it_and_cuts_the_answer() {
    let s = start_server(&model(), |c| c.kv = Some(KvOptions { tokens: Some(48), policy: Some(KvPolicy::Error), ..Default::default() }));
    let (status, v) = complete(s.addr(), 10, 4);
    assert_eq!((status, v["error"]["code"].as_str()), (400, Some("context_length_exceeded")), "{v}");
    let (status, v) = complete(s.addr(), 2, 100);
    assert_eq!(status, 200, "{v}");
    let prompt = v["usage"]["prompt_tokens"].as_u64().unwrap();
    assert_eq!((v["usage"]["completion_tokens"].as_u64(), v["choices"][0]["finish_reason"].as_str()), (Some(48 - prompt), Some("length")), "{v}");
    drop(s); // stops the server
}

#[test]
fn kv_settings_that_cannot_work_stop_the_server_from_starting() {
    let mut cfg = edgellm::server::ServerConfig::new(model());
    cfg.port = 0;
    cfg.kv = Some(KvOptions { bytes: Some(1), ..Default::default() });
    let e = edgellm::server::start(cfg).err().expect("a one-byte budget is refused");
    assert_eq!(e.code, "BAD_KV_CONFIG");
    assert!(e.message.contains("KV_BUDGET_TOO_SMALL"), "{}", e.message);
    // Each code once in what the CLI prints.
    let mut cfg = edgellm::server::ServerConfig::new(model());
    cfg.port = 0;
    cfg.kv = Some(KvOptions { tokens: Some(4), sinks: Some(4), ..Default::default() });
    let e = edgellm::server::start(cfg).err().expect("no room for a window");
    assert_eq!((e.code, e.to_string().matches("BAD_KV_CONFIG").count()), ("BAD_KV_CONFIG", 1), "{e}");
}
