//! Log probabilities of generated tokens (OpenAI's `logprobs` / `top_logprobs`), from the logits
//! the token was sampled from.
//!
//! Which distribution: the model's own — log-softmax over the whole vocabulary of the raw logits,
//! before temperature, penalties and top-k/top-p/min-p truncation (what OpenAI reports), and
//! before the logit bias (as llama.cpp reports it). So a greedy token's logprob is the largest
//! of the step, and the values do not depend on the sampling settings.

use serde::{Deserialize, Serialize};

use crate::tokenizer::Tokenizer;
use crate::ops::math::{exp_f64, ln_f64};

/// Most alternatives per token (OpenAI's limit for `top_logprobs`).
pub const MAX_TOP_LOGPROBS: usize = 20;

/// One alternative at a position.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TopLogprob {
    /// The token's text (lossy where its bytes are not whole UTF-8 characters: see `bytes`).
    pub token: String,
    pub logprob: f32,
    /// The token's UTF-8 bytes.
    pub bytes: Vec<u8>,
}

/// A generated token's log probability and the most likely alternatives at its position
/// (most likely first; the token itself is among them when it is one of the `n` likeliest).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TokenLogprob {
    pub token: String,
    pub logprob: f32,
    pub bytes: Vec<u8>,
    pub top_logprobs: Vec<TopLogprob>,
}

fn entry(tok: &Tokenizer, id: u32, logprob: f32) -> TopLogprob {
    let bytes = tok.token_to_piece(id, true).unwrap_or_default();
    TopLogprob { token: String::from_utf8_lossy(&bytes).into_owned(), logprob, bytes }
}

/// `id`'s log probability under `logits`, with the `top` likeliest tokens (ties: lower id first).
/// NaN logits count as impossible.
pub fn token_logprob(logits: &[f32], id: u32, top: usize, tok: &Tokenizer) -> TokenLogprob {
    let top = top.min(MAX_TOP_LOGPROBS);
    let max = logits.iter().copied().filter(|v| !v.is_nan()).fold(f32::NEG_INFINITY, f32::max);
    // log Σ exp(l - max), accumulated in f64: 262 144 terms stay exact enough.
    let sum: f64 = logits.iter().filter(|v| !v.is_nan()).map(|&v| exp_f64((v - max) as f64)).sum();
    let lse = max as f64 + ln_f64(sum);
    let lp = |v: f32| if v.is_nan() { f32::NEG_INFINITY } else { (v as f64 - lse) as f32 };
    let mut best: Vec<(f32, u32)> = Vec::with_capacity(top + 1);
    if top > 0 {
        for (i, &v) in logits.iter().enumerate() {
            if v.is_nan() || (best.len() == top && v <= best[top - 1].0) {
                continue;
            }
            let at = best.partition_point(|&(b, _)| b >= v);
            best.insert(at, (v, i as u32));
            best.truncate(top);
        }
    }
    let chosen = entry(tok, id, logits.get(id as usize).map_or(f32::NEG_INFINITY, |&v| lp(v)));
    TokenLogprob {
        token: chosen.token,
        logprob: chosen.logprob,
        bytes: chosen.bytes,
        top_logprobs: best.into_iter().map(|(v, i)| entry(tok, i, lp(v))).collect(),
    }
}
