//! What things cost in wasm32 memory: the sizes of the structures the estimate counts and the
//! allocator's chunk rounding. The estimate is for the browser build whatever the host (the
//! native CLI prints the same figures); `const` assertions below keep the sizes true when the
//! crate is built for wasm32.

/// `String` / `Vec<T>`: pointer, capacity, length.
pub const STRING: u64 = 12;
pub const VEC: u64 = 12;
/// `gguf::Array` (a tagged `Vec`).
pub const ARRAY: u64 = 16;
/// `(String, gguf::Value)`: one metadata entry.
pub const KV_PAIR: u64 = 32;
/// `gguf::TensorInfo`.
pub const TENSOR_INFO: u64 = 40;

/// Bytes dlmalloc (the allocator of Rust's wasm32 std) takes for a request of `n` bytes: a 4-byte
/// header, 8-byte alignment, 16 bytes at least; 0 for no allocation (empty `String`/`Vec`).
pub fn alloc(n: u64) -> u64 {
    if n == 0 {
        0
    } else {
        ((n + 4 + 7) & !7).max(16)
    }
}

/// The chunk of a `Vec` whose buffer holds `payload` bytes.
pub fn vec_bytes(payload: u64) -> u64 {
    alloc(payload)
}

#[cfg(target_arch = "wasm32")]
const _: () = {
    use std::mem::size_of;
    assert!(size_of::<String>() as u64 == STRING);
    assert!(size_of::<Vec<u8>>() as u64 == VEC);
    assert!(size_of::<crate::gguf::Array>() as u64 == ARRAY);
    assert!(size_of::<(String, crate::gguf::Value)>() as u64 == KV_PAIR);
    assert!(size_of::<crate::gguf::TensorInfo>() as u64 == TENSOR_INFO);
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dlmalloc_rounding() {
        assert_eq!(alloc(0), 0);
        assert_eq!(alloc(1), 16);
        assert_eq!(alloc(12), 16);
        assert_eq!(alloc(13), 24);
        assert_eq!(alloc(1 << 20), (1 << 20) + 8);
    }
}
