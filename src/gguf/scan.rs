//! Finds where a GGUF header ends, from a prefix of the file that may still be growing.
//!
//! The scanner walks the header's structure (lengths, counts, type ids) without decoding or
//! allocating anything, and remembers how far it got, so feeding it a buffer that grows chunk by
//! chunk costs O(header) in total rather than O(header × chunks). Once it reports the header's
//! length, `parse.rs` decodes those bytes in one pass, knowing every read is in bounds.
//!
//! Every count read from the file is checked against the bytes a header of at most
//! `MAX_HEADER_BYTES` could hold before it is believed, so a corrupt count fails fast instead
//! of asking for gigabytes.

use super::error::GgufError;
use super::item::{
    array_head, check_counts, check_key_len, check_magic, check_n_dims, check_string_len, check_tensor_name_len, check_version,
    le_u32, le_u64, tensor_info_len, value_type, FIXED_HEADER_BYTES,
};
use super::types::ValueType;

/// The largest header the parser will wait for. Real headers are a few MiB (a 262k-token
/// vocabulary is ~6 MiB); anything near this limit is a corrupt length field.
pub const MAX_HEADER_BYTES: u64 = 512 << 20;
/// The GGUF spec caps keys at 65535 bytes.
pub const MAX_KEY_BYTES: u64 = 65_535;
/// The GGUF spec caps tensor names at 64 bytes (ggml's `GGML_MAX_NAME`).
pub const MAX_TENSOR_NAME_BYTES: u64 = 64;
/// ggml tensors have at most four dimensions.
pub const MAX_DIMS: u32 = 4;
/// How deeply metadata arrays may nest; real files use one level. The decoder recurses once per
/// level, so this also bounds its stack use.
pub const MAX_ARRAY_DEPTH: usize = 8;

/// The largest `count` of items of at least `min_size` bytes that fit between `pos` and the
/// header size limit; errors name `what` was being counted.
pub(crate) fn check_count(
    what: &'static str,
    count: u64,
    min_size: u64,
    pos: u64,
) -> Result<(), GgufError> {
    let max = MAX_HEADER_BYTES.saturating_sub(pos) / min_size;
    if count > max {
        return Err(GgufError::CountTooLarge { what, count, max });
    }
    Ok(())
}

/// Where the scanner stands: the header's length, or how many bytes it needs at least.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScanStatus {
    /// The header (up to the end of the tensor index, before alignment padding) is this long.
    Complete { header_len: u64 },
    /// The prefix must be at least this long (in total) for the scan to make progress.
    NeedMore { total_bytes_needed: u64 },
}

#[derive(Clone, Copy, Debug)]
enum Step {
    Magic,
    Version,
    Counts,
    Key,
    /// A value of this type comes next: a top-level metadata value or an array element.
    Value(ValueType),
    TensorInfo,
    Done,
}

#[derive(Clone, Copy, Debug)]
struct OpenArray {
    elem: ValueType,
    remaining: u64,
}

/// A resumable scan over a growing prefix of a GGUF file.
///
/// Call `scan` with the whole prefix received so far (always the same buffer, longer each time);
/// it resumes where the previous call stopped. After an error it keeps returning that error.
#[derive(Clone, Debug)]
pub struct HeaderScanner {
    /// Bytes before this point have been scanned and are structurally sound.
    pos: u64,
    step: Step,
    kv_count: u64,
    kv_done: u64,
    tensor_count: u64,
    tensors_done: u64,
    open_arrays: Vec<OpenArray>,
    failed: Option<GgufError>,
}

impl Default for HeaderScanner {
    fn default() -> Self {
        Self::new()
    }
}

/// `len` bytes of `prefix` at `start`, `Ok(None)` when the prefix is too short, or an error when
/// the range passes the header size limit.
fn window(prefix: &[u8], start: u64, len: u64) -> Result<Option<&[u8]>, GgufError> {
    let end = start.checked_add(len).filter(|&e| e <= MAX_HEADER_BYTES).ok_or_else(|| {
        GgufError::HeaderTooLarge { needed: start.saturating_add(len), limit: MAX_HEADER_BYTES }
    })?;
    if end > prefix.len() as u64 {
        return Ok(None);
    }
    Ok(Some(&prefix[start as usize..end as usize]))
}

/// Reads `len` bytes at `start` or returns `NeedMore` from the enclosing function.
macro_rules! take {
    ($prefix:expr, $start:expr, $len:expr) => {
        match window($prefix, $start, $len)? {
            Some(b) => b,
            None => {
                return Ok(ScanStatus::NeedMore { total_bytes_needed: $start + $len });
            }
        }
    };
}

impl HeaderScanner {
    pub fn new() -> Self {
        HeaderScanner {
            pos: 0,
            step: Step::Magic,
            kv_count: 0,
            kv_done: 0,
            tensor_count: 0,
            tensors_done: 0,
            open_arrays: Vec::new(),
            failed: None,
        }
    }

    /// Advances over `prefix` (the file's first bytes, as many as have arrived).
    pub fn scan(&mut self, prefix: &[u8]) -> Result<ScanStatus, GgufError> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        let r = self.advance(prefix);
        if let Err(e) = &r {
            self.failed = Some(e.clone());
        }
        r
    }

    fn advance(&mut self, prefix: &[u8]) -> Result<ScanStatus, GgufError> {
        loop {
            let p = self.pos;
            match self.step {
                Step::Done => return Ok(ScanStatus::Complete { header_len: p }),
                Step::Magic => {
                    check_magic(take!(prefix, p, 4))?;
                    self.pos = p + 4;
                    self.step = Step::Version;
                }
                Step::Version => {
                    check_version(le_u32(take!(prefix, p, 4)))?;
                    self.pos = p + 4;
                    self.step = Step::Counts;
                }
                Step::Counts => {
                    let b = take!(prefix, p, 16);
                    let tensor_count = le_u64(&b[0..8]);
                    let kv_count = le_u64(&b[8..16]);
                    let after = p + 16;
                    debug_assert_eq!(after, FIXED_HEADER_BYTES);
                    check_counts(tensor_count, kv_count)?;
                    self.tensor_count = tensor_count;
                    self.kv_count = kv_count;
                    self.pos = after;
                    self.step = if kv_count > 0 { Step::Key } else { Step::TensorInfo };
                }
                Step::Key => {
                    let len = le_u64(take!(prefix, p, 8));
                    check_key_len(len, after(prefix, p + 8))?;
                    let b = take!(prefix, p, 8 + len + 4);
                    let t = value_type(le_u32(&b[8 + len as usize..]), p + 8 + len)?;
                    self.pos = p + 8 + len + 4;
                    self.step = Step::Value(t);
                }
                Step::Value(t) => {
                    if let Some(size) = t.fixed_size() {
                        take!(prefix, p, size);
                        self.pos = p + size;
                    } else if t == ValueType::String {
                        let len = le_u64(take!(prefix, p, 8));
                        check_string_len(len, p + 8)?;
                        take!(prefix, p, 8 + len);
                        self.pos = p + 8 + len;
                    } else {
                        if let Some(status) = self.array_start(prefix, p)? {
                            return Ok(status);
                        }
                        // `array_start` set the next step (elements, or the next value).
                        continue;
                    }
                    self.value_done();
                }
                Step::TensorInfo => {
                    if self.tensors_done == self.tensor_count {
                        self.step = Step::Done;
                        continue;
                    }
                    let len = le_u64(take!(prefix, p, 8));
                    check_tensor_name_len(len, after(prefix, p + 8))?;
                    let b = take!(prefix, p, 8 + len + 4);
                    let n_dims = le_u32(&b[8 + len as usize..]);
                    check_n_dims(&b[8..8 + len as usize], n_dims)?;
                    let total = tensor_info_len(len, n_dims);
                    take!(prefix, p, total);
                    self.pos = p + total;
                    self.tensors_done += 1;
                }
            }
        }
    }

    /// Scans an array's element type and count at `p`. Fixed-size elements are skipped in one
    /// step; strings and nested arrays are walked one element at a time (so a scan can stop
    /// and resume inside a 262k-entry vocabulary).
    fn array_start(&mut self, prefix: &[u8], p: u64) -> Result<Option<ScanStatus>, GgufError> {
        if self.open_arrays.len() >= MAX_ARRAY_DEPTH {
            return Err(GgufError::ArrayTooDeep { max_depth: MAX_ARRAY_DEPTH, offset: p });
        }
        let need = |n: u64| Some(ScanStatus::NeedMore { total_bytes_needed: p + n });
        let Some(b) = window(prefix, p, 12)? else { return Ok(need(12)) };
        let (elem, count) = array_head(b, p)?;
        let body = p + 12;
        if let Some(size) = elem.fixed_size() {
            let Some(_) = window(prefix, p, 12 + count * size)? else {
                return Ok(need(12 + count * size));
            };
            self.pos = body + count * size;
            self.value_done();
            return Ok(None);
        }
        self.pos = body;
        if count == 0 {
            self.value_done();
        } else {
            self.open_arrays.push(OpenArray { elem, remaining: count });
            self.step = Step::Value(elem);
        }
        Ok(None)
    }

    /// One value finished: move to the next array element, or close arrays that are complete
    /// and move to the next key (or the tensor index).
    fn value_done(&mut self) {
        loop {
            match self.open_arrays.last_mut() {
                Some(top) => {
                    top.remaining -= 1;
                    if top.remaining > 0 {
                        self.step = Step::Value(top.elem);
                        return;
                    }
                    self.open_arrays.pop();
                }
                None => {
                    self.kv_done += 1;
                    self.step =
                        if self.kv_done < self.kv_count { Step::Key } else { Step::TensorInfo };
                    return;
                }
            }
        }
    }
}

/// What `prefix` holds from `start` on (for the messages about names we will not accept).
fn after(prefix: &[u8], start: u64) -> &[u8] {
    &prefix[(start as usize).min(prefix.len())..]
}
