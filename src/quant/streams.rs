//! The order in which a decode matmul's kernel calls take the matrix's rows: one stream
//! (consecutive rows, call after call) or several ascending streams read in turn.
//!
//! Decode reads each weight once per token, from memory. wasm has no prefetch instruction, and
//! one thread reading its rows as one stream waited on memory: in a Chromium `perf` profile on
//! an Intel VM about half of the screen's pass-1 samples, and two fifths of the four-row Q5_0
//! kernel's, sat on the first loads of a line (the Q5_0 kernel's then plain loads touching the
//! next call's rows: a load that misses holds retirement like any other). Four streams, as the
//! membw probe's four-stream loop reads, keep more lines in flight. Measured in Chromium on
//! that VM (`--include-ignored stream_throughput`, medians, the same session): pass 1 over
//! 85 MB 88 → 75 ns a row (2 streams 1.22×, 4 1.30×, 8 1.15× in another run); over 63 MB,
//! the four-row kernels 1.03–1.05× (Q5_0 2048 wide), 1.3–1.4× (Q5_0 640 wide), 1.25× (Q4_0),
//! 1.6–1.8× (Q8_0) over one stream (which had measured alike with and without touching the
//! next call's rows), the one-row Q4_K kernel 1.05–1.3×, Q6_K 1.05×; in cache all alike.
//! Natively AVX2 prefetches the next call's rows: one stream.

use core::ops::Range;

/// Streams per thread of a decode matmul (and of the screen's pass 1).
#[cfg(target_arch = "wasm32")]
pub const STREAMS: usize = 4;
#[cfg(not(target_arch = "wasm32"))]
pub const STREAMS: usize = 1;

/// [`schedule`] in this build's streams ([`STREAMS`]): the row order of every decode matmul
/// and of the screen's pass 1.
pub fn ordered<const N: usize>(range: Range<usize>) -> (impl Iterator<Item = [usize; N]>, Range<usize>) {
    schedule::<N>(range, STREAMS)
}

/// The rows of each call of an `N`-row kernel over the rows `range`, in call order, and the
/// rows left over (`range.len() % N`, at its end) for a one-row kernel: the first
/// `N·calls` rows cut into `streams` consecutive spans (`streams` divides `N`), each call taking
/// the next `N / streams` rows of every span in turn. One stream: consecutive rows.
pub fn schedule<const N: usize>(range: Range<usize>, streams: usize) -> (impl Iterator<Item = [usize; N]>, Range<usize>) {
    assert!(streams > 0 && N % streams == 0, "streams divide the rows of a call");
    let per = N / streams;
    let calls = range.len() / N;
    let (start, span) = (range.start, calls * per);
    let sets = (0..calls).map(move |c| core::array::from_fn(|k| start + (k % streams) * span + c * per + k / streams));
    (sets, start + calls * N..range.end)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every schedule covers its range once: each row in one call or in the tail, the calls'
    /// rows in `streams` ascending runs of consecutive rows.
    #[test]
    fn schedules_cover_each_row_once() {
        fn check<const N: usize>(streams: usize, range: Range<usize>) {
            let (sets, tail) = schedule::<N>(range.clone(), streams);
            let mut seen = vec![0u8; range.end];
            let calls: Vec<[usize; N]> = sets.collect();
            for r in calls.iter().flatten().copied().chain(tail.clone()) {
                seen[r] += 1;
            }
            assert!(seen[..range.start].iter().all(|&n| n == 0) && seen[range.clone()].iter().all(|&n| n == 1), "{N} {streams} {range:?}");
            assert_eq!(tail.len(), range.len() % N);
            for j in 0..streams {
                let run: Vec<usize> = calls.iter().flat_map(|s| s.iter().skip(j).step_by(streams).copied()).collect();
                assert!(run.windows(2).all(|w| w[1] == w[0] + 1), "{N} {streams} {range:?} stream {j}");
            }
        }
        for range in [0..0, 0..3, 0..7, 0..8, 5..29, 0..262_144, 100..1000] {
            for streams in [1, 2, 4, 8] {
                check::<8>(streams, range.clone());
            }
            for streams in [1, 2, 4] {
                check::<4>(streams, range.clone());
            }
        }
    }
}
