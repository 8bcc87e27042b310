//! What the process really uses: the wasm linear memory's size, and (where installed) a
//! counting allocator that knows the bytes live on the heap and their peak.
//!
//! wasm memory only grows: its size *is* the high-water mark, and it is what the tab pays.
//! The counting allocator tells how much of it is live data and how much is free space the
//! allocator holds (freed transients, fragmentation). It is the global allocator of the wasm32
//! build; native test binaries may install it with
//! `#[global_allocator] static A: edgellm::memory::CountingAlloc = edgellm::memory::CountingAlloc;`.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);
static ACTIVE: AtomicBool = AtomicBool::new(false);

/// The system allocator, counting live bytes (as requested) and their peak.
pub struct CountingAlloc;

#[inline]
fn added(n: usize) {
    let now = LIVE.fetch_add(n, Relaxed) + n;
    if now > PEAK.load(Relaxed) {
        PEAK.store(now, Relaxed);
    }
}

unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = System.alloc(layout);
        if !p.is_null() {
            ACTIVE.store(true, Relaxed);
            added(layout.size());
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = System.alloc_zeroed(layout);
        if !p.is_null() {
            ACTIVE.store(true, Relaxed);
            added(layout.size());
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout);
        LIVE.fetch_sub(layout.size(), Relaxed);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = System.realloc(ptr, layout, new_size);
        if !p.is_null() {
            if new_size >= layout.size() {
                added(new_size - layout.size());
            } else {
                LIVE.fetch_sub(layout.size() - new_size, Relaxed);
            }
        }
        p
    }
}

#[cfg(target_arch = "wasm32")]
#[global_allocator]
static GLOBAL: CountingAlloc = CountingAlloc;

/// Bytes live on the heap now, if the counting allocator is installed.
pub fn heap_live() -> Option<u64> {
    ACTIVE.load(Relaxed).then(|| LIVE.load(Relaxed) as u64)
}

/// The peak of [`heap_live`] since the last [`reset_heap_peak`].
pub fn heap_peak() -> Option<u64> {
    ACTIVE.load(Relaxed).then(|| PEAK.load(Relaxed) as u64)
}

/// Starts a new peak window at the current live bytes.
pub fn reset_heap_peak() {
    PEAK.store(LIVE.load(Relaxed), Relaxed);
}

/// Bytes of wasm linear memory (`memory.size × 64 KiB`); `None` on native targets.
pub fn wasm_memory() -> Option<u64> {
    #[cfg(target_arch = "wasm32")]
    {
        Some(core::arch::wasm32::memory_size(0) as u64 * 65536)
    }
    #[cfg(not(target_arch = "wasm32"))]
    {
        None
    }
}

/// What the process occupies as the ledger sees it: wasm memory in the browser; natively the
/// live heap when the counting allocator is installed.
pub fn process_bytes() -> Option<u64> {
    wasm_memory().or_else(heap_live)
}

/// Bytes [`reserve`]d when a wasm engine is created: room for the chunk copies of an estimate
/// (64 KiB each) and the header skimmer's state.
pub const IO_RESERVE: usize = 512 << 10;

/// Grows the heap by `bytes` once and gives them back to the allocator, so that later small
/// allocations (chunk copies, the skimmer) are served without growing wasm memory.
pub fn reserve(bytes: usize) {
    let v: Vec<u8> = Vec::with_capacity(bytes);
    drop(std::hint::black_box(v));
}
