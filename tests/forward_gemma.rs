//! The real model (Gemma 3 270M Q4_K_M) against llama.cpp and the float64 reference
//! (tests/data/fwd_gemma_greedy.json and fwd_gemma_logits.json, made by
//! tools/reference/make_forward_fixtures.py).
//!
//! One batched forward pass per prompt over `ids + llama.cpp's first 47 greedy tokens`
//! (teacher forcing), with logits only at the rows that are checked, serves both checks:
//! - greedy agreement: at every step where llama.cpp's top1 − top2 margin is ≥ 0.5, our argmax
//!   given the same prefix is llama.cpp's token (100% required) — except where llama.cpp's own
//!   token is not the float64 reference's argmax (llama.cpp's numerics vary by about as much
//!   between its batched and token-by-token paths: ±0.5 in log-prob); there ours must be one
//!   of the two, and the step is listed;
//! - last-prompt-position distributions (the logits fixture's prompts): top-1 identical (in a
//!   near-tie under the same margin where llama.cpp and float64 differ: one of the two),
//!   top-20 sets share ≥ 15 ids, log-probs on the shared ids within rms 0.5 / max 1.0 of
//!   llama.cpp; the same figures against float64 are printed next to llama.cpp's own distance.
//!
//! Log-probs (log-softmax over the full vocabulary) are compared because llama.cpp's driver
//! exposes probabilities only.
//!
//! Cost: the prompts of ≤ 64 ids by default (22 greedy prompts, 5 of them in the logits
//! fixture); `EDGELLM_FORWARD_ALL=1` adds the three long ones (418, 638 and 762 ids, the last
//! two past the 512-token sliding window, which tests/forward_tiny.rs also covers with a window
//! of 8). Prompts run on `min(available_parallelism, 4)` threads.

mod common;
mod forward_real;

#[test]
fn gemma_agrees_with_llama_cpp() {
    let Some(path) = common::real_model() else { return };
    forward_real::check(&path, "gemma", forward_real::Expect { min_prompts: 20, min_logit_prompts: 5 });
}
