//! The encoding of one GGUF header item and the header's size limits: the fixed header, a key's
//! or string's length, a scalar value, an array's head, a tensor info. The one header reader
//! (`stream.rs`, in its full mode for the loader and the parser, with limits for the memory
//! ledger) calls these, so each rule — a type id, a cap, an error and its code — is written
//! once.

use super::error::GgufError;
use super::types::{GgmlType, TensorInfo, Value, ValueType};

/// The largest header a reader will wait for. Real headers are a few MiB (a 262k-token
/// vocabulary is ~6 MiB); anything near this limit is a corrupt length field.
pub const MAX_HEADER_BYTES: u64 = 512 << 20;
/// The GGUF spec caps keys at 65535 bytes.
pub const MAX_KEY_BYTES: u64 = 65_535;
/// The GGUF spec caps tensor names at 64 bytes (ggml's `GGML_MAX_NAME`).
pub const MAX_TENSOR_NAME_BYTES: u64 = 64;
/// ggml tensors have at most four dimensions.
pub const MAX_DIMS: u32 = 4;
/// How deeply metadata arrays may nest; real files use one level. The reader keeps one frame per
/// level, so this also bounds what an open array costs.
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

/// Magic, version, tensor count, metadata count.
pub(crate) const FIXED_HEADER_BYTES: u64 = 4 + 4 + 8 + 8;
/// Smallest possible key/value pair: 1-byte key, type id, 1-byte value.
pub(crate) const MIN_KV_BYTES: u64 = 8 + 1 + 4 + 1;
/// Smallest possible tensor info: 1-byte name, one dimension, type, offset.
pub(crate) const MIN_TENSOR_INFO_BYTES: u64 = 8 + 1 + 4 + 8 + 4 + 8;

pub(crate) fn le_u32(b: &[u8]) -> u32 {
    u32::from_le_bytes([b[0], b[1], b[2], b[3]])
}

pub(crate) fn le_u64(b: &[u8]) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[..8]);
    u64::from_le_bytes(a)
}

/// The file's first four bytes.
pub(crate) fn check_magic(b: &[u8]) -> Result<(), GgufError> {
    if &b[..4] != b"GGUF" {
        return Err(GgufError::BadMagic { found: b[..4].to_vec() });
    }
    Ok(())
}

/// GGUF versions 2 and 3 (same layout: 64-bit counts and lengths).
pub(crate) fn check_version(version: u32) -> Result<(), GgufError> {
    if version != 2 && version != 3 {
        return Err(GgufError::UnsupportedVersion { version });
    }
    Ok(())
}

/// The tensor and metadata counts: each, and both together, must fit in a header of at most
/// `MAX_HEADER_BYTES` at their smallest encodings.
pub(crate) fn check_counts(tensor_count: u64, kv_count: u64) -> Result<(), GgufError> {
    let after = FIXED_HEADER_BYTES;
    check_count("tensor count", tensor_count, MIN_TENSOR_INFO_BYTES, after)?;
    check_count("metadata count", kv_count, MIN_KV_BYTES, after)?;
    let both = tensor_count * MIN_TENSOR_INFO_BYTES + kv_count * MIN_KV_BYTES;
    if both > MAX_HEADER_BYTES - after {
        return Err(GgufError::HeaderTooLarge { needed: after + both, limit: MAX_HEADER_BYTES });
    }
    Ok(())
}

/// A metadata key's length; `name` is what follows it (for the message about a long key).
pub(crate) fn check_key_len(len: u64, name: &[u8]) -> Result<(), GgufError> {
    if len == 0 {
        return Err(GgufError::BadKey { key: String::new(), reason: "empty" });
    }
    if len > MAX_KEY_BYTES {
        return Err(GgufError::BadKey { key: lossy(name), reason: "longer than 65535 bytes" });
    }
    Ok(())
}

/// A string value's length, read just before file offset `body`.
pub(crate) fn check_string_len(len: u64, body: u64) -> Result<(), GgufError> {
    check_count("string length", len, 1, body)
}

/// A value type id read at file offset `offset`.
pub(crate) fn value_type(id: u32, offset: u64) -> Result<ValueType, GgufError> {
    ValueType::from_id(id).ok_or(GgufError::UnknownValueType { id, offset })
}

/// An array's head (element type id, count: 12 bytes of `b`) at file offset `offset`; the
/// count is checked against the bytes its elements take at least.
pub(crate) fn array_head(b: &[u8], offset: u64) -> Result<(ValueType, u64), GgufError> {
    let elem = value_type(le_u32(b), offset)?;
    let count = le_u64(&b[4..]);
    check_count("array length", count, elem.min_size(), offset + 12)?;
    Ok((elem, count))
}

/// Bools are 0 or 1; `offset` is the file offset of `body`.
pub(crate) fn check_bools(body: &[u8], offset: u64) -> Result<(), GgufError> {
    match body.iter().position(|&x| x > 1) {
        Some(i) => Err(GgufError::InvalidBool { value: body[i], offset: offset + i as u64 }),
        None => Ok(()),
    }
}

/// A fixed-size value of type `ty` from the start of `b` (which holds at least its size), at
/// file offset `offset`. Callers pass only types with a `fixed_size`.
pub(crate) fn scalar(ty: ValueType, b: &[u8], offset: u64) -> Result<Value, GgufError> {
    Ok(match ty {
        ValueType::U8 => Value::U8(b[0]),
        ValueType::I8 => Value::I8(b[0] as i8),
        ValueType::U16 => Value::U16(u16::from_le_bytes([b[0], b[1]])),
        ValueType::I16 => Value::I16(i16::from_le_bytes([b[0], b[1]])),
        ValueType::U32 => Value::U32(le_u32(b)),
        ValueType::I32 => Value::I32(le_u32(b) as i32),
        ValueType::F32 => Value::F32(f32::from_bits(le_u32(b))),
        ValueType::U64 => Value::U64(le_u64(b)),
        ValueType::I64 => Value::I64(le_u64(b) as i64),
        ValueType::F64 => Value::F64(f64::from_bits(le_u64(b))),
        ValueType::Bool => {
            check_bools(&b[..1], offset)?;
            Value::Bool(b[0] == 1)
        }
        ValueType::String | ValueType::Array => unreachable!("scalar() of a variable-size type"),
    })
}

/// UTF-8 text of a string's bytes at file offset `offset`.
pub(crate) fn utf8(bytes: &[u8], what: &'static str, offset: u64) -> Result<String, GgufError> {
    std::str::from_utf8(bytes)
        .map(str::to_owned)
        .map_err(|e| GgufError::InvalidUtf8 { what, offset: offset + e.valid_up_to() as u64 })
}

/// A tensor name's length; `name` is what follows it (for the message about a long name).
pub(crate) fn check_tensor_name_len(len: u64, name: &[u8]) -> Result<(), GgufError> {
    if len == 0 {
        return Err(GgufError::BadTensorName { name: String::new(), reason: "empty" });
    }
    if len > MAX_TENSOR_NAME_BYTES {
        return Err(GgufError::BadTensorName { name: lossy(name), reason: "longer than 64 bytes" });
    }
    Ok(())
}

/// A tensor's dimension count (1 to `MAX_DIMS`).
pub(crate) fn check_n_dims(name: &[u8], n_dims: u32) -> Result<(), GgufError> {
    if n_dims == 0 || n_dims > MAX_DIMS {
        return Err(GgufError::BadDimCount { tensor: String::from_utf8_lossy(name).into_owned(), n_dims });
    }
    Ok(())
}

/// Bytes of a tensor info with a `name_len`-byte name and `n_dims` dimensions.
pub(crate) fn tensor_info_len(name_len: u64, n_dims: u32) -> u64 {
    8 + name_len + 4 + 8 * n_dims as u64 + 4 + 8
}

/// Decodes a whole tensor info at the start of `b` (file offset `offset`); `b` holds at least
/// `tensor_info_len` bytes, and the name length and dimension count were checked.
pub(crate) fn tensor_info(b: &[u8], offset: u64) -> Result<TensorInfo, GgufError> {
    let l = le_u64(b) as usize;
    let name = utf8(&b[8..8 + l], "tensor name", offset + 8)?;
    let n_dims = le_u32(&b[8 + l..]) as usize;
    let mut p = 8 + l + 4;
    let dims = (0..n_dims).map(|i| le_u64(&b[p + 8 * i..])).collect();
    p += 8 * n_dims;
    let id = le_u32(&b[p..]);
    let ggml_type = GgmlType::from_id(id).ok_or_else(|| GgufError::UnknownTensorType { tensor: name.clone(), id })?;
    Ok(TensorInfo { name, dims, ggml_type, offset: le_u64(&b[p + 4..]) })
}

/// Up to 64 bytes of a name we will not accept, as text, for the error message.
fn lossy(b: &[u8]) -> String {
    String::from_utf8_lossy(&b[..b.len().min(64)]).into_owned()
}
