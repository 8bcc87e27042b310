//! What several subcommands' arguments share, beside clap (which parses, prints `--help` and
//! refuses unknown options): the engine's range check of counts, the comma-separated token-id
//! list, and the `--kv-*` options of every command that runs a session.

use std::str::FromStr;

use edgellm::kv::{KvDtype, KvOptions, KvPolicy};
use edgellm::limits::{MAX_CONTEXT_TOKENS, MAX_KV_BYTES};

/// A count within `min..=max` (the engine's limits, `edgellm::limits`): `--max-tokens
/// 18446744073709551615` is refused with the range instead of wrapping a sum later. clap reads
/// the number as u64; the range is the engine's, so it is checked here with its typed error.
pub fn count(name: &'static str, v: Option<u64>, min: usize, max: usize) -> Result<Option<usize>, String> {
    let Some(v) = v else { return Ok(None) };
    edgellm::limits::check_range(name, v, min as u64, max as u64).map_err(|e| format!("--{e} [{}]", e.code()))?;
    Ok(Some(v as usize))
}

/// A value within the engine's range, for an option that always has one (a clap default).
pub fn range(name: &'static str, v: u64, min: usize, max: usize) -> Result<usize, String> {
    Ok(count(name, Some(v), min, max)?.unwrap_or_default())
}

/// A comma-separated list of token ids such as `2,818,5279` (empty items are skipped).
#[derive(Clone, Debug)]
pub struct TokenIds(pub Vec<u32>);

impl FromStr for TokenIds {
    type Err = String;
    fn from_str(v: &str) -> Result<TokenIds, String> {
        v.split(',')
            .filter(|s| !s.trim().is_empty())
            .map(|s| s.trim().parse::<u32>().map_err(|_| format!("bad id {s:?}")))
            .collect::<Result<Vec<_>, _>>()
            .map(TokenIds)
    }
}

/// `--kv-dtype`, in the engine's own spelling (`KvDtype::parse`).
pub fn kv_dtype(s: &str) -> Result<KvDtype, String> {
    KvDtype::parse(s).ok_or_else(|| format!("{s:?} is not f16 or q8"))
}

fn kv_policy(s: &str) -> Result<KvPolicy, String> {
    KvPolicy::parse(s).ok_or_else(|| format!("{s:?} is not window-sinks or error"))
}

/// The KV cache options of `generate` and `perplexity`. Without any of them the cache is a
/// plain context, no eviction; any of them makes it a bounded cache.
#[derive(clap::Args, Debug)]
#[command(next_help_heading = "KV cache (without these: a plain context, no eviction)")]
pub struct KvArgs {
    /// Budget in tokens held by global-attention layers (default: the plain context's size)
    #[arg(long, value_name = "N")]
    kv_tokens: Option<u64>,
    /// Budget in bytes (instead of --kv-tokens)
    #[arg(long, value_name = "B")]
    kv_bytes: Option<u64>,
    /// Storage: f16, or q8 (int8 with an f16 scale per 32 values)
    #[arg(long, value_name = "f16|q8", value_parser = kv_dtype)]
    kv_dtype: Option<KvDtype>,
    /// Attention sinks kept by window-sinks [default: 4]
    #[arg(long, value_name = "K")]
    kv_sinks: Option<usize>,
    /// window-sinks: evict old tokens keeping sinks + recent (default); error: refuse past the budget
    #[arg(long, value_name = "window-sinks|error", value_parser = kv_policy)]
    kv_policy: Option<KvPolicy>,
}

impl KvArgs {
    /// The KV options given on the command line (`None` when there are none).
    pub fn options(&self) -> Result<Option<KvOptions>, String> {
        let none = self.kv_tokens.is_none() && self.kv_bytes.is_none() && self.kv_dtype.is_none() && self.kv_sinks.is_none() && self.kv_policy.is_none();
        if none {
            return Ok(None);
        }
        Ok(Some(KvOptions {
            tokens: count("kv-tokens", self.kv_tokens, 1, MAX_CONTEXT_TOKENS)?,
            bytes: count("kv-bytes", self.kv_bytes, 1, MAX_KV_BYTES as usize)?,
            dtype: self.kv_dtype,
            sinks: self.kv_sinks,
            policy: self.kv_policy,
        }))
    }
}
