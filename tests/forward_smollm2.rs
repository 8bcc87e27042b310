//! The chat model (SmolLM2 135M Instruct Q4_1: llama architecture, 30 layers, GQA 9/3 heads,
//! tied Q8_0 output, Q4_1 + Q8_0 weights) against llama.cpp and the float64 reference, with the
//! same checks as tests/forward_gemma.rs: greedy agreement (teacher-forced over llama.cpp's 48
//! greedy tokens) wherever llama.cpp's top-2 margin is ≥ 0.5, and at the last prompt position
//! top-1 identical (at a near-tie — 3 of these 7 prompts have a top-2 margin under 0.35 — where
//! llama.cpp and float64 disagree: one of the two), top-20 overlap ≥ 15 and log-probs within
//! rms 0.5 / max 1.0 of llama.cpp.
//!
//! Fixtures: tests/data/fwd_smollm2_{greedy,logits}.json, made by
//! `tools/reference/make_forward_fixtures.py --model smollm2`: the short prompts of the corpus
//! (≤ 100 characters) and four ChatML conversations as SmolLM2's template renders them (one
//! with its template's own default system prompt).

mod common;
mod forward_real;

#[test]
fn smollm2_agrees_with_llama_cpp() {
    let Some(path) = common::chat_model() else { return };
    forward_real::check(&path, "smollm2", forward_real::Expect { min_prompts: 20, min_logit_prompts: 6 });
}
