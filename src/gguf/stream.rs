//! The streaming GGUF header reader: the header in chunks of any size, in file order, with
//! bounded memory on any header.
//!
//! It keeps the tensor index, scalar metadata, and strings and arrays up to the sizes its
//! [`Keep`] allows; a value past them is dropped as its bytes arrive (a string is skipped, an
//! array's elements are walked and discarded), leaving the key with an empty value of its type.
//! What it holds between chunks is one partial item (at most a kept string) plus what it keeps.
//! A [`StreamObserver`] sees every item's size as it goes by, kept or not: the memory ledger
//! (`memory/skim.rs`) counts the vocabulary and the parsed header's heap that way without
//! holding them. With [`Keep::ALL`] it keeps what `parse_header` returns, but for arrays of
//! arrays (kept empty, their element type kept: no key this crate reads holds one).
//!
//! Every item is read by the rules of `item.rs`, the same as the scanner's and the parser's, so
//! a hostile header is refused with the same typed error whichever reader meets it.

use super::error::GgufError;
use super::item::{
    array_head, check_bools, check_counts, check_key_len, check_magic, check_n_dims, check_string_len, check_tensor_name_len,
    check_version, le_u32, le_u64, scalar, tensor_info, tensor_info_len, utf8, value_type, FIXED_HEADER_BYTES,
};
use super::parse::{alignment_of, check_keys, validate_file_size};
use super::scan::{MAX_ARRAY_DEPTH, MAX_HEADER_BYTES};
use super::types::{Array, GgufHeader, TensorInfo, Value, ValueType};
use super::validate::validate_tensors;

/// What the reader keeps of values: strings up to `string_bytes`, arrays up to `array_len`
/// elements (and never arrays of arrays, whose values no reader of this crate looks up).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Keep {
    pub string_bytes: u64,
    pub array_len: u64,
}

impl Keep {
    /// Every value but nested arrays (kept empty).
    pub const ALL: Keep = Keep { string_bytes: u64::MAX, array_len: u64::MAX };
}

/// Told of every item's size as the reader passes it, kept or not. `depth`: 0 for a
/// metadata value, 1 for an element of its array, and so on.
pub trait StreamObserver {
    /// A metadata key, or a top-level string value, of `len` bytes.
    fn string(&mut self, _len: u64) {}
    /// The header's metadata and tensor counts (once the metadata is read).
    fn counts(&mut self, _n_kv: u64, _n_tensors: u64) {}
    /// An array head under `key`: `count` elements of type `elem`.
    fn array(&mut self, _key: &str, _depth: usize, _elem: ValueType, _count: u64) {}
    /// A run of fixed-size elements of an array at `depth` under `key`.
    fn fixed_run(&mut self, _key: &str, _depth: usize, _elem: ValueType, _bytes: &[u8]) {}
    /// A string element of `len` bytes in an array at `depth` under `key`.
    fn element_string(&mut self, _key: &str, _depth: usize, _len: u64) {}
    /// A tensor info with a `name_len`-byte name and `n_dims` dimensions.
    fn tensor(&mut self, _name_len: u64, _n_dims: u32) {}
}

/// No observer: the reader alone.
impl StreamObserver for () {}

/// Where the reader stands after a chunk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StreamStatus {
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
pub struct HeaderStream<O: StreamObserver> {
    keep: Keep,
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
    observer: O,
    received: u64,
    header_len: Option<u64>,
}

impl<O: StreamObserver> HeaderStream<O> {
    /// A reader keeping what `keep` allows and telling `observer` of every item.
    pub fn new(keep: Keep, observer: O) -> HeaderStream<O> {
        HeaderStream {
            keep,
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
            observer,
            received: 0,
            header_len: None,
        }
    }

    /// Bytes pushed so far.
    pub fn bytes_received(&self) -> u64 {
        self.received
    }

    /// Bytes the reader holds now (its buffer and what it keeps), for the tests' bound.
    pub fn bytes_held(&self) -> usize {
        self.buf.capacity()
            + self.tensors.capacity() * std::mem::size_of::<TensorInfo>()
            + self.tensors.iter().map(|t| t.name.capacity() + 8 * t.dims.capacity()).sum::<usize>()
            + self.metadata.capacity() * std::mem::size_of::<(String, Value)>()
    }

    /// Feeds the next bytes of the file.
    pub fn push(&mut self, chunk: &[u8]) -> Result<StreamStatus, GgufError> {
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
            Some(header_len) => StreamStatus::Complete { header_len },
            None => StreamStatus::NeedMore { bytes_received: self.received },
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
        self.observer.string(len);
        Ok(Some((utf8(&b[8..end], what, off + 8)?, end)))
    }

    fn push_value(&mut self, key: String, v: Value) {
        self.metadata.push((key, v));
        self.kv_done += 1;
        self.state = if self.kv_done < self.n_kv { State::Key } else { self.after_metadata() };
    }

    fn after_metadata(&mut self) -> State {
        self.observer.counts(self.n_kv, self.n_tensors);
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
                if len > self.keep.string_bytes {
                    self.observer.string(len);
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
                self.observer.array(&key, 0, elem, count);
                let keep = if count <= self.keep.array_len && elem != ValueType::Array {
                    // The capacity backed by no bytes yet stays small whatever the count says.
                    Some(if elem == ValueType::String { Kept::Strings(Vec::with_capacity(count.min(4096) as usize)) } else { Kept::Bytes(Vec::new()) })
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
            self.observer.fixed_run(&key, depth, elem, bytes);
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
            match &mut keep {
                Some(Kept::Strings(v)) if len <= self.keep.string_bytes => {
                    let end = 8 + len as usize;
                    if b.len() < end {
                        self.state = State::Array { key, frames, keep, top_elem };
                        return Ok(None);
                    }
                    self.observer.element_string(&key, depth, len);
                    v.push(utf8(&b[8..end], "string value", off + 8)?);
                    used = end;
                }
                _ => {
                    self.observer.element_string(&key, depth, len);
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
            self.observer.array(&key, depth, inner, count);
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
        self.observer.tensor(len, n_dims);
        self.tensors.push(tensor_info(b, off)?);
        if self.tensors.len() as u64 == self.n_tensors {
            self.state = State::Done;
        }
        Ok(Some(end))
    }

    /// The header, its length (magic to the end of the tensor index) and the observer, once
    /// `push` reported `Complete`. `file_len`: the whole file's length when known (then every
    /// tensor must lie inside it, as the loader will check).
    pub fn finish(self, file_len: Option<u64>) -> Result<(GgufHeader, u64, O), GgufError> {
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
        Ok((header, header_len, self.observer))
    }
}
