//! The executor the forward pass splits its work over: one small interface ([`Executor`]),
//! a serial implementation and a pool of threads: natively a persistent rayon pool
//! (`pool.rs`), in the threaded wasm build web workers over the module's shared memory
//! (`wasm_pool.rs`).
//!
//! Work is split into contiguous index ranges ([`Exec::for_ranges`]); the callers keep each
//! output element computed by the same kernel in the same order whatever the split, so every
//! thread count gives bit-identical results.

mod shared;

use std::ops::Range;
use std::sync::Arc;

pub use shared::SharedMut;

/// Runs parts of one job, possibly in parallel.
pub trait Executor: Send + Sync {
    /// Threads that run parts at once (the calling thread included).
    fn threads(&self) -> usize;
    /// Calls `f(part)` once for every `part` in `0..parts`; returns when all have returned.
    fn run(&self, parts: usize, f: &(dyn Fn(usize) + Sync));
}

/// Every part on the calling thread, in order.
pub struct Serial;

impl Executor for Serial {
    fn threads(&self) -> usize {
        1
    }
    fn run(&self, parts: usize, f: &(dyn Fn(usize) + Sync)) {
        (0..parts).for_each(f)
    }
}

#[cfg(not(target_arch = "wasm32"))]
mod pool;
#[cfg(not(target_arch = "wasm32"))]
pub use pool::ThreadPool;
#[cfg(all(target_arch = "wasm32", feature = "threads"))]
pub mod wasm_pool;
#[cfg(all(target_arch = "wasm32", feature = "threads"))]
pub use wasm_pool::ThreadPool;

/// Why an executor could not be made. `code()` is stable.
#[derive(Clone, Debug, PartialEq)]
pub enum ExecError {
    /// Asked for 0 threads or more than [`crate::limits::MAX_THREADS`].
    BadThreadCount(usize),
    /// This build cannot run threads (the single-thread wasm builds).
    Unsupported,
    /// The operating system refused to start a thread.
    Spawn(String),
}

impl ExecError {
    pub fn code(&self) -> &'static str {
        match self {
            ExecError::BadThreadCount(_) => "INVALID_REQUEST",
            ExecError::Unsupported => "THREADS_UNSUPPORTED",
            ExecError::Spawn(_) => "THREAD_SPAWN_FAILED",
        }
    }
}

impl std::fmt::Display for ExecError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ExecError::BadThreadCount(n) => {
                write!(f, "threads must be within 1..={}, got {n}", crate::limits::MAX_THREADS)
            }
            ExecError::Unsupported => f.write_str("this build runs one thread only"),
            ExecError::Spawn(e) => write!(f, "could not start a thread: {e}"),
        }
    }
}

impl std::error::Error for ExecError {}

/// A shared handle to an executor (cheap to clone; sessions of one host share one pool).
#[derive(Clone)]
pub enum Exec {
    /// One thread, nothing shared (allocation-free, so a plain `matmul` can make one).
    Serial,
    Threads(Arc<dyn Executor>),
}

impl Default for Exec {
    fn default() -> Exec {
        Exec::serial()
    }
}

impl std::fmt::Debug for Exec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Exec({} threads)", self.threads())
    }
}

impl Exec {
    pub fn serial() -> Exec {
        Exec::Serial
    }

    pub fn from_executor(e: Arc<dyn Executor>) -> Exec {
        Exec::Threads(e)
    }

    /// `n` threads: the serial executor for 1, else a pool (the calling thread + `n - 1`
    /// workers). `Unsupported` where this build has no threads.
    pub fn with_threads(n: usize) -> Result<Exec, ExecError> {
        if n == 0 || n > crate::limits::MAX_THREADS {
            return Err(ExecError::BadThreadCount(n));
        }
        if n == 1 {
            return Ok(Exec::serial());
        }
        #[cfg(any(not(target_arch = "wasm32"), feature = "threads"))]
        {
            Ok(Exec::Threads(Arc::new(ThreadPool::new(n)?)))
        }
        #[cfg(not(any(not(target_arch = "wasm32"), feature = "threads")))]
        {
            Err(ExecError::Unsupported)
        }
    }

    pub fn threads(&self) -> usize {
        match self {
            Exec::Serial => 1,
            Exec::Threads(e) => e.threads(),
        }
    }

    /// Calls `f(part, range)` over `0..n` cut into at most `threads()` contiguous ranges whose
    /// starts are multiples of `align` (so a kernel working `align` rows at a time sees the
    /// same groups as one call over `0..n`). One range runs inline, without any hand-off.
    pub fn for_ranges(&self, n: usize, align: usize, f: impl Fn(usize, Range<usize>) + Sync) {
        let pool = match self {
            Exec::Threads(e) if e.threads() > 1 && n > align => e,
            _ => return f(0, 0..n),
        };
        let ranges = split(n, align.max(1), pool.threads());
        if ranges.len() <= 1 {
            return f(0, 0..n);
        }
        pool.run(ranges.len(), &|i| f(i, ranges[i].clone()));
    }
}

/// `0..n` in at most `parts` ranges of whole `align`-groups, as even as the groups allow.
pub fn split(n: usize, align: usize, parts: usize) -> Vec<Range<usize>> {
    let groups = n.div_ceil(align);
    let parts = parts.clamp(1, groups.max(1));
    let (per, extra) = (groups / parts, groups % parts);
    let mut out = Vec::with_capacity(parts);
    let mut g0 = 0;
    for p in 0..parts {
        let g1 = g0 + per + usize::from(p < extra);
        out.push((g0 * align).min(n)..(g1 * align).min(n));
        g0 = g1;
    }
    out
}

/// The threads the machine offers (native: `available_parallelism`; 1 where unknown).
#[cfg(not(target_arch = "wasm32"))]
pub fn available_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get()).min(crate::limits::MAX_THREADS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn split_covers_everything_once_in_aligned_ranges() {
        for n in [0, 1, 3, 4, 5, 17, 64, 262_144, 262_147] {
            for align in [1, 4, 8] {
                for parts in 1..6 {
                    let r = split(n, align, parts);
                    assert!(!r.is_empty() && r.len() <= parts);
                    assert_eq!(r[0].start, 0);
                    assert_eq!(r.last().unwrap().end, n);
                    for w in r.windows(2) {
                        assert_eq!(w[0].end, w[1].start);
                        assert_eq!(w[1].start % align, 0);
                    }
                }
            }
        }
        assert_eq!(split(10, 4, 2), vec![0..8, 8..10]);
        assert_eq!(split(16, 4, 3), vec![0..8, 8..12, 12..16]);
    }

    #[test]
    fn every_executor_runs_each_part_once() {
        for threads in 1..=3 {
            let e = Exec::with_threads(threads).unwrap();
            assert_eq!(e.threads(), threads);
            for n in [1, 7, 1000] {
                let hits: Vec<AtomicUsize> = (0..n).map(|_| AtomicUsize::new(0)).collect();
                let parts = AtomicUsize::new(0);
                e.for_ranges(n, 4, |_, r| {
                    parts.fetch_add(1, Ordering::Relaxed);
                    r.for_each(|i| {
                        hits[i].fetch_add(1, Ordering::Relaxed);
                    })
                });
                assert!(hits.iter().all(|h| h.load(Ordering::Relaxed) == 1));
                assert!(parts.load(Ordering::Relaxed) <= threads);
            }
        }
    }

    #[test]
    fn bad_counts_are_typed_errors() {
        assert_eq!(Exec::with_threads(0).unwrap_err().code(), "INVALID_REQUEST");
        let e = Exec::with_threads(crate::limits::MAX_THREADS + 1).unwrap_err();
        assert_eq!(e.code(), "INVALID_REQUEST");
    }
}
