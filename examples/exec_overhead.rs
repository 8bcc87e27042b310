//! The executor's cost per split job (what each of a decode step's ~130 matmuls pays on top of
//! its work): `cargo run --release --example exec_overhead [threads] [calls]` (default 2 threads,
//! 20 000 calls). Each call splits 1024 rows and touches one value per row, so it measures the
//! hand-off and the wait, not work. Prints one JSON line: the median µs per call over 5 runs.

use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use edgellm::exec::Exec;

fn main() {
    let mut args = std::env::args().skip(1);
    let threads: usize = args.next().map_or(2, |s| s.parse().expect("threads"));
    let calls: usize = args.next().map_or(20_000, |s| s.parse().expect("calls"));
    let exec = Exec::with_threads(threads).expect("threads");
    let sink = AtomicU64::new(0);
    let job = || {
        exec.for_ranges(1024, 4, |_, r| {
            sink.fetch_add(black_box(r.len() as u64), Ordering::Relaxed);
        })
    };
    (0..1000).for_each(|_| job());
    let mut us: Vec<f64> = (0..5)
        .map(|_| {
            let t = Instant::now();
            (0..calls).for_each(|_| job());
            t.elapsed().as_secs_f64() * 1e6 / calls as f64
        })
        .collect();
    us.sort_by(|a, b| a.partial_cmp(b).unwrap());
    println!("{{\"threads\":{threads},\"calls\":{calls},\"median_us_per_call\":{:.2},\"best_us_per_call\":{:.2}}}", us[2], us[0]);
}
