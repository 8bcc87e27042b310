//! No allocation is sized by a count the input's bytes do not back.
//!
//! A counting global allocator records the largest single request; one test function runs
//! every case in turn so no other test in this binary allocates meanwhile.

mod common;
mod gguf_common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use edgellm::gguf::{
    parse_file, parse_header, GgmlType, GgufWriter, HeaderStatus, LoadProgress, StreamLoader, Value,
};
use gguf_common::Raw;

struct Counting;

static LARGEST: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LARGEST.fetch_max(layout.size(), Ordering::Relaxed);
        System.alloc(layout)
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        LARGEST.fetch_max(layout.size(), Ordering::Relaxed);
        System.alloc_zeroed(layout)
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LARGEST.fetch_max(new_size, Ordering::Relaxed);
        System.realloc(ptr, layout, new_size)
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout)
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// Runs `f` and returns its result with the largest single allocation it made.
fn largest_during<T>(f: impl FnOnce() -> T) -> (T, usize) {
    LARGEST.store(0, Ordering::Relaxed);
    let r = f();
    (r, LARGEST.load(Ordering::Relaxed))
}

/// Headers whose counts claim far more than the bytes present.
fn huge_claims() -> Vec<(&'static str, Vec<u8>)> {
    let mut v = Vec::new();
    let mut add = |what, r: &mut Raw| v.push((what, std::mem::take(&mut r.0)));
    add("tensor count 2^62", &mut Raw::header(3, 1 << 62, 0));
    add("kv count 2^62", &mut Raw::header(3, 0, 1 << 62));
    add("kv count 2^60, 100 bytes", Raw::header(3, 0, 1 << 60).bytes(&[7; 100]));
    add("kv count 10^7, 100 bytes", Raw::header(3, 0, 10_000_000).bytes(&[1; 100]));
    add("tensor count 10^7", Raw::header(3, 10_000_000, 0).tensor("t", &[32], 0, 0));
    add("key length 2^62", Raw::header(3, 0, 1).u64(1 << 62).bytes(b"abc"));
    add("string length 2^62", Raw::header(3, 0, 1).str("k").u32(8).u64(1 << 62).bytes(b"x"));
    add("string length 400 MiB", Raw::header(3, 0, 1).str("k").u32(8).u64(400 << 20).bytes(b"x"));
    for elem in [0u32, 4, 8, 9, 12] {
        add("array count 2^62", Raw::header(3, 0, 1).str("k").u32(9).u32(elem).u64(1 << 62));
        add(
            "array count 10^7",
            Raw::header(3, 0, 1).str("k").u32(9).u32(elem).u64(10_000_000).u64(0),
        );
    }
    v
}

#[test]
fn allocations_stay_proportional_to_the_input() {
    // 1. Huge claims: refused (or waiting for more bytes) without allocating anything big.
    for (what, bytes) in huge_claims() {
        let t = Instant::now();
        let (r, largest) = largest_during(|| {
            parse_header(&bytes).map(|s| matches!(s, HeaderStatus::NeedMore { .. }))
        });
        assert!(largest <= 4096, "{what}: allocated {largest} bytes");
        assert!(t.elapsed().as_millis() < 50, "{what}: took {:?}", t.elapsed());
        assert!(!matches!(r, Ok(false)), "{what}: accepted");
        let (r, largest) = largest_during(|| parse_file(&bytes).map(|_| ()));
        assert!(r.is_err() && largest <= 4096, "{what}: {r:?}, allocated {largest}");
    }

    // 2. Many tiny items really present: the vectors holding them may cost a small multiple of
    // the input (a String is 24 bytes for an 8-byte length), never more.
    let mut w = GgufWriter::new();
    w.metadata("k", Value::Array(edgellm::gguf::Array::String(vec![String::new(); 100_000])));
    let bytes = w.to_bytes().unwrap();
    let (r, largest) = largest_during(|| parse_file(&bytes).map(|h| h.metadata.len()));
    assert_eq!(r, Ok(1));
    assert!(largest <= 3 * bytes.len(), "{largest} bytes for a {}-byte file", bytes.len());
    // (and the counter does see the vector of 100,000 strings)
    assert!(largest >= 100_000 * std::mem::size_of::<String>());

    // 3. The stream loader allocates nothing for tensors before the header is accepted, and a
    // header that claims more data than the announced length is refused at once.
    let mut claim = Raw::header(3, 1, 0);
    claim.tensor("huge", &[1 << 60], GgmlType::F32.id(), 0).data(32, 64);
    let (r, largest) = largest_during(|| {
        let mut l = StreamLoader::new(Some(claim.0.len() as u64));
        l.push(&claim.0)
    });
    assert_eq!(r.unwrap_err().code(), "GGUF_TENSOR_OUT_OF_BOUNDS");
    assert!(largest <= 4096, "allocated {largest}");

    // Without a length the header is accepted (it is well formed); the caller sees the 4 EiB
    // claim at HeaderReady, and if it goes on anyway the allocation fails as an error.
    let header_only = &claim.0[..claim.0.len() - 64];
    let mut l = StreamLoader::new(None);
    let (r, largest) = largest_during(|| l.push(header_only));
    assert_eq!(r, Ok(LoadProgress::HeaderReady));
    assert_eq!(l.header().unwrap().tensor_data_bytes(), 1 << 62);
    assert!(largest <= 4096 && l.bytes_allocated() == 0);
    assert_eq!(l.push(&[0; 64]).unwrap_err().code(), "GGUF_ALLOC_FAILED");

    // 4. The real header: nothing larger than the header itself.
    if let Some(path) = common::real_model() {
        let (r, largest) =
            largest_during(|| edgellm::gguf::read_header_file(&path).map(|(h, _)| h.data_offset));
        let header_len = r.unwrap() as usize;
        assert!(
            largest <= header_len + (1 << 20),
            "{largest} bytes for a {header_len}-byte header"
        );
    }
}
