//! Saved conversations (`edgellm::snapshot`, `Session::save_snapshot` / `restore_snapshot`) on
//! the tiny fixture models: a restored session continues exactly as the saved one would (also
//! after evictions and with wrapped sliding-window rings, f16 and int8), the next request
//! reuses it, and another model, other KV settings, a flipped byte or a truncated file are typed
//! errors that leave the session as it was.

mod engine_common;

use std::sync::Arc;

use edgellm::engine::{Session, SessionOptions};
use edgellm::generate::{GenerateOptions, Generator};
use edgellm::kv::{KvConfig, KvDtype};
use edgellm::model::Model;
use edgellm::sampling::SamplerConfig;
use edgellm::tokenizer::Tokenizer;
use engine_common::{load, text_ids as ids};

const SHA: &str = "00aa";

fn session(model: &Arc<Model>, kv: &KvConfig) -> Session {
    let o = SessionOptions { sampler: SamplerConfig::greedy(), ..SessionOptions::for_model(model) };
    Session::with_kv(model.clone(), o, kv).unwrap()
}

/// (cached, logits bits, ids)
fn request(s: &mut Session, tok: &Tokenizer, prompt: &[u32], n: usize) -> (usize, Vec<u32>, Vec<u32>) {
    let mut g = Generator::start(s, tok, prompt.to_vec(), GenerateOptions { max_tokens: n, stop: vec![], stop_on_eog: false }).unwrap();
    while !g.prefill(s, 5).unwrap().done {}
    let l = s.logits().iter().map(|x| x.to_bits()).collect();
    while g.step(s, tok).unwrap().finish_reason.is_none() {}
    let c = g.cached_tokens();
    (c, l, g.into_generation(s).ids)
}

#[test]
fn a_restored_session_continues_exactly_as_the_saved_one() {
    for name in ["tiny_llama.gguf", "tiny_qwen3.gguf", "tiny_gemma3.gguf"] {
        let (model, tok) = load(name);
        let nv = model.n_vocab();
        // 30 + 4 tokens: the gemma's window of 8 has wrapped; a budget of 24 has evicted.
        for kv in [KvConfig::window(256), KvConfig { dtype: KvDtype::Q8, ..KvConfig::window(256) }, KvConfig::window(24)] {
            let mut a = session(&model, &kv);
            let p1 = ids(nv, 3, 30);
            let (_, _, a1) = request(&mut a, &tok, &p1, 4);
            let saved = a.save_snapshot(SHA);
            let mut b = session(&model, &kv);
            b.prefill(&ids(nv, 9, 5)).unwrap(); // some other conversation, replaced
            assert_eq!(b.restore_snapshot(&saved, SHA).unwrap(), p1.len() + a1.len());
            assert_eq!(b.tokens(), a.tokens());
            assert_eq!(b.kv_stats(), a.kv_stats(), "{name} {kv:?}");
            let p2: Vec<u32> = p1.iter().chain(&a1).copied().chain(ids(nv, 4, 6)).collect();
            let ra = request(&mut a, &tok, &p2, 4);
            let rb = request(&mut b, &tok, &p2, 4);
            // All of it is reused; its last answer token was sampled, never run (it is prefilled).
            assert_eq!(rb.0, p1.len() + a1.len() - 1, "{name} {kv:?}: the restored conversation is reused");
            assert_eq!(ra, rb, "{name} {kv:?}: restored = saved, bit for bit");
        }
    }
}

#[test]
fn mismatch_and_corruption_are_typed_errors_that_change_nothing() {
    let (model, tok) = load("tiny_llama.gguf");
    let nv = model.n_vocab();
    let kv = KvConfig::window(64);
    let mut a = session(&model, &kv);
    let p = ids(nv, 5, 12);
    request(&mut a, &tok, &p, 3);
    let saved = a.save_snapshot(SHA);

    let mut b = session(&model, &kv);
    let p_b = ids(nv, 6, 10);
    let before = request(&mut b, &tok, &p_b, 3);
    let tokens_b = b.tokens().to_vec();
    let code = |b: &mut Session, bytes: &[u8], sha: &str| b.restore_snapshot(bytes, sha).unwrap_err().code();
    assert_eq!(code(&mut b, &saved, "ffee"), "SESSION_MISMATCH", "another model");
    let mut q8 = session(&model, &KvConfig { dtype: KvDtype::Q8, ..kv.clone() });
    assert_eq!(code(&mut q8, &saved, SHA), "SESSION_MISMATCH", "int8 vs f16");
    let mut small = session(&model, &KvConfig::window(48));
    assert_eq!(code(&mut small, &saved, SHA), "SESSION_MISMATCH", "another budget");
    let (other, _) = load("tiny_qwen2.gguf");
    assert_eq!(code(&mut session(&other, &kv), &saved, SHA), "SESSION_MISMATCH", "another geometry");
    for at in [0, 9, 20, saved.len() / 2, saved.len() - 40, saved.len() - 1] {
        let mut bad = saved.clone();
        bad[at] ^= 0x10;
        assert_eq!(code(&mut b, &bad, SHA), "SESSION_CORRUPT", "flipped byte at {at}");
    }
    for len in [0, 10, 47, saved.len() / 2, saved.len() - 1] {
        assert_eq!(code(&mut b, &saved[..len], SHA), "SESSION_CORRUPT", "truncated to {len}");
    }
    // A well-formed snapshot whose counts lie (checksum recomputed): still refused.
    let mut lie = saved[..saved.len() - 32].to_vec();
    let m = u32::from_le_bytes(lie[12..16].try_into().unwrap()) as usize;
    let json = String::from_utf8(lie[16..16 + m].to_vec()).unwrap().replace("\"n_past\":14", "\"n_past\":13");
    assert_eq!(json.len(), m, "the edit keeps the length");
    lie[16..16 + m].copy_from_slice(json.as_bytes());
    let mut h = edgellm::sha256::Sha256::new();
    h.update(&lie);
    lie.extend_from_slice(&h.digest());
    assert_eq!(code(&mut b, &lie, SHA), "SESSION_CORRUPT", "counts that do not match the tokens");
    // Rows holding an Inf or NaN (checksum recomputed), f16 and int8 scales: refused at restore,
    // not left to fail the next step as a broken model.
    let resum = |mut body: Vec<u8>| {
        let mut h = edgellm::sha256::Sha256::new();
        h.update(&body);
        body.extend_from_slice(&h.digest());
        body
    };
    for (cfg, what) in [(kv.clone(), "f16"), (KvConfig { dtype: KvDtype::Q8, ..kv.clone() }, "int8")] {
        let mut s = session(&model, &cfg);
        request(&mut s, &tok, &p, 3);
        let good = s.save_snapshot(SHA);
        let mut nan = good[..good.len() - 32].to_vec();
        let rows_at = nan.len() - s.kv().export_rows_bytes();
        // The first row's first f16 (F16) or first block's scale (int8): all ones, a NaN.
        nan[rows_at..rows_at + 2].copy_from_slice(&0x7e00u16.to_le_bytes());
        let mut fresh = session(&model, &cfg);
        assert_eq!(code(&mut fresh, &resum(nan), SHA), "SESSION_CORRUPT", "{what}: a NaN row");
        assert_eq!(fresh.restore_snapshot(&good, SHA).unwrap(), s.tokens().len(), "{what}: the good one restores");
        assert_eq!(good.capacity(), good.len(), "{what}: the snapshot's buffer was sized once");
    }
    // Nothing changed: the session still holds its conversation and gives the same results.
    assert_eq!(b.tokens(), &tokens_b[..]);
    let again = request(&mut b, &tok, &p_b, 3);
    assert_eq!(again.1, before.1);
    assert_eq!(again.2, before.2);
}
