//! A session: one conversation's KV cache, sampler and timings over a shared [`Model`].
//!
//! The step API is what a browser worker drives (prefill, then one `step` per event-loop turn);
//! [`Session::generate`] is the whole loop built on it, with stop conditions (end-of-generation
//! tokens, stop strings, max tokens) and streamed text.
//!
//! A sampled token is fed to the model lazily, at the start of the next `step` (or `prefill`),
//! so the last token of a generation never costs a forward pass.
//!
//! The KV cache is the session's: a plain context of `max_context` positions by default
//! ([`Session::new`]), or a bounded cache with its own budget, storage and eviction policy
//! ([`Session::with_kv`], see [`crate::kv`]). With policy `window-sinks` a prompt of any length
//! is prefilled in batches the cache can take, evicting as it goes; a generation never runs out
//! of room.

use std::sync::Arc;

use crate::metrics::{Clock, GenerationMetrics};
use crate::model::{ForwardScratch, LogitRows, Model, ModelError};
use crate::sampling::{Sampler, SamplerConfig};
use crate::kv::{KvCache, KvConfig, KvStats};
use crate::tokenizer::{DecodeOptions, Tokenizer, TokenizerError};

/// Why a session call failed. `code()` is stable.
#[derive(Clone, Debug, PartialEq)]
pub enum EngineError {
    Model(ModelError),
    Tokenizer(TokenizerError),
    /// `step` before any `prefill`.
    NothingToDecode,
    /// The caller's callback asked to stop.
    Aborted,
}

impl EngineError {
    pub fn code(&self) -> &'static str {
        match self {
            EngineError::Model(e) => e.code(),
            EngineError::Tokenizer(e) => e.code(),
            EngineError::NothingToDecode => "NOTHING_TO_DECODE",
            EngineError::Aborted => "ABORTED",
        }
    }
}

impl std::fmt::Display for EngineError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            EngineError::Model(e) => e.fmt(f),
            EngineError::Tokenizer(e) => e.fmt(f),
            EngineError::NothingToDecode => f.write_str("nothing to decode: prefill a prompt first"),
            EngineError::Aborted => f.write_str("aborted"),
        }
    }
}

impl std::error::Error for EngineError {}

impl From<ModelError> for EngineError {
    fn from(e: ModelError) -> Self {
        EngineError::Model(e)
    }
}


impl From<TokenizerError> for EngineError {
    fn from(e: TokenizerError) -> Self {
        EngineError::Tokenizer(e)
    }
}

/// How a session is set up.
#[derive(Clone, Debug)]
pub struct SessionOptions {
    /// Most positions the KV cache holds (prompt + generated); `CONTEXT_FULL` beyond. Not used
    /// by [`Session::with_kv`], whose configuration sets the budget.
    pub max_context: usize,
    /// Prompt tokens per forward pass: a longer prompt is run in chunks of this many, which
    /// bounds the activation scratch memory.
    pub max_batch: usize,
    pub sampler: SamplerConfig,
    pub clock: Clock,
}

impl SessionOptions {
    /// Context `min(training context, 4096)`, batches of 512, greedy sampling, no clock.
    pub fn for_model(model: &Model) -> SessionOptions {
        let train = model.hparams().n_ctx_train;
        SessionOptions {
            max_context: if train == 0 { 4096 } else { train.min(4096) },
            max_batch: 512,
            sampler: SamplerConfig::greedy(),
            clock: crate::metrics::no_clock,
        }
    }
}

pub struct Session {
    model: Arc<Model>,
    kv: KvCache,
    scratch: ForwardScratch,
    sampler: Sampler,
    /// Every token of the conversation: those in the KV cache, then `pending` if any.
    tokens: Vec<u32>,
    /// Sampled, returned to the caller, not yet run through the model.
    pending: Option<u32>,
    /// Next-token logits after the last token run through the model.
    logits: Vec<f32>,
    /// Where a forward pass writes (swapped into `logits` on success).
    out: Vec<f32>,
    /// Logits of every position of the last `prefill_scored`.
    scored: Vec<f32>,
    max_batch: usize,
    clock: Clock,
    metrics: GenerationMetrics,
    /// Start of the current generation (its first prefill), in clock milliseconds.
    gen_start: f64,
    /// No token sampled since the current generation's first prefill.
    in_prompt: bool,
}

impl Session {
    /// A session whose KV cache is a plain context of `opts.max_context` positions (f16, no
    /// eviction, `CONTEXT_FULL` when it is full).
    pub fn new(model: Arc<Model>, opts: SessionOptions) -> Session {
        let kv = model.new_kv_cache(opts.max_context);
        Session::with_cache(model, opts, kv)
    }

    /// A session with a bounded KV cache set up by `kv` (budget, f16/int8, policy, sinks).
    /// `BAD_KV_CONFIG` / `KV_BUDGET_TOO_SMALL` when the settings cannot work for this model.
    pub fn with_kv(model: Arc<Model>, opts: SessionOptions, kv: &KvConfig) -> Result<Session, EngineError> {
        let cache = model.new_kv_cache_with(kv).map_err(ModelError::from)?;
        Ok(Session::with_cache(model, opts, cache))
    }

    fn with_cache(model: Arc<Model>, opts: SessionOptions, kv: KvCache) -> Session {
        let metrics = fresh_metrics(&model);
        Session {
            model,
            kv,
            scratch: ForwardScratch::default(),
            sampler: Sampler::new(opts.sampler),
            tokens: Vec::new(),
            pending: None,
            logits: Vec::new(),
            out: Vec::new(),
            scored: Vec::new(),
            max_batch: opts.max_batch.max(1),
            clock: opts.clock,
            metrics,
            gen_start: 0.0,
            in_prompt: false,
        }
    }

    pub fn model(&self) -> &Model {
        &self.model
    }

    pub fn kv(&self) -> &KvCache {
        &self.kv
    }

    /// The KV cache's occupancy now: tokens held, evicted, bytes used / budget, by layer kind.
    pub fn kv_stats(&self) -> KvStats {
        self.kv.stats()
    }

    /// All tokens so far (prompt and generated).
    pub fn tokens(&self) -> &[u32] {
        &self.tokens
    }

    /// Next-token logits after the last token run through the model (empty before a prefill).
    pub fn logits(&self) -> &[f32] {
        &self.logits
    }

    pub fn sampler(&self) -> &Sampler {
        &self.sampler
    }

    pub fn set_sampler(&mut self, cfg: SamplerConfig) {
        self.sampler = Sampler::new(cfg);
    }

    /// Timings of the current generation (since the first prefill after a step or reset).
    pub fn metrics(&self) -> &GenerationMetrics {
        &self.metrics
    }

    /// Bytes of session state: KV cache and scratch buffers.
    pub fn bytes(&self) -> usize {
        self.kv.bytes_allocated()
            + self.kv.scratch_bytes()
            + self.scratch.bytes()
            + 4 * (self.logits.capacity() + self.out.capacity() + self.scored.capacity())
    }

    /// Forgets the conversation (the sampler keeps its RNG state; reseed it to repeat a run).
    pub fn reset(&mut self) {
        self.kv.clear();
        self.tokens.clear();
        self.pending = None;
        self.logits.clear();
        self.metrics = fresh_metrics(&self.model);
        self.in_prompt = false;
    }

    /// Runs `ids` through the model (after any pending sampled token), batched, in chunks of
    /// at most `max_batch`; logits are computed for the last position only. All or nothing: on
    /// error the session is as it was.
    pub fn prefill(&mut self, ids: &[u32]) -> Result<(), EngineError> {
        self.prefill_with(ids, true)
    }

    /// [`prefill`](Self::prefill), optionally without computing logits: a host that feeds a
    /// long prompt in several calls skips the output projection (the largest matmul of a small
    /// model) on all but the last. After `logits = false`, `step` needs another prefill first.
    pub fn prefill_with(&mut self, ids: &[u32], logits: bool) -> Result<(), EngineError> {
        let rows = if logits { Rows::Last } else { Rows::None };
        self.run_prompt(ids, rows)
    }

    /// Teacher-forced scoring: runs `ids` like [`prefill`](Self::prefill) and returns the
    /// next-token logits after *every* one of them (`ids.len() × n_vocab`, row `i` predicting
    /// the token after `ids[i]`). Memory grows with `ids.len()`: score long texts in chunks;
    /// with a bounded cache each chunk sees what the cache holds (evicting as it goes).
    pub fn prefill_scored(&mut self, ids: &[u32]) -> Result<&[f32], EngineError> {
        if ids.is_empty() {
            return Err(ModelError::BadRequest("empty prompt".into()).into());
        }
        self.run_prompt(ids, Rows::All)?;
        Ok(&self.scored)
    }

    fn run_prompt(&mut self, ids: &[u32], rows: Rows) -> Result<(), EngineError> {
        let t0 = (self.clock)();
        if !self.in_prompt {
            self.metrics = fresh_metrics(&self.model);
            self.gen_start = t0;
            self.in_prompt = true;
        }
        let mut batch: Vec<u32> = Vec::with_capacity(ids.len() + 1);
        batch.extend(self.pending);
        batch.extend_from_slice(ids);
        if batch.is_empty() {
            return Err(ModelError::BadRequest("empty prompt".into()).into());
        }
        // Fail before doing any work if a token is bad or the prompt cannot fit.
        let n_vocab = self.model.n_vocab();
        if let Some(&id) = batch.iter().find(|&&id| id as usize >= n_vocab) {
            return Err(ModelError::BadTokenId { id, n_vocab }.into());
        }
        self.kv.check_prompt(batch.len()).map_err(ModelError::from)?;
        let mark = self.kv.mark();
        let skip = batch.len() - ids.len(); // the pending token's row is not scored
        let step = self.max_batch.min(self.kv.max_batch()).max(1);
        let n_chunks = batch.len().div_ceil(step);
        self.scored.clear();
        for (i, chunk) in batch.chunks(step).enumerate() {
            let last = i + 1 == n_chunks;
            let r = match rows {
                Rows::All => LogitRows::All,
                Rows::Last if last => LogitRows::Last,
                _ => LogitRows::None,
            };
            if let Err(e) = self.model.forward(chunk, &mut self.kv, &mut self.scratch, r, &mut self.out) {
                // All or nothing: go back to where the prompt started. Only an internal error
                // can get here (ids and room are checked above); if the cache already evicted
                // what it held then, the conversation is lost and the session starts afresh.
                self.scored.clear();
                if !self.kv.restore(mark) {
                    self.reset();
                }
                return Err(e.into());
            }
            if rows == Rows::All {
                if n_chunks == 1 && skip == 0 {
                    std::mem::swap(&mut self.scored, &mut self.out);
                } else {
                    let from = if i == 0 { skip * n_vocab } else { 0 };
                    self.scored.extend_from_slice(&self.out[from..]);
                }
            }
        }
        // `pending` was already in `tokens` (pushed when sampled).
        self.pending = None;
        self.tokens.extend_from_slice(ids);
        match rows {
            Rows::Last => std::mem::swap(&mut self.logits, &mut self.out),
            Rows::All => {
                self.logits.clear();
                self.logits.extend_from_slice(&self.scored[self.scored.len() - n_vocab..]);
            }
            Rows::None => self.logits.clear(),
        }
        self.metrics.prompt_tokens += ids.len();
        self.metrics.prefill_ms += (self.clock)() - t0;
        Ok(())
    }

    /// Samples the next token (first running the previously sampled one through the model).
    pub fn step(&mut self) -> Result<u32, EngineError> {
        let t0 = (self.clock)();
        let mut kv_read = None;
        if let Some(t) = self.pending {
            self.model.forward(&[t], &mut self.kv, &mut self.scratch, LogitRows::Last, &mut self.out)?;
            std::mem::swap(&mut self.logits, &mut self.out);
            self.pending = None;
            // The attention read every row held, this token's included.
            kv_read = Some(self.kv.bytes_used());
        }
        if self.logits.is_empty() {
            return Err(EngineError::NothingToDecode);
        }
        let id = self.sampler.sample(&self.logits, &self.tokens);
        self.tokens.push(id);
        self.pending = Some(id);
        let t1 = (self.clock)();
        if self.in_prompt {
            self.in_prompt = false;
            self.metrics.ttft_ms = t1 - self.gen_start;
        } else {
            self.metrics.decode_ms += t1 - t0;
            if let Some(b) = kv_read {
                self.metrics.record_decode_kv(b);
            }
        }
        self.metrics.generated_tokens += 1;
        Ok(id)
    }

    /// Whether `step` can run: the KV cache has room for the pending token, if any.
    pub fn can_step(&self) -> bool {
        !self.logits.is_empty() && (self.pending.is_none() || self.kv.check_room(1).is_ok())
    }
}

/// Empty metrics for a new generation on `model` (its per-token weight bytes filled in).
fn fresh_metrics(model: &Model) -> GenerationMetrics {
    GenerationMetrics { decode_weight_bytes_per_token: model.decode_weight_bytes(), ..Default::default() }
}

/// Which logits a prompt run keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Rows {
    None,
    Last,
    All,
}

/// Stop conditions of [`Session::generate`].
#[derive(Clone, Debug, PartialEq)]
pub struct GenerateOptions {
    /// Most tokens to generate (an end-of-generation token counts).
    pub max_tokens: usize,
    /// Stop when the text contains one of these; the text ends before it.
    pub stop: Vec<String>,
    /// Stop at the tokenizer's end-of-generation tokens (EOS, end of turn).
    pub stop_on_eog: bool,
}

impl Default for GenerateOptions {
    fn default() -> Self {
        GenerateOptions { max_tokens: 256, stop: Vec::new(), stop_on_eog: true }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FinishReason {
    /// An end-of-generation token or a stop string.
    Stop,
    /// `max_tokens` reached, or the context is full.
    Length,
    /// The text callback asked to stop.
    Aborted,
}

impl FinishReason {
    pub fn as_str(self) -> &'static str {
        match self {
            FinishReason::Stop => "stop",
            FinishReason::Length => "length",
            FinishReason::Aborted => "abort",
        }
    }
}

/// The result of [`Session::generate`].
#[derive(Clone, Debug, PartialEq)]
pub struct Generation {
    pub prompt_ids: Vec<u32>,
    /// Generated ids, including a final end-of-generation token if that is what stopped it.
    pub ids: Vec<u32>,
    /// Generated text (without end-of-generation tokens, cut before a stop string).
    pub text: String,
    pub finish_reason: FinishReason,
    pub metrics: GenerationMetrics,
}

/// Streams text to a callback, holding back any tail that could be the start of a stop string.
struct StopScanner<'a> {
    stop: &'a [String],
    text: String,
    emitted: usize,
}

impl StopScanner<'_> {
    /// Appends `piece`; returns true when a stop string now occurs (text cut before it).
    fn push(&mut self, piece: &str) -> bool {
        let from = self.emitted;
        self.text.push_str(piece);
        let mut cut: Option<usize> = None;
        for s in self.stop.iter().filter(|s| !s.is_empty()) {
            // A match can start before the unemitted part only if it was held back, so
            // searching from `emitted` finds every new one.
            if let Some(i) = self.text[from..].find(s.as_str()) {
                cut = Some(cut.map_or(from + i, |c: usize| c.min(from + i)));
            }
        }
        if let Some(c) = cut {
            self.text.truncate(c);
            return true;
        }
        false
    }

    /// Text safe to show now: all but a tail that is a proper prefix of a stop string.
    fn ready(&mut self, all: bool) -> Option<&str> {
        let mut end = self.text.len();
        if !all {
            for s in self.stop.iter() {
                // Longest suffix of text (on a char boundary) that is a prefix of `s`.
                let max = s.len().saturating_sub(1).min(self.text.len() - self.emitted);
                for k in (1..=max).rev() {
                    let start = self.text.len() - k;
                    if self.text.is_char_boundary(start) && s.starts_with(&self.text[start..]) {
                        end = end.min(start);
                        break;
                    }
                }
            }
        }
        if end > self.emitted {
            let out = &self.text[self.emitted..end];
            self.emitted = end;
            Some(out)
        } else {
            None
        }
    }
}

impl Session {
    /// Prefills `prompt`, then samples until an end-of-generation token, a stop string,
    /// `max_tokens` or a full context. `on_text` receives the text as it becomes final (never
    /// a part of a stop string); returning `false` stops the generation (`Aborted`).
    pub fn generate(
        &mut self,
        prompt: &[u32],
        tok: &Tokenizer,
        opts: &GenerateOptions,
        on_text: &mut dyn FnMut(&str) -> bool,
    ) -> Result<Generation, EngineError> {
        self.generate_observed(prompt, tok, opts, on_text, &mut |_, _| {})
    }

    /// [`generate`](Self::generate), calling `on_step(session, token)` after every sampled
    /// token (to watch the KV cache, memory or speed as the generation goes).
    pub fn generate_observed(
        &mut self,
        prompt: &[u32],
        tok: &Tokenizer,
        opts: &GenerateOptions,
        on_text: &mut dyn FnMut(&str) -> bool,
        on_step: &mut dyn FnMut(&Session, u32),
    ) -> Result<Generation, EngineError> {
        self.prefill(prompt)?;
        let mut decoder = tok.stream_decoder(DecodeOptions::default());
        let mut scan = StopScanner { stop: &opts.stop, text: String::new(), emitted: 0 };
        let mut ids = Vec::new();
        let mut finish = FinishReason::Length;
        let mut stopped_by_string = false;
        while ids.len() < opts.max_tokens && self.can_step() {
            let id = self.step()?;
            ids.push(id);
            on_step(self, id);
            if opts.stop_on_eog && tok.is_eog(id) {
                finish = FinishReason::Stop;
                break;
            }
            let piece = decoder.push(id)?;
            if scan.push(&piece) {
                finish = FinishReason::Stop;
                stopped_by_string = true;
                break;
            }
            if let Some(t) = scan.ready(false) {
                if !on_text(t) {
                    finish = FinishReason::Aborted;
                    break;
                }
            }
        }
        if !stopped_by_string && finish != FinishReason::Aborted && scan.push(&decoder.finish()) {
            finish = FinishReason::Stop;
        }
        if finish != FinishReason::Aborted {
            if let Some(t) = scan.ready(true) {
                on_text(t);
            }
        } else {
            scan.text.truncate(scan.emitted);
        }
        Ok(Generation {
            prompt_ids: prompt.to_vec(),
            ids,
            text: scan.text,
            finish_reason: finish,
            metrics: self.metrics.clone(),
        })
    }
}
