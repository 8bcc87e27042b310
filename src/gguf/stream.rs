//! The GGUF header reader — the crate's only one: the header in chunks of any size, in file
//! order. The loader (`load.rs`, `file.rs`), `parse_header`/`parse_file` and the header-end
//! scanner use it; so does the memory ledger, with limits that bound its memory on any header.
//!
//! It keeps the tensor index, scalar metadata, and strings and arrays up to the sizes its
//! [`Keep`] allows; a value past them is dropped as its bytes arrive (a string is skipped, an
//! array's elements are walked and discarded), leaving the key with an empty value of its type.
//! What it holds between chunks is one partial item (at most a kept string) plus what it keeps.
//! A [`StreamObserver`] sees every item's size as it goes by, kept or not: the memory ledger
//! (`memory/skim.rs`) counts the vocabulary and the parsed header's heap that way without
//! holding them. With [`Keep::ALL`] (the full mode) it keeps every value, arrays of arrays
//! included. While the header is incomplete it says how far the stream must reach
//! (`bytes_needed`: the end of the item it waits for), which the loader reports to its fetcher.
//!
//! Every item is read by the rules of `item.rs`, so a hostile header is refused with the same
//! typed error whatever the mode and however the bytes are chunked.

use super::error::GgufError;
use super::item::{
    array_head, check_bools, check_counts, check_key_len, check_magic, check_n_dims, check_string_len, check_tensor_name_len,
    check_version, le_u32, le_u64, scalar, tensor_info, tensor_info_len, utf8, value_type, FIXED_HEADER_BYTES,
    MAX_ARRAY_DEPTH, MAX_HEADER_BYTES, MIN_KV_BYTES, MIN_TENSOR_INFO_BYTES,
};
use super::types::{Array, GgufHeader, TensorInfo, Value, ValueType};
use super::validate::{alignment_of, check_keys, validate_file_size, validate_tensors};

/// What the reader keeps of values: strings up to `string_bytes`, arrays up to `array_len`
/// elements (each nested array too), and arrays of arrays only when `nested`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Keep {
    pub string_bytes: u64,
    pub array_len: u64,
    pub nested: bool,
}

impl Keep {
    /// Every value: the full header, as the loader and `parse_header` need it.
    pub const ALL: Keep = Keep { string_bytes: u64::MAX, array_len: u64::MAX, nested: true };
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

/// One array being read: its element type, how many elements remain, and what is kept of it
/// (`None`: the value is dropped).
#[derive(Debug)]
struct Frame {
    elem: ValueType,
    remaining: u64,
    keep: Option<Kept>,
}

#[derive(Debug)]
enum State {
    Fixed,
    Key,
    ValueType { key: String },
    Value { key: String, ty: ValueType },
    /// Reading an array: `frames[0]` is the metadata value, nested arrays are pushed after it.
    Array { key: String, frames: Vec<Frame> },
    Tensor,
    Done,
}

#[derive(Debug)]
enum Kept {
    Strings(Vec<String>),
    Bytes(Vec<u8>),
    Arrays(Vec<Array>),
}

impl Kept {
    /// The array a finished frame of element type `elem` holds.
    fn into_array(self, elem: ValueType) -> Array {
        match self {
            Kept::Strings(v) => Array::String(v),
            Kept::Arrays(v) => Array::Array(v),
            Kept::Bytes(v) => Array::from_le_bytes(elem, &v).unwrap_or_else(|| Array::empty(elem)),
        }
    }
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
    /// The file offset the pending item needs to reach (when no string body is being skipped).
    need: u64,
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
            need: FIXED_HEADER_BYTES,
            header_len: None,
        }
    }

    /// Bytes pushed so far.
    pub fn bytes_received(&self) -> u64 {
        self.received
    }

    /// While the header is incomplete: how long (from the start of the file) the stream must
    /// be at least before the reader can make progress — the end of the item it waits for.
    /// Never more than the header's true length; the header's length once complete.
    pub fn bytes_needed(&self) -> u64 {
        match self.header_len {
            Some(len) => len,
            None if self.skip > 0 => self.at + self.skip,
            None => self.need.max(self.received + 1),
        }
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
            // The header ends once its last item is read, a skipped string body included.
            if matches!(self.state, State::Done) {
                self.header_len = Some(self.at + p as u64);
                return Ok(p);
            }
            match self.item(&b[p..], self.at + p as u64)? {
                Some(n) => p += n,
                None => return Ok(p),
            }
        }
    }

    /// The pending item ends at file offset `end`, past the bytes at hand: wait for them.
    fn short(&mut self, state: State, end: u64) -> Result<Option<usize>, GgufError> {
        self.state = state;
        self.need = end;
        Ok(None)
    }

    /// Consumes one item at the start of `b` (file offset `off`): `None` if `b` is too short
    /// (then `self.need` says how far the stream must reach).
    fn item(&mut self, b: &[u8], off: u64) -> Result<Option<usize>, GgufError> {
        match std::mem::replace(&mut self.state, State::Done) {
            State::Fixed => {
                // The magic and the version are judged as soon as they are there.
                if b.len() >= 4 {
                    check_magic(b)?;
                }
                if b.len() >= 8 {
                    check_version(le_u32(&b[4..]))?;
                }
                if (b.len() as u64) < FIXED_HEADER_BYTES {
                    return self.short(State::Fixed, off + FIXED_HEADER_BYTES);
                }
                self.version = le_u32(&b[4..]);
                self.n_tensors = le_u64(&b[8..]);
                self.n_kv = le_u64(&b[16..]);
                check_counts(self.n_tensors, self.n_kv)?;
                // Room for no more items than the bytes at hand can hold (nor than 4096), so a
                // count the file does not back reserves nothing.
                let rest = b.len() as u64 - FIXED_HEADER_BYTES;
                self.metadata.reserve(self.n_kv.min(rest / MIN_KV_BYTES).min(4096) as usize);
                self.tensors.reserve(self.n_tensors.min(rest / MIN_TENSOR_INFO_BYTES).min(4096) as usize);
                self.state = if self.n_kv > 0 { State::Key } else { self.after_metadata() };
                Ok(Some(FIXED_HEADER_BYTES as usize))
            }
            State::Key => {
                if b.len() >= 8 {
                    check_key_len(le_u64(b), &b[8..])?;
                }
                match self.kept_string(b, off, "metadata key")? {
                    Ok((key, n)) => {
                        self.state = State::ValueType { key };
                        Ok(Some(n))
                    }
                    Err(end) => self.short(State::Key, off + end),
                }
            }
            State::ValueType { key } => {
                if b.len() < 4 {
                    return self.short(State::ValueType { key }, off + 4);
                }
                let ty = value_type(le_u32(b), off)?;
                self.state = State::Value { key, ty };
                Ok(Some(4))
            }
            State::Value { key, ty } => self.value(b, off, key, ty),
            State::Array { key, frames } => self.array_step(b, off, key, frames),
            State::Tensor => self.tensor(b, off),
            State::Done => {
                self.state = State::Done;
                Ok(None)
            }
        }
    }

    /// A length-prefixed string to keep (its length already checked against what it may be)
    /// and the bytes it takes, or `Err(end)`: `b` must hold `end` bytes first.
    fn kept_string(&mut self, b: &[u8], off: u64, what: &'static str) -> Result<Result<(String, usize), u64>, GgufError> {
        if b.len() < 8 {
            return Ok(Err(8));
        }
        let len = le_u64(b);
        let end = 8 + len as usize;
        if b.len() < end {
            return Ok(Err(8 + len));
        }
        self.observer.string(len);
        Ok(Ok((utf8(&b[8..end], what, off + 8)?, end)))
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

    /// What to keep of an array of `count` elements of type `elem` (`None`: drop it); `at_hand`
    /// bytes of its body have arrived.
    fn kept_for(&self, elem: ValueType, count: u64, at_hand: u64) -> Option<Kept> {
        if count > self.keep.array_len || (elem == ValueType::Array && !self.keep.nested) {
            return None;
        }
        // Room for no more elements than the bytes at hand hold, so a count the file does not
        // back reserves nothing, and a whole array at hand is one allocation of its size.
        let cap = count.min(at_hand / elem.min_size()) as usize;
        Some(match elem {
            ValueType::String => Kept::Strings(Vec::with_capacity(cap)),
            ValueType::Array => Kept::Arrays(Vec::with_capacity(cap)),
            _ => Kept::Bytes(Vec::new()),
        })
    }

    fn value(&mut self, b: &[u8], off: u64, key: String, ty: ValueType) -> Result<Option<usize>, GgufError> {
        if let Some(size) = ty.fixed_size() {
            if (b.len() as u64) < size {
                return self.short(State::Value { key, ty }, off + size);
            }
            let v = scalar(ty, b, off)?;
            self.push_value(key, v);
            return Ok(Some(size as usize));
        }
        match ty {
            ValueType::String => {
                if b.len() < 8 {
                    return self.short(State::Value { key, ty }, off + 8);
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
                    Ok((s, n)) => {
                        self.push_value(key, Value::String(s));
                        Ok(Some(n))
                    }
                    Err(end) => self.short(State::Value { key, ty }, off + end),
                }
            }
            _ => {
                // Array head: element type and count.
                if b.len() < 12 {
                    return self.short(State::Value { key, ty }, off + 12);
                }
                let (elem, count) = array_head(b, off)?;
                self.observer.array(&key, 0, elem, count);
                let keep = self.kept_for(elem, count, b.len() as u64 - 12);
                self.settle(key, vec![Frame { elem, remaining: count, keep }]);
                Ok(Some(12))
            }
        }
    }

    /// One step inside an array: a run of fixed-size elements, one string, or a nested head.
    fn array_step(&mut self, b: &[u8], off: u64, key: String, mut frames: Vec<Frame>) -> Result<Option<usize>, GgufError> {
        let depth = frames.len();
        let top = frames.last_mut().expect("an array has a frame");
        let elem = top.elem;
        let used;
        if let Some(size) = elem.fixed_size() {
            let n = (top.remaining).min(b.len() as u64 / size);
            if n == 0 {
                // Ask for the rest of the run: one request, however long the array.
                let end = off + top.remaining * size;
                return self.short(State::Array { key, frames }, end);
            }
            let bytes = &b[..(n * size) as usize];
            if elem == ValueType::Bool {
                check_bools(bytes, off)?;
            }
            self.observer.fixed_run(&key, depth, elem, bytes);
            if let Some(Kept::Bytes(v)) = &mut top.keep {
                v.extend_from_slice(bytes);
            }
            top.remaining -= n;
            used = bytes.len();
        } else if elem == ValueType::String {
            if b.len() < 8 {
                return self.short(State::Array { key, frames }, off + 8);
            }
            let len = le_u64(b);
            check_string_len(len, off + 8)?;
            match &mut top.keep {
                Some(Kept::Strings(v)) if len <= self.keep.string_bytes => {
                    let end = 8 + len as usize;
                    if b.len() < end {
                        return self.short(State::Array { key, frames }, off + 8 + len);
                    }
                    self.observer.element_string(&key, depth, len);
                    if v.len() == v.capacity() {
                        // Doubling, but never past the count: a 262k vocabulary's vector is
                        // its own size, not the next power of two of a chunk's share.
                        v.reserve_exact((top.remaining as usize).min(v.capacity().max(16)));
                    }
                    v.push(utf8(&b[8..end], "string value", off + 8)?);
                    used = end;
                }
                _ => {
                    self.observer.element_string(&key, depth, len);
                    // Not kept: drop the body as it streams by, and the whole value with it.
                    frames.iter_mut().for_each(|f| f.keep = None);
                    self.skip = len;
                    used = 8;
                }
            }
            frames.last_mut().expect("an array has a frame").remaining -= 1;
        } else {
            // A nested array head.
            if depth >= MAX_ARRAY_DEPTH {
                return Err(GgufError::ArrayTooDeep { max_depth: MAX_ARRAY_DEPTH, offset: off });
            }
            if b.len() < 12 {
                return self.short(State::Array { key, frames }, off + 12);
            }
            let (inner, count) = array_head(b, off)?;
            self.observer.array(&key, depth, inner, count);
            top.remaining -= 1;
            let keep = if top.keep.is_some() { self.kept_for(inner, count, b.len() as u64 - 12) } else { None };
            if keep.is_none() {
                // A part not kept: the value it belongs to cannot be whole.
                frames.iter_mut().for_each(|f| f.keep = None);
            }
            frames.push(Frame { elem: inner, remaining: count, keep });
            used = 12;
        }
        self.settle(key, frames);
        Ok(Some(used))
    }

    /// Closes the arrays that are complete (each goes into the one it is nested in); the
    /// metadata value is stored when the outermost closes.
    fn settle(&mut self, key: String, mut frames: Vec<Frame>) {
        while frames.last().is_some_and(|f| f.remaining == 0) {
            let done = frames.pop().expect("checked");
            let arr = done.keep.map(|k| k.into_array(done.elem));
            match frames.last_mut() {
                Some(parent) => {
                    if let (Some(Kept::Arrays(v)), Some(a)) = (&mut parent.keep, arr) {
                        v.push(a);
                    }
                }
                None => {
                    let arr = arr.unwrap_or_else(|| Array::empty(done.elem));
                    self.push_value(key, Value::Array(arr));
                    return;
                }
            }
        }
        self.state = State::Array { key, frames };
    }

    fn tensor(&mut self, b: &[u8], off: u64) -> Result<Option<usize>, GgufError> {
        if b.len() < 8 {
            return self.short(State::Tensor, off + 8);
        }
        let len = le_u64(b);
        check_tensor_name_len(len, &b[8..])?;
        let l = len as usize;
        if b.len() < 8 + l + 4 {
            return self.short(State::Tensor, off + 8 + len + 4);
        }
        let n_dims = le_u32(&b[8 + l..]);
        check_n_dims(&b[8..8 + l], n_dims)?;
        let end = tensor_info_len(len, n_dims);
        if (b.len() as u64) < end {
            return self.short(State::Tensor, off + end);
        }
        self.observer.tensor(len, n_dims);
        self.tensors.push(tensor_info(b, off)?);
        self.state = if self.tensors.len() as u64 == self.n_tensors { State::Done } else { State::Tensor };
        Ok(Some(end as usize))
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
