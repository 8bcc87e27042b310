//! Prefix reuse on the real model (Gemma 3 270M: global layers + sliding-window rings of 512),
//! through the chat template as a chat client sends it: the next turn reuses the previous
//! prompt and answer, a regenerate reuses all but the last prompt token, and both give bit for
//! bit the logits and greedy tokens of a fresh session — with f16 and int8 KV, prefilling the
//! reused session's suffix in chunks of 16 and the fresh one in one batch. Prompts are short
//! (the native kernels are scalar).

mod common;

use std::sync::Arc;

use edgellm::engine::{Session, SessionOptions};
use edgellm::generate::{GenerateOptions, Generator};
use edgellm::kv::{KvConfig, KvDtype};
use edgellm::model::Model;
use edgellm::sampling::SamplerConfig;
use edgellm::tokenizer::{ChatMessage, Tokenizer};

fn session(model: &Arc<Model>, dtype: Option<KvDtype>) -> Session {
    let o = SessionOptions { sampler: SamplerConfig::greedy(), ..SessionOptions::for_model(model) };
    match dtype {
        None => Session::new(model.clone(), o),
        Some(dtype) => Session::with_kv(model.clone(), o, &KvConfig { dtype, ..KvConfig::window(1024) }).unwrap(),
    }
}

/// (cached, logits after the prompt, ids, text)
fn request(s: &mut Session, tok: &Tokenizer, prompt: &[u32], chunk: usize, max_tokens: usize) -> (usize, Vec<u32>, Vec<u32>, String) {
    let opts = GenerateOptions { max_tokens, stop: vec![], stop_on_eog: true };
    let mut g = Generator::start(s, tok, prompt.to_vec(), opts).unwrap();
    while !g.prefill(s, chunk).unwrap().done {}
    let logits = s.logits().iter().map(|x| x.to_bits()).collect();
    while g.step(s, tok).unwrap().finish_reason.is_none() {}
    let cached = g.cached_tokens();
    let r = g.into_generation(s);
    (cached, logits, r.ids, r.text)
}

#[test]
fn real_model_next_turn_and_regenerate_equal_a_fresh_run() {
    let Some(path) = common::real_model() else { return };
    let model = Arc::new(Model::load_file(&path).unwrap());
    let tok = Tokenizer::from_gguf(model.header()).unwrap();
    let q1 = ChatMessage::new("user", "Name one planet.");
    for dtype in [None, Some(KvDtype::Q8)] {
        let mut s = session(&model, dtype);
        let p1 = tok.encode_chat(std::slice::from_ref(&q1), true).unwrap();
        let (c1, _, a1, text1) = request(&mut s, &tok, &p1, 16, 6);
        assert_eq!(c1, 0);
        let msgs = [q1.clone(), ChatMessage::new("assistant", &text1), ChatMessage::new("user", "And a moon?")];
        let p2 = tok.encode_chat(&msgs, true).unwrap();
        let (c2, l2, ids2, _) = request(&mut s, &tok, &p2, 16, 6);
        // The template re-encodes the answer as it was sampled (for this prompt), so the whole
        // first turn — prompt and every answer token — is reused: all but the last answer token
        // were in the KV cache (that one was sampled, never run: it is prefilled with the rest).
        assert_eq!(p2[..p1.len() + a1.len()], [&p1[..], &a1[..]].concat()[..], "{dtype:?}: turn 2 starts with turn 1");
        assert_eq!(c2, p1.len() + a1.len() - 1, "{dtype:?}: cached tokens of the next turn");
        let mut f = session(&model, dtype);
        let (fc, fl, fids, _) = request(&mut f, &tok, &p2, usize::MAX, 6);
        assert_eq!(fc, 0);
        assert!(l2 == fl, "{dtype:?}: next-turn logits differ from a fresh prefill");
        assert_eq!(ids2, fids, "{dtype:?}: next-turn tokens differ from a fresh run");
        // Regenerate: the same messages again.
        let (c3, l3, ids3, _) = request(&mut s, &tok, &p2, 16, 6);
        assert_eq!(c3, p2.len() - 1, "{dtype:?}: regenerate keeps all but the last prompt token");
        assert!(l3 == fl, "{dtype:?}: regenerated logits differ from a fresh prefill");
        assert_eq!(ids3, fids);
        eprintln!("{dtype:?}: turn 2 prompt {} tokens, {} reused; answer {:?}", p2.len(), c2, tok.decode(&ids2, Default::default()).unwrap());
    }
}
