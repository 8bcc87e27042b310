//! Log probabilities (`GenerateRequest::logprobs`, OpenAI's `logprobs` / `top_logprobs`) on the
//! tiny synthetic model: the model's own distribution (log-softmax of the raw logits, checked
//! against an independent computation), the same whatever the sampling settings, ordered
//! alternatives, and the streamed entries adding up to the result's.

use edgellm::engine::{Session, SessionOptions};
use edgellm::host::{GenerateRequest, Host};
use edgellm::model::Model;
use edgellm::tokenizer::Tokenizer;
use std::sync::Arc;

mod common;

const TINY: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/tiny_llama.gguf");

fn host() -> Host {
    let bytes = std::fs::read(TINY).unwrap();
    let mut h = Host::new();
    h.load_begin(bytes.len() as u64, None);
    h.load_push(&bytes).unwrap();
    h.load_finish().unwrap();
    h
}

fn request(temperature: f32, logprobs: usize) -> GenerateRequest {
    GenerateRequest {
        kind: Some("completion".into()),
        prompt: Some("hello world".into()),
        max_tokens: Some(6),
        temperature: Some(temperature),
        repetition_penalty: Some(if temperature > 0.0 { 1.3 } else { 1.0 }),
        seed: Some(7),
        logprobs: Some(logprobs),
        ..Default::default()
    }
}

/// Runs `req`; returns the result and the entries the step events carried, in order.
fn run(h: &mut Host, req: &GenerateRequest) -> (edgellm::host::GenerateResult, Vec<edgellm::generate::TokenLogprob>) {
    h.generate_begin(req, 0.0).unwrap();
    while !h.prefill_chunk().unwrap().done {}
    let mut streamed = Vec::new();
    for _ in 0..100 {
        let ev = h.decode_step().unwrap();
        streamed.extend(ev.logprobs);
        if ev.finish_reason.is_some() {
            break;
        }
    }
    (h.generate_end(1.0).unwrap(), streamed)
}

#[test]
fn logprobs_are_the_models_distribution_whatever_the_sampling() {
    let mut h = host();
    let (greedy, streamed) = run(&mut h, &request(0.0, 5));
    let entries = greedy.logprobs.clone().expect("logprobs were asked for");
    assert_eq!(streamed, entries, "the step events hand out every entry once, in order");
    assert!(!entries.is_empty() && entries.len() <= greedy.ids.len());
    for e in &entries {
        assert_eq!(e.top_logprobs.len(), 5);
        assert!(e.logprob <= 0.0);
        assert!(e.top_logprobs.windows(2).all(|w| w[0].logprob >= w[1].logprob));
        let mass: f64 = e.top_logprobs.iter().map(|t| (t.logprob as f64).exp()).sum();
        assert!(mass <= 1.0 + 1e-5, "{mass}");
        // Greedy: the chosen token is the likeliest.
        assert_eq!((&e.top_logprobs[0].token, e.top_logprobs[0].logprob), (&e.token, e.logprob));
    }

    // An independent log-softmax of the prompt's logits gives the first entry.
    let model = Arc::new(Model::load_file(std::path::Path::new(TINY)).unwrap());
    let tok = Tokenizer::from_gguf(model.header()).unwrap();
    let mut s = Session::new(model.clone(), SessionOptions::for_model(&model));
    s.prefill(&tok.encode("hello world", true, true)).unwrap();
    let logits = s.logits();
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max) as f64;
    let lse = max + logits.iter().map(|&v| (v as f64 - max).exp()).sum::<f64>().ln();
    let first = greedy.ids[0] as usize;
    assert!((entries[0].logprob as f64 - (logits[first] as f64 - lse)).abs() < 1e-5);

    // Sampled with temperature and a penalty: the first position's figures are the same (the
    // model's distribution, not the sampler's).
    let (sampled, _) = run(&mut h, &request(1.5, 5));
    assert_eq!(sampled.logprobs.unwrap()[0].top_logprobs, entries[0].top_logprobs);

    // top_logprobs 0: the token's own figure only; off: nothing computed.
    let (zero, _) = run(&mut h, &request(0.0, 0));
    let z = zero.logprobs.unwrap();
    assert!(z.iter().all(|e| e.top_logprobs.is_empty()));
    assert_eq!(z[0].logprob, entries[0].logprob);
    let (off, streamed) = run(&mut h, &GenerateRequest { logprobs: None, ..request(0.0, 0) });
    assert!(off.logprobs.is_none() && streamed.is_empty());
}

/// A stop string cuts the entries of the tokens it removed from the answer: the entries'
/// bytes spell the returned text (they used to spell the text with the stop string too),
/// streamed and not alike. On the real chat model, whose answers are plain text.
#[test]
fn a_stop_string_cuts_its_tokens_entries() {
    let Some(path) = common::chat_model() else { return };
    let mut h = common::load_host(&path);
    let mut req = request(0.0, 2);
    req.prompt = Some("The three primary colors are".into());
    req.repetition_penalty = None;
    req.max_tokens = Some(12);
    let (full, _) = run(&mut h, &req);
    let entries = full.logprobs.clone().unwrap();
    let utf8 = |e: &[edgellm::generate::TokenLogprob]| String::from_utf8(e.iter().flat_map(|e| e.bytes.clone()).collect()).unwrap();
    assert_eq!(utf8(&entries), full.text, "plain text: the entries spell it");
    // A stop string from the start of the third token on (its first occurrence): that token's
    // entry and the later ones go.
    let start = utf8(&entries[..2]).len();
    let stop = utf8(&entries[2..4]);
    assert!(!full.text[..start + stop.len() - 1].contains(&stop), "{:?} occurs earlier in {:?}", stop, full.text);
    req.stop = Some(vec![stop]);
    let (cut, streamed) = run(&mut h, &req);
    assert_eq!((cut.finish_reason, cut.text.as_str()), ("stop", &full.text[..start]));
    let kept = cut.logprobs.clone().unwrap();
    assert_eq!(kept, entries[..2].to_vec());
    assert_eq!(streamed, kept);
}
