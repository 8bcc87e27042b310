//! This machine's native read bandwidth, the ceiling for a decode step that streams the weights
//! once: `cargo run --release --example read_bandwidth [MB] [passes] [threads]` (default 178 MB,
//! the size of the default model's largest matrix, 7 passes, 1 thread). Four streams (the
//! buffer's four quarters, read side by side, as a four-row decode kernel reads four weight
//! rows) per thread; with several threads each reads its own contiguous share of the buffer at
//! once, as the threaded matmul splits a weight's rows. Prints one JSON line: the median and
//! best GB/s over the passes (after one warm-up pass), all threads together.

use std::hint::black_box;
use std::time::Instant;

/// Wrapping sum of the four quarters of `buf`, read in lockstep, 8 bytes per stream per step.
fn read4(buf: &[u64]) -> u64 {
    let q = buf.len() / 4;
    let (a, rest) = buf.split_at(q);
    let (b, rest) = rest.split_at(q);
    let (c, d) = rest.split_at(q);
    let mut s = [0u64; 4];
    for i in 0..q {
        s[0] = s[0].wrapping_add(a[i]);
        s[1] = s[1].wrapping_add(b[i]);
        s[2] = s[2].wrapping_add(c[i]);
        s[3] = s[3].wrapping_add(d[i]);
    }
    s.iter().fold(0, |x, y| x ^ y)
}

fn main() {
    let mut args = std::env::args().skip(1);
    let mb: usize = args.next().map_or(178, |s| s.parse().expect("MB"));
    let passes: usize = args.next().map_or(7, |s| s.parse().expect("passes"));
    let threads: usize = args.next().map_or(1, |s| s.parse().expect("threads")).max(1);
    let buf: Vec<u64> = (0..mb * 1_000_000 / 8).map(|i| i as u64 * 0x9e37_79b9).collect();
    let share = buf.len().div_ceil(threads);
    let pass = || {
        std::thread::scope(|s| {
            for part in buf.chunks(share) {
                s.spawn(move || black_box(read4(black_box(part))));
            }
        })
    };
    pass();
    let mut gbs: Vec<f64> = (0..passes.max(1))
        .map(|_| {
            let t = Instant::now();
            pass();
            (buf.len() * 8) as f64 / t.elapsed().as_secs_f64() / 1e9
        })
        .collect();
    gbs.sort_by(|a, b| a.partial_cmp(b).unwrap());
    println!(
        "{{\"buffer_mb\":{mb},\"streams\":4,\"threads\":{threads},\"passes\":{},\"median_gb_s\":{:.2},\"best_gb_s\":{:.2}}}",
        gbs.len(),
        gbs[gbs.len() / 2],
        gbs[gbs.len() - 1]
    );
}
