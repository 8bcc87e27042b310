//! Saved conversations: a session's token sequence and KV cache as bytes, to resume a
//! conversation after a reload without prefilling it again.
//!
//! Format (little-endian), version 1:
//!
//! | bytes | holds |
//! |---|---|
//! | 8 | magic `EDGELLMS` |
//! | 4 | version (u32) |
//! | 4 | length `m` of the metadata (u32) |
//! | m | metadata, JSON: `model_sha256`, `kv` ([`KvSettings`]), `counters` ([`KvCounters`]), `tokens`, `pending` |
//! | 4 × tokens | the conversation's token ids (u32) |
//! | … | the KV cache's held rows ([`KvCache::export_rows`](crate::kv::KvCache::export_rows)) |
//! | 32 | SHA-256 of every byte before it |
//!
//! A snapshot is restored only into a session of the same model (its SHA-256) and the same KV
//! settings (`SESSION_MISMATCH`), and only if the checksum and every count agree
//! (`SESSION_CORRUPT`); nothing changes on error. A restored session is exactly the saved one.

use serde::{Deserialize, Serialize};

use crate::kv::{KvCounters, KvSettings};
use crate::sha256::Sha256;

pub const MAGIC: &[u8; 8] = b"EDGELLMS";
pub const VERSION: u32 = 1;

/// Why a snapshot cannot be restored. `code()` is stable.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SnapshotError {
    /// Another model, other KV settings, or a format version this engine does not read.
    Mismatch(String),
    /// Bad checksum, truncated, or inconsistent.
    Corrupt(String),
}

impl SnapshotError {
    pub fn code(&self) -> &'static str {
        match self {
            SnapshotError::Mismatch(_) => "SESSION_MISMATCH",
            SnapshotError::Corrupt(_) => "SESSION_CORRUPT",
        }
    }
}

impl std::fmt::Display for SnapshotError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SnapshotError::Mismatch(m) => write!(f, "the saved session does not fit this engine: {m}"),
            SnapshotError::Corrupt(m) => write!(f, "the saved session is corrupt: {m}"),
        }
    }
}

impl std::error::Error for SnapshotError {}

/// The snapshot's metadata (JSON in the file).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SnapshotMeta {
    pub model_sha256: String,
    pub kv: KvSettings,
    pub counters: KvCounters,
    pub tokens: usize,
    /// The last token was sampled but not yet run through the model.
    pub pending: bool,
}

/// A parsed, checksum-verified snapshot (not yet checked against a session).
pub struct Snapshot<'a> {
    pub meta: SnapshotMeta,
    pub tokens: Vec<u32>,
    pub rows: &'a [u8],
}

/// Writes a snapshot; `write_rows` appends the KV rows (`rows_len` bytes). The buffer is sized
/// once for all of it, checksum included: a buffer that grew by doubling at the last 32 bytes
/// left wasm memory (which never shrinks) three times the snapshot larger.
pub fn encode(meta: &SnapshotMeta, tokens: &[u32], rows_len: usize, write_rows: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
    let json = serde_json::to_vec(meta).expect("metadata serializes");
    let len = 16 + json.len() + 4 * tokens.len() + rows_len + 32;
    let mut out = Vec::with_capacity(len);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&VERSION.to_le_bytes());
    out.extend_from_slice(&(json.len() as u32).to_le_bytes());
    out.extend_from_slice(&json);
    for t in tokens {
        out.extend_from_slice(&t.to_le_bytes());
    }
    write_rows(&mut out);
    debug_assert_eq!(out.capacity(), len, "sized once");
    let mut h = Sha256::new();
    h.update(&out);
    out.extend_from_slice(&h.digest());
    out
}

/// Checks the checksum and framing and parses the metadata and tokens.
pub fn decode(bytes: &[u8]) -> Result<Snapshot<'_>, SnapshotError> {
    let corrupt = |m: &str| SnapshotError::Corrupt(m.to_string());
    if bytes.len() < 16 + 32 || &bytes[..8] != MAGIC {
        return Err(corrupt("not a saved session"));
    }
    let (body, sum) = bytes.split_at(bytes.len() - 32);
    let mut h = Sha256::new();
    h.update(body);
    if h.digest()[..] != *sum {
        return Err(corrupt("checksum mismatch"));
    }
    let version = u32::from_le_bytes(body[8..12].try_into().unwrap());
    if version != VERSION {
        return Err(SnapshotError::Mismatch(format!("format version {version}; this engine reads version {VERSION}")));
    }
    let m = u32::from_le_bytes(body[12..16].try_into().unwrap()) as usize;
    let json = body.get(16..16usize.saturating_add(m)).ok_or_else(|| corrupt("metadata past the end"))?;
    let meta: SnapshotMeta = serde_json::from_slice(json).map_err(|e| SnapshotError::Corrupt(format!("metadata: {e}")))?;
    let at = 16 + m;
    let tok_end = meta.tokens.checked_mul(4).and_then(|n| n.checked_add(at)).filter(|&e| e <= body.len()).ok_or_else(|| corrupt("tokens past the end"))?;
    let tokens = body[at..tok_end].chunks_exact(4).map(|c| u32::from_le_bytes(c.try_into().unwrap())).collect();
    Ok(Snapshot { meta, tokens, rows: &body[tok_end..] })
}
