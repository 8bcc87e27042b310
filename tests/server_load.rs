//! Load on the server: 50 concurrent requests against a queue of 8. Every request gets either
//! a complete response or a 429 with `Retry-After` (none hangs, none is lost), the server is
//! idle afterwards with every admitted request counted as completed, and its memory stays
//! bounded over repeated rounds (VmRSS of this process, which hosts the server).

mod common;
mod server_common;

use std::time::Instant;

use serde_json::json;
use server_common::*;

const CLIENTS: usize = 50;
const QUEUE: usize = 8;
const ROUNDS: usize = 2;

#[derive(Default, Debug)]
struct Tally {
    ok: usize,
    rejected: usize,
}

fn round(addr: std::net::SocketAddr, r: usize) -> Tally {
    let threads: Vec<_> = (0..CLIENTS)
        .map(|i| {
            std::thread::spawn(move || {
                // Alternate chat/completions and JSON/SSE; 1–2 tokens each.
                let stream = i % 2 == 1;
                let (path, body) = if i % 4 < 2 {
                    ("/v1/completions", json!({"prompt": format!("Count: {i} {r}"), "max_tokens": 1 + i % 2, "temperature": 0, "stream": stream}))
                } else {
                    ("/v1/chat/completions", json!({"messages": [{"role": "user", "content": format!("Hi {i}")}], "max_tokens": 1, "stream": stream}))
                };
                let resp = post_json(addr, path, &[], &body);
                (stream, resp)
            })
        })
        .collect();
    let mut t = Tally::default();
    for th in threads {
        let (stream, resp) = th.join().expect("a client thread hung up or panicked");
        match resp.status {
            200 if stream => {
                let ev = resp.sse();
                assert_eq!(ev.last().map(String::as_str), Some("[DONE]"), "{}", resp.text());
                let fin: serde_json::Value = serde_json::from_str(&ev[ev.len() - 2]).unwrap();
                assert!(fin["choices"][0]["finish_reason"].is_string(), "{fin}");
                t.ok += 1;
            }
            200 => {
                let v = resp.json();
                assert!(v["choices"][0]["finish_reason"].is_string(), "{v}");
                assert!(v["usage"]["completion_tokens"].as_u64().unwrap() >= 1);
                t.ok += 1;
            }
            429 => {
                assert_eq!(resp.error_code(), "queue_full");
                let secs: u64 = resp.header("retry-after").expect("Retry-After").parse().unwrap();
                assert!((1..=600).contains(&secs));
                t.rejected += 1;
            }
            other => panic!("unexpected status {other}: {}", resp.text()),
        }
    }
    t
}

#[test]
fn fifty_concurrent_requests_against_a_queue_of_eight() {
    let Some(model) = common::real_model() else { return };
    let s = start_server(&model, |c| c.queue = QUEUE);
    let a = s.addr();
    // Warm up once so the first round does not pay one-time allocations.
    assert_eq!(post_json(a, "/v1/completions", &[], &json!({"prompt": "Hi", "max_tokens": 1})).status, 200);
    let rss0 = vm_rss_kib();
    let mut rss = Vec::new();
    let mut total = Tally::default();
    let t0 = Instant::now();
    for r in 0..ROUNDS {
        let t = round(a, r);
        eprintln!("round {r}: {} complete, {} rejected with 429 ({:.1} s)", t.ok, t.rejected, t0.elapsed().as_secs_f64());
        assert_eq!(t.ok + t.rejected, CLIENTS, "a request was lost");
        // The running request may or may not have left the queue when the burst arrives, so
        // the queue's capacity is the floor (plus one when the worker took the first in time).
        assert!(t.ok >= QUEUE, "at least the queue's worth of requests complete: {t:?}");
        assert!(t.rejected > 0, "50 requests at once must overflow a queue of 8: {t:?}");
        total.ok += t.ok;
        total.rejected += t.rejected;
        rss.push(vm_rss_kib());
    }
    // Everything admitted ran to completion and was counted; nothing is left behind.
    let idle = wait_until(10, || {
        let h = get(a, "/health", &[]).json();
        h["queue"]["waiting"] == 0 && h["queue"]["running"] == 0
    });
    assert!(idle, "the queue did not drain");
    let q = s.queue_stats();
    use std::sync::atomic::Ordering::Relaxed;
    assert_eq!(q.completed.load(Relaxed) as usize, total.ok + 1);
    assert_eq!(q.rejected_full.load(Relaxed) as usize, total.rejected);
    assert_eq!(q.failed.load(Relaxed), 0);
    assert_eq!(q.cancelled.load(Relaxed), 0);
    // Bounded memory: the last rounds do not grow beyond the first (allocator noise allowed).
    let growth = rss[ROUNDS - 1].saturating_sub(rss[0]);
    eprintln!("VmRSS: before {rss0} KiB, after each round {rss:?} KiB; growth after round 1: {growth} KiB");
    assert!(growth < 24 << 10, "VmRSS grew by {growth} KiB between round 1 and round {ROUNDS}");
    assert!(rss[0].saturating_sub(rss0) < 64 << 10, "round 1 took {} KiB", rss[0] - rss0);
    s.stop();
}
