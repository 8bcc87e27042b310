//! The validating GGUF header parser.
//!
//! `parse_header` takes whatever prefix of the file has arrived: too short, it says how many
//! bytes it needs in total; long enough, it returns the decoded, validated header. The structure
//! is first walked by `HeaderScanner` (no allocation, every count checked against the bytes a
//! header may hold), then decoded here in one pass over bytes known to be present, so no
//! allocation is ever sized by a count the bytes do not back.

use std::collections::HashSet;

use super::error::GgufError;
use super::item::{array_head, check_bools, le_u32, le_u64, scalar, tensor_info, tensor_info_len, utf8, value_type, FIXED_HEADER_BYTES};
use super::scan::{HeaderScanner, ScanStatus, MAX_ARRAY_DEPTH};
use super::types::{Array, GgufHeader, Value, ValueType};
use super::validate::{validate_tensors, ALIGNMENT_KEY, DEFAULT_ALIGNMENT};

pub use super::validate::validate_file_size;

/// The outcome of parsing a prefix of a GGUF file.
#[derive(Clone, Debug, PartialEq)]
pub enum HeaderStatus {
    Complete(GgufHeader),
    /// The prefix is too short: at least this many bytes (counted from the start of the file)
    /// are needed before trying again. Never more than the header's true length.
    NeedMore {
        total_bytes_needed: u64,
    },
}

/// Parses the header from a prefix of a GGUF file (which may also be the whole file).
pub fn parse_header(prefix: &[u8]) -> Result<HeaderStatus, GgufError> {
    match HeaderScanner::new().scan(prefix)? {
        ScanStatus::NeedMore { total_bytes_needed } => {
            Ok(HeaderStatus::NeedMore { total_bytes_needed })
        }
        ScanStatus::Complete { header_len } => {
            decode_header(&prefix[..header_len as usize]).map(HeaderStatus::Complete)
        }
    }
}

/// Parses a complete file held in memory: a short input is `GGUF_TRUNCATED`, and every tensor's
/// data must lie inside `file`.
pub fn parse_file(file: &[u8]) -> Result<GgufHeader, GgufError> {
    match parse_header(file)? {
        HeaderStatus::NeedMore { total_bytes_needed } => {
            Err(GgufError::Truncated { needed: total_bytes_needed, available: file.len() as u64 })
        }
        HeaderStatus::Complete(header) => {
            validate_file_size(&header, file.len() as u64)?;
            Ok(header)
        }
    }
}

/// Decodes and validates a header whose structure `HeaderScanner` has already walked:
/// `bytes` is exactly the header, from the magic to the end of the tensor index.
pub(crate) fn decode_header(bytes: &[u8]) -> Result<GgufHeader, GgufError> {
    let mut c = Cursor { buf: bytes, pos: 0 };
    c.take(4)?; // magic, checked by the scanner
    let version = c.u32()?;
    let tensor_count = c.u64()?;
    let kv_count = c.u64()?;
    debug_assert_eq!(c.pos as u64, FIXED_HEADER_BYTES);

    let mut metadata = Vec::with_capacity(c.capacity_for(kv_count, 14));
    for _ in 0..kv_count {
        let key = c.string("metadata key")?;
        let t = value_type(c.u32()?, c.pos as u64 - 4)?;
        let value = c.value(t)?;
        metadata.push((key, value));
    }
    check_keys(&metadata)?;
    let alignment = alignment_of(&metadata)?;

    let mut tensors = Vec::with_capacity(c.capacity_for(tensor_count, 33));
    for _ in 0..tensor_count {
        tensors.push(c.tensor_info()?);
    }
    let header_len = c.pos as u64;
    // Padding up to the alignment; cannot overflow since header_len is bounded by the scanner's
    // size limit and alignment by u32.
    let data_offset = header_len.div_ceil(alignment) * alignment;
    validate_tensors(&tensors, alignment, data_offset)?;
    Ok(GgufHeader { version, metadata, tensors, alignment, data_offset })
}

/// Keys must be non-empty and unique (the spec requires both; a duplicate would make lookups
/// depend on which copy a reader happens to find first).
pub(crate) fn check_keys(metadata: &[(String, Value)]) -> Result<(), GgufError> {
    let mut seen = HashSet::with_capacity(metadata.len());
    for (key, _) in metadata {
        if key.is_empty() {
            return Err(GgufError::BadKey { key: key.clone(), reason: "empty" });
        }
        if !seen.insert(key.as_str()) {
            return Err(GgufError::DuplicateKey { key: key.clone() });
        }
    }
    Ok(())
}

/// `general.alignment`: a power-of-two u32 (what ggml writes and requires), 32 when absent.
pub(crate) fn alignment_of(metadata: &[(String, Value)]) -> Result<u64, GgufError> {
    match metadata.iter().find(|(k, _)| k == ALIGNMENT_KEY).map(|(_, v)| v) {
        None => Ok(DEFAULT_ALIGNMENT),
        Some(Value::U32(a)) if a.is_power_of_two() => Ok(*a as u64),
        Some(Value::U32(a)) => {
            Err(GgufError::BadAlignment { reason: format!("{a} is not a power of two") })
        }
        Some(other) => Err(GgufError::BadAlignment {
            reason: format!("has type {:?}, must be U32", other.value_type()),
        }),
    }
}

/// A bounds-checked little-endian reader. The scanner has already proved the structure fits,
/// so its errors are a second line of defence, not the expected path.
struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn remaining(&self) -> u64 {
        (self.buf.len() - self.pos) as u64
    }

    /// A capacity for `count` items of at least `min_size` bytes that the remaining bytes can
    /// actually back.
    fn capacity_for(&self, count: u64, min_size: u64) -> usize {
        count.min(self.remaining() / min_size) as usize
    }

    fn take(&mut self, n: u64) -> Result<&'a [u8], GgufError> {
        if n > self.remaining() {
            return Err(GgufError::Truncated {
                needed: self.pos as u64 + n,
                available: self.buf.len() as u64,
            });
        }
        let s = &self.buf[self.pos..self.pos + n as usize];
        self.pos += n as usize;
        Ok(s)
    }

    fn u32(&mut self) -> Result<u32, GgufError> {
        self.take(4).map(le_u32)
    }

    fn u64(&mut self) -> Result<u64, GgufError> {
        self.take(8).map(le_u64)
    }

    fn string(&mut self, what: &'static str) -> Result<String, GgufError> {
        let len = self.u64()?;
        let start = self.pos as u64;
        utf8(self.take(len)?, what, start)
    }

    fn value(&mut self, t: ValueType) -> Result<Value, GgufError> {
        if let Some(size) = t.fixed_size() {
            let offset = self.pos as u64;
            return scalar(t, self.take(size)?, offset);
        }
        Ok(match t {
            ValueType::String => Value::String(self.string("string value")?),
            _ => Value::Array(self.array(0)?),
        })
    }

    /// One tensor info, whose name length and dimension count the scanner has checked.
    fn tensor_info(&mut self) -> Result<super::types::TensorInfo, GgufError> {
        let at = self.pos;
        let rest = &self.buf[at..];
        let head = |n: usize| rest.get(..n).ok_or(GgufError::Truncated { needed: (at + n) as u64, available: self.buf.len() as u64 });
        let name_len = le_u64(head(8)?);
        let n_dims = le_u32(&head(8 + name_len as usize + 4)?[8 + name_len as usize..]);
        let len = tensor_info_len(name_len, n_dims);
        let b = self.take(len)?;
        tensor_info(b, at as u64)
    }

    /// An array (element type, count, elements); `depth` counts the arrays it is nested in.
    fn array(&mut self, depth: usize) -> Result<Array, GgufError> {
        let at = self.pos as u64;
        if depth >= MAX_ARRAY_DEPTH {
            return Err(GgufError::ArrayTooDeep { max_depth: MAX_ARRAY_DEPTH, offset: at });
        }
        let (elem, count) = array_head(self.take(12)?, at)?;
        if let Some(size) = elem.fixed_size() {
            let n_bytes = count.checked_mul(size).ok_or_else(|| GgufError::CountTooLarge {
                what: "array length",
                count,
                max: self.remaining() / size,
            })?;
            let body = self.take(n_bytes)?;
            return fixed_array(elem, body, at + 12);
        }
        Ok(match elem {
            ValueType::String => {
                let mut v = Vec::with_capacity(self.capacity_for(count, 8));
                for _ in 0..count {
                    v.push(self.string("string value")?);
                }
                Array::String(v)
            }
            _ => {
                let mut v = Vec::with_capacity(self.capacity_for(count, 12));
                for _ in 0..count {
                    v.push(self.array(depth + 1)?);
                }
                Array::Array(v)
            }
        })
    }
}

/// Decodes a run of fixed-size little-endian elements (`body_offset` is for error messages):
/// bools must be 0 or 1.
fn fixed_array(elem: ValueType, body: &[u8], body_offset: u64) -> Result<Array, GgufError> {
    if elem == ValueType::Bool {
        check_bools(body, body_offset)?;
    }
    // Only fixed-size element types reach here (`elem.fixed_size()` was Some).
    Ok(Array::from_le_bytes(elem, body).unwrap_or_else(|| Array::empty(elem)))
}
