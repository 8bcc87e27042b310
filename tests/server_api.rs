//! The OpenAI-compatible server (`edgellm::server`, `edgellm serve`) on the real model, started
//! in-process on 127.0.0.1: routes and shapes, greedy output equal to the CLI's, SSE, typed
//! errors and limits, bearer auth, CORS, and client disconnects stopping generation.
//!
//! One server is shared by the tests of this file (they run in parallel against its queue).

mod common;
mod server_common;

use std::io::Read;
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

use edgellm::server::ServerHandle;
use serde_json::{json, Value};
use server_common::*;

const MODEL_SHA256: &str = "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818";
const KEY: &str = "test-key-123";
const AUTH: (&str, &str) = ("Authorization", "Bearer test-key-123");
const ORIGIN: &str = "http://app.example.test";
/// The server's power model in these tests (not the default, so the figure is seen to be used).
const WATTS: f64 = 7.5;

fn server() -> Option<&'static ServerHandle> {
    static S: OnceLock<Option<ServerHandle>> = OnceLock::new();
    S.get_or_init(|| {
        let model = common::real_model()?;
        Some(start_server(&model, |c| {
            c.api_key = Some(KEY.into());
            c.cors_origins = vec![ORIGIN.into()];
            c.queue = 8;
            c.max_tokens = 64;
            c.max_prompt_tokens = Some(200);
            c.max_body_bytes = 64 << 10;
            c.power = edgellm::work::PowerModel::new(WATTS).unwrap();
        }))
    })
    .as_ref()
}

fn health(s: &ServerHandle) -> Value {
    get(s.addr(), "/health", &[]).json()
}

/// `edgellm generate ... --temperature 0 --json` (the native CLI) for the same prompt.
fn cli_greedy(prompt: &str, max_tokens: usize, chat: bool) -> Value {
    let model = common::real_model().unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_edgellm"));
    cmd.args(["generate", "--model"]).arg(&model).args(["--prompt", prompt, "--max-tokens", &max_tokens.to_string(), "--temperature", "0", "--json"]);
    if chat {
        cmd.arg("--chat");
    }
    let out = cmd.output().expect("run the CLI");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn health_needs_no_token_and_reports_the_model() {
    let Some(s) = server() else { return };
    let r = get(s.addr(), "/health", &[]);
    assert_eq!(r.status, 200);
    let h = r.json();
    assert_eq!(h["status"], "ok");
    assert_eq!(h["sha256"], MODEL_SHA256);
    assert_eq!(h["queue"]["capacity"], 8);
    assert!(h["requests"]["health"].as_u64().unwrap() >= 1);
    // HEAD: the GET's status and headers, no body (RFC 9110); a wrong method names the allowed.
    for (path, auth) in [("/health", None), ("/v1/models", Some(AUTH))] {
        let mut raw = String::new();
        send(s.addr(), "HEAD", path, auth.as_slice(), b"").read_to_string(&mut raw).unwrap();
        let (head, body) = raw.split_once("\r\n\r\n").unwrap();
        assert!(head.starts_with("HTTP/1.1 200"), "{raw}");
        assert!(head.to_ascii_lowercase().contains("content-type: application/json"), "{raw}");
        assert_eq!(body, "", "HEAD {path} has no body");
    }
    let r = request(s.addr(), "DELETE", "/health", &[], b"");
    assert_eq!((r.status, r.header("allow")), (405, Some("GET, HEAD, OPTIONS")));
    let r = request(s.addr(), "GET", "/v1/completions", &[AUTH], b"");
    assert_eq!((r.status, r.header("allow")), (405, Some("POST, OPTIONS")));
}

#[test]
fn models_lists_sha256_and_context_limits_behind_the_token() {
    let Some(s) = server() else { return };
    let r = get(s.addr(), "/v1/models", &[]);
    assert_eq!(r.status, 401);
    assert_eq!(r.error_code(), "invalid_api_key");
    assert_eq!(r.json()["error"]["type"], "authentication_error");
    assert_eq!(r.header("www-authenticate"), Some("Bearer"));
    let r = get(s.addr(), "/v1/models", &[("Authorization", "Bearer wrong")]);
    assert_eq!(r.status, 401);

    let r = get(s.addr(), "/v1/models", &[AUTH]);
    assert_eq!(r.status, 200);
    let m = &r.json()["data"][0];
    assert_eq!(m["object"], "model");
    assert_eq!(m["id"], "Gemma 3 270m");
    assert_eq!(m["sha256"], MODEL_SHA256);
    assert_eq!(m["context_length"], 32768);
    assert_eq!(m["max_context"], 4096);
    assert_eq!(m["max_prompt_tokens"], 200);
    assert_eq!(m["max_tokens"], 64);
    // Gemma 3 270M (base) has no chat template in its file.
    assert_eq!(m["chat_template"], "built-in");

    // OpenAI's "retrieve model": the same object by its (percent-encoded) id; another id is 404.
    let r = get(s.addr(), "/v1/models/Gemma%203%20270m", &[AUTH]);
    assert_eq!(r.status, 200);
    assert_eq!(&r.json(), m);
    let r = get(s.addr(), "/v1/models/gpt-4o", &[AUTH]);
    assert_eq!((r.status, r.error_code().as_str()), (404, "model_not_found"));
    assert_eq!(get(s.addr(), "/v1/models/Gemma%203%20270m", &[]).status, 401);
}

#[test]
fn greedy_completion_equals_the_cli() {
    let Some(s) = server() else { return };
    let prompt = "The capital of France is";
    let cli = cli_greedy(prompt, 8, false);
    let r = post_json(s.addr(), "/v1/completions", &[AUTH], &json!({"prompt": prompt, "max_tokens": 8, "temperature": 0}));
    assert_eq!(r.status, 200, "{}", r.text());
    let v = r.json();
    assert_eq!(v["object"], "text_completion");
    assert_eq!(v["choices"][0]["text"], cli["text"]);
    assert_eq!(v["choices"][0]["finish_reason"], cli["finish_reason"]);
    let u = &v["usage"];
    assert_eq!(u["prompt_tokens"], cli["prompt_ids"].as_array().unwrap().len());
    assert_eq!(u["completion_tokens"], cli["ids"].as_array().unwrap().len());
    assert_eq!(u["total_tokens"], u["prompt_tokens"].as_u64().unwrap() + u["completion_tokens"].as_u64().unwrap());
    for k in ["ttft_ms", "tpot_ms", "prefill_tokens_per_s", "decode_tokens_per_s", "decode_bytes_per_token", "decode_gb_s"] {
        assert!(u[k].as_f64().unwrap() > 0.0, "usage.{k} = {}", u[k]);
    }
    assert_eq!(u["decode_weight_bytes_per_token"], cli["decode_weight_bytes_per_token"]);
    check_compute(u);
    eprintln!(
        "server greedy: {:?}; decode {:.2} tok/s (CLI {:.2} tok/s)",
        v["choices"][0]["text"],
        u["decode_tokens_per_s"].as_f64().unwrap(),
        cli["decode_tok_s"].as_f64().unwrap()
    );
}

/// `usage.compute`: the process's CPU time per phase, energy = CPU time × the server's model.
fn check_compute(u: &Value) {
    let c = &u["compute"];
    assert_eq!(c["cpu_clock"], "process-cpu", "{c}");
    assert_eq!(c["watts_per_busy_core"], WATTS);
    for phase in ["prefill", "decode"] {
        let cpu = c["cpu_ms"][phase].as_f64().unwrap();
        assert!(cpu > 0.0, "cpu_ms.{phase} = {cpu}");
        assert!(c["busy_wall_ms"][phase].as_f64().unwrap() > 0.0);
        let e = c["energy_j"][phase].as_f64().unwrap();
        assert!((e - cpu / 1000.0 * WATTS).abs() <= 1e-9 * e.max(1.0), "energy_j.{phase} {e} vs cpu {cpu} ms × {WATTS} W");
    }
    let total = c["cpu_ms"]["prefill"].as_f64().unwrap() + c["cpu_ms"]["decode"].as_f64().unwrap();
    assert!((c["cpu_ms"]["total"].as_f64().unwrap() - total).abs() < 1e-9);
    assert!(c["busy_cores"].as_f64().unwrap() > 0.0);
    // OpenAI's fields stay where OpenAI clients read them; the extension is one sub-object.
    assert!(u.get("energy_j").is_none() && u.get("cpu_ms").is_none());
}

#[test]
fn greedy_chat_equals_the_cli_streamed_and_not() {
    let Some(s) = server() else { return };
    let prompt = "Name a color.";
    let cli = cli_greedy(prompt, 6, true);
    let body = json!({"messages": [{"role": "user", "content": prompt}], "max_tokens": 6, "temperature": 0});
    let r = post_json(s.addr(), "/v1/chat/completions", &[AUTH], &body);
    assert_eq!(r.status, 200, "{}", r.text());
    let v = r.json();
    assert_eq!(v["object"], "chat.completion");
    assert_eq!(v["choices"][0]["message"]["role"], "assistant");
    assert_eq!(v["choices"][0]["message"]["content"], cli["text"]);

    // The same, streamed: role first, deltas that add up, finish + usage, usage chunk, [DONE].
    let mut b = body.clone();
    b["stream"] = json!(true);
    b["stream_options"] = json!({"include_usage": true});
    let r = post_json(s.addr(), "/v1/chat/completions", &[AUTH], &b);
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-type"), Some("text/event-stream"));
    let ev = r.sse();
    assert_eq!(ev.last().map(String::as_str), Some("[DONE]"));
    let chunks: Vec<Value> = ev[..ev.len() - 1].iter().map(|e| serde_json::from_str(e).unwrap()).collect();
    assert_eq!(chunks[0]["choices"][0]["delta"]["role"], "assistant");
    let text: String = chunks.iter().filter_map(|c| c["choices"][0]["delta"]["content"].as_str()).collect();
    assert_eq!(text, cli["text"].as_str().unwrap());
    let fin = &chunks[chunks.len() - 2];
    assert_eq!(fin["choices"][0]["finish_reason"], cli["finish_reason"]);
    // OpenAI's include_usage: usage on exactly one chunk, the last, with no choices; every
    // other chunk has `usage: null`.
    assert_eq!(fin.get("usage"), Some(&Value::Null), "{fin}");
    assert_eq!(chunks.iter().filter(|c| !c["usage"].is_null()).count(), 1);
    assert!(chunks.iter().all(|c| c.get("usage").is_some()));
    let last = &chunks[chunks.len() - 1];
    assert_eq!(last["choices"], json!([]));
    assert!(last["usage"]["decode_tokens_per_s"].as_f64().unwrap() > 0.0);
    assert_eq!(last["usage"]["completion_tokens"], cli["ids"].as_array().unwrap().len());
    assert!(chunks.iter().all(|c| c["object"] == "chat.completion.chunk" && c["id"] == chunks[0]["id"]));
}

#[test]
fn typed_errors_for_bad_requests_and_limits() {
    let Some(s) = server() else { return };
    let a = s.addr();
    let post = |path: &str, body: &[u8]| request(a, "POST", path, &[AUTH, ("Content-Type", "application/json")], body);
    let check = |r: Resp, status: u16, code: &str| {
        assert_eq!(r.status, status, "{}", r.text());
        assert_eq!(r.error_code(), code, "{}", r.text());
        let e = &r.json()["error"];
        assert!(e["message"].as_str().is_some_and(|m| !m.is_empty()) && e["type"].is_string());
    };
    check(post("/v1/chat/completions", b"{not json"), 400, "invalid_json");
    check(post("/v1/chat/completions", b"{\"messages\": []}"), 400, "invalid_messages");
    check(post("/v1/completions", b"{\"prompt\": 5}"), 400, "invalid_prompt");
    check(post("/v1/completions", b"{\"prompt\": \"x\", \"max_tokens\": 65}"), 400, "max_tokens_exceeded");
    check(post("/v1/completions", b"{\"prompt\": \"x\", \"max_tokens\": 0}"), 400, "invalid_value");
    check(post("/v1/completions", b"{\"prompt\": \"x\", \"temperature\": \"hot\"}"), 400, "invalid_value");
    check(post("/v1/completions", b"{\"prompt\": \"x\", \"best_of\": 2}"), 400, "unsupported_parameter");
    // Parameters the engine does not implement, or that nobody defines, are named (`param`).
    let r = post("/v1/chat/completions", br#"{"messages": [{"role": "user", "content": "x"}], "functions": []}"#);
    assert_eq!(r.json()["error"]["param"], "functions");
    check(r, 400, "unsupported_parameter");
    let r = post("/v1/chat/completions", br#"{"messages": [{"role": "user", "content": "x"}], "tools": []}"#);
    assert_eq!(r.json()["error"]["param"], "tools");
    check(r, 400, "invalid_tools");
    let r = post("/v1/completions", br#"{"prompt": "x", "frobnicate": 1}"#);
    assert_eq!(r.json()["error"]["param"], "frobnicate");
    check(r, 400, "unknown_parameter");
    // Over the prompt-token limit (200): refused before any generation, also when streamed.
    let long = "word ".repeat(400);
    check(post("/v1/completions", json!({"prompt": long, "max_tokens": 2}).to_string().as_bytes()), 400, "context_length_exceeded");
    let r = post("/v1/completions", json!({"prompt": long, "max_tokens": 2, "stream": true}).to_string().as_bytes());
    assert_eq!(r.header("content-type"), Some("application/json"));
    check(r, 400, "context_length_exceeded");
    // Over the body limit (64 KiB).
    check(post("/v1/completions", json!({"prompt": "y".repeat(70 << 10)}).to_string().as_bytes()), 413, "body_too_large");
    check(get(a, "/v1/nothing", &[AUTH]), 404, "not_found");
    check(get(a, "/v1/completions", &[AUTH]), 405, "method_not_allowed");
    check(request(a, "POST", "/v1/completions", &[], b"{\"prompt\": \"x\"}"), 401, "invalid_api_key");
}

#[test]
fn logprobs_in_openai_shape() {
    let Some(s) = server() else { return };
    let body = json!({"messages": [{"role": "user", "content": "Name a color."}], "max_tokens": 4, "temperature": 0, "logprobs": true, "top_logprobs": 2});
    let r = post_json(s.addr(), "/v1/chat/completions", &[AUTH], &body);
    assert_eq!(r.status, 200, "{}", r.text());
    let v = r.json();
    let lp = &v["choices"][0]["logprobs"];
    assert_eq!(lp["refusal"], Value::Null);
    let content = lp["content"].as_array().unwrap();
    assert!(!content.is_empty());
    let text: String = content.iter().map(|e| e["token"].as_str().unwrap()).collect();
    assert_eq!(text, v["choices"][0]["message"]["content"].as_str().unwrap());
    for e in content {
        let top = e["top_logprobs"].as_array().unwrap();
        assert_eq!(top.len(), 2);
        // Greedy: the chosen token is the model's likeliest.
        assert_eq!((&top[0]["token"], &top[0]["logprob"]), (&e["token"], &e["logprob"]));
        assert!(e["logprob"].as_f64().unwrap() <= 0.0 && top[1]["logprob"].as_f64() <= top[0]["logprob"].as_f64());
        let t = e["token"].as_str().unwrap();
        if !t.contains('\u{FFFD}') {
            assert_eq!(e["bytes"].as_array().unwrap().iter().map(|b| b.as_u64().unwrap() as u8).collect::<Vec<_>>(), t.as_bytes());
        }
    }
}

/// OpenAI's `n`: every choice with its index, whole and streamed (the same seed gives the same
/// choices both ways), usage covering them all, and each choice's chunks in OpenAI's order.
#[test]
fn n_choices_whole_and_streamed() {
    let Some(s) = server() else { return };
    let body = json!({"messages": [{"role": "user", "content": "Write a word."}], "max_tokens": 6, "temperature": 1.2, "seed": 5, "n": 3, "logprobs": true});
    let r = post_json(s.addr(), "/v1/chat/completions", &[AUTH], &body);
    assert_eq!(r.status, 200, "{}", r.text());
    let v = r.json();
    let choices = v["choices"].as_array().unwrap();
    assert_eq!(choices.len(), 3);
    let mut whole = Vec::new();
    for (i, c) in choices.iter().enumerate() {
        assert_eq!(c["index"], i);
        let text = c["message"]["content"].as_str().unwrap();
        let lp: String = c["logprobs"]["content"].as_array().unwrap().iter().map(|e| e["token"].as_str().unwrap()).collect();
        assert_eq!(lp, text, "choice {i}'s logprobs are its own tokens");
        whole.push((text.to_string(), c["finish_reason"].as_str().unwrap().to_string()));
    }
    let u = &v["usage"];
    let tokens = u["completion_tokens"].as_u64().unwrap();
    assert!(tokens > 6 && tokens <= 18, "three choices' tokens: {u}");
    assert_eq!(u["total_tokens"].as_u64(), Some(u["prompt_tokens"].as_u64().unwrap() + tokens));
    // Streamed with the same seed: the same choices, each opened by its role chunk and closed
    // by its finish chunk, then one usage chunk.
    let mut stream_body = body.clone();
    stream_body["stream"] = json!(true);
    stream_body["stream_options"] = json!({"include_usage": true});
    let r = post_json(s.addr(), "/v1/chat/completions", &[AUTH], &stream_body);
    assert_eq!(r.status, 200, "{}", r.text());
    let events = r.sse();
    assert_eq!(events.last().map(String::as_str), Some("[DONE]"));
    let chunks: Vec<Value> = events[..events.len() - 1].iter().map(|e| serde_json::from_str(e).unwrap()).collect();
    let mut streamed = vec![(String::new(), String::new()); 3];
    let mut order = Vec::new();
    for c in &chunks[..chunks.len() - 1] {
        let ch = &c["choices"][0];
        let i = ch["index"].as_u64().unwrap() as usize;
        if ch["delta"]["role"] == "assistant" {
            order.push(format!("role {i}"));
        }
        streamed[i].0.push_str(ch["delta"]["content"].as_str().unwrap_or(""));
        if let Some(f) = ch["finish_reason"].as_str() {
            order.push(format!("finish {i}"));
            streamed[i].1 = f.to_string();
        }
    }
    assert_eq!(order, ["role 0", "finish 0", "role 1", "finish 1", "role 2", "finish 2"]);
    assert_eq!(streamed, whole);
    let last = chunks.last().unwrap();
    assert_eq!((&last["choices"], &last["usage"]["completion_tokens"]), (&json!([]), &json!(tokens)));
    // Past OpenAI's 128: a typed 400.
    let r = post_json(s.addr(), "/v1/completions", &[AUTH], &json!({"prompt": "x", "n": 129}));
    assert_eq!((r.status, r.json()["error"]["param"].as_str()), (400, Some("n")), "{}", r.text());
}

#[test]
fn logit_bias_forces_and_bans_tokens() {
    let Some(s) = server() else { return };
    let (h, _) = edgellm::gguf::read_header_file(common::real_model().unwrap()).unwrap();
    let tok = edgellm::tokenizer::Tokenizer::from_gguf(&h).unwrap();
    let id_of = |text: &str| {
        let ids = tok.encode(text, false, false);
        assert_eq!(ids.len(), 1, "{text:?} is one token");
        ids[0]
    };
    let complete = |bias: Value| {
        let body = json!({"prompt": "The capital of France is", "max_tokens": 3, "temperature": 0, "logit_bias": bias});
        let r = post_json(s.addr(), "/v1/completions", &[AUTH], &body);
        assert_eq!(r.status, 200, "{}", r.text());
        r.json()["choices"][0]["text"].as_str().unwrap().to_string()
    };
    let plain = complete(json!({}));
    // +100 on " banana": the greedy answer starts with it.
    let banana = id_of(" banana");
    assert!(complete(json!({ banana.to_string(): 100 })).starts_with(" banana"), "{plain:?}");
    // -100 on the greedy first token: another first token.
    let first = tok.encode(&plain, false, false)[0];
    let banned = complete(json!({ first.to_string(): -100 }));
    assert_ne!(tok.encode(&banned, false, false)[0], first, "{plain:?} -> {banned:?}");
    // An id the model does not have: a typed 400, nothing generated.
    let body = json!({"prompt": "x", "max_tokens": 2, "logit_bias": {"999999999": 1}});
    let r = post_json(s.addr(), "/v1/completions", &[AUTH], &body);
    assert_eq!(r.status, 400, "{}", r.text());
    assert_eq!(r.json()["error"]["param"], "logit_bias", "{}", r.text());
}

#[test]
fn cors_for_configured_origins_only() {
    let Some(s) = server() else { return };
    let a = s.addr();
    let pre = request(
        a,
        "OPTIONS",
        "/v1/chat/completions",
        &[("Origin", ORIGIN), ("Access-Control-Request-Method", "POST"), ("Access-Control-Request-Headers", "authorization, content-type")],
        b"",
    );
    assert_eq!(pre.status, 204);
    assert_eq!(pre.header("access-control-allow-origin"), Some(ORIGIN));
    assert!(pre.header("access-control-allow-methods").unwrap().contains("POST"));
    assert!(pre.header("access-control-allow-headers").unwrap().contains("authorization"));
    let other = request(a, "OPTIONS", "/v1/chat/completions", &[("Origin", "http://evil.test"), ("Access-Control-Request-Method", "POST")], b"");
    assert_eq!(other.header("access-control-allow-origin"), None);
    // Actual responses (errors included) carry the header for an allowed origin.
    let r = get(a, "/v1/models", &[("Origin", ORIGIN)]);
    assert_eq!(r.status, 401);
    assert_eq!(r.header("access-control-allow-origin"), Some(ORIGIN));
    let r = get(a, "/health", &[("Origin", "http://evil.test")]);
    assert_eq!(r.header("access-control-allow-origin"), None);
}

#[test]
fn a_client_that_disconnects_stops_its_generation() {
    let Some(s) = server() else { return };
    let a = s.addr();
    let cancelled = |s: &ServerHandle| health(s)["generations"]["cancelled"].as_u64().unwrap();
    let c0 = cancelled(s);
    // Streamed: read until the first token arrives, then hang up.
    let body = json!({"prompt": "Once upon a time", "max_tokens": 64, "temperature": 0, "stream": true}).to_string();
    let mut conn = send(a, "POST", "/v1/completions", &[AUTH, ("Content-Type", "application/json")], body.as_bytes());
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    while !String::from_utf8_lossy(&seen).contains("data: ") {
        let n = conn.read(&mut buf).unwrap();
        assert!(n > 0, "the stream ended early");
        seen.extend_from_slice(&buf[..n]);
    }
    drop(conn);
    assert!(wait_until(30, || cancelled(s) > c0), "the streamed generation was not cancelled");
    // Not streamed: hang up while it runs.
    let c1 = cancelled(s);
    let body = json!({"prompt": "Once upon a time", "max_tokens": 64, "temperature": 0}).to_string();
    let conn = send(a, "POST", "/v1/completions", &[AUTH, ("Content-Type", "application/json")], body.as_bytes());
    std::thread::sleep(Duration::from_millis(300));
    drop(conn);
    assert!(wait_until(60, || cancelled(s) > c1), "the non-streamed generation was not cancelled");
    // The server carries on.
    let r = post_json(a, "/v1/completions", &[AUTH], &json!({"prompt": "Hello", "max_tokens": 1, "temperature": 0}));
    assert_eq!(r.status, 200);
}
