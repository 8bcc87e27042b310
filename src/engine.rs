//! A session: one conversation's KV cache, sampler and timings over a shared [`Model`].
//!
//! The step API (prefill, then one `step` per token) is what the one generation driver,
//! [`crate::generate::Generator`], runs; `Session::generate` (in that module) is the whole loop.
//!
//! The session knows the tokens its KV cache was built from: [`Session::reuse_prefix`] keeps the
//! longest common prefix with a new prompt (rolling the cache back when the cache can: see
//! [`KvCache::truncate`]) so that only the rest is prefilled.
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

use crate::metrics::{Clock, GenerationMetrics, HeadUse};
use crate::ops::screen::{check_against_full, Ask, Screened};
use crate::exec::Exec;
use crate::model::{ForwardScratch, HParams, LogitRows, Model, ModelError};
use crate::sampling::{Sampler, SamplerConfig};
use crate::snapshot::{self, SnapshotError, SnapshotMeta};
use crate::kv::{KvCache, KvConfig, KvStats};
use crate::tokenizer::TokenizerError;

pub use crate::generate::{FinishReason, GenerateOptions, Generation};

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

/// Decode steps on the full head after a screened step fell back (too many candidates: it read
/// more than the full head alone). Tokens are the same either way; this only saves bytes.
const SCREEN_BACKOFF: usize = 8;

/// Which output head decode steps use.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum HeadMode {
    /// The screened head (`ops::screen`) whenever the model has one and the step's sampling
    /// can be screened exactly ([`Sampler::screen_need`]); else the full head.
    #[default]
    Auto,
    /// Always the full head (every logit computed).
    Full,
    /// As `Auto`, and on every screened step the full head too, asserting that each candidate's
    /// logit is bit-equal to the full head's and every other row's logit is below the
    /// threshold (a debug mode: it panics on a violation, and reads the head twice).
    Checked,
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
    /// The threads the forward pass splits its work over (results are the same for any count).
    pub exec: Exec,
}

impl SessionOptions {
    /// Context [`SessionOptions::default_context`], batches of 512, greedy sampling, no clock.
    pub fn for_model(model: &Model) -> SessionOptions {
        SessionOptions {
            max_context: SessionOptions::default_context(model.hparams()),
            max_batch: 512,
            sampler: SamplerConfig::greedy(),
            clock: crate::metrics::no_clock,
            exec: Exec::Serial,
        }
    }

    /// The context a session gets without KV options: `min(training context, 4096)` (4096 when
    /// the file does not say). The memory ledger estimates by the same.
    pub fn default_context(hp: &HParams) -> usize {
        match hp.n_ctx_train {
            0 => 4096,
            train => train.min(4096),
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
    /// The last forward pass went through the screened head: its candidates are in `sparse`
    /// and `logits` is empty.
    screened: bool,
    sparse: Screened,
    head_mode: HeadMode,
    /// Decode steps left on the full head after a screened step fell back (`SCREEN_BACKOFF`).
    screen_backoff: usize,
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
            scratch: ForwardScratch::new(opts.exec),
            sampler: Sampler::new(opts.sampler),
            tokens: Vec::new(),
            pending: None,
            logits: Vec::new(),
            out: Vec::new(),
            scored: Vec::new(),
            screened: false,
            sparse: Screened::default(),
            screen_backoff: 0,
            head_mode: HeadMode::Auto,
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

    /// Splits later forward passes over `exec`'s threads.
    pub fn set_exec(&mut self, exec: Exec) {
        self.scratch.set_exec(exec);
    }

    pub fn exec(&self) -> &Exec {
        self.scratch.exec()
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

    /// Next-token logits after the last token run through the model (empty before a prefill,
    /// and after a [`step`](Self::step) that used the screened head: see
    /// [`screened`](Self::screened); [`step_with`](Self::step_with) always computes them all).
    pub fn logits(&self) -> &[f32] {
        &self.logits
    }

    pub fn sampler(&self) -> &Sampler {
        &self.sampler
    }

    pub fn set_sampler(&mut self, cfg: SamplerConfig) {
        self.sampler = Sampler::new(cfg);
    }

    /// Which output head later decode steps use (`Auto` by default).
    pub fn set_head_mode(&mut self, mode: HeadMode) {
        self.head_mode = mode;
    }

    pub fn head_mode(&self) -> HeadMode {
        self.head_mode
    }

    /// The candidates of the last decode step when it went through the screened head (`None`
    /// when its logits are the full ones, in [`logits`](Self::logits)).
    pub fn screened(&self) -> Option<&Screened> {
        self.screened.then_some(&self.sparse)
    }

    /// Forgets the next-token logits (dense and screened).
    fn drop_logits(&mut self) {
        self.logits.clear();
        self.screened = false;
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
            + 4 * (self.sparse.ids.capacity() + self.sparse.logits.capacity())
    }

    /// Forgets the conversation (the sampler keeps its RNG state; reseed it to repeat a run).
    pub fn reset(&mut self) {
        self.kv.clear();
        self.tokens.clear();
        self.pending = None;
        self.drop_logits();
        self.metrics = fresh_metrics(&self.model);
        self.in_prompt = false;
    }

    /// Keeps the longest prefix of the conversation that `prompt` starts with (at most all but
    /// its last token: the next prefill must produce the logits after it) and returns its
    /// length; the caller prefills `prompt[kept..]`. Positions after the kept prefix are
    /// dropped from the KV cache. When the cache cannot go back that far (a ring has
    /// overwritten what the rollback needs, or tokens were evicted: see
    /// [`KvCache::truncate`]) it is cleared and 0 is returned. A kept cache holds exactly what
    /// prefilling the kept tokens afresh would have built.
    pub fn reuse_prefix(&mut self, prompt: &[u32]) -> usize {
        self.in_prompt = false;
        let keep = self.reusable_prefix(prompt);
        if keep < self.cached_len() && !self.kv.truncate(keep) {
            // Only possible for `keep == 0` (`reusable_prefix` checked any other): start afresh.
            self.reset();
            return 0;
        }
        if keep < self.tokens.len() {
            self.pending = None;
            self.tokens.truncate(keep);
            // The logits were those after the last cached token, which is gone (or, when
            // `keep` is all of the cache, the next prefill replaces them anyway).
            self.drop_logits();
        }
        keep
    }

    /// How many tokens of `prompt` [`reuse_prefix`](Self::reuse_prefix) would keep (nothing
    /// changes): the common prefix with the conversation, at most all but the prompt's last
    /// token, 0 when the KV cache cannot roll back to it.
    pub fn reusable_prefix(&self, prompt: &[u32]) -> usize {
        let common = self.tokens.iter().zip(prompt).take_while(|(a, b)| a == b).count();
        let keep = common.min(prompt.len().saturating_sub(1));
        // Past the cache: the pending token is part of the kept prefix (it runs with the rest).
        if keep >= self.cached_len() || self.kv.can_truncate(keep) {
            keep
        } else {
            0
        }
    }

    /// Of a kept prefix of `keep` tokens ([`reusable_prefix`](Self::reusable_prefix)), those
    /// already in the KV cache (the pending sampled token is not: it runs with the prompt).
    pub fn held_in_kv(&self, keep: usize) -> usize {
        keep.min(self.cached_len())
    }

    /// Tokens run through the model (all of `tokens` but a pending sampled one).
    fn cached_len(&self) -> usize {
        self.tokens.len() - self.pending.is_some() as usize
    }

    /// The conversation as a snapshot (see [`crate::snapshot`]): its tokens and the KV cache's
    /// rows, tagged with `model_sha256` and the cache's settings.
    pub fn save_snapshot(&self, model_sha256: &str) -> Vec<u8> {
        let meta = SnapshotMeta {
            model_sha256: model_sha256.to_string(),
            kv: self.kv.settings(),
            counters: self.kv.counters(),
            tokens: self.tokens.len(),
            pending: self.pending.is_some(),
        };
        snapshot::encode(&meta, &self.tokens, self.kv.export_rows_bytes(), |out| self.kv.export_rows(out))
    }

    /// Replaces the conversation by a saved one (of this model: `model_sha256`; with this
    /// session's KV settings) and returns its token count. The next request whose prompt
    /// starts with those tokens reuses them. On error nothing changes.
    pub fn restore_snapshot(&mut self, bytes: &[u8], model_sha256: &str) -> Result<usize, SnapshotError> {
        let snap = snapshot::decode(bytes)?;
        let meta = &snap.meta;
        if meta.model_sha256 != model_sha256 {
            return Err(SnapshotError::Mismatch(format!("saved with model sha256 {}, this model is {model_sha256}", meta.model_sha256)));
        }
        if meta.kv != self.kv.settings() {
            return Err(SnapshotError::Mismatch(format!("saved with KV settings {:?}, this session has {:?}", meta.kv, self.kv.settings())));
        }
        let corrupt = |m: String| SnapshotError::Corrupt(m);
        let in_cache = snap.tokens.len().checked_sub(meta.pending as usize).ok_or_else(|| corrupt("a pending token in an empty conversation".into()))?;
        if in_cache != meta.counters.n_past {
            return Err(corrupt(format!("{} tokens for {} cached positions", snap.tokens.len(), meta.counters.n_past)));
        }
        let n_vocab = self.model.n_vocab();
        if let Some(id) = snap.tokens.iter().find(|&&id| id as usize >= n_vocab) {
            return Err(corrupt(format!("token id {id} outside the vocabulary ({n_vocab})")));
        }
        self.kv.import_rows(&meta.counters, snap.rows).map_err(corrupt)?;
        self.pending = if meta.pending { snap.tokens.last().copied() } else { None };
        self.tokens = snap.tokens;
        self.drop_logits();
        self.metrics = fresh_metrics(&self.model);
        self.in_prompt = false;
        Ok(self.tokens.len())
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
            self.screen_backoff = 0;
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
        self.scored.clear();
        let mut at = 0;
        while at < batch.len() {
            // Up to `max_batch`, and to what the cache takes without evicting (then one token
            // at a time: `KvCache::next_batch_max`), so the rows do not depend on the split.
            let n = self.max_batch.min(self.kv.next_batch_max()).max(1).min(batch.len() - at);
            let (start, chunk) = (at, &batch[at..at + n]);
            at += n;
            let last = at == batch.len();
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
                if start == 0 && last && skip == 0 {
                    std::mem::swap(&mut self.scored, &mut self.out);
                } else {
                    let from = if start == 0 { skip * n_vocab } else { 0 };
                    self.scored.extend_from_slice(&self.out[from..]);
                }
            }
        }
        // `pending` was already in `tokens` (pushed when sampled).
        self.pending = None;
        self.tokens.extend_from_slice(ids);
        self.screened = false;
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

    /// Samples the next token (first running the previously sampled one through the model),
    /// through the screened output head when the model has one and the sampler's settings
    /// allow it exactly (see [`HeadMode`]): the same token as with every logit.
    pub fn step(&mut self) -> Result<u32, EngineError> {
        self.decode_step(true, |_| Ok(()))
    }

    /// [`step`](Self::step), with `filter` editing the logits between the forward pass and the
    /// sampler (constrained decoding masks tokens out with `-inf`). Always the full head: the
    /// filter and [`logits`](Self::logits) see every logit.
    pub fn step_with(&mut self, filter: impl FnOnce(&mut [f32]) -> Result<(), EngineError>) -> Result<u32, EngineError> {
        self.decode_step(false, filter)
    }

    fn decode_step(&mut self, may_screen: bool, filter: impl FnOnce(&mut [f32]) -> Result<(), EngineError>) -> Result<u32, EngineError> {
        let t0 = (self.clock)();
        let mut read = None;
        if let Some(t) = self.pending {
            let n_vocab = self.model.n_vocab();
            let need = match self.head_mode {
                HeadMode::Full => None,
                _ if !may_screen || !self.model.has_screened_head() => None,
                _ if self.screen_backoff > 0 => {
                    self.screen_backoff -= 1;
                    None
                }
                _ => self.sampler.screen_need(n_vocab),
            };
            let head = if let Some(need) = need {
                let model = &self.model;
                let check = self.head_mode == HeadMode::Checked;
                // The penalized recent tokens and the biased ones: computed exactly by the
                // screen, ranked by their adjusted logits.
                self.sampler.prepare_adjusted(&self.tokens, n_vocab);
                let sampler = &self.sampler;
                let value = |i: usize, z: f32| sampler.adjusted_logit(i, z);
                let ask = Ask { need, adjusted: sampler.adjusted(), value: &value };
                model.forward_screened(t, &mut self.kv, &mut self.scratch, ask, &mut self.sparse, &mut self.out, check)?;
                if check {
                    if let Err(e) = check_against_full(&self.sparse, &self.out, ask) {
                        panic!("screened head bound violated at position {}: {e}", self.tokens.len());
                    }
                }
                if self.sparse.fell_back {
                    // Every logit was computed: sampled as the full head's. Such a step reads
                    // pass 1 and the whole head; where the candidates are that many, the next
                    // ones likely are too: a few steps on the full head first.
                    std::mem::swap(&mut self.logits, &mut self.out);
                    self.screened = false;
                    self.screen_backoff = SCREEN_BACKOFF;
                } else {
                    self.logits.clear();
                    self.screened = true;
                }
                let weights = model.decode_weight_bytes() - model.head_bytes() + self.sparse.bytes_read;
                (weights, HeadUse::Screened { candidates: self.sparse.ids.len(), fell_back: self.sparse.fell_back })
            } else {
                self.model.forward(&[t], &mut self.kv, &mut self.scratch, LogitRows::Last, &mut self.out)?;
                std::mem::swap(&mut self.logits, &mut self.out);
                self.screened = false;
                (self.model.decode_weight_bytes(), HeadUse::Full)
            };
            self.pending = None;
            // The attention read every row held, this token's included.
            read = Some((self.kv.bytes_used(), head));
        }
        let id = if self.screened {
            if !may_screen {
                // Unreachable: a screened forward pass is always sampled in the same call.
                return Err(EngineError::NothingToDecode);
            }
            self.sampler.sample_candidates(&self.sparse.ids, &self.sparse.logits, &self.tokens, self.model.n_vocab())
        } else {
            if self.logits.is_empty() {
                return Err(EngineError::NothingToDecode);
            }
            filter(&mut self.logits)?;
            self.sampler.sample(&self.logits, &self.tokens)
        };
        self.tokens.push(id);
        self.pending = Some(id);
        let t1 = (self.clock)();
        if self.in_prompt {
            self.in_prompt = false;
            self.metrics.ttft_ms = t1 - self.gen_start;
        } else {
            self.metrics.decode_ms += t1 - t0;
            if let Some((kv, (weights, head))) = read {
                self.metrics.record_decode_kv(kv);
                self.metrics.record_decode_weights(weights, head);
            }
        }
        self.metrics.generated_tokens += 1;
        Ok(id)
    }

    /// Whether `step` can run: the KV cache has room for the pending token, if any.
    pub fn can_step(&self) -> bool {
        (!self.logits.is_empty() || self.screened) && (self.pending.is_none() || self.kv.check_room(1).is_ok())
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
