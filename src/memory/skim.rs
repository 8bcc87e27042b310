//! Reading what the ledger needs from a GGUF header as it streams by, in a few kilobytes.
//!
//! The loader's full read (`gguf::HeaderStream` with `Keep::ALL`) holds every metadata value,
//! among them the vocabulary: ~10 MB of parsed strings for a 262k-token model. An admission
//! check that did that would itself grow wasm memory by ~10 MB before it could refuse anything. The skimmer instead takes the header in
//! chunks of any size and keeps only:
//! - the tensor index (names, shapes, types, offsets: all the weights term needs);
//! - scalar metadata, strings up to [`KEEP_STRING`] bytes and arrays of up to [`KEEP_ARRAY`]
//!   elements (every hyper-parameter);
//! - [`HeaderStats`] of everything else: counts and byte sizes of the big arrays (vocabulary,
//!   scores, merges), from which the runtime term is estimated.
//!
//! The reading is gguf's streaming reader (`gguf::HeaderStream`, its items by the loader's own
//! rules) with these limits; this file holds what the ledger adds: the statistics, gathered
//! as the reader passes each item (`StreamObserver`). The light header it returns works with
//! `HParams::from_header`; [`HeaderStats::of`] computes the same statistics from a fully
//! parsed header, so both routes give the same estimate.

use crate::gguf::{Array, GgufError, GgufHeader, HeaderStream, Keep, StreamObserver, StreamStatus, Value, ValueType};
use crate::tokenizer::{KEY_MERGES, KEY_SCORES, KEY_TOKENS, KEY_TOKEN_TYPE};

use super::wasm32;

/// String values longer than this are not kept (chat templates are a few KB).
pub const KEEP_STRING: u64 = 64 << 10;
/// Arrays with more elements than this are summarized, not kept (per-layer arrays are short).
pub const KEEP_ARRAY: u64 = 4096;


/// Figures about a header's metadata that the estimate needs and a light header does not hold.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct HeaderStats {
    /// Bytes the fully parsed `GgufHeader` occupies in wasm32 memory (allocator chunks included):
    /// it stays in memory with the model (tokenizer, chat template).
    pub parsed_heap_bytes: u64,
    /// Bytes of the header in the file (magic to the end of the tensor index).
    pub header_len: u64,
    pub n_tokens: u64,
    /// Bytes of all token texts.
    pub token_bytes: u64,
    pub n_empty_tokens: u64,
    /// Tokens of type UNKNOWN, CONTROL or USER_DEFINED (the special-token matcher's entries).
    pub n_special_tokens: u64,
    pub n_merges: u64,
    pub merge_bytes: u64,
    pub has_scores: bool,
    pub has_token_type: bool,
}

impl HeaderStats {
    /// The same statistics from a fully parsed header.
    pub fn of(h: &GgufHeader, header_len: u64) -> HeaderStats {
        let mut s = HeaderStats { header_len, ..HeaderStats::default() };
        s.parsed_heap_bytes += wasm32::vec_bytes(h.metadata.len() as u64 * wasm32::KV_PAIR);
        for (k, v) in &h.metadata {
            s.parsed_heap_bytes += wasm32::alloc(k.len() as u64);
            match v {
                Value::String(x) => s.parsed_heap_bytes += wasm32::alloc(x.len() as u64),
                Value::Array(a) => {
                    s.parsed_heap_bytes += array_heap(a);
                    match (k.as_str(), a) {
                        (KEY_TOKENS, Array::String(t)) => {
                            s.n_tokens = t.len() as u64;
                            s.token_bytes = t.iter().map(|x| x.len() as u64).sum();
                            s.n_empty_tokens = t.iter().filter(|x| x.is_empty()).count() as u64;
                        }
                        (KEY_TOKEN_TYPE, Array::I32(t)) => {
                            s.has_token_type = true;
                            s.n_special_tokens = t.iter().filter(|&&x| is_special_type(x)).count() as u64;
                        }
                        (KEY_MERGES, Array::String(m)) => {
                            s.n_merges = m.len() as u64;
                            s.merge_bytes = m.iter().map(|x| x.len() as u64).sum();
                        }
                        (KEY_SCORES, _) => s.has_scores = true,
                        _ => {}
                    }
                }
                _ => {}
            }
        }
        s.parsed_heap_bytes += wasm32::vec_bytes(h.tensors.len() as u64 * wasm32::TENSOR_INFO);
        for t in &h.tensors {
            s.parsed_heap_bytes += wasm32::alloc(t.name.len() as u64) + wasm32::alloc(8 * t.dims.len() as u64);
        }
        s
    }
}

/// llama.cpp token types 2 (unknown), 3 (control), 4 (user-defined).
fn is_special_type(t: i32) -> bool {
    matches!(t, 2..=4)
}

fn array_heap(a: &Array) -> u64 {
    match a {
        Array::String(v) => {
            wasm32::vec_bytes(v.len() as u64 * wasm32::STRING) + v.iter().map(|s| wasm32::alloc(s.len() as u64)).sum::<u64>()
        }
        Array::Array(v) => wasm32::vec_bytes(v.len() as u64 * wasm32::ARRAY) + v.iter().map(array_heap).sum::<u64>(),
        other => wasm32::vec_bytes(other.len() as u64 * other.value_type().fixed_size().unwrap_or(1)),
    }
}

/// What the skimmer learned once the header is complete.
#[derive(Clone, Debug, PartialEq)]
pub struct HeaderSummary {
    /// Every tensor and every small metadata value; big arrays are present but empty (their
    /// element type kept), strings over [`KEEP_STRING`] are empty.
    pub header: GgufHeader,
    pub stats: HeaderStats,
}

/// Where the skimmer stands after a chunk.
pub use crate::gguf::StreamStatus as SkimStatus;

/// The statistics, item by item as the reader passes them (the same sums as
/// [`HeaderStats::of`] over the parsed header).
impl StreamObserver for HeaderStats {
    fn string(&mut self, len: u64) {
        self.parsed_heap_bytes += wasm32::alloc(len);
    }

    fn counts(&mut self, n_kv: u64, n_tensors: u64) {
        self.parsed_heap_bytes += wasm32::vec_bytes(n_kv * wasm32::KV_PAIR);
        self.parsed_heap_bytes += wasm32::vec_bytes(n_tensors * wasm32::TENSOR_INFO);
    }

    fn array(&mut self, key: &str, depth: usize, elem: ValueType, count: u64) {
        let elem_size = elem.fixed_size().unwrap_or(if elem == ValueType::String { wasm32::STRING } else { wasm32::ARRAY });
        self.parsed_heap_bytes += wasm32::vec_bytes(count * elem_size);
        if depth > 0 {
            return;
        }
        match (key, elem) {
            (KEY_TOKENS, ValueType::String) => self.n_tokens = count,
            (KEY_MERGES, ValueType::String) => self.n_merges = count,
            (KEY_TOKEN_TYPE, ValueType::I32) => self.has_token_type = true,
            (KEY_SCORES, _) => self.has_scores = true,
            _ => {}
        }
    }

    fn fixed_run(&mut self, key: &str, depth: usize, elem: ValueType, bytes: &[u8]) {
        if depth == 1 && key == KEY_TOKEN_TYPE && elem == ValueType::I32 {
            self.n_special_tokens += bytes.chunks_exact(4).filter(|c| is_special_type(i32::from_le_bytes([c[0], c[1], c[2], c[3]]))).count() as u64;
        }
    }

    fn element_string(&mut self, key: &str, depth: usize, len: u64) {
        self.parsed_heap_bytes += wasm32::alloc(len);
        if depth == 1 && key == KEY_TOKENS {
            self.token_bytes += len;
            self.n_empty_tokens += (len == 0) as u64;
        } else if depth == 1 && key == KEY_MERGES {
            self.merge_bytes += len;
        }
    }

    fn tensor(&mut self, name_len: u64, n_dims: u32) {
        self.parsed_heap_bytes += wasm32::alloc(name_len) + wasm32::alloc(8 * n_dims as u64);
    }
}

/// The ledger's header reader: gguf's streaming reader keeping [`KEEP_STRING`] /
/// [`KEEP_ARRAY`], with the statistics. Push chunks in file order; `finish` once `push` said
/// complete.
#[derive(Debug)]
pub struct HeaderSkimmer(HeaderStream<HeaderStats>);

impl Default for HeaderSkimmer {
    fn default() -> Self {
        Self::new()
    }
}

impl HeaderSkimmer {
    pub fn new() -> HeaderSkimmer {
        HeaderSkimmer(HeaderStream::new(Keep { string_bytes: KEEP_STRING, array_len: KEEP_ARRAY, nested: false }, HeaderStats::default()))
    }

    /// Bytes pushed so far.
    pub fn bytes_received(&self) -> u64 {
        self.0.bytes_received()
    }

    /// Bytes the skimmer holds now (its buffer and what it keeps), for the tests' bound.
    pub fn bytes_held(&self) -> usize {
        self.0.bytes_held()
    }

    /// Feeds the next bytes of the file.
    pub fn push(&mut self, chunk: &[u8]) -> Result<StreamStatus, GgufError> {
        self.0.push(chunk)
    }

    /// The summary, once `push` reported `Complete`. `file_len`: the whole file's length when
    /// known (then every tensor must lie inside it, as the loader will check).
    pub fn finish(self, file_len: Option<u64>) -> Result<HeaderSummary, GgufError> {
        let (header, header_len, mut stats) = self.0.finish(file_len)?;
        stats.header_len = header_len;
        Ok(HeaderSummary { header, stats })
    }
}
