//! How a session's KV cache is set up: budget, storage type, eviction policy, attention sinks.

use serde::{Deserialize, Serialize};

use super::KvError;
use crate::limits::{MAX_CONTEXT_TOKENS, MAX_KV_BYTES};

/// Element type of the stored keys and values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum KvDtype {
    /// IEEE half precision (what llama.cpp's default cache keeps): 2 bytes per element.
    #[default]
    F16,
    /// int8 in blocks of [`Q8_BLOCK`] elements, each block with its own f16 scale (the layout of
    /// ggml's Q8_0): `32 + 2` bytes per 32 elements, i.e. 1.0625 bytes per element.
    #[serde(alias = "int8", alias = "q8_0")]
    Q8,
}

/// Elements per int8 block (one f16 scale each): Q8_0's, as the rows are read back as Q8_0
/// blocks (`kv::store::decode_row`).
pub const Q8_BLOCK: usize = crate::quant::Q8_0_BLOCK;

impl KvDtype {
    pub fn name(self) -> &'static str {
        match self {
            KvDtype::F16 => "f16",
            KvDtype::Q8 => "q8",
        }
    }

    /// `f16`, `q8` (also `int8`, `q8_0`).
    pub fn parse(s: &str) -> Option<KvDtype> {
        match s.to_ascii_lowercase().as_str() {
            "f16" => Some(KvDtype::F16),
            "q8" | "int8" | "q8_0" => Some(KvDtype::Q8),
            _ => None,
        }
    }

    /// Bytes of one stored row of `width` values (f16: `2w`; q8: `w + 2·⌈w/32⌉`, the per-block
    /// scales included).
    pub fn row_bytes(self, width: usize) -> usize {
        match self {
            KvDtype::F16 => 2 * width,
            KvDtype::Q8 => width + 2 * width.div_ceil(Q8_BLOCK),
        }
    }

    /// Whether one stored row holds only finite values: every f16 (F16), every block's f16
    /// scale (Q8, blocks of a scale then up to [`Q8_BLOCK`] int8 values, finite by construction).
    pub fn row_finite(self, row: &[u8]) -> bool {
        let finite = |b: &[u8]| u16::from_le_bytes([b[0], b[1]]) & 0x7c00 != 0x7c00;
        match self {
            KvDtype::F16 => row.chunks_exact(2).all(finite),
            KvDtype::Q8 => row.chunks(2 + Q8_BLOCK).all(|b| b.len() < 2 || finite(b)),
        }
    }
}

/// What happens when the cache is full.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum KvPolicy {
    /// Keep the first `n_sink` tokens (attention sinks) and the most recent ones; older tokens
    /// are evicted one by one as new ones arrive, positions stay compacted (StreamingLLM).
    WindowSinks,
    /// Refuse to go past the budget: `PROMPT_OVER_KV_BUDGET` before a prefill that cannot fit,
    /// `KV_FULL` when a decode step would need another slot.
    Error,
}

impl KvPolicy {
    pub fn name(self) -> &'static str {
        match self {
            KvPolicy::WindowSinks => "window-sinks",
            KvPolicy::Error => "error",
        }
    }

    /// `window-sinks` (also `window`, `sinks`), `error`.
    pub fn parse(s: &str) -> Option<KvPolicy> {
        match s.to_ascii_lowercase().as_str() {
            "window-sinks" | "window_sinks" | "window" | "sinks" => Some(KvPolicy::WindowSinks),
            "error" => Some(KvPolicy::Error),
            _ => None,
        }
    }
}

/// How big the cache may get.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KvBudget {
    /// Tokens held by the global-attention layers (sinks included). Sliding-window layers hold
    /// `min(window, tokens)`.
    Tokens(usize),
    /// Bytes of K/V storage at full occupancy: the most tokens whose storage fits.
    Bytes(usize),
}

/// The default number of attention sinks (StreamingLLM's choice).
pub const DEFAULT_SINKS: usize = 4;

/// A session's KV cache settings.
#[derive(Clone, Debug, PartialEq)]
pub struct KvConfig {
    pub budget: KvBudget,
    pub dtype: KvDtype,
    /// Attention sinks kept by `window-sinks` (ignored by `error`, which never evicts).
    pub n_sink: usize,
    pub policy: KvPolicy,
    /// Re-base stored key positions once RoPE positions would pass this (default
    /// `max(8192, 2 × budget)`). See the module documentation; tests set it low to force it.
    pub rebase_after: Option<usize>,
    /// `true` for the plain context-length cache a session gets without a KV configuration:
    /// same behaviour as `error`, but running out is reported as `CONTEXT_FULL`.
    pub context_limit: bool,
}

impl KvConfig {
    /// A bounded cache of `tokens` with the default policy (window + 4 sinks), f16.
    pub fn window(tokens: usize) -> KvConfig {
        KvConfig {
            budget: KvBudget::Tokens(tokens),
            dtype: KvDtype::F16,
            n_sink: DEFAULT_SINKS,
            policy: KvPolicy::WindowSinks,
            rebase_after: None,
            context_limit: false,
        }
    }

    /// The plain context of `max_tokens` positions (f16, never evicts, `CONTEXT_FULL` beyond):
    /// what a session uses when it is given no KV configuration.
    pub fn context(max_tokens: usize) -> KvConfig {
        KvConfig { n_sink: 0, policy: KvPolicy::Error, context_limit: true, ..KvConfig::window(max_tokens) }
    }
}

impl KvConfig {
    /// The checks that need no model: a non-zero budget, room for a window after the sinks.
    pub fn check(&self) -> Result<(), KvError> {
        if self.context_limit {
            return match self.budget {
                KvBudget::Tokens(t) if t > MAX_CONTEXT_TOKENS => {
                    Err(KvError::BadConfig(format!("a context of {t} tokens is more than the {MAX_CONTEXT_TOKENS} supported")))
                }
                _ => Ok(()),
            };
        }
        match self.budget {
            KvBudget::Tokens(0) | KvBudget::Bytes(0) => Err(KvError::BadConfig("the budget must be at least 1 token".into())),
            KvBudget::Tokens(t) if t > MAX_CONTEXT_TOKENS => {
                Err(KvError::BadConfig(format!("a budget of {t} tokens is more than the {MAX_CONTEXT_TOKENS} supported")))
            }
            KvBudget::Bytes(b) if b as u64 > MAX_KV_BYTES => {
                Err(KvError::BadConfig(format!("a budget of {b} bytes is more than the {MAX_KV_BYTES} supported")))
            }
            KvBudget::Tokens(t) if self.policy == KvPolicy::WindowSinks && t <= self.n_sink => Err(KvError::BadConfig(format!(
                "a budget of {t} tokens leaves no room for a window after {} sinks",
                self.n_sink
            ))),
            _ => Ok(()),
        }
    }

    /// The budget in tokens for a model of this `shape`: a byte budget buys
    /// `shape.tokens_for_bytes`, and too few of them for the policy (`window-sinks`: the sinks
    /// and one more) are `KV_BUDGET_TOO_SMALL`. The one rule the cache sizes itself by and the
    /// memory ledger estimates by.
    pub fn budget_tokens(&self, shape: &super::KvShape) -> Result<usize, KvError> {
        match self.budget {
            KvBudget::Tokens(t) => Ok(t),
            KvBudget::Bytes(b) => {
                let t = shape.tokens_for_bytes(self.dtype, b as u64);
                let min_tokens = if self.policy == KvPolicy::WindowSinks { self.n_sink + 1 } else { 1 };
                if t < min_tokens {
                    return Err(KvError::BudgetTooSmall { budget_bytes: b, min_bytes: shape.bytes_at(self.dtype, min_tokens) as usize });
                }
                Ok(t)
            }
        }
    }
}

/// The KV settings as a host (the JS API, the CLI) spells them; every field optional.
///
/// `{ "tokens": 1024, "dtype": "q8", "sinks": 4, "policy": "window-sinks" }`, or
/// `{ "bytes": 8000000 }` instead of `tokens`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KvOptions {
    #[serde(default)]
    pub tokens: Option<usize>,
    #[serde(default)]
    pub bytes: Option<usize>,
    #[serde(default)]
    pub dtype: Option<KvDtype>,
    #[serde(default)]
    pub sinks: Option<usize>,
    #[serde(default)]
    pub policy: Option<KvPolicy>,
}

impl KvOptions {
    /// The eviction policy these options ask for (`window-sinks` unless told otherwise).
    pub fn policy(&self) -> KvPolicy {
        self.policy.unwrap_or(KvPolicy::WindowSinks)
    }

    /// The checks that need no model, as `to_config` makes them.
    pub fn check(&self) -> Result<(), KvError> {
        self.to_config(MAX_CONTEXT_TOKENS).map(drop)
    }

    /// The configuration these options ask for (`default_tokens` when neither `tokens` nor
    /// `bytes` is given), with the checks that need no model.
    pub fn to_config(&self, default_tokens: usize) -> Result<KvConfig, KvError> {
        let budget = match (self.tokens, self.bytes) {
            (Some(_), Some(_)) => return Err(KvError::BadConfig("give a budget in tokens or in bytes, not both".into())),
            (Some(t), None) => KvBudget::Tokens(t),
            (None, Some(b)) => KvBudget::Bytes(b),
            (None, None) => KvBudget::Tokens(default_tokens),
        };
        let cfg = KvConfig {
            budget,
            dtype: self.dtype.unwrap_or(KvDtype::F16),
            n_sink: self.sinks.unwrap_or(DEFAULT_SINKS),
            policy: self.policy(),
            rebase_after: None,
            context_limit: false,
        };
        cfg.check()?;
        Ok(cfg)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_and_row_bytes() {
        assert_eq!(KvDtype::parse("int8"), Some(KvDtype::Q8));
        assert_eq!(KvDtype::parse("F16"), Some(KvDtype::F16));
        assert_eq!(KvDtype::parse("q4"), None);
        assert_eq!(KvPolicy::parse("window-sinks"), Some(KvPolicy::WindowSinks));
        assert_eq!(KvPolicy::parse("error"), Some(KvPolicy::Error));
        assert_eq!(KvDtype::F16.row_bytes(256), 512);
        assert_eq!(KvDtype::Q8.row_bytes(256), 256 + 16);
        assert_eq!(KvDtype::Q8.row_bytes(40), 40 + 4);
    }

    #[test]
    fn options_from_json() {
        let o: KvOptions = serde_json::from_str(r#"{"tokens":64,"dtype":"int8","sinks":2,"policy":"error"}"#).unwrap();
        let c = o.to_config(4096).unwrap();
        assert_eq!(c.budget, KvBudget::Tokens(64));
        assert_eq!((c.dtype, c.n_sink, c.policy), (KvDtype::Q8, 2, KvPolicy::Error));
        let c = KvOptions::default().to_config(512).unwrap();
        assert_eq!((c.budget, c.policy, c.n_sink), (KvBudget::Tokens(512), KvPolicy::WindowSinks, 4));
        assert!(serde_json::from_str::<KvOptions>(r#"{"tokenz":1}"#).is_err());
        let both = KvOptions { tokens: Some(1), bytes: Some(1), ..Default::default() };
        assert_eq!(both.to_config(1).unwrap_err().code(), "BAD_KV_CONFIG");
    }
}
