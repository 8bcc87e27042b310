//! Every way a GGUF file (or a stream of one) can be rejected.
//!
//! Each variant has a stable `code()` that the JS surface passes on as `Error.code`, so callers
//! can branch on the kind of failure without parsing messages. Messages say what was found and,
//! where it helps, what would have been valid.

use std::fmt;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GgufError {
    /// The first four bytes are not `GGUF`.
    BadMagic {
        found: Vec<u8>,
    },
    /// Only versions 2 and 3 exist in the wild with 64-bit counts; 1 is obsolete.
    UnsupportedVersion {
        version: u32,
    },
    /// The input ended before `needed` bytes, and the caller said it was the whole file.
    Truncated {
        needed: u64,
        available: u64,
    },
    /// The header would need more than `limit` bytes: no sane model has one that large.
    HeaderTooLarge {
        needed: u64,
        limit: u64,
    },
    /// A count or length (`what`) cannot be satisfied by the bytes a header may hold.
    CountTooLarge {
        what: &'static str,
        count: u64,
        max: u64,
    },
    /// A key, string value or tensor name is not valid UTF-8.
    InvalidUtf8 {
        what: &'static str,
        offset: u64,
    },
    /// A metadata value type id outside the `gguf_type` enum.
    UnknownValueType {
        id: u32,
        offset: u64,
    },
    /// A bool metadata byte other than 0 or 1.
    InvalidBool {
        value: u8,
        offset: u64,
    },
    /// Arrays nested deeper than the parser allows (protects the recursion depth).
    ArrayTooDeep {
        max_depth: usize,
        offset: u64,
    },
    /// An empty or over-long metadata key.
    BadKey {
        key: String,
        reason: &'static str,
    },
    DuplicateKey {
        key: String,
    },
    /// `general.alignment` is not a power-of-two u32.
    BadAlignment {
        reason: String,
    },
    /// An empty or over-long tensor name.
    BadTensorName {
        name: String,
        reason: &'static str,
    },
    DuplicateTensor {
        name: String,
    },
    /// A tensor type id that is not a known `ggml_type`.
    UnknownTensorType {
        tensor: String,
        id: u32,
    },
    /// A tensor with no dimensions or more than four.
    BadDimCount {
        tensor: String,
        n_dims: u32,
    },
    /// A dimension, element count or byte size beyond what 64-bit ggml can address.
    DimsOverflow {
        tensor: String,
    },
    /// The row length (`dims[0]`) is not a whole number of the type's blocks.
    PartialBlock {
        tensor: String,
        row_len: u64,
        block_size: u64,
    },
    /// A tensor offset that is not a multiple of the file's alignment.
    MisalignedTensor {
        tensor: String,
        offset: u64,
        alignment: u64,
    },
    /// Two tensors' data ranges share bytes.
    OverlappingTensors {
        first: String,
        second: String,
    },
    /// A tensor's data (absolute bytes `start .. start + len`) lies past the end of the file
    /// (`file_len`), or past the end of the 64-bit range when `file_len` is `None`.
    TensorOutOfBounds {
        tensor: String,
        start: u64,
        len: u64,
        file_len: Option<u64>,
    },
    /// The writer was given a byte buffer whose length does not match the tensor's shape.
    TensorDataSize {
        tensor: String,
        expected: u64,
        actual: u64,
    },
    /// A stream delivered more bytes than the length announced for it.
    StreamTooLong {
        expected: u64,
        received: u64,
    },
    /// The allocator refused a tensor buffer.
    AllocFailed {
        bytes: u64,
    },
    /// Reading the file failed (native only).
    Io {
        kind: std::io::ErrorKind,
        message: String,
    },
}

impl GgufError {
    /// A stable, machine-readable identifier.
    pub fn code(&self) -> &'static str {
        use GgufError::*;
        match self {
            BadMagic { .. } => "GGUF_BAD_MAGIC",
            UnsupportedVersion { .. } => "GGUF_UNSUPPORTED_VERSION",
            Truncated { .. } => "GGUF_TRUNCATED",
            HeaderTooLarge { .. } => "GGUF_HEADER_TOO_LARGE",
            CountTooLarge { .. } => "GGUF_COUNT_TOO_LARGE",
            InvalidUtf8 { .. } => "GGUF_INVALID_UTF8",
            UnknownValueType { .. } => "GGUF_UNKNOWN_VALUE_TYPE",
            InvalidBool { .. } => "GGUF_INVALID_BOOL",
            ArrayTooDeep { .. } => "GGUF_ARRAY_TOO_DEEP",
            BadKey { .. } => "GGUF_BAD_KEY",
            DuplicateKey { .. } => "GGUF_DUPLICATE_KEY",
            BadAlignment { .. } => "GGUF_BAD_ALIGNMENT",
            BadTensorName { .. } => "GGUF_BAD_TENSOR_NAME",
            DuplicateTensor { .. } => "GGUF_DUPLICATE_TENSOR",
            UnknownTensorType { .. } => "GGUF_UNKNOWN_TENSOR_TYPE",
            BadDimCount { .. } => "GGUF_BAD_DIM_COUNT",
            DimsOverflow { .. } => "GGUF_DIMS_OVERFLOW",
            PartialBlock { .. } => "GGUF_PARTIAL_BLOCK",
            MisalignedTensor { .. } => "GGUF_MISALIGNED_TENSOR",
            OverlappingTensors { .. } => "GGUF_OVERLAPPING_TENSORS",
            TensorOutOfBounds { .. } => "GGUF_TENSOR_OUT_OF_BOUNDS",
            TensorDataSize { .. } => "GGUF_TENSOR_DATA_SIZE",
            StreamTooLong { .. } => "GGUF_STREAM_TOO_LONG",
            AllocFailed { .. } => "GGUF_ALLOC_FAILED",
            Io { .. } => "GGUF_IO",
        }
    }
}

impl fmt::Display for GgufError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use GgufError::*;
        match self {
            BadMagic { found } => write!(
                f,
                "not a GGUF file: starts with {found:02x?} instead of \"GGUF\" (47 47 55 46)"
            ),
            UnsupportedVersion { version } => {
                write!(f, "GGUF version {version} is not supported (only 2 and 3 are)")?;
                if version.swap_bytes() == 2 || version.swap_bytes() == 3 {
                    write!(f, "; this looks like a big-endian file")?;
                }
                Ok(())
            }
            Truncated { needed, available } => {
                write!(f, "file is truncated: needs at least {needed} bytes but has {available}")
            }
            HeaderTooLarge { needed, limit } => write!(
                f,
                "GGUF header would need {needed} bytes, more than the {limit}-byte limit \
                 (corrupt length field?)"
            ),
            CountTooLarge { what, count, max } => {
                write!(f, "{what} of {count} is impossible: a header can hold at most {max}")
            }
            InvalidUtf8 { what, offset } => {
                write!(f, "{what} at byte {offset} is not valid UTF-8")
            }
            UnknownValueType { id, offset } => {
                write!(f, "unknown metadata value type {id} at byte {offset}")
            }
            InvalidBool { value, offset } => {
                write!(f, "bool at byte {offset} has value {value} (must be 0 or 1)")
            }
            ArrayTooDeep { max_depth, offset } => {
                write!(f, "metadata arrays nested more than {max_depth} deep at byte {offset}")
            }
            BadKey { key, reason } => write!(f, "bad metadata key {key:?}: {reason}"),
            DuplicateKey { key } => write!(f, "metadata key {key:?} appears more than once"),
            BadAlignment { reason } => write!(f, "bad general.alignment: {reason}"),
            BadTensorName { name, reason } => write!(f, "bad tensor name {name:?}: {reason}"),
            DuplicateTensor { name } => write!(f, "tensor {name:?} appears more than once"),
            UnknownTensorType { tensor, id } => {
                write!(f, "tensor {tensor:?} has unknown ggml type id {id}")
            }
            BadDimCount { tensor, n_dims } => {
                write!(f, "tensor {tensor:?} has {n_dims} dimensions (must be 1 to 4)")
            }
            DimsOverflow { tensor } => {
                write!(f, "tensor {tensor:?}: dimensions overflow the 64-bit element or byte count")
            }
            PartialBlock { tensor, row_len, block_size } => write!(
                f,
                "tensor {tensor:?}: row length {row_len} is not a multiple of its type's \
                 block size {block_size}"
            ),
            MisalignedTensor { tensor, offset, alignment } => write!(
                f,
                "tensor {tensor:?}: data offset {offset} is not a multiple of the alignment \
                 {alignment}"
            ),
            OverlappingTensors { first, second } => {
                write!(f, "tensors {first:?} and {second:?} overlap in the data section")
            }
            TensorOutOfBounds { tensor, start, len, file_len } => match file_len {
                Some(n) => write!(
                    f,
                    "tensor {tensor:?}: data at bytes {start}..{} lies beyond the end of the \
                     {n}-byte file (truncated file or corrupt header)",
                    start.saturating_add(*len)
                ),
                None => write!(
                    f,
                    "tensor {tensor:?}: data at offset {start} with {len} bytes overflows the \
                     64-bit address range"
                ),
            },
            TensorDataSize { tensor, expected, actual } => write!(
                f,
                "tensor {tensor:?}: its shape needs {expected} bytes but {actual} were given"
            ),
            StreamTooLong { expected, received } => {
                write!(f, "stream delivered {received} bytes, more than the announced {expected}")
            }
            AllocFailed { bytes } => {
                write!(f, "could not allocate {bytes} bytes for tensor data")
            }
            Io { kind, message } => write!(f, "I/O error ({kind:?}): {message}"),
        }
    }
}

impl std::error::Error for GgufError {}

impl From<std::io::Error> for GgufError {
    fn from(e: std::io::Error) -> Self {
        GgufError::Io { kind: e.kind(), message: e.to_string() }
    }
}
