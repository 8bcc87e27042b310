//! Sessions on the tiny fixture models: batched prefill equals token-by-token decoding, the
//! stop conditions (end-of-generation token, stop strings, max tokens, full context), seeds,
//! typed errors and timings.

mod engine_common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use edgellm::engine::{FinishReason, GenerateOptions, Session, SessionOptions};
use edgellm::gguf::Value;
use edgellm::model::{ForwardScratch, LogitRows, Model};
use edgellm::sampling::SamplerConfig;
use edgellm::tokenizer::Tokenizer;
use engine_common::{load, load_with};

const MODELS: [&str; 4] = ["tiny_llama.gguf", "tiny_qwen2.gguf", "tiny_qwen3.gguf", "tiny_gemma3.gguf"];

fn opts(model: &Model, sampler: SamplerConfig) -> SessionOptions {
    SessionOptions { sampler, ..SessionOptions::for_model(model) }
}

fn prompt(tok: &Tokenizer) -> Vec<u32> {
    tok.encode("hello world, this is a test", true, true)
}

fn greedy(model: &Arc<Model>, tok: &Tokenizer, p: &[u32], o: &GenerateOptions) -> (edgellm::engine::Generation, String) {
    let mut s = Session::new(model.clone(), opts(model, SamplerConfig::greedy()));
    let mut streamed = String::new();
    let g = s.generate(p, tok, o, &mut |t| {
        streamed.push_str(t);
        true
    })
    .unwrap();
    (g, streamed)
}

#[test]
fn batched_prefill_equals_token_by_token() {
    for name in MODELS {
        let (model, tok) = load(name);
        let ids = prompt(&tok);
        let n_vocab = model.n_vocab();
        // One batch, logits everywhere.
        let mut kv = model.new_kv_cache(64);
        let mut all = Vec::new();
        model.forward(&ids, &mut kv, &mut ForwardScratch::default(), LogitRows::All, &mut all).unwrap();
        // One token per call.
        let mut kv1 = model.new_kv_cache(64);
        let mut s1 = ForwardScratch::default();
        let mut one = Vec::new();
        for (i, &id) in ids.iter().enumerate() {
            model.forward(&[id], &mut kv1, &mut s1, LogitRows::Last, &mut one).unwrap();
            assert_eq!(one[..], all[i * n_vocab..(i + 1) * n_vocab], "{name}: position {i}");
        }
        // Selected rows (out of order) and the last row alone agree too.
        let mut kv2 = model.new_kv_cache(64);
        let mut sel = Vec::new();
        let rows = [ids.len() - 1, 0, 2];
        model.forward(&ids, &mut kv2, &mut ForwardScratch::default(), LogitRows::Rows(&rows), &mut sel).unwrap();
        for (k, &r) in rows.iter().enumerate() {
            assert_eq!(sel[k * n_vocab..(k + 1) * n_vocab], all[r * n_vocab..(r + 1) * n_vocab], "{name}: row {r}");
        }
        assert_eq!(kv.len(), ids.len());
        assert_eq!(kv1.len(), ids.len());
    }
}

#[test]
fn chunked_prefill_and_continued_conversation_match_one_batch() {
    let (model, tok) = load("tiny_gemma3.gguf");
    let ids = prompt(&tok);
    let mut whole = Session::new(model.clone(), opts(&model, SamplerConfig::greedy()));
    whole.prefill(&ids).unwrap();
    let mut chunked = Session::new(model.clone(), SessionOptions { max_batch: 3, ..opts(&model, SamplerConfig::greedy()) });
    chunked.prefill(&ids).unwrap();
    assert_eq!(whole.logits(), chunked.logits());
    // A host feeding the prompt in pieces, logits only for the last piece.
    let mut pieces = Session::new(model.clone(), opts(&model, SamplerConfig::greedy()));
    pieces.prefill_with(&ids[..4], false).unwrap();
    assert!(pieces.logits().is_empty());
    assert_eq!(pieces.step().unwrap_err().code(), "NOTHING_TO_DECODE");
    pieces.prefill_with(&ids[4..], true).unwrap();
    assert_eq!(whole.logits(), pieces.logits());
    assert_eq!(pieces.tokens(), &ids[..]);

    // Generate two tokens, then add more prompt: the same as a fresh session given everything.
    let a = whole.step().unwrap();
    let b = whole.step().unwrap();
    let more = tok.encode(" and more", false, true);
    whole.prefill(&more).unwrap();
    let mut all = ids.clone();
    all.extend([a, b]);
    all.extend(&more);
    assert_eq!(whole.tokens(), &all[..]);
    let mut fresh = Session::new(model.clone(), opts(&model, SamplerConfig::greedy()));
    fresh.prefill(&all).unwrap();
    assert_eq!(whole.logits(), fresh.logits());
    assert_eq!(whole.kv().len(), all.len());
}

#[test]
fn max_tokens_gives_length() {
    let (model, tok) = load("tiny_llama.gguf");
    let p = prompt(&tok);
    let (g, streamed) = greedy(&model, &tok, &p, &GenerateOptions { max_tokens: 7, stop: vec![], stop_on_eog: false });
    assert_eq!(g.ids.len(), 7);
    assert_eq!(g.finish_reason, FinishReason::Length);
    assert_eq!(g.prompt_ids, p);
    assert_eq!(streamed, g.text);
    assert_eq!(g.text, tok.decode(&g.ids, Default::default()).unwrap());
    assert_eq!(g.metrics.prompt_tokens, p.len());
    assert_eq!(g.metrics.generated_tokens, 7);
}

#[test]
fn end_of_generation_token_stops() {
    // Find a token greedy decoding produces at step >= 1 (first occurrence), then declare it
    // the EOS of a copy of the model: generation must stop right there.
    let (model, tok) = load("tiny_llama.gguf");
    let p = prompt(&tok);
    let (free, _) = greedy(&model, &tok, &p, &GenerateOptions { max_tokens: 24, stop: vec![], stop_on_eog: false });
    let (k, &eos) = free.ids.iter().enumerate().skip(1).find(|(i, t)| !free.ids[..*i].contains(t)).unwrap_or_else(|| panic!("no fresh token in {:?}", free.ids));
    let (model2, tok2) = load_with("tiny_llama.gguf", "tokenizer.ggml.eos_token_id", Value::U32(eos));
    assert!(tok2.is_eog(eos));
    let (g, streamed) = greedy(&model2, &tok2, &p, &GenerateOptions { max_tokens: 24, stop: vec![], stop_on_eog: true });
    assert_eq!(g.finish_reason, FinishReason::Stop);
    assert_eq!(g.ids, free.ids[..=k]);
    // The end-of-generation token is not part of the text.
    assert_eq!(g.text, tok2.decode(&free.ids[..k], Default::default()).unwrap());
    assert_eq!(streamed, g.text);
    // With stop_on_eog off it runs on.
    let (g, _) = greedy(&model2, &tok2, &p, &GenerateOptions { max_tokens: 24, stop: vec![], stop_on_eog: false });
    assert_eq!(g.ids.len(), 24);
}

#[test]
fn stop_string_cuts_text_and_is_never_streamed() {
    let (model, tok) = load("tiny_qwen2.gguf");
    let p = tok.encode("hello world", true, true);
    let o = GenerateOptions { max_tokens: 40, stop: vec![], stop_on_eog: false };
    let (free, _) = greedy(&model, &tok, &p, &o);
    let text = free.text.clone();
    let chars: Vec<(usize, char)> = text.char_indices().collect();
    assert!(chars.len() >= 12, "need some text to cut: {text:?}");
    // A 3-character stop string taken from the middle; the text must end where it first occurs.
    let (a, b) = (chars[6].0, chars.get(9).map_or(text.len(), |c| c.0));
    let stop = text[a..b].to_string();
    let first = text.find(&stop).unwrap();
    let (g, streamed) = greedy(&model, &tok, &p, &GenerateOptions { max_tokens: 40, stop: vec!["zzzz-never".into(), stop.clone()], stop_on_eog: false });
    assert_eq!(g.finish_reason, FinishReason::Stop, "stop {stop:?} in {text:?}");
    assert_eq!(g.text, text[..first]);
    assert_eq!(streamed, g.text);
    assert!(g.ids.len() < 40);
    assert_eq!(g.ids[..], free.ids[..g.ids.len()]);
}

#[test]
fn abort_from_callback() {
    let (model, tok) = load("tiny_llama.gguf");
    let mut s = Session::new(model.clone(), opts(&model, SamplerConfig::greedy()));
    let mut calls = 0;
    let g = s
        .generate(&prompt(&tok), &tok, &GenerateOptions { max_tokens: 30, stop: vec![], stop_on_eog: false }, &mut |_| {
            calls += 1;
            calls < 2
        })
        .unwrap();
    assert_eq!(g.finish_reason, FinishReason::Aborted);
    assert!(g.ids.len() < 30);
}

#[test]
fn same_seed_same_output() {
    let (model, tok) = load("tiny_qwen3.gguf");
    let p = tok.encode("hello world", true, true);
    let run = |seed: u64| {
        let cfg = SamplerConfig { temperature: 1.5, top_k: 0, top_p: 1.0, min_p: 0.0, seed, ..SamplerConfig::default() };
        let mut s = Session::new(model.clone(), opts(&model, cfg));
        s.generate(&p, &tok, &GenerateOptions { max_tokens: 30, stop: vec![], stop_on_eog: false }, &mut |_| true).unwrap().ids
    };
    assert_eq!(run(11), run(11));
    assert_ne!(run(11), run(12));
}

#[test]
fn full_context_and_bad_input_are_typed_errors() {
    let (model, tok) = load("tiny_llama.gguf");
    let p = prompt(&tok);
    // Prompt longer than the context: refused before any work.
    let mut s = Session::new(model.clone(), SessionOptions { max_context: p.len() - 1, ..opts(&model, SamplerConfig::greedy()) });
    let e = s.prefill(&p).unwrap_err();
    assert_eq!(e.code(), "CONTEXT_FULL");
    assert_eq!(s.kv().len(), 0);
    // Room for the prompt and 3 more tokens: generation ends with "length" after 4 tokens
    // (the 4th is sampled from the last position's logits and never needs a slot).
    let mut s = Session::new(model.clone(), SessionOptions { max_context: p.len() + 3, ..opts(&model, SamplerConfig::greedy()) });
    let g = s.generate(&p, &tok, &GenerateOptions { max_tokens: 50, stop: vec![], stop_on_eog: false }, &mut |_| true).unwrap();
    assert_eq!(g.finish_reason, FinishReason::Length);
    assert_eq!(g.ids.len(), 4);
    assert_eq!(s.kv().len(), p.len() + 3);
    // Bad ids, empty prompts, stepping before prefill.
    let mut s = Session::new(model.clone(), opts(&model, SamplerConfig::greedy()));
    assert_eq!(s.step().unwrap_err().code(), "NOTHING_TO_DECODE");
    assert_eq!(s.prefill(&[1, 999_999]).unwrap_err().code(), "BAD_TOKEN_ID");
    assert_eq!(s.kv().len(), 0);
    assert_eq!(s.prefill(&[]).unwrap_err().code(), "BAD_REQUEST");
    // The session still works afterwards, and a failed prefill leaves it as it was.
    s.prefill(&p).unwrap();
    let before = s.logits().to_vec();
    assert_eq!(s.prefill(&[5, 999_999]).unwrap_err().code(), "BAD_TOKEN_ID");
    assert_eq!((s.logits(), s.tokens(), s.kv().len()), (&before[..], &p[..], p.len()));
    // Also when an earlier chunk already went through the model.
    let mut c = Session::new(model.clone(), SessionOptions { max_batch: 2, ..opts(&model, SamplerConfig::greedy()) });
    c.prefill(&p).unwrap();
    assert_eq!(c.prefill(&[5, 6, 7, 999_999]).unwrap_err().code(), "BAD_TOKEN_ID");
    assert_eq!((c.logits(), c.kv().len()), (&before[..], p.len()));
    let a = s.step().unwrap();
    assert_eq!(c.step().unwrap(), a);
    let mut fresh = Session::new(model.clone(), opts(&model, SamplerConfig::greedy()));
    fresh.prefill(&p).unwrap();
    assert_eq!(fresh.step().unwrap(), a);
}

static TICKS: AtomicU64 = AtomicU64::new(0);
/// A clock that advances 1 ms per reading.
fn ticking_clock() -> f64 {
    TICKS.fetch_add(1, Ordering::SeqCst) as f64
}

#[test]
fn metrics_follow_the_clock() {
    let (model, tok) = load("tiny_gemma3.gguf");
    let p = prompt(&tok);
    let mut s = Session::new(model.clone(), SessionOptions { clock: ticking_clock, ..opts(&model, SamplerConfig::greedy()) });
    let g = s.generate(&p, &tok, &GenerateOptions { max_tokens: 5, stop: vec![], stop_on_eog: false }, &mut |_| true).unwrap();
    let m = &g.metrics;
    assert_eq!((m.prompt_tokens, m.generated_tokens), (p.len(), 5));
    // Readings: prefill start/end (1 ms), first step start/end (TTFT spans 3 ms),
    // then 1 ms per further step.
    assert_eq!(m.prefill_ms, 1.0);
    assert_eq!(m.ttft_ms, 3.0);
    assert_eq!(m.decode_ms, 4.0);
    assert_eq!(m.tpot_ms(), 1.0);
    assert_eq!(m.decode_tok_s(), 1000.0);
    assert_eq!(m.prefill_tok_s(), p.len() as f64 * 1000.0);
}

/// Weight bytes one decode step reads, summed independently over the file's tensor index:
/// every tensor as stored (1-D ones as the f32 they are held in), except the token embedding,
/// of which one row is read (the lookup) plus all of it as the output projection when there is
/// no `output.weight` (tied), and `rope_freqs.weight` (folded into the RoPE at load).
fn index_decode_bytes(model: &Model) -> usize {
    let h = model.header();
    let mut want = 0u64;
    for t in &h.tensors {
        want += match t.name.as_str() {
            "token_embd.weight" => t.n_bytes() / t.n_rows() + if h.tensor("output.weight").is_none() { t.n_bytes() } else { 0 },
            "rope_freqs.weight" => 0,
            _ if t.dims.len() == 1 => 4 * t.n_elements(),
            _ => t.n_bytes(),
        };
    }
    want as usize
}

#[test]
fn decode_weight_bytes_are_the_tensor_index_sum() {
    // llama: untied output and rope_freqs; qwen2: biases; qwen3: Q/K norms; gemma3: tied
    // output, post-norms.
    for name in MODELS {
        let (model, _) = load(name);
        let h = model.header();
        assert_eq!(model.decode_weight_bytes(), index_decode_bytes(&model), "{name}");
        let embd = h.tensor("token_embd.weight").unwrap();
        let tied = h.tensor("output.weight").is_none();
        assert_eq!(tied, name != "tiny_llama.gguf", "{name}: the fixtures cover both cases");
        // Against what is held: the embedding matrix is read once more when tied, else not.
        let row = (embd.n_bytes() / embd.n_rows()) as usize;
        let held = model.weight_bytes();
        let want = if tied { held + row } else { held - embd.n_bytes() as usize + row };
        assert_eq!(model.decode_weight_bytes(), want, "{name}");
    }
}

#[test]
fn decode_kv_bytes_are_the_cache_occupancy_of_each_step() {
    let (model, tok) = load("tiny_gemma3.gguf");
    let p = prompt(&tok);
    let mut s = Session::new(model.clone(), SessionOptions { clock: ticking_clock, ..opts(&model, SamplerConfig::greedy()) });
    let o = GenerateOptions { max_tokens: 6, stop: vec![], stop_on_eog: false };
    // The first token is sampled from the prompt's logits (no decode step).
    let mut per_step = Vec::new();
    let g = s
        .generate_observed(&p, &tok, &o, &mut |_| true, &mut |s, _| per_step.push(s.kv_stats().bytes))
        .unwrap();
    let m = &g.metrics;
    assert_eq!(per_step.len(), 6);
    let decode = &per_step[1..];
    assert!(decode.windows(2).all(|w| w[1] > w[0]), "{decode:?}");
    // Weights: each decode step's own bytes (the screened head reads less than the full one).
    assert_eq!(m.head_screened_steps + m.head_full_steps, 5);
    assert_eq!(m.decode_weight_bytes_per_token as u64, m.decode_weight_bytes_total / 5);
    assert!(m.decode_weight_bytes_per_token <= model.decode_weight_bytes());
    assert_eq!(m.decode_kv_bytes_last_token, *decode.last().unwrap());
    assert_eq!(m.decode_kv_bytes_total, decode.iter().sum::<usize>() as u64);
    let mean = decode.iter().sum::<usize>() as f64 / 5.0;
    assert_eq!(m.decode_kv_bytes_mean(), mean);
    assert!(m.decode_gb_s() > 0.0);
    assert_eq!(m.decode_gb_s(), (m.decode_weight_bytes_per_token as f64 + mean) * m.decode_tok_s() / 1e9);
    // A new generation starts from zero but keeps the model's weight bytes.
    s.reset();
    assert_eq!(s.metrics().decode_weight_bytes_per_token, model.decode_weight_bytes());
    assert_eq!((s.metrics().decode_kv_bytes_last_token, s.metrics().decode_kv_bytes_total), (0, 0));
}
