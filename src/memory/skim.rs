//! Reading what the ledger needs from a GGUF header as it streams by, in a few kilobytes.
//!
//! The full parser (`gguf::parse_header`) needs the whole header in one buffer and then holds
//! every metadata value, among them the vocabulary: ~6.5 MB of bytes and ~10 MB of parsed
//! strings for a 262k-token model. An admission check that did that would itself grow wasm
//! memory by ~16 MB before it could refuse anything. The skimmer instead takes the header in
//! chunks of any size and keeps only:
//! - the tensor index (names, shapes, types, offsets: all the weights term needs);
//! - scalar metadata, strings up to [`KEEP_STRING`] bytes and arrays of up to [`KEEP_ARRAY`]
//!   elements (every hyper-parameter);
//! - [`HeaderStats`] of everything else: counts and byte sizes of the big arrays (vocabulary,
//!   scores, merges), from which the runtime term is estimated.
//!
//! Bytes of a value it does not keep are dropped as they arrive, so what it holds between
//! chunks is one partial item (at most a kept string) plus what it keeps. The light header it
//! returns works with `HParams::from_header`; [`HeaderStats::of`] computes the same statistics
//! from a fully parsed header, so both routes give the same estimate.

use crate::gguf::{
    alignment_of, array_head, check_bools, check_counts, check_key_len, check_keys, check_magic, check_n_dims, check_string_len,
    check_tensor_name_len, check_version, le_u32, le_u64, scalar, tensor_info, tensor_info_len, utf8, validate_file_size,
    validate_tensors, value_type, Array, GgufError, GgufHeader, TensorInfo, Value, ValueType, FIXED_HEADER_BYTES, MAX_ARRAY_DEPTH,
    MAX_HEADER_BYTES,
};
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
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SkimStatus {
    /// More bytes are needed; `bytes_received` so far.
    NeedMore { bytes_received: u64 },
    /// The header ended at `header_len`; later bytes are ignored.
    Complete { header_len: u64 },
}

/// One array being read: its element type and how many elements remain.
#[derive(Debug)]
struct Frame {
    elem: ValueType,
    remaining: u64,
}

#[derive(Debug)]
enum State {
    Fixed,
    Key,
    ValueType { key: String },
    Value { key: String, ty: ValueType },
    /// Reading an array (nested ones are pushed on `frames`); `keep` collects a small top-level
    /// array of fixed-size elements or strings.
    Array { key: String, frames: Vec<Frame>, keep: Option<Kept>, top_elem: ValueType },
    Tensor,
    Done,
}

#[derive(Debug)]
enum Kept {
    Strings(Vec<String>),
    Bytes(Vec<u8>),
}

/// The streaming header reader. Push chunks in file order; `finish` once `push` said complete.
#[derive(Debug)]
pub struct HeaderSkimmer {
    buf: Vec<u8>,
    /// File offset of `buf[0]`.
    at: u64,
    /// Bytes to drop (a string body that is not kept) before parsing resumes.
    skip: u64,
    state: State,
    version: u32,
    n_tensors: u64,
    n_kv: u64,
    kv_done: u64,
    metadata: Vec<(String, Value)>,
    tensors: Vec<TensorInfo>,
    stats: HeaderStats,
    received: u64,
    header_len: Option<u64>,
}

impl Default for HeaderSkimmer {
    fn default() -> Self {
        Self::new()
    }
}

impl HeaderSkimmer {
    pub fn new() -> HeaderSkimmer {
        HeaderSkimmer {
            buf: Vec::new(),
            at: 0,
            skip: 0,
            state: State::Fixed,
            version: 0,
            n_tensors: 0,
            n_kv: 0,
            kv_done: 0,
            metadata: Vec::new(),
            tensors: Vec::new(),
            stats: HeaderStats::default(),
            received: 0,
            header_len: None,
        }
    }

    /// Bytes pushed so far.
    pub fn bytes_received(&self) -> u64 {
        self.received
    }

    /// Bytes the skimmer holds now (its buffer and what it keeps), for the tests' bound.
    pub fn bytes_held(&self) -> usize {
        self.buf.capacity()
            + self.tensors.capacity() * std::mem::size_of::<TensorInfo>()
            + self.tensors.iter().map(|t| t.name.capacity() + 8 * t.dims.capacity()).sum::<usize>()
            + self.metadata.capacity() * std::mem::size_of::<(String, Value)>()
    }

    /// Feeds the next bytes of the file.
    pub fn push(&mut self, chunk: &[u8]) -> Result<SkimStatus, GgufError> {
        self.received += chunk.len() as u64;
        let mut rest = chunk;
        while self.header_len.is_none() {
            if self.skip > 0 {
                debug_assert!(self.buf.is_empty(), "run() drops skipped bytes from its input");
                let n = self.skip.min(rest.len() as u64) as usize;
                rest = &rest[n..];
                self.skip -= n as u64;
                self.at += n as u64;
                if self.skip > 0 {
                    break;
                }
            }
            if self.buf.is_empty() {
                // Parse straight from the chunk; carry a partial item over.
                let used = self.run(rest)?;
                self.at += used as u64;
                rest = &rest[used..];
                if self.skip == 0 && self.header_len.is_none() {
                    self.buf.extend_from_slice(rest);
                    rest = &[];
                    break;
                }
            } else {
                if rest.is_empty() {
                    break;
                }
                // Enough new bytes to finish the pending item in most cases, without copying a
                // whole large chunk into the carry buffer.
                let take = rest.len().min(self.buf.len().max(4096) * 2);
                self.buf.extend_from_slice(&rest[..take]);
                rest = &rest[take..];
                let buf = std::mem::take(&mut self.buf);
                let used = self.run(&buf)?;
                self.at += used as u64;
                self.buf = buf;
                self.buf.drain(..used);
            }
            if self.at > MAX_HEADER_BYTES {
                return Err(GgufError::HeaderTooLarge { needed: self.at, limit: MAX_HEADER_BYTES });
            }
        }
        let _ = rest;
        if self.buf.is_empty() && self.buf.capacity() > 64 << 10 {
            self.buf = Vec::new();
        }
        Ok(match self.header_len {
            Some(header_len) => SkimStatus::Complete { header_len },
            None => SkimStatus::NeedMore { bytes_received: self.received },
        })
    }

    /// Parses as many whole items from `b` as it holds; returns the bytes consumed. Stops early
    /// when a string body is to be skipped (`self.skip` set) or the header is complete.
    fn run(&mut self, b: &[u8]) -> Result<usize, GgufError> {
        let mut p = 0usize;
        loop {
            if self.skip > 0 {
                // Drop what this buffer holds of the body right away.
                let n = (self.skip as usize).min(b.len() - p);
                p += n;
                self.skip -= n as u64;
                if self.skip > 0 {
                    return Ok(p);
                }
            }
            match self.item(&b[p..], self.at + p as u64)? {
                Some(n) => p += n,
                None => return Ok(p),
            }
            if matches!(self.state, State::Done) && self.header_len.is_none() {
                self.header_len = Some(self.at + p as u64 + self.skip);
            }
            if self.header_len.is_some() {
                return Ok(p);
            }
        }
    }

    /// Consumes one item at the start of `b` (file offset `off`): `None` if `b` is too short.
    fn item(&mut self, b: &[u8], off: u64) -> Result<Option<usize>, GgufError> {
        match std::mem::replace(&mut self.state, State::Done) {
            State::Fixed => {
                if (b.len() as u64) < FIXED_HEADER_BYTES {
                    self.state = State::Fixed;
                    return Ok(None);
                }
                check_magic(b)?;
                self.version = le_u32(&b[4..]);
                check_version(self.version)?;
                self.n_tensors = le_u64(&b[8..]);
                self.n_kv = le_u64(&b[16..]);
                check_counts(self.n_tensors, self.n_kv)?;
                self.metadata.reserve(self.n_kv.min(4096) as usize);
                self.tensors.reserve(self.n_tensors.min(4096) as usize);
                self.state = if self.n_kv > 0 { State::Key } else { self.after_metadata() };
                Ok(Some(FIXED_HEADER_BYTES as usize))
            }
            State::Key => {
                if b.len() >= 8 {
                    check_key_len(le_u64(b), &b[8..])?;
                }
                let Some((key, n)) = self.kept_string(b, off, "metadata key")? else {
                    self.state = State::Key;
                    return Ok(None);
                };
                self.state = State::ValueType { key };
                Ok(Some(n))
            }
            State::ValueType { key } => {
                if b.len() < 4 {
                    self.state = State::ValueType { key };
                    return Ok(None);
                }
                let ty = value_type(le_u32(b), off)?;
                self.state = State::Value { key, ty };
                Ok(Some(4))
            }
            State::Value { key, ty } => self.value(b, off, key, ty),
            st @ State::Array { .. } => self.array_step(b, off, st),
            State::Tensor => self.tensor(b, off),
            State::Done => {
                self.state = State::Done;
                Ok(None)
            }
        }
    }

    /// A length-prefixed string to keep (its length already checked against what it may be);
    /// `None` when `b` is too short.
    fn kept_string(&mut self, b: &[u8], off: u64, what: &'static str) -> Result<Option<(String, usize)>, GgufError> {
        if b.len() < 8 {
            return Ok(None);
        }
        let len = le_u64(b);
        let end = 8 + len as usize;
        if b.len() < end {
            return Ok(None);
        }
        self.stats.parsed_heap_bytes += wasm32::alloc(len);
        Ok(Some((utf8(&b[8..end], what, off + 8)?, end)))
    }

    fn push_value(&mut self, key: String, v: Value) {
        self.metadata.push((key, v));
        self.kv_done += 1;
        self.state = if self.kv_done < self.n_kv { State::Key } else { self.after_metadata() };
    }

    fn after_metadata(&mut self) -> State {
        self.stats.parsed_heap_bytes += wasm32::vec_bytes(self.n_kv * wasm32::KV_PAIR);
        self.stats.parsed_heap_bytes += wasm32::vec_bytes(self.n_tensors * wasm32::TENSOR_INFO);
        if self.n_tensors > 0 {
            State::Tensor
        } else {
            State::Done
        }
    }

    fn value(&mut self, b: &[u8], off: u64, key: String, ty: ValueType) -> Result<Option<usize>, GgufError> {
        if let Some(size) = ty.fixed_size() {
            if (b.len() as u64) < size {
                self.state = State::Value { key, ty };
                return Ok(None);
            }
            let v = scalar(ty, b, off)?;
            self.push_value(key, v);
            return Ok(Some(size as usize));
        }
        match ty {
            ValueType::String => {
                if b.len() < 8 {
                    self.state = State::Value { key, ty };
                    return Ok(None);
                }
                let len = le_u64(b);
                check_string_len(len, off + 8)?;
                if len > KEEP_STRING {
                    self.stats.parsed_heap_bytes += wasm32::alloc(len);
                    self.skip = len;
                    self.push_value(key, Value::String(String::new()));
                    return Ok(Some(8));
                }
                match self.kept_string(b, off, "string value")? {
                    Some((s, n)) => {
                        self.push_value(key, Value::String(s));
                        Ok(Some(n))
                    }
                    None => {
                        self.state = State::Value { key, ty };
                        Ok(None)
                    }
                }
            }
            _ => {
                // Array head: element type and count.
                if b.len() < 12 {
                    self.state = State::Value { key, ty };
                    return Ok(None);
                }
                let (elem, count) = array_head(b, off)?;
                let elem_size = elem.fixed_size().unwrap_or(if elem == ValueType::String { wasm32::STRING } else { wasm32::ARRAY });
                self.stats.parsed_heap_bytes += wasm32::vec_bytes(count * elem_size);
                match (key.as_str(), elem) {
                    (KEY_TOKENS, ValueType::String) => self.stats.n_tokens = count,
                    (KEY_MERGES, ValueType::String) => self.stats.n_merges = count,
                    (KEY_TOKEN_TYPE, ValueType::I32) => self.stats.has_token_type = true,
                    (KEY_SCORES, _) => self.stats.has_scores = true,
                    _ => {}
                }
                let keep = if count <= KEEP_ARRAY && elem != ValueType::Array {
                    Some(if elem == ValueType::String { Kept::Strings(Vec::with_capacity(count as usize)) } else { Kept::Bytes(Vec::new()) })
                } else {
                    None
                };
                let st = State::Array { key, frames: vec![Frame { elem, remaining: count }], keep, top_elem: elem };
                if count == 0 {
                    self.close_array(st);
                } else {
                    self.state = st;
                }
                Ok(Some(12))
            }
        }
    }

    /// One step inside an array: a run of fixed-size elements, one string, or a nested head.
    fn array_step(&mut self, b: &[u8], off: u64, st: State) -> Result<Option<usize>, GgufError> {
        let State::Array { key, mut frames, mut keep, top_elem } = st else { unreachable!() };
        let depth = frames.len();
        let top = frames.last_mut().expect("an array has a frame");
        let elem = top.elem;
        let used;
        if let Some(size) = elem.fixed_size() {
            let n = (top.remaining).min(b.len() as u64 / size);
            if n == 0 {
                self.state = State::Array { key, frames, keep, top_elem };
                return Ok(None);
            }
            let bytes = &b[..(n * size) as usize];
            if elem == ValueType::Bool {
                check_bools(bytes, off)?;
            }
            if depth == 1 && key == KEY_TOKEN_TYPE && elem == ValueType::I32 {
                self.stats.n_special_tokens += bytes.chunks_exact(4).filter(|c| is_special_type(le_u32(c) as i32)).count() as u64;
            }
            if let Some(Kept::Bytes(v)) = &mut keep {
                v.extend_from_slice(bytes);
            }
            top.remaining -= n;
            used = bytes.len();
        } else if elem == ValueType::String {
            if b.len() < 8 {
                self.state = State::Array { key, frames, keep, top_elem };
                return Ok(None);
            }
            let len = le_u64(b);
            check_string_len(len, off + 8)?;
            self.stats.parsed_heap_bytes += wasm32::alloc(len);
            if depth == 1 && key == KEY_TOKENS {
                self.stats.token_bytes += len;
                self.stats.n_empty_tokens += (len == 0) as u64;
            } else if depth == 1 && key == KEY_MERGES {
                self.stats.merge_bytes += len;
            }
            match &mut keep {
                Some(Kept::Strings(v)) if len <= KEEP_STRING => {
                    let end = 8 + len as usize;
                    if b.len() < end {
                        self.stats.parsed_heap_bytes -= wasm32::alloc(len);
                        if depth == 1 && key == KEY_TOKENS {
                            self.stats.token_bytes -= len;
                            self.stats.n_empty_tokens -= (len == 0) as u64;
                        } else if depth == 1 && key == KEY_MERGES {
                            self.stats.merge_bytes -= len;
                        }
                        self.state = State::Array { key, frames, keep, top_elem };
                        return Ok(None);
                    }
                    v.push(utf8(&b[8..end], "string value", off + 8)?);
                    used = end;
                }
                _ => {
                    // Not kept: drop the body as it streams by.
                    keep = None;
                    self.skip = len;
                    used = 8;
                }
            }
            top.remaining -= 1;
        } else {
            // A nested array head.
            if depth >= MAX_ARRAY_DEPTH {
                return Err(GgufError::ArrayTooDeep { max_depth: MAX_ARRAY_DEPTH, offset: off });
            }
            if b.len() < 12 {
                self.state = State::Array { key, frames, keep, top_elem };
                return Ok(None);
            }
            let (inner, count) = array_head(b, off)?;
            let elem_size = inner.fixed_size().unwrap_or(if inner == ValueType::String { wasm32::STRING } else { wasm32::ARRAY });
            self.stats.parsed_heap_bytes += wasm32::vec_bytes(count * elem_size);
            top.remaining -= 1;
            frames.push(Frame { elem: inner, remaining: count });
            used = 12;
        }
        while frames.last().is_some_and(|f| f.remaining == 0) && frames.len() > 1 {
            frames.pop();
        }
        let st = State::Array { key, frames, keep, top_elem };
        if matches!(&st, State::Array { frames, .. } if frames.len() == 1 && frames[0].remaining == 0) {
            self.close_array(st);
        } else {
            self.state = st;
        }
        Ok(Some(used))
    }

    fn close_array(&mut self, st: State) {
        let State::Array { key, keep, top_elem, .. } = st else { unreachable!() };
        let arr = match keep {
            Some(Kept::Strings(v)) => Array::String(v),
            Some(Kept::Bytes(v)) => {
                Array::from_le_bytes(top_elem, &v).unwrap_or_else(|| Array::empty(top_elem))
            }
            None => Array::empty(top_elem),
        };
        self.push_value(key, Value::Array(arr));
    }

    fn tensor(&mut self, b: &[u8], off: u64) -> Result<Option<usize>, GgufError> {
        self.state = State::Tensor;
        if b.len() < 8 {
            return Ok(None);
        }
        let len = le_u64(b);
        check_tensor_name_len(len, &b[8..])?;
        let l = len as usize;
        if b.len() < 8 + l + 4 {
            return Ok(None);
        }
        let n_dims = le_u32(&b[8 + l..]);
        check_n_dims(&b[8..8 + l], n_dims)?;
        let end = tensor_info_len(len, n_dims) as usize;
        if b.len() < end {
            return Ok(None);
        }
        self.stats.parsed_heap_bytes += wasm32::alloc(len) + wasm32::alloc(8 * n_dims as u64);
        self.tensors.push(tensor_info(b, off)?);
        if self.tensors.len() as u64 == self.n_tensors {
            self.state = State::Done;
        }
        Ok(Some(end))
    }

    /// The summary, once `push` reported `Complete`. `file_len`: the whole file's length when
    /// known (then every tensor must lie inside it, as the loader will check).
    pub fn finish(self, file_len: Option<u64>) -> Result<HeaderSummary, GgufError> {
        let Some(header_len) = self.header_len else {
            return Err(GgufError::Truncated { needed: self.received + 1, available: self.received });
        };
        // The full parser's checks, on what was kept: unique keys, the alignment rule, the
        // tensor index.
        check_keys(&self.metadata)?;
        let alignment = alignment_of(&self.metadata)?;
        let data_offset = header_len.div_ceil(alignment) * alignment;
        validate_tensors(&self.tensors, alignment, data_offset)?;
        let header = GgufHeader { version: self.version, metadata: self.metadata, tensors: self.tensors, alignment, data_offset };
        if let Some(len) = file_len {
            validate_file_size(&header, len)?;
        }
        let mut stats = self.stats;
        stats.header_len = header_len;
        Ok(HeaderSummary { header, stats })
    }
}
