//! How many tokens a generation may add after its prompt: the one rule every host applies (the
//! worker and `edgellm serve` through `host`, the CLI directly), so a prompt near the end of
//! the context gets the same answer everywhere.
//!
//! The last position a cache holds is the prompt's plus the room: a prompt of `n` tokens in a
//! context of `max` leaves `max - n` tokens, as llama.cpp's server stops one token before its
//! context is full. (A step could sample one token more without storing it, but the next turn
//! of the conversation could then not hold it.)

use crate::kv::KvPolicy;

/// A prompt the session cannot take.
#[derive(Clone, Debug, PartialEq)]
pub struct OverContext {
    /// `PROMPT_TOO_LONG` (the plain context) or `PROMPT_OVER_KV_BUDGET` (a KV budget with
    /// policy `error`).
    pub code: &'static str,
    pub message: String,
}

/// Positions left for generated tokens after a prompt of `n` tokens in a session holding
/// `max_context` tokens (`None`: no limit, the window-sinks policy evicts as it goes).
/// `budget`: the session's KV budget policy, `None` for the plain context.
pub fn room_after(max_context: usize, budget: Option<KvPolicy>, n: usize) -> Result<Option<usize>, OverContext> {
    if budget == Some(KvPolicy::WindowSinks) {
        return Ok(None);
    }
    if n >= max_context {
        let (code, what) = if budget.is_some() { ("PROMPT_OVER_KV_BUDGET", "the KV budget") } else { ("PROMPT_TOO_LONG", "the context") };
        return Err(OverContext { code, message: format!("the prompt has {n} tokens; {what} holds {max_context} (prompt + generated)") });
    }
    Ok(Some(max_context - n))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_room_is_what_the_context_leaves() {
        assert_eq!(room_after(256, None, 248), Ok(Some(8)));
        assert_eq!(room_after(256, Some(KvPolicy::Error), 255), Ok(Some(1)));
        assert_eq!(room_after(256, None, 256).unwrap_err().code, "PROMPT_TOO_LONG");
        assert_eq!(room_after(256, Some(KvPolicy::Error), 300).unwrap_err().code, "PROMPT_OVER_KV_BUDGET");
        assert_eq!(room_after(256, Some(KvPolicy::WindowSinks), 10_000), Ok(None));
    }
}
