//! A request's prompt, as generation runs it: its tokens (chat template or raw text, with the
//! special-token rules of `tokenizer::ContentSpecials`) and whether it fits the session's KV
//! cache. `generate_begin` and `count_tokens` both go through here, so the count a caller (the
//! router) gets is the one the generation would see.

use serde::Serialize;

use crate::generate::OverContext;
use crate::tokenizer::{ContentSpecials, Tokenizer};

use super::{GenerateRequest, Host, HostError, Loaded};

/// The prompt tokens of `req` (`INVALID_REQUEST` for a request without a prompt, an empty one,
/// or an unknown kind).
pub(super) fn prompt_tokens(tokenizer: &Tokenizer, req: &GenerateRequest) -> Result<Vec<u32>, HostError> {
    let prompt = match req.kind_name() {
        "chat" => {
            let messages = req.messages.as_deref().filter(|m| !m.is_empty()).ok_or_else(|| HostError::new("INVALID_REQUEST", "messages must be a non-empty list"))?;
            // Tools, past calls and their results: by the model's template when it renders
            // them, else by the fallback (`tools::render`).
            let template = crate::tokenizer::ChatTemplate::for_tokenizer(tokenizer);
            let (messages, tools) = crate::tools::render::conversation(&template, messages, req.tools.as_ref());
            template.encode_with_tools(tokenizer, &messages, true, ContentSpecials::from_opt_in(req.raw_special_tokens), tools.as_ref())?
        }
        "completion" => {
            let prompt = req.prompt.as_deref().ok_or_else(|| HostError::new("INVALID_REQUEST", "prompt is required"))?;
            tokenizer.encode(prompt, true, true)
        }
        other => return Err(HostError::new("INVALID_REQUEST", format!("unknown request kind {other:?}"))),
    };
    if prompt.is_empty() {
        return Err(HostError::new("INVALID_REQUEST", "the prompt has no tokens").with_param(req.input_param()));
    }
    Ok(prompt)
}

impl GenerateRequest {
    /// "chat" or "completion" (a request without a kind: by whether it has messages).
    pub fn kind_name(&self) -> &str {
        self.kind.as_deref().unwrap_or(if self.messages.is_some() { "chat" } else { "completion" })
    }

    /// The parameter that holds the prompt, which errors about the prompt name (OpenAI's
    /// `param`): `messages` or `prompt`.
    pub fn input_param(&self) -> &'static str {
        if self.kind_name() == "chat" {
            "messages"
        } else {
            "prompt"
        }
    }
}

/// Positions left for generated tokens after a prompt of `n` tokens in the loaded session
/// (`None`: no limit), or the error generation gives: `generate::room_after`, the rule every
/// host applies, over the session's context and KV policy.
pub(super) fn room_after(l: &Loaded, n: usize) -> Result<Option<usize>, OverContext> {
    let budget = l.kv_options.as_ref().map(|_| l.session.kv().policy());
    crate::generate::room_after(l.info.max_context, budget, n)
}

impl From<OverContext> for HostError {
    fn from(e: OverContext) -> HostError {
        HostError::new(e.code, e.message)
    }
}

/// What `count_tokens` answers.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TokenCount {
    /// The prompt's tokens, chat template and special tokens as generation applies them.
    pub prompt_tokens: usize,
    /// The loaded session's context (or KV budget) in tokens.
    pub max_context: usize,
    /// Whether a generation of this request could start.
    pub fits: bool,
    /// When it could not: the error generation would give (`PROMPT_TOO_LONG`,
    /// `PROMPT_OVER_KV_BUDGET`).
    pub code: Option<&'static str>,
}

impl Host {
    /// The prompt tokens of `req` as a generation would run them, and whether it fits the
    /// session's KV cache. No model call; a generation in progress is left alone.
    /// `MODEL_NOT_LOADED`, `INVALID_REQUEST` (no prompt, an empty one).
    pub fn count_tokens(&self, req: &GenerateRequest) -> Result<TokenCount, HostError> {
        let l = self.loaded.as_ref().ok_or_else(|| HostError::new("MODEL_NOT_LOADED", "no model is loaded"))?;
        let prompt_tokens = prompt_tokens(&l.tokenizer, req)?.len();
        let max_context = l.info.max_context;
        Ok(match room_after(l, prompt_tokens) {
            Ok(_) => TokenCount { prompt_tokens, max_context, fits: true, code: None },
            Err(e) => TokenCount { prompt_tokens, max_context, fits: false, code: Some(e.code) },
        })
    }
}
