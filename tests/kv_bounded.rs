//! The bounded KV cache (src/kv) through sessions on the tiny fixture models: a budget that is
//! never exceeded however long the generation, storage allocated once, eviction with attention
//! sinks that stays consistent with an explicit re-rotation of every cached key, int8 storage,
//! the `error` policy's codes, bytes per token against the formula, teacher-forced scoring, and
//! the host's `kv` options. Each test runs in well under a second.

mod engine_common;

use std::sync::Arc;

use edgellm::engine::{FinishReason, GenerateOptions, HeadMode, Session, SessionOptions};
use edgellm::host::{GenerateRequest, Host};
use edgellm::kv::{KvBudget, KvConfig, KvDtype, KvOptions, KvPolicy, KvStats};
use edgellm::model::Model;
use edgellm::sampling::SamplerConfig;
use edgellm::tokenizer::Tokenizer;
use engine_common::{data, load};

const MODELS: [&str; 4] = ["tiny_llama.gguf", "tiny_qwen2.gguf", "tiny_qwen3.gguf", "tiny_gemma3.gguf"];

fn opts(model: &Model) -> SessionOptions {
    SessionOptions { sampler: SamplerConfig::greedy(), ..SessionOptions::for_model(model) }
}

fn sampled(model: &Model, seed: u64) -> SessionOptions {
    SessionOptions { sampler: SamplerConfig { seed, ..SamplerConfig::default() }, ..SessionOptions::for_model(model) }
}

fn bounded(model: &Arc<Model>, o: SessionOptions, cfg: &KvConfig) -> Session {
    Session::with_kv(model.clone(), o, cfg).unwrap()
}

fn prompt(tok: &Tokenizer) -> Vec<u32> {
    tok.encode("hello world, this is a test", true, true)
}

fn log_softmax(row: &[f32]) -> Vec<f64> {
    let max = row.iter().fold(f32::NEG_INFINITY, |m, &v| m.max(v)) as f64;
    let lse = max + row.iter().map(|&v| (v as f64 - max).exp()).sum::<f64>().ln();
    row.iter().map(|&v| v as f64 - lse).collect()
}

/// A long pseudo-text of token ids (no special tokens), deterministic.
fn stream(n_vocab: usize, n: usize) -> Vec<u32> {
    let mut s = 0x2545_f491u32;
    let mut v = vec![2u32];
    while v.len() < n {
        s ^= s << 13;
        s ^= s >> 17;
        s ^= s << 5;
        v.push(10 + s % (n_vocab as u32 - 20));
    }
    v
}

/// Teacher-forced next-token log-probs of `ids` through `s`, in chunks of `chunk`.
fn scored(s: &mut Session, ids: &[u32], chunk: usize) -> Vec<Vec<f64>> {
    let n_vocab = s.model().n_vocab();
    let mut out = Vec::new();
    for c in ids.chunks(chunk) {
        let l = s.prefill_scored(c).unwrap();
        out.extend(l.chunks_exact(n_vocab).map(log_softmax));
    }
    out
}

fn mean_diff(a: &[Vec<f64>], b: &[Vec<f64>]) -> f64 {
    let n: usize = a.iter().map(|x| x.len()).sum();
    a.iter().zip(b).flat_map(|(x, y)| x.iter().zip(y).map(|(p, q)| (p - q).abs())).sum::<f64>() / n as f64
}

fn max_diff(a: &[Vec<f64>], b: &[Vec<f64>]) -> f64 {
    a.iter().zip(b).flat_map(|(x, y)| x.iter().zip(y).map(|(p, q)| (p - q).abs())).fold(0.0, f64::max)
}

#[test]
fn below_the_budget_a_bounded_cache_is_the_plain_one() {
    for name in MODELS {
        let (model, tok) = load(name);
        let p = prompt(&tok);
        let go = GenerateOptions { max_tokens: 40, stop: vec![], stop_on_eog: false };
        // The full head, so that the last step's logits are all there to compare.
        let mut plain = Session::new(model.clone(), opts(&model));
        plain.set_head_mode(HeadMode::Full);
        let a = plain.generate(&p, &tok, &go, &mut |_| true).unwrap();
        // Room for the prompt + 40: nothing is ever evicted, results are bit-identical.
        let mut b = bounded(&model, opts(&model), &KvConfig::window(p.len() + 40));
        b.set_head_mode(HeadMode::Full);
        let g = b.generate(&p, &tok, &go, &mut |_| true).unwrap();
        assert_eq!(a.ids, g.ids, "{name}");
        assert_eq!(plain.logits(), b.logits(), "{name}");
        assert_eq!(b.kv_stats().evicted, 0);
    }
}

/// Generates `n` tokens (no EOS stop) and returns the KV stats and session bytes after every
/// step.
fn long_generation(model: &Arc<Model>, tok: &Tokenizer, cfg: &KvConfig, n: usize) -> (Vec<(KvStats, usize)>, FinishReason) {
    let mut s = bounded(model, sampled(model, 7), cfg);
    let mut trace = Vec::new();
    let go = GenerateOptions { max_tokens: n, stop: vec![], stop_on_eog: false };
    let g = s
        .generate_observed(&prompt(tok), tok, &go, &mut |_| true, &mut |s, _| trace.push((s.kv_stats(), s.bytes())))
        .unwrap();
    assert_eq!(g.ids.len(), n);
    (trace, g.finish_reason)
}

#[test]
fn a_long_generation_stays_within_the_budget_and_allocates_once() {
    for name in ["tiny_gemma3.gguf", "tiny_llama.gguf"] {
        let (model, tok) = load(name);
        for dtype in [KvDtype::F16, KvDtype::Q8] {
            let cfg = KvConfig { dtype, ..KvConfig::window(64) };
            let (trace, finish) = long_generation(&model, &tok, &cfg, 300);
            assert_eq!(finish, FinishReason::Length);
            let full = trace.iter().position(|(k, _)| k.tokens_held == 64).expect("the cache fills");
            let (k_full, bytes_full) = trace[full].clone();
            assert_eq!(k_full.bytes, k_full.budget_bytes, "{name} {dtype:?}");
            assert_eq!(k_full.allocated_bytes, k_full.budget_bytes);
            for (k, session_bytes) in &trace[full..] {
                assert_eq!(k.tokens_held, 64);
                assert_eq!(k.evicted + 64, k.n_past);
                assert_eq!((k.bytes, k.allocated_bytes), (k_full.bytes, k_full.allocated_bytes), "KV bytes constant once full");
                assert_eq!(*session_bytes, bytes_full, "{name} {dtype:?}: no session buffer grows after the first fill");
            }
            let last = &trace.last().unwrap().0;
            assert!(last.evicted > 200, "{last:?}");
            assert_eq!(last.rebases, 0);
        }
    }
}

#[test]
fn sinks_rotated_on_read_equal_an_explicit_rerotation_of_every_key() {
    // Reference: re-base at every batch (5 tokens), i.e. every cached key is re-rotated to its
    // compacted position before each batch (llama.cpp's context shift, done batch by batch). Ours:
    // keys stay where they were written and only the sinks are rotated as they are read.
    // Both must give the same scores up to rounding (the reference re-rounds every key to f16
    // after each re-rotation; random-weight models amplify last-bit differences through their
    // quantized activations, to ~0.05 in log-prob on average); dropping the sinks instead must
    // differ by several times more, so the check can tell. (src/kv's unit tests check the
    // same property exactly, key by key.)
    for name in MODELS {
        let (model, _) = load(name);
        let ids = stream(model.n_vocab(), 160);
        let budget = 24;
        let ours = KvConfig::window(budget);
        let explicit = KvConfig { rebase_after: Some(budget + 1), ..KvConfig::window(budget) };
        let no_sinks = KvConfig { n_sink: 0, ..KvConfig::window(budget) };
        let mut s_ours = bounded(&model, opts(&model), &ours);
        let mut s_ref = bounded(&model, opts(&model), &explicit);
        let mut s_none = bounded(&model, opts(&model), &no_sinks);
        let a = scored(&mut s_ours, &ids, 5);
        let b = scored(&mut s_ref, &ids, 5);
        let c = scored(&mut s_none, &ids, 5);
        // Every batch after the first eviction re-rotates every key.
        assert!(s_ref.kv_stats().rebases >= (ids.len() - budget) / 5 - 1, "{:?}", s_ref.kv_stats());
        assert_eq!(s_ours.kv_stats().rebases, 0);
        let (d_ref, d_none) = (max_diff(&a[budget..], &b[budget..]), max_diff(&a[budget..], &c[budget..]));
        let (m_ref, m_none) = (mean_diff(&a[budget..], &b[budget..]), mean_diff(&a[budget..], &c[budget..]));
        eprintln!("{name}: |ours − re-rotated| max {d_ref:.2e} mean {m_ref:.2e}, |ours − no sinks| max {d_none:.2e} mean {m_none:.2e} (log-prob)");
        assert!(m_ref < 0.1 && d_ref < 1.0, "{name}: mean {m_ref} max {d_ref}");
        assert!(m_none > 4.0 * m_ref, "{name}: {m_none} vs {m_ref}");
        // Before anything is evicted, all three are the same cache.
        assert_eq!(max_diff(&a[..budget - 5], &b[..budget - 5]), 0.0);
    }
}

#[test]
fn int8_storage_is_close_to_f16() {
    for name in MODELS {
        let (model, tok) = load(name);
        let ids = stream(model.n_vocab(), 120);
        let f16 = scored(&mut bounded(&model, opts(&model), &KvConfig::window(48)), &ids, 8);
        let q8 = scored(&mut bounded(&model, opts(&model), &KvConfig { dtype: KvDtype::Q8, ..KvConfig::window(48) }), &ids, 8);
        let nll = |lp: &[Vec<f64>]| -> f64 { (1..ids.len()).map(|i| -lp[i - 1][ids[i] as usize]).sum::<f64>() / (ids.len() - 1) as f64 };
        let (p16, p8) = (nll(&f16).exp(), nll(&q8).exp());
        eprintln!("{name}: perplexity f16 {p16:.4}, q8 {p8:.4} ({:+.3}%)", 100.0 * (p8 / p16 - 1.0));
        // Random-weight models (perplexities near or above their vocabulary size) are far more
        // sensitive than real ones; the 1% criterion is measured on the real model.
        assert!((p8 / p16 - 1.0).abs() < 0.05, "{name}: {p16} vs {p8}");
        // Greedy continuations mostly agree (random-weight models have small margins).
        let p = prompt(&tok);
        let go = GenerateOptions { max_tokens: 24, stop: vec![], stop_on_eog: false };
        let a = bounded(&model, opts(&model), &KvConfig::window(48)).generate(&p, &tok, &go, &mut |_| true).unwrap();
        let b = bounded(&model, opts(&model), &KvConfig { dtype: KvDtype::Q8, ..KvConfig::window(48) })
            .generate(&p, &tok, &go, &mut |_| true)
            .unwrap();
        let same = a.ids.iter().zip(&b.ids).take_while(|(x, y)| x == y).count();
        eprintln!("{name}: greedy q8 = f16 for the first {same} of 24 tokens");
        assert!(same >= 12, "{name}");
    }
}

#[test]
fn policy_error_refuses_before_prefill_and_at_decode() {
    let (model, tok) = load("tiny_llama.gguf");
    let p = prompt(&tok);
    let cfg = KvConfig { policy: KvPolicy::Error, ..KvConfig::window(p.len() + 3) };
    // A prompt over the budget: refused before any work.
    let mut s = bounded(&model, opts(&model), &KvConfig { policy: KvPolicy::Error, ..KvConfig::window(p.len() - 1) });
    let e = s.prefill(&p).unwrap_err();
    assert_eq!(e.code(), "PROMPT_OVER_KV_BUDGET");
    assert_eq!((s.kv().n_past(), s.tokens().len(), s.metrics().prompt_tokens), (0, 0, 0));
    // Room for the prompt and 3 more: generate ends with "length", a further step is KV_FULL.
    let mut s = bounded(&model, opts(&model), &cfg);
    let g = s.generate(&p, &tok, &GenerateOptions { max_tokens: 50, stop: vec![], stop_on_eog: false }, &mut |_| true).unwrap();
    assert_eq!((g.finish_reason, g.ids.len()), (FinishReason::Length, 4));
    assert!(!s.can_step());
    assert_eq!(s.step().unwrap_err().code(), "KV_FULL");
    assert_eq!(s.kv_stats().evicted, 0);
    // Bad settings are typed errors.
    for bad in [KvConfig::window(4), KvConfig { budget: KvBudget::Bytes(100), ..KvConfig::window(0) }] {
        let code = Session::with_kv(model.clone(), opts(&model), &bad).err().unwrap().code();
        assert!(code == "BAD_KV_CONFIG" || code == "KV_BUDGET_TOO_SMALL", "{code}");
    }
}

#[test]
fn a_prompt_longer_than_the_budget_is_prefilled_with_eviction() {
    let (model, _) = load("tiny_gemma3.gguf");
    let ids = stream(model.n_vocab(), 200);
    let mut s = bounded(&model, SessionOptions { max_batch: 512, ..opts(&model) }, &KvConfig::window(32));
    s.prefill(&ids).unwrap();
    let k = s.kv_stats();
    assert_eq!((k.tokens_held, k.evicted, k.n_past), (32, 168, 200));
    // The same as feeding it in host-sized pieces.
    let mut t = bounded(&model, opts(&model), &KvConfig::window(32));
    for c in ids.chunks(7) {
        t.prefill(c).unwrap();
    }
    // Once the cache evicts, tokens go one at a time (`KvCache::next_batch_max`): every token
    // sees the budget's last tokens and the sinks, however the prompt was split.
    assert_eq!(s.logits(), t.logits());
    assert_eq!(s.tokens(), &ids[..]);
}

/// A conversation continued on its own cache gives what a fresh session given the whole
/// conversation gives, bit for bit, also once a window-sinks budget has evicted (the sessions
/// probe: a reused turn differed, the fresh prefill's batches evicting their share up front).
#[test]
fn a_continued_conversation_under_eviction_equals_a_fresh_one() {
    for name in MODELS {
        let (model, _) = load(name);
        let all = stream(model.n_vocab(), 70);
        for cfg in [KvConfig::window(24), KvConfig { dtype: KvDtype::Q8, ..KvConfig::window(30) }] {
            // Turn 1: a prompt, then generated tokens one at a time; turn 2: the rest at once.
            let mut reused = bounded(&model, opts(&model), &cfg);
            reused.prefill(&all[..20]).unwrap();
            for &id in &all[20..33] {
                reused.prefill(&[id]).unwrap();
            }
            reused.prefill(&all[33..]).unwrap();
            for max_batch in [512, 5] {
                let mut fresh = bounded(&model, SessionOptions { max_batch, ..opts(&model) }, &cfg);
                fresh.prefill(&all).unwrap();
                assert_eq!(fresh.logits(), reused.logits(), "{name} {cfg:?} max_batch {max_batch}");
                assert_eq!(fresh.kv_stats().evicted, reused.kv_stats().evicted);
            }
            assert!(reused.kv_stats().evicted > 0, "{name}: the budget evicted");
        }
    }
}

#[test]
fn scored_rows_equal_token_by_token_logits() {
    for name in MODELS {
        let (model, _) = load(name);
        let ids = stream(model.n_vocab(), 50);
        let n_vocab = model.n_vocab();
        // Plain context, a bounded cache that never has to evict, and ones that evict (f16 and
        // int8): scoring in chunks gives exactly the logits of feeding one token at a time.
        for cfg in [None, Some(KvConfig { dtype: KvDtype::Q8, ..KvConfig::window(50) }), Some(KvConfig::window(20)), Some(KvConfig { dtype: KvDtype::Q8, ..KvConfig::window(17) })] {
            let mk = || match &cfg {
                None => Session::new(model.clone(), opts(&model)),
                Some(c) => bounded(&model, opts(&model), c),
            };
            let mut a = mk();
            let mut rows = Vec::new();
            for c in ids.chunks(6) {
                rows.extend_from_slice(a.prefill_scored(c).unwrap());
            }
            assert_eq!(a.logits(), &rows[rows.len() - n_vocab..]);
            let mut b = mk();
            for (i, &id) in ids.iter().enumerate() {
                b.prefill(&[id]).unwrap();
                assert_eq!(&rows[i * n_vocab..(i + 1) * n_vocab], b.logits(), "{name} {cfg:?}: position {i}");
            }
        }
    }
}

/// Bytes per held token: `2 · n_layers · n_kv_heads · head_dim · bytes_per_element`, window
/// layers counted only while they have room. f16: 2 bytes per element. q8: 1 byte per element
/// plus a 2-byte f16 scale per block of 32 elements along a row of `n_kv_heads · head_dim`
/// values, i.e. 34/32 bytes per element when the row is a multiple of 32 (every real model);
/// a shorter row (tiny_qwen2: 16 values) has one partial block.
#[test]
fn bytes_per_held_token_follow_the_formula() {
    for name in MODELS {
        let (model, _) = load(name);
        let hp = model.hparams().clone();
        let (n_kv, hd) = (hp.n_head_kv, hp.head_dim_k);
        assert_eq!(hp.head_dim_k, hp.head_dim_v);
        let n_local = hp.swa_layers.iter().filter(|&&s| s).count();
        let n_global = hp.n_layer - n_local;
        let window = hp.sliding_window.unwrap_or(usize::MAX);
        for dtype in [KvDtype::F16, KvDtype::Q8] {
            let w = n_kv * hd;
            let per_layer_token = match dtype {
                KvDtype::F16 => 2 * w * 2,
                KvDtype::Q8 => 2 * (w + 2 * w.div_ceil(32)),
            };
            if w % 32 == 0 && dtype == KvDtype::Q8 {
                assert_eq!(per_layer_token * 32, 2 * n_kv * hd * 34);
            }
            let mut s = bounded(&model, opts(&model), &KvConfig { dtype, ..KvConfig::window(40) });
            let ids = stream(model.n_vocab(), 60);
            for (t, &id) in ids.iter().enumerate() {
                s.prefill(&[id]).unwrap();
                let held = (t + 1).min(40);
                let want = per_layer_token * (n_global * held + n_local * held.min(window));
                let k = s.kv_stats();
                assert_eq!(k.bytes, want, "{name} {dtype:?} after {} tokens", t + 1);
                if held <= window.min(40) {
                    assert_eq!(k.bytes, held * hp.n_layer * per_layer_token);
                }
            }
            let k = s.kv_stats();
            assert_eq!(k.budget_bytes, per_layer_token * (n_global * 40 + n_local * window.min(40)));
            assert_eq!(k.allocated_bytes, k.budget_bytes);
            let g = k.by_kind.iter().find(|b| b.kind == "global").unwrap();
            assert_eq!(g.bytes_per_token, per_layer_token * n_global);
            if n_local > 0 {
                let l = k.by_kind.iter().find(|b| b.kind == "local").unwrap();
                assert_eq!((l.bytes_per_token, l.tokens_held, l.capacity_tokens), (per_layer_token * n_local, window, window));
            }
        }
    }
}

#[test]
fn host_kv_options_reach_the_session_and_the_usage() {
    let bytes = std::fs::read(data("tiny_gemma3.gguf")).unwrap();
    let mut h = Host::new();
    // Bad options are refused at once when no model is needed to tell, at load otherwise.
    let bad = KvOptions { tokens: Some(3), sinks: Some(4), ..Default::default() };
    assert_eq!(h.set_kv_options(Some(bad)).unwrap_err().code, "BAD_KV_CONFIG");
    h.set_kv_options(Some(KvOptions { bytes: Some(10), ..Default::default() })).unwrap();
    h.load_begin(bytes.len() as u64, None);
    // Refused from the header (the memory estimate sizes the cache by the same rule), before
    // the weights arrive.
    assert_eq!(h.load_push(&bytes).unwrap_err().code, "KV_BUDGET_TOO_SMALL");
    let opts = KvOptions { tokens: Some(32), dtype: Some(KvDtype::Q8), ..Default::default() };
    h.set_kv_options(Some(opts)).unwrap();
    h.load_begin(bytes.len() as u64, None);
    h.load_push(&bytes).unwrap();
    let info = h.load_finish().unwrap().clone();
    assert_eq!((info.max_context, info.kv.budget_tokens, info.kv.dtype, info.kv.policy), (32, 32, "q8", "window-sinks"));
    let e = h.set_kv_options(Some(KvOptions { tokens: Some(1), bytes: Some(1), ..Default::default() })).unwrap_err();
    assert_eq!(e.code, "BAD_KV_CONFIG");
    assert_eq!(h.model_info().unwrap().kv.budget_tokens, 32);

    // A generation far past the budget: no error, the usage carries the KV figures.
    let req = GenerateRequest { prompt: Some("hello world".into()), max_tokens: Some(100), temperature: Some(0.0), ..Default::default() };
    h.generate_begin(&req, 0.0).unwrap();
    while !h.prefill_chunk().unwrap().done {}
    let mut held = Vec::new();
    loop {
        let ev = h.decode_step().unwrap();
        held.push(h.kv_stats().unwrap().tokens_held);
        if ev.finish_reason.is_some() {
            break;
        }
    }
    let r = h.generate_end(1.0).unwrap();
    assert!(r.ids.len() == 100 || r.finish_reason == "stop", "{r:?}");
    if r.ids.len() == 100 {
        assert_eq!(r.kv.tokens_held, 32);
        assert!(r.kv.evicted > 0);
        assert!(held.iter().all(|&t| t <= 32));
    }
    assert_eq!(r.kv.budget_bytes, r.kv.allocated_bytes.max(r.kv.bytes));
    let json = serde_json::to_value(&r).unwrap();
    for k in ["tokens_held", "evicted", "bytes", "budget_bytes"] {
        assert!(json["kv"][k].is_u64(), "{k}");
    }

    // Policy error: a prompt over the budget is refused before any work.
    h.set_kv_options(Some(KvOptions { tokens: Some(4), policy: Some(KvPolicy::Error), ..Default::default() })).unwrap();
    let long = GenerateRequest { prompt: Some("one two three four five six seven".into()), ..Default::default() };
    assert_eq!(h.generate_begin(&long, 0.0).unwrap_err().code, "PROMPT_OVER_KV_BUDGET");
    // Back to the plain context.
    h.set_kv_options(None).unwrap();
    assert_eq!(h.model_info().unwrap().kv.policy, "error");
    assert_eq!(h.model_info().unwrap().max_context, 256);
}
