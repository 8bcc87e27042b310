//! Prefix reuse across requests (`Session::reuse_prefix` through the one driver,
//! `edgellm::generate::Generator`) on the tiny fixture models: the next chat turn, a regenerated
//! answer, an edited earlier message and a different conversation keep what the cache can serve
//! and give bit-for-bit what a fresh session gives (logits after the prompt, greedy tokens), in
//! any prefill chunking; with f16 and int8 storage; sliding-window rings serve a rollback only
//! while they have not wrapped; after an eviction (`window-sinks`) the cache keeps extending
//! itself and a rollback means a full prefill.

mod engine_common;

use std::sync::Arc;

use edgellm::engine::{Session, SessionOptions};
use edgellm::generate::{GenerateOptions, Generator};
use edgellm::gguf::Value;
use edgellm::kv::{KvConfig, KvDtype, KvPolicy};
use edgellm::model::Model;
use edgellm::sampling::SamplerConfig;
use edgellm::tokenizer::Tokenizer;
use engine_common::{load, load_with, text_ids};

const MODELS: [&str; 4] = ["tiny_llama.gguf", "tiny_qwen2.gguf", "tiny_qwen3.gguf", "tiny_gemma3.gguf"];

/// How a test session's KV cache is made.
#[derive(Clone, Copy, Debug)]
enum Cache {
    Plain,
    Bounded(KvDtype, usize),
}

fn session(model: &Arc<Model>, cache: Cache) -> Session {
    let o = SessionOptions { sampler: SamplerConfig::greedy(), max_batch: 512, ..SessionOptions::for_model(model) };
    match cache {
        Cache::Plain => Session::new(model.clone(), o),
        Cache::Bounded(dtype, tokens) => Session::with_kv(model.clone(), o, &KvConfig { dtype, ..KvConfig::window(tokens) }).unwrap(),
    }
}

fn no_eog(max_tokens: usize) -> GenerateOptions {
    GenerateOptions { max_tokens, stop: vec![], stop_on_eog: false }
}

/// One request through the driver, prefilling in chunks of `chunk`; returns (cached tokens,
/// logits after the prompt, generated ids).
fn request(s: &mut Session, tok: &Tokenizer, prompt: &[u32], chunk: usize, max_tokens: usize) -> (usize, Vec<f32>, Vec<u32>) {
    let mut g = Generator::start(s, tok, prompt.to_vec(), no_eog(max_tokens)).unwrap();
    while !g.prefill(s, chunk).unwrap().done {}
    let logits = s.logits().to_vec();
    for _ in 0..max_tokens + 1 {
        if g.step(s, tok).unwrap().finish_reason.is_some() {
            break;
        }
    }
    let cached = g.cached_tokens();
    (cached, logits, g.into_generation(s).ids)
}

/// The same request on a fresh session, the whole prompt in one prefill call.
fn fresh(model: &Arc<Model>, tok: &Tokenizer, cache: Cache, prompt: &[u32], max_tokens: usize) -> (Vec<f32>, Vec<u32>) {
    let mut s = session(model, cache);
    let (cached, logits, ids) = request(&mut s, tok, prompt, usize::MAX, max_tokens);
    assert_eq!(cached, 0);
    (logits, ids)
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

/// Turn 1, then the next turn, a regenerate, an edit and a different conversation, each
/// compared with a fresh session (bit for bit) and checked for what it reused.
fn conversation_cases(model: &Arc<Model>, tok: &Tokenizer, cache: Cache, label: &str) {
    let nv = model.n_vocab();
    let bos = tok.encode("", true, false);
    let p1: Vec<u32> = bos.iter().copied().chain(text_ids(nv, 7, 13)).collect();
    let mut s = session(model, cache);
    let (c, _, a1) = request(&mut s, tok, &p1, 5, 6);
    assert_eq!(c, 0, "{label}: an empty cache has nothing to reuse");
    let t1: Vec<u32> = p1.iter().chain(&a1).copied().collect();
    assert_eq!(s.tokens(), &t1[..]);

    let check = |s: &mut Session, prompt: &[u32], chunk: usize, want_cached: usize, case: &str| {
        // A rollback the cache cannot serve (a wrapped ring: the tiny gemma's window is 8)
        // falls back to a full prefill.
        let rollback = want_cached < s.kv().n_past();
        let want_cached = if rollback && !s.kv().can_roll_back() { 0 } else { want_cached };
        let (cached, logits, ids) = request(s, tok, prompt, chunk, 5);
        assert_eq!(cached, want_cached, "{label} {case}: cached tokens");
        let (fl, fids) = fresh(model, tok, cache, prompt, 5);
        assert_eq!(bits(&logits), bits(&fl), "{label} {case}: logits after the prompt differ from a fresh prefill");
        assert_eq!(ids, fids, "{label} {case}: greedy tokens differ from a fresh run");
        prompt.iter().chain(&ids).copied().collect::<Vec<u32>>()
    };
    // The next turn: everything so far + a new message. All of it is kept; the last answer
    // token, sampled but never run, is prefilled with the message, so the cache held one less.
    let p2: Vec<u32> = t1.iter().copied().chain(text_ids(nv, 11, 9)).collect();
    let t2 = check(&mut s, &p2, 4, t1.len() - 1, "next turn");
    // Regenerate: the same prompt again (the answer is replaced): all but its last token kept.
    check(&mut s, &p2, 3, p2.len() - 1, "regenerate");
    // An earlier message edited at position 9: reuse up to the edit.
    let mut p3 = t2.clone();
    p3[9] = if p3[9] == 12 { 13 } else { 12 };
    check(&mut s, &p3, 7, 9, "edited earlier message");
    // Another conversation: only what it shares (the BOS, if any) is kept.
    let p4: Vec<u32> = bos.iter().copied().chain(text_ids(nv, 99, 17)).collect();
    check(&mut s, &p4, 2, bos.len(), "different conversation");
}

#[test]
fn reuse_equals_a_fresh_run_f16_and_int8() {
    for name in MODELS {
        let (model, tok) = load(name);
        conversation_cases(&model, &tok, Cache::Plain, &format!("{name} plain"));
        for dtype in [KvDtype::F16, KvDtype::Q8] {
            conversation_cases(&model, &tok, Cache::Bounded(dtype, 256), &format!("{name} {dtype:?}"));
        }
    }
}

/// A model whose sliding-window layers hold only `window` positions.
fn gemma_window(window: u32) -> (Arc<Model>, Tokenizer) {
    let (m, t) = load_with("tiny_gemma3.gguf", "gemma3.attention.sliding_window", Value::U32(window));
    assert!(m.hparams().swa_layers.iter().any(|&s| s), "the tiny gemma has local layers");
    assert_eq!(m.hparams().sliding_window, Some(window as usize));
    (m, t)
}

#[test]
fn sliding_window_rings_serve_rollbacks_only_before_they_wrap() {
    let (wide, wide_tok) = gemma_window(64);
    let (model, tok) = gemma_window(24);
    let nv = model.n_vocab();
    for dtype in [KvDtype::F16, KvDtype::Q8] {
        let cache = Cache::Bounded(dtype, 256);
        // Within the window: the whole conversation (< 64 tokens) stays in the rings, so every
        // rollback is served.
        let mut s = session(&wide, cache);
        request(&mut s, &wide_tok, &text_ids(nv, 1, 60), usize::MAX, 3);
        assert!(s.kv().can_roll_back(), "63 positions in a window of 64");
        conversation_cases(&wide, &wide_tok, cache, &format!("window 64 {dtype:?}"));

        // Past the window: 30 prompt tokens + 4 generated.
        let p1 = text_ids(nv, 5, 30);
        let mut s = session(&model, cache);
        let (_, _, a1) = request(&mut s, &tok, &p1, 8, 4);
        assert!(!s.kv().can_roll_back(), "the rings wrapped");
        // Going forward is always served (and exact).
        let t1: Vec<u32> = p1.iter().chain(&a1).copied().collect();
        let p2: Vec<u32> = t1.iter().copied().chain(text_ids(nv, 3, 6)).collect();
        let (c, l, ids) = request(&mut s, &tok, &p2, 5, 4);
        assert_eq!(c, t1.len() - 1, "{dtype:?}: extension reused (the pending answer token is prefilled)");
        let (fl, fids) = fresh(&model, &tok, cache, &p2, 4);
        assert_eq!((bits(&l), ids), (bits(&fl), fids.clone()), "{dtype:?}: extension past the window equals a fresh run");
        // A rollback (regenerate) needs positions the rings overwrote: a full prefill, exact.
        let (c, l, ids) = request(&mut s, &tok, &p2, 5, 4);
        assert_eq!(c, 0, "{dtype:?}: rollback past a wrapped ring is a full prefill");
        assert_eq!((bits(&l), ids), (bits(&fl), fids), "{dtype:?}: the full prefill equals a fresh run");
    }
}

#[test]
fn after_an_eviction_the_cache_extends_itself_and_a_rollback_prefills_afresh() {
    for name in MODELS {
        let (model, tok) = load(name);
        let nv = model.n_vocab();
        let cache = Cache::Bounded(KvDtype::F16, 24);
        let p1 = text_ids(nv, 21, 30);
        let mut s = session(&model, cache);
        let (_, _, a1) = request(&mut s, &tok, &p1, usize::MAX, 5);
        assert!(s.kv().evicted() > 0, "{name}: the budget of 24 evicted");
        assert_eq!(s.kv().policy(), KvPolicy::WindowSinks);

        // The next turn continues the bounded cache: what the same session gives when fed the
        // new tokens directly (no reuse logic involved).
        let t1: Vec<u32> = p1.iter().chain(&a1).copied().collect();
        let suffix = text_ids(nv, 8, 7);
        let p2: Vec<u32> = t1.iter().copied().chain(suffix.iter().copied()).collect();
        let mut manual = session(&model, cache);
        manual.prefill(&p1).unwrap();
        for &want in &a1 {
            assert_eq!(manual.step().unwrap(), want);
        }
        manual.prefill(&suffix).unwrap();
        let (c, l, _) = request(&mut s, &tok, &p2, usize::MAX, 3);
        assert_eq!(c, t1.len() - 1, "{name}: everything held is kept (the pending answer token is prefilled)");
        assert_eq!(bits(&l), bits(manual.logits()), "{name}: extension = the cache's own continuation");

        // Regenerate after an eviction: the cache cannot go back, so a full prefill, equal to a
        // fresh bounded session's.
        let (c, l, ids) = request(&mut s, &tok, &p2, usize::MAX, 3);
        assert_eq!(c, 0, "{name}: a rollback past an eviction reuses nothing");
        let (fl, fids) = fresh(&model, &tok, cache, &p2, 3);
        assert_eq!((bits(&l), ids), (bits(&fl), fids), "{name}: after the fallback the result is a fresh run's");
    }
}

#[test]
fn a_cancelled_prefill_leaves_a_reusable_cache() {
    let (model, tok) = load("tiny_llama.gguf");
    let nv = model.n_vocab();
    let p: Vec<u32> = text_ids(nv, 17, 20);
    let mut s = session(&model, Cache::Plain);
    let mut g = Generator::start(&s, &tok, p.clone(), no_eog(4)).unwrap();
    g.prefill(&mut s, 8).unwrap();
    drop(g); // the request went away after one chunk
    // A request that never prefills (a token count, a refusal) changes nothing.
    let other = text_ids(nv, 3, 12);
    let g = Generator::start(&s, &tok, other, no_eog(4)).unwrap();
    assert_eq!(g.cached_tokens(), 0);
    drop(g);
    assert_eq!(s.tokens(), &p[..8]);
    let (c, l, ids) = request(&mut s, &tok, &p, 5, 4);
    assert_eq!(c, 8, "the chunk already run is kept");
    let (fl, fids) = fresh(&model, &tok, Cache::Plain, &p, 4);
    assert_eq!((bits(&l), ids), (bits(&fl), fids));
}
