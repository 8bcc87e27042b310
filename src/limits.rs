//! Caps on what a file or a caller may declare, in one place.
//!
//! Every size the engine computes from a header value or a request option goes through one of
//! these checks before it sizes an allocation or a loop: a hostile file or request then gets a
//! typed error instead of a wrapped figure, a "capacity overflow" panic, a terabyte allocation
//! or an estimate that runs for minutes. The caps are far above any model this engine can run
//! in a browser or on a workstation (the largest supported models have 128 layers, 262 144
//! tokens and 128 K contexts), so they only ever refuse nonsense.

/// Most positions a KV cache, a context or an estimate may be asked for (4 M tokens).
pub const MAX_CONTEXT_TOKENS: usize = 1 << 22;
/// Most bytes a KV budget may be given in (1 TiB).
pub const MAX_KV_BYTES: u64 = 1 << 40;
/// Most prompt tokens per forward pass.
pub const MAX_BATCH: usize = 1 << 16;
/// Most tokens one request may ask to generate (16 M: a window-sinks cache streams forever).
pub const MAX_NEW_TOKENS: usize = 1 << 24;
/// Most transformer blocks a header may declare.
pub const MAX_LAYERS: usize = 4096;
/// Most tokens a vocabulary may have.
pub const MAX_VOCAB: usize = 1 << 24;
/// Largest hidden, feed-forward or head dimension a header may declare.
pub const MAX_DIM: usize = 1 << 20;
/// Most attention heads.
pub const MAX_HEADS: usize = 1 << 12;
/// Most threads an executor may be asked for.
pub const MAX_THREADS: usize = 256;
/// Largest request (its JSON text, in bytes) a host takes by default: `edgellm serve`'s
/// `--max-body-bytes` and the JS engine's `maxRequestBytes`. A prompt is tokenized inside wasm
/// memory, which never shrinks: a 17 MB prompt grew it by 265 MB for good (about 16 bytes per
/// byte of text, measured on SmolLM2), so the size is bounded before the text reaches wasm.
pub const DEFAULT_MAX_REQUEST_BYTES: usize = 1 << 20;
/// Stack of each native worker thread of the executor (`exec::ThreadPool`): the kernels keep
/// their buffers on the heap, so a small stack is plenty.
pub const WORKER_STACK_BYTES: usize = 1 << 20;

/// Stack of `edgellm serve`'s inference thread (Rust's default for a spawned thread is 2 MiB):
/// margin for what recurses over its input (grammars, template values at their limits).
pub const INFERENCE_STACK_BYTES: usize = 32 << 20;

/// A caller-supplied value outside its range. `code()` is `INVALID_REQUEST`, the hosts' code for
/// a bad request field.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LimitError {
    pub what: &'static str,
    pub value: u64,
    pub min: u64,
    pub max: u64,
}

impl LimitError {
    pub fn code(&self) -> &'static str {
        "INVALID_REQUEST"
    }
}

impl std::fmt::Display for LimitError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} is {}; it must be between {} and {}", self.what, self.value, self.min, self.max)
    }
}

impl std::error::Error for LimitError {}

impl From<LimitError> for crate::host::HostError {
    fn from(e: LimitError) -> Self {
        crate::host::HostError::new(e.code(), e.to_string())
    }
}

/// `value` within `min..=max`, else a [`LimitError`] naming `what`.
pub fn check_range(what: &'static str, value: u64, min: u64, max: u64) -> Result<(), LimitError> {
    if (min..=max).contains(&value) {
        Ok(())
    } else {
        Err(LimitError { what, value, min, max })
    }
}

/// A context / KV budget in tokens.
pub fn check_context(what: &'static str, tokens: usize) -> Result<(), LimitError> {
    check_range(what, tokens as u64, 1, MAX_CONTEXT_TOKENS as u64)
}

/// A prefill batch.
pub fn check_batch(what: &'static str, batch: usize) -> Result<(), LimitError> {
    check_range(what, batch as u64, 1, MAX_BATCH as u64)
}

/// A number of tokens to generate.
pub fn check_new_tokens(what: &'static str, n: usize) -> Result<(), LimitError> {
    check_range(what, n as u64, 1, MAX_NEW_TOKENS as u64)
}

/// `a × b` as u64, saturating: figures computed from declared sizes never wrap (on wasm32 a
/// `usize` product of two header values easily would); a saturated figure is refused by the
/// budget instead.
pub fn mul(a: usize, b: usize) -> u64 {
    (a as u64).saturating_mul(b as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges() {
        assert!(check_context("ctx", 1).is_ok() && check_context("ctx", MAX_CONTEXT_TOKENS).is_ok());
        // 3e9 fits usize on wasm32 as well as natively.
        let e = check_context("ctx", 3_000_000_000usize).unwrap_err();
        assert_eq!(e.code(), "INVALID_REQUEST");
        assert!(e.to_string().contains("ctx is 3000000000"), "{e}");
        assert!(check_batch("batch", 0).is_err() && check_new_tokens("max_tokens", usize::MAX).is_err());
        assert_eq!(mul(usize::MAX, 3), u64::MAX.min((usize::MAX as u64).saturating_mul(3)));
    }
}
