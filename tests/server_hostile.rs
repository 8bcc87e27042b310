//! The server under hostile clients (issue 17): slow bodies, connection exhaustion, DNS
//! rebinding, blind cross-site posts, and prompts that would hold the inference thread. Every
//! server listens on 127.0.0.1 and stops inside its test; every loop is bounded.

mod common;
mod server_common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use serde_json::json;
use server_common::{post_json, read_response, send, start_server, Resp};

fn model() -> std::path::PathBuf {
    common::data("tiny_llama.gguf")
}

/// One request written by hand (any Host, any headers), `Connection: close`.
fn raw(addr: SocketAddr, head: &str, body: &[u8]) -> Resp {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    s.write_all(head.replace('\n', "\r\n").as_bytes()).unwrap();
    s.write_all(body).unwrap();
    read_response(s).unwrap()
}

fn chat_body() -> Vec<u8> {
    json!({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2, "temperature": 0}).to_string().into_bytes()
}

#[test]
fn a_foreign_host_header_is_refused_and_ips_localhost_and_allowed_names_pass() {
    let s = start_server(&model(), |c| c.allowed_hosts = vec!["llm.lan".into()]);
    let a = s.addr();
    let get = |host: &str| raw(a, &format!("GET /v1/models HTTP/1.1\nHost: {host}\nConnection: close\n\n"), b"");
    // DNS rebinding: a hostile name resolving to 127.0.0.1 is still named in Host.
    let r = get("attacker.test:8080");
    assert_eq!((r.status, r.error_code()), (403, "host_not_allowed".to_string()));
    for ok in [a.to_string(), format!("localhost:{}", a.port()), "llm.lan".into()] {
        assert_eq!(get(&ok).status, 200, "{ok}");
    }
    // A request target in absolute form names its host too (and takes precedence over Host).
    let abs = |target_host: &str| raw(a, &format!("GET http://{target_host}/v1/models HTTP/1.1\nHost: {a}\nConnection: close\n\n"), b"");
    let r = abs("attacker.test:8080");
    assert_eq!((r.status, r.error_code()), (403, "host_not_allowed".to_string()));
    assert_eq!(abs(&a.to_string()).status, 200);
    // A preflight answers for this server's paths only.
    let options = |path: &str| raw(a, &format!("OPTIONS {path} HTTP/1.1\nHost: {a}\nConnection: close\n\n"), b"").status;
    assert_eq!((options("/v1/chat/completions"), options("/v1/models/x"), options("*")), (204, 204, 204));
    assert_eq!((options("/admin"), options("/v1/chat")), (404, 404));
}

#[test]
fn a_simple_cross_origin_post_is_refused_before_the_model_runs() {
    let s = start_server(&model(), |c| c.cors_origins = vec!["http://app.test".into()]);
    let a = s.addr();
    let body = chat_body();
    let post = |origin: &str, ctype: &str| {
        raw(
            a,
            &format!("POST /v1/chat/completions HTTP/1.1\nHost: {a}\nOrigin: {origin}\nContent-Type: {ctype}\nContent-Length: {}\nConnection: close\n\n", body.len()),
            &body,
        )
    };
    // A text/plain JSON post needs no preflight: a page anywhere could send it blind.
    let r = post("http://evil.test", "text/plain");
    assert_eq!((r.status, r.error_code()), (403, "origin_not_allowed".to_string()));
    assert_eq!(s.queue_stats().completed.load(std::sync::atomic::Ordering::Relaxed), 0, "the model never ran");
    // The configured origin, and clients that send no Origin (curl, SDKs), are served.
    assert_eq!(post("http://app.test", "application/json").status, 200);
    assert_eq!(post_json(a, "/v1/chat/completions", &[], &serde_json::from_slice(&body).unwrap()).status, 200);
}

#[test]
fn a_body_that_never_arrives_times_out() {
    let s = start_server(&model(), |c| c.body_timeout = Duration::from_millis(300));
    let a = s.addr();
    let mut c = TcpStream::connect(a).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    write!(c, "POST /v1/chat/completions HTTP/1.1\r\nHost: {a}\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{{\"mess").unwrap();
    let r = read_response(c).unwrap();
    assert_eq!((r.status, r.error_code()), (408, "body_timeout".to_string()));
}

#[test]
fn connections_holding_partial_bodies_cannot_lock_everyone_out() {
    // The default limit (256) and timeouts long enough that only eviction can save the
    // honest client.
    let s = start_server(&model(), |c| {
        c.body_timeout = Duration::from_secs(300);
        c.header_timeout = Duration::from_secs(300);
    });
    let a = s.addr();
    let n = 256;
    let mut slow = Vec::with_capacity(n + 8);
    for _ in 0..n + 8 {
        let mut c = TcpStream::connect(a).unwrap();
        write!(c, "POST /v1/chat/completions HTTP/1.1\r\nHost: {a}\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{{").unwrap();
        slow.push(c);
    }
    // Give the server time to have taken them all in (bounded: 5 s).
    let t0 = Instant::now();
    let r = post_json(a, "/v1/chat/completions", &[], &serde_json::from_slice(&chat_body()).unwrap());
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(t0.elapsed() < Duration::from_secs(60));
    // The evicted ones were closed (read gives EOF), the newest are still open.
    let mut closed = 0;
    for c in slow.iter_mut() {
        // Non-blocking: a closed socket reads EOF at once, an open one would block.
        c.set_nonblocking(true).unwrap();
        if matches!(c.read(&mut [0u8; 64]), Ok(0)) {
            closed += 1;
        }
    }
    assert!(closed >= 8, "{closed} slow connections were evicted");
}

#[test]
fn a_connection_past_the_limit_while_every_slot_is_busy_is_told_to_retry() {
    let s = start_server(&model(), |c| c.max_connections = 1);
    let a = s.addr();
    // A long generation holds the one slot busy: 128 sampled choices, each to its limit.
    let long = json!({"messages": [{"role": "user", "content": "hi"}], "n": 128, "max_tokens": 200, "temperature": 1.0, "stream": true});
    let mut busy = send(a, "POST", "/v1/chat/completions", &[("Content-Type", "application/json")], long.to_string().as_bytes());
    // Its first bytes come after the server read its body: from then on the slot is busy.
    busy.read_exact(&mut [0u8; 1]).unwrap();
    let t0 = Instant::now();
    let r = raw(a, &format!("GET /v1/models HTTP/1.1\nHost: {a}\nConnection: close\n\n"), b"");
    assert_eq!((r.status, r.error_code()), (503, "too_many_connections".to_string()), "{}", r.text());
    assert_eq!(r.header("retry-after"), Some("1"));
    assert_eq!(r.json()["error"]["type"], "server_error");
    assert!(t0.elapsed() < Duration::from_secs(10));
    // A refused POST is answered the same way (its body read first, so no reset).
    let r = raw(a, &format!("POST /v1/chat/completions HTTP/1.1\nHost: {a}\nContent-Type: application/json\nContent-Length: {}\nConnection: close\n\n", chat_body().len()), &chat_body());
    assert_eq!(r.status, 503, "{}", r.text());
    // The client goes away: its generation stops at the next step and the slot is free again.
    drop(busy);
    let t1 = Instant::now();
    loop {
        let r = post_json(a, "/v1/chat/completions", &[], &serde_json::from_slice(&chat_body()).unwrap());
        if r.status == 200 {
            break;
        }
        assert_eq!(r.status, 503, "{}", r.text());
        assert!(t1.elapsed() < Duration::from_secs(30), "the slot never came back");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_prefill_past_its_time_limit_fails_and_the_queue_moves_on() {
    let s = start_server(&model(), |c| c.max_prefill = Some(Duration::ZERO));
    let a = s.addr();
    let r = post_json(a, "/v1/chat/completions", &[], &serde_json::from_slice(&chat_body()).unwrap());
    assert_eq!((r.status, r.error_code()), (413, "prefill_timeout".to_string()), "{}", r.text());
    // The thread is free again: the next request is taken at once (and stopped the same way).
    let t0 = Instant::now();
    let r = post_json(a, "/v1/chat/completions", &[], &serde_json::from_slice(&chat_body()).unwrap());
    assert_eq!(r.status, 413);
    assert!(t0.elapsed() < Duration::from_secs(30));
    // The inference thread counts a job after its answer is sent: wait for the count (bounded).
    let failed = || s.queue_stats().failed.load(std::sync::atomic::Ordering::Relaxed);
    let t1 = Instant::now();
    while failed() < 2 && t1.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(failed(), 2);
}

/// A streamed answer the client does not read is not buffered without bound in the server: the
/// inference thread waits for the reader (its event channel holds `EVENTS_IN_FLIGHT` steps),
/// and the answer completes, whole, once the client reads. (Before, the thread ran the whole
/// generation into an unbounded channel: an unread `n = 128` stream with top logprobs grew the
/// server's memory by well over 100 MB.)
#[test]
fn an_unread_stream_holds_its_generation_back_and_completes_once_read() {
    use std::sync::atomic::Ordering::Relaxed;
    let s = start_server(&model(), |_| {});
    let a = s.addr();
    // ~100 steps × 128 choices, each chunk over a kilobyte with 20 top logprobs: far more than
    // the socket buffers of both ends hold.
    let body = json!({"messages": [{"role": "user", "content": "a"}], "max_tokens": 100, "n": 128, "temperature": 1.0, "seed": 7, "logprobs": true, "top_logprobs": 20, "stream": true}).to_string();
    let post = || send(a, "POST", "/v1/chat/completions", &[("Content-Type", "application/json")], body.as_bytes());
    let stats = s.queue_stats();
    let done = |n: u64| {
        let t = Instant::now();
        while stats.completed.load(Relaxed) < n && t.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(5));
        }
        stats.completed.load(Relaxed)
    };
    let whole = |c: TcpStream| {
        let r = read_response(c).unwrap();
        assert_eq!(r.status, 200);
        let text = r.text();
        assert!(text.trim_end().ends_with("data: [DONE]"), "{}", &text[text.len().saturating_sub(300)..]);
        text.matches("\"finish_reason\":\"length\"").count() + text.matches("\"finish_reason\":\"stop\"").count()
    };
    // Read at once: how long the generation takes.
    let t0 = Instant::now();
    assert_eq!(whole(post()), 128, "every choice finished");
    let took = t0.elapsed();
    assert_eq!(done(1), 1);
    // Unread for twice that (and a second more): the generation is still waiting for its reader.
    let c = post();
    std::thread::sleep(2 * took + Duration::from_secs(1));
    assert_eq!((stats.running.load(Relaxed), stats.completed.load(Relaxed)), (1, 1), "the generation waits for its reader (it took {took:?} read at once)");
    assert_eq!(whole(c), 128, "every choice finished");
    assert_eq!(done(2), 2);
}

/// `n` × `max_tokens` cannot hold the one inference thread past `max_decode`: then every choice
/// ends with "length" (what the running one generated is kept; later ones are empty), streamed
/// or not, and the next request is served as usual.
#[test]
fn decoding_past_its_time_limit_ends_every_choice_with_length() {
    let s = start_server(&model(), |c| {
        c.max_decode = Some(Duration::ZERO);
        c.max_tokens = 100_000;
    });
    let a = s.addr();
    let body = |stream: bool| json!({"messages": [{"role": "user", "content": "a"}], "max_tokens": 100_000, "n": 5, "temperature": 1.0, "stream": stream});
    let t0 = Instant::now();
    let r = post_json(a, "/v1/chat/completions", &[], &body(false));
    assert_eq!(r.status, 200, "{}", r.text());
    let v = r.json();
    let choices = v["choices"].as_array().unwrap();
    assert_eq!(choices.len(), 5);
    for (i, c) in choices.iter().enumerate() {
        assert_eq!((c["index"].as_u64(), c["finish_reason"].as_str(), c["message"]["content"].as_str()), (Some(i as u64), Some("length"), Some("")), "{c}");
    }
    assert_eq!(v["usage"]["completion_tokens"], 0);
    let r = post_json(a, "/v1/chat/completions", &[], &body(true));
    assert_eq!(r.status, 200);
    let events = r.sse();
    assert_eq!(events.last().map(String::as_str), Some("[DONE]"));
    let finishes: Vec<(u64, String)> = events
        .iter()
        .filter_map(|e| serde_json::from_str::<serde_json::Value>(e).ok())
        .filter(|v| v["choices"].as_array().is_some_and(|c| !c.is_empty()))
        .filter_map(|v| Some((v["choices"][0]["index"].as_u64()?, v["choices"][0]["finish_reason"].as_str()?.to_string())))
        .collect();
    assert_eq!(finishes, (0..5).map(|i| (i, "length".to_string())).collect::<Vec<_>>());
    assert!(t0.elapsed() < Duration::from_secs(30));
    // Not a failure: the next request runs (and is cut the same way).
    let r = post_json(a, "/v1/completions", &[], &json!({"prompt": "a", "max_tokens": 3}));
    assert_eq!((r.status, r.json()["choices"][0]["finish_reason"].as_str()), (200, Some("length")));
}
