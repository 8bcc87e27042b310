//! Checks that need the whole of a header: unique keys, the alignment rule, and on the tensor
//! index shapes, alignment, overlaps and (once the file's length is known) that every tensor's
//! data is inside the file.

use std::collections::HashSet;

use super::error::GgufError;
use super::types::{GgufHeader, TensorInfo, Value};

pub(crate) const ALIGNMENT_KEY: &str = "general.alignment";
pub(crate) const DEFAULT_ALIGNMENT: u64 = 32;

/// ggml stores element counts in `int64_t`: anything larger cannot be a real tensor.
const MAX_ELEMENTS: u64 = i64::MAX as u64;

/// Validates names, shapes, offsets and overlaps of a freshly parsed tensor index.
/// `data_offset` is where the data section starts, used to bound absolute positions.
pub(crate) fn validate_tensors(
    tensors: &[TensorInfo],
    alignment: u64,
    data_offset: u64,
) -> Result<(), GgufError> {
    let mut names = HashSet::with_capacity(tensors.len());
    // (offset, byte length, index) for the overlap check below.
    let mut ranges = Vec::with_capacity(tensors.len());
    for (i, t) in tensors.iter().enumerate() {
        if t.name.is_empty() {
            return Err(GgufError::BadTensorName { name: String::new(), reason: "empty" });
        }
        if !names.insert(t.name.as_str()) {
            return Err(GgufError::DuplicateTensor { name: t.name.clone() });
        }
        let n_bytes = checked_n_bytes(t)?;
        if !t.offset.is_multiple_of(alignment) {
            return Err(GgufError::MisalignedTensor {
                tensor: t.name.clone(),
                offset: t.offset,
                alignment,
            });
        }
        let start = data_offset.checked_add(t.offset);
        if start.and_then(|s| s.checked_add(n_bytes)).is_none() {
            return Err(GgufError::TensorOutOfBounds {
                tensor: t.name.clone(),
                start: data_offset.saturating_add(t.offset),
                len: n_bytes,
                file_len: None,
            });
        }
        ranges.push((t.offset, n_bytes, i));
    }
    // Sorting a copy leaves the index in file order for callers, while letting each range be
    // compared with its neighbour only.
    ranges.sort_unstable();
    for pair in ranges.windows(2) {
        let (off_a, len_a, a) = pair[0];
        let (off_b, _, b) = pair[1];
        if off_a + len_a > off_b {
            return Err(GgufError::OverlappingTensors {
                first: tensors[a].name.clone(),
                second: tensors[b].name.clone(),
            });
        }
    }
    Ok(())
}

/// Element count and stored size of a tensor, rejecting shapes ggml could not represent.
fn checked_n_bytes(t: &TensorInfo) -> Result<u64, GgufError> {
    let overflow = || GgufError::DimsOverflow { tensor: t.name.clone() };
    let mut n: u64 = 1;
    for &d in &t.dims {
        n = n.checked_mul(d).filter(|&n| n <= MAX_ELEMENTS).ok_or_else(overflow)?;
    }
    if t.dims.iter().any(|&d| d > MAX_ELEMENTS) {
        return Err(overflow());
    }
    let block_size = t.ggml_type.block_size();
    let row_len = t.row_len();
    if !row_len.is_multiple_of(block_size) {
        return Err(GgufError::PartialBlock { tensor: t.name.clone(), row_len, block_size });
    }
    t.ggml_type.bytes_for(n).ok_or_else(overflow)
}

/// Checks that every tensor's data lies inside a file of `file_len` bytes.
pub fn validate_file_size(header: &GgufHeader, file_len: u64) -> Result<(), GgufError> {
    for t in &header.tensors {
        let start = header.data_offset.saturating_add(t.offset);
        let len = t.n_bytes();
        if start.checked_add(len).is_none_or(|end| end > file_len) {
            return Err(GgufError::TensorOutOfBounds {
                tensor: t.name.clone(),
                start,
                len,
                file_len: Some(file_len),
            });
        }
    }
    Ok(())
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
