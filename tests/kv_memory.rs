//! Memory stays flat once a bounded KV cache has filled: every heap byte of the process is
//! counted (a counting global allocator; this file holds a single test so nothing else
//! allocates meanwhile) during a generation many times longer than the budget.
//!
//! What may still grow is what the caller gets back: the token ids of the conversation
//! (4 bytes each, kept by the session for penalties and by the generation's result) and the
//! generated text. The test bounds growth after the fill by that, and checks the cache itself
//! and every session buffer are constant.

mod engine_common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};

use edgellm::engine::{GenerateOptions, Session, SessionOptions};
use edgellm::kv::{KvConfig, KvDtype};
use edgellm::sampling::SamplerConfig;

struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        LIVE.fetch_add(l.size() as isize, Ordering::Relaxed);
        System.alloc(l)
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        LIVE.fetch_sub(l.size() as isize, Ordering::Relaxed);
        System.dealloc(p, l)
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        LIVE.fetch_add(l.size() as isize, Ordering::Relaxed);
        System.alloc_zeroed(l)
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        LIVE.fetch_add(new as isize - l.size() as isize, Ordering::Relaxed);
        System.realloc(p, l, new)
    }
}

#[global_allocator]
static A: Counting = Counting;

#[test]
fn heap_is_flat_after_the_cache_fills() {
    for (name, dtype) in [("tiny_gemma3.gguf", KvDtype::F16), ("tiny_llama.gguf", KvDtype::Q8)] {
        let (model, tok) = engine_common::load(name);
        let cfg = KvConfig { dtype, ..KvConfig::window(64) };
        let o = SessionOptions { sampler: SamplerConfig { seed: 5, ..SamplerConfig::default() }, ..SessionOptions::for_model(&model) };
        let mut s = Session::with_kv(model.clone(), o, &cfg).unwrap();
        let p = tok.encode("hello world, this is a test", true, true);
        let n = 800;
        let mut live = Vec::with_capacity(n + 1);
        let mut session_bytes = Vec::with_capacity(n + 1);
        let mut text_len = 0usize;
        let go = GenerateOptions { max_tokens: n, stop: vec![], stop_on_eog: false };
        let g = s
            .generate_observed(&p, &tok, &go, &mut |t| {
                text_len += t.len();
                true
            }, &mut |s, _| {
                live.push(LIVE.load(Ordering::Relaxed));
                session_bytes.push(s.bytes());
            })
            .unwrap();
        assert_eq!(g.ids.len(), n);
        let k = s.kv_stats();
        assert_eq!((k.tokens_held, k.evicted), (64, p.len() + n - 1 - 64));
        // Full after 64 − prompt steps; measure from well after that.
        let from = 100;
        let growth = live[n - 1] - live[from];
        assert!(session_bytes[from..].iter().all(|&b| b == session_bytes[from]), "{name}: a session buffer grew");
        // ids (session history + generation result: 8 bytes per token) and text, each in a
        // Vec/String that may have doubled once: at most 2 × that.
        let steps = (n - 1 - from) as isize;
        let allowed = 2 * (8 * steps + text_len as isize);
        eprintln!(
            "{name} {dtype:?}: live heap +{growth} bytes over {steps} steps after the fill (ids + text allow {allowed}); KV {} bytes",
            k.allocated_bytes
        );
        assert!(growth <= allowed, "{name}: heap grew {growth} bytes over {steps} steps");
        drop(s);
    }
}
