//! The one step-wise generation driver: the CLI ([`Session::generate`]), the browser worker
//! (through [`crate::host`] and `src/wasm`) and `edgellm serve` all run a generation through a
//! [`Generator`].
//!
//! [`Generator::start`] keeps what the session's KV cache already holds of the prompt (see
//! [`Session::reuse_prefix`]); [`prefill`](Generator::prefill) then runs the rest in chunks (one
//! call per chunk, so a host can yield in between), and [`step`](Generator::step) samples one
//! token per call, applying the stop rules (end-of-generation tokens, stop strings, max tokens,
//! a full context) and streaming text. The decoder state is owned ([`DecodeState`]): each step
//! decodes only its own token.

mod logprobs;
mod room;
mod stop;

use serde::Serialize;

use crate::engine::{EngineError, Session};
use crate::metrics::GenerationMetrics;
use crate::model::ModelError;
use crate::tokenizer::{DecodeOptions, DecodeState, Tokenizer};

pub use logprobs::{token_logprob, TokenLogprob, TopLogprob, MAX_TOP_LOGPROBS};
pub use room::{room_after, OverContext};
pub use stop::StopHold;

/// Stop conditions of a generation.
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
    /// The reader asked to stop.
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

impl Serialize for FinishReason {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// The result of a whole generation.
#[derive(Clone, Debug, PartialEq)]
pub struct Generation {
    pub prompt_ids: Vec<u32>,
    /// Prompt tokens the KV cache already held (not prefilled again).
    pub cached_tokens: usize,
    /// Generated ids, including a final end-of-generation token if that is what stopped it.
    pub ids: Vec<u32>,
    /// Generated text (without end-of-generation tokens, cut before a stop string).
    pub text: String,
    pub finish_reason: FinishReason,
    pub metrics: GenerationMetrics,
}

/// Where the prefill is after a [`Generator::prefill`] call.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PrefillStatus {
    pub done: bool,
    /// Prompt tokens in the KV cache now (the reused ones included).
    pub processed: usize,
    pub total: usize,
}

/// One decode step's outcome.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct StepEvent {
    /// The sampled token (None when the call only reports the end).
    pub token: Option<u32>,
    /// Text that became final with this step (may be empty: an unfinished UTF-8 character, or
    /// text that could be the start of a stop string, is held back).
    pub text: String,
    /// Set on the last step.
    pub finish_reason: Option<FinishReason>,
    /// With [`Generator::set_logprobs`]: the entries of the tokens whose text this event
    /// completes (held-back tokens wait for the event that releases their text; the last event
    /// carries what is left). An end-of-generation token has none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub logprobs: Vec<TokenLogprob>,
    /// With tools (set by the host, `crate::tools::output`): the `delta.tool_calls` pieces this
    /// step completes; `text` is then only the content besides the calls.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<crate::tools::ToolCallDelta>,
    /// The choice this step belongs to (OpenAI's `n`: the host runs the choices one after the
    /// other; 0 here).
    pub choice: usize,
    /// With `finish_reason`: the choice's `finish_reason` as OpenAI reports it (the host makes
    /// it "tool_calls" for an answer whose calls all closed).
    pub choice_finish_reason: Option<&'static str>,
    /// The request's last step: its last choice finished.
    pub done: bool,
}

impl StepEvent {
    pub(crate) fn new(token: Option<u32>, text: String, finish_reason: Option<FinishReason>, logprobs: Vec<TokenLogprob>) -> StepEvent {
        let choice_finish_reason = finish_reason.map(FinishReason::as_str);
        StepEvent { token, text, finish_reason, logprobs, tool_calls: Vec::new(), choice: 0, choice_finish_reason, done: finish_reason.is_some() }
    }
}

/// Constrained decoding's hook (`crate::structured::Constraint`): `filter` masks the tokens
/// that cannot come next out of the logits (`-inf`) before sampling; `accept` tells it the token
/// sampled. Errors end the generation with `INVALID_REQUEST`.
pub trait TokenFilter {
    fn filter(&mut self, logits: &mut [f32]) -> Result<(), String>;
    fn accept(&mut self, id: u32) -> Result<(), String>;
}

/// One generation in progress over a session (which it borrows per call, so a host can keep
/// both side by side).
#[derive(Clone, Debug)]
pub struct Generator {
    prompt: Vec<u32>,
    /// Prompt tokens kept from the conversation (a pending sampled token included: it runs
    /// with the rest of the prompt).
    cached: usize,
    /// Of those, the ones already in the KV cache (`cached_tokens`: not the pending one).
    in_kv: usize,
    /// The session was rolled back to the cached prefix (by the first `prefill`).
    started: bool,
    /// Prompt tokens in the KV cache (`cached` included).
    prefilled: usize,
    ids: Vec<u32>,
    decoder: DecodeState,
    hold: StopHold,
    opts: GenerateOptions,
    finish: Option<FinishReason>,
    /// Alternatives per token when log probabilities are wanted (`None`: not computed).
    logprobs: Option<usize>,
    /// Entries not yet handed out by an event; all of them, in order.
    logprobs_pending: Vec<TokenLogprob>,
    logprobs_all: Vec<TokenLogprob>,
    /// Where each `logprobs_all` token's text starts in the decoded output (bytes): a stop
    /// string cuts the entries of the tokens past its start (they are not in the answer).
    logprob_at: Vec<usize>,
    /// Bytes of text decoded so far (before any stop string cut).
    decoded: usize,
}

impl Generator {
    /// Starts a generation of `prompt` on `session`: sets up the stop rules and finds how much
    /// of the prompt the KV cache holds ([`cached_tokens`](Self::cached_tokens)). Nothing
    /// changes until the first [`prefill`](Self::prefill), which rolls the cache back to that
    /// prefix: a request refused or dropped before it leaves the session as it was.
    pub fn start(session: &Session, tok: &Tokenizer, prompt: Vec<u32>, opts: GenerateOptions) -> Result<Generator, EngineError> {
        if prompt.is_empty() {
            return Err(ModelError::BadRequest("empty prompt".into()).into());
        }
        let cached = session.reusable_prefix(&prompt);
        Ok(Generator {
            prompt,
            cached,
            in_kv: session.held_in_kv(cached),
            started: false,
            prefilled: cached,
            ids: Vec::new(),
            decoder: tok.decode_state(DecodeOptions::default()),
            hold: StopHold::new(opts.stop.clone()),
            opts,
            finish: None,
            logprobs: None,
            logprobs_pending: Vec::new(),
            logprobs_all: Vec::new(),
            logprob_at: Vec::new(),
            decoded: 0,
        })
    }

    pub fn prompt(&self) -> &[u32] {
        &self.prompt
    }

    /// Prompt tokens the KV cache already held when the generation started.
    pub fn cached_tokens(&self) -> usize {
        self.in_kv
    }

    /// Prompt tokens not yet run through the model.
    pub fn prompt_remaining(&self) -> usize {
        self.prompt.len() - self.prefilled
    }

    /// Generated ids so far (a final end-of-generation token included).
    pub fn ids(&self) -> &[u32] {
        &self.ids
    }

    /// The final text so far (all of it once finished).
    pub fn text(&self) -> &str {
        &self.hold.text
    }

    pub fn max_tokens(&self) -> usize {
        self.opts.max_tokens
    }

    pub fn finish_reason(&self) -> Option<FinishReason> {
        self.finish
    }

    /// Computes each generated token's log probability with `top` alternatives (at most
    /// [`MAX_TOP_LOGPROBS`]); `None` turns it off. See `logprobs.rs` for the distribution.
    pub fn set_logprobs(&mut self, top: Option<usize>) {
        self.logprobs = top.map(|t| t.min(MAX_TOP_LOGPROBS));
    }

    /// Whether log probabilities are computed.
    pub fn is_logprobs(&self) -> bool {
        self.logprobs.is_some()
    }

    /// Every entry so far (with [`set_logprobs`](Self::set_logprobs)).
    pub fn logprobs(&self) -> &[TokenLogprob] {
        &self.logprobs_all
    }

    /// Runs the next at most `chunk` prompt tokens through the model (logits only after the
    /// last prompt token). All or nothing per call (see [`Session::prefill`]).
    pub fn prefill(&mut self, session: &mut Session, chunk: usize) -> Result<PrefillStatus, EngineError> {
        let total = self.prompt.len();
        if !self.started {
            // The session is the one `start` looked at, unchanged since (one generation at a
            // time); should it have changed, what it keeps now is what counts.
            // Of what is kept, the tokens already in the KV cache (before `reuse_prefix` drops
            // the pending one from the session).
            let held = session.held_in_kv(usize::MAX);
            self.cached = session.reuse_prefix(&self.prompt);
            self.in_kv = self.cached.min(held);
            self.prefilled = self.cached;
            self.started = true;
        }
        if self.prefilled < total {
            let end = self.prefilled.saturating_add(chunk.max(1)).min(total);
            session.prefill_with(&self.prompt[self.prefilled..end], end == total)?;
            self.prefilled = end;
        }
        Ok(PrefillStatus { done: self.prefilled == total, processed: self.prefilled, total })
    }

    /// Samples one token (the prompt must be prefilled) and applies the stop rules. After the
    /// event that carries a `finish_reason`, further calls only repeat it.
    pub fn step(&mut self, session: &mut Session, tok: &Tokenizer) -> Result<StepEvent, EngineError> {
        self.step_with(session, tok, None)
    }

    /// [`step`](Self::step) under a [`TokenFilter`] (constrained decoding). Log probabilities
    /// stay those of the model's distribution (taken before the mask).
    pub fn step_with(&mut self, session: &mut Session, tok: &Tokenizer, mut filter: Option<&mut dyn TokenFilter>) -> Result<StepEvent, EngineError> {
        if let Some(f) = self.finish {
            return Ok(StepEvent::new(None, String::new(), Some(f), Vec::new()));
        }
        if self.prefilled < self.prompt.len() {
            return Err(EngineError::NothingToDecode);
        }
        if self.out_of_room(session) {
            let text = self.end(tok, FinishReason::Length);
            return Ok(self.event(None, text));
        }
        let want_raw = self.logprobs.is_some() && filter.is_some();
        let mut raw: Vec<f32> = Vec::new();
        let id = match filter.as_deref_mut() {
            // Log probabilities need every logit: the full head.
            None if self.logprobs.is_some() => session.step_with(|_| Ok(()))?,
            None => session.step()?,
            Some(f) => session.step_with(|logits| {
                if want_raw {
                    raw.extend_from_slice(logits);
                }
                f.filter(logits).map_err(|e| EngineError::from(ModelError::BadRequest(format!("constrained decoding: {e}"))))
            })?,
        };
        if let Some(f) = filter {
            f.accept(id).map_err(|e| EngineError::from(ModelError::BadRequest(format!("constrained decoding: {e}"))))?;
        }
        self.ids.push(id);
        let eog = self.opts.stop_on_eog && tok.is_eog(id);
        if let (Some(top), false) = (self.logprobs, eog) {
            // The logits `id` was sampled from are still the session's (until the next step);
            // under a filter, the copy taken before the mask.
            let e = token_logprob(if want_raw { &raw } else { session.logits() }, id, top, tok);
            self.logprobs_all.push(e.clone());
            self.logprob_at.push(self.decoded);
            self.logprobs_pending.push(e);
        }
        if eog {
            let text = self.end(tok, FinishReason::Stop);
            return Ok(self.event(Some(id), text));
        }
        let piece = self.decoder.push(tok, id)?;
        self.decoded += piece.len();
        if self.hold.push(&piece) {
            let text = self.end(tok, FinishReason::Stop);
            return Ok(self.event(Some(id), text));
        }
        if self.out_of_room(session) {
            let text = self.end(tok, FinishReason::Length);
            return Ok(self.event(Some(id), text));
        }
        let text = self.hold.ready(false);
        Ok(self.event(Some(id), text))
    }

    /// A step's event: pending log probabilities go out with text, or with the end.
    fn event(&mut self, token: Option<u32>, text: String) -> StepEvent {
        let logprobs = if !text.is_empty() || self.finish.is_some() { std::mem::take(&mut self.logprobs_pending) } else { Vec::new() };
        StepEvent::new(token, text, self.finish, logprobs)
    }

    /// Finishes now with `Length`, as if `max_tokens` had been reached (a caller's own limit:
    /// the server's time cap): the decoder's held-back tail is released as at any end. After a
    /// finish, repeats it, as [`step_with`](Self::step_with) does.
    pub fn cut(&mut self, tok: &Tokenizer) -> StepEvent {
        if let Some(f) = self.finish {
            return StepEvent::new(None, String::new(), Some(f), Vec::new());
        }
        let text = self.end(tok, FinishReason::Length);
        self.event(None, text)
    }

    /// Ends the generation here (`Aborted`): the text is what was returned so far.
    pub fn abort(&mut self) {
        if self.finish.is_none() {
            self.finish = Some(FinishReason::Aborted);
            self.hold.truncate_unemitted();
        }
    }

    /// The whole generation (`Length` if it was never finished).
    pub fn into_generation(self, session: &Session) -> Generation {
        Generation {
            prompt_ids: self.prompt,
            cached_tokens: self.in_kv,
            ids: self.ids,
            text: self.hold.text,
            finish_reason: self.finish.unwrap_or(FinishReason::Length),
            metrics: session.metrics().clone(),
        }
    }

    fn out_of_room(&self, session: &Session) -> bool {
        self.ids.len() >= self.opts.max_tokens || !session.can_step()
    }

    /// Finishes with `reason`: the decoder's held-back tail becomes final (a stop string it
    /// completes makes the reason `Stop`); returns the text not yet returned.
    fn end(&mut self, tok: &Tokenizer, reason: FinishReason) -> String {
        let tail = self.decoder.finish(tok);
        let stopped = self.hold.push(&tail);
        self.finish = Some(if stopped { FinishReason::Stop } else { reason });
        if stopped {
            self.drop_logprobs_past(self.hold.text.len());
        }
        self.hold.ready(true)
    }

    /// Drops the log probabilities of the tokens whose text starts at or past `len` (those a
    /// stop string cut away): an entry per token that gave the returned text some of its
    /// bytes. The last one may run past the cut, when the stop string starts inside its text
    /// (`stop: "wo"` after " woven": the text ends with " ", the entries with " woven").
    fn drop_logprobs_past(&mut self, len: usize) {
        let keep = self.logprob_at.iter().take_while(|&&at| at < len).count();
        let cut = self.logprobs_all.len() - keep;
        self.logprobs_all.truncate(keep);
        self.logprob_at.truncate(keep);
        let pending = self.logprobs_pending.len();
        self.logprobs_pending.truncate(pending.saturating_sub(cut));
    }
}

impl Session {
    /// Prefills `prompt` (keeping what the cache already holds of it), then samples until an
    /// end-of-generation token, a stop string, `max_tokens` or a full context. `on_text`
    /// receives the text as it becomes final (never a part of a stop string); returning
    /// `false` stops the generation (`Aborted`).
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
        let mut g = Generator::start(self, tok, prompt.to_vec(), opts.clone())?;
        // One call: the session splits the prompt into batches the KV cache can take.
        g.prefill(self, usize::MAX)?;
        loop {
            let ev = g.step(self, tok)?;
            if let Some(id) = ev.token {
                on_step(self, id);
            }
            if ev.finish_reason.is_some() {
                if !ev.text.is_empty() {
                    on_text(&ev.text);
                }
                break;
            }
            if !ev.text.is_empty() && !on_text(&ev.text) {
                g.abort();
                break;
            }
        }
        Ok(g.into_generation(self))
    }
}
