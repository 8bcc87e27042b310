//! Scalar throughput of dequantization, vec_dot and activation quantization, per type.
//! Not a correctness test: run on demand with
//!   cargo test --release --test quant_bench -- --ignored --nocapture
//! Numbers are weight bytes processed per second (and elements per second) of this thread's
//! CPU time where Linux reports it.

mod quant_fixture;

use edgellm::quant::{
    dequantize_kernel, quantize_activation, row_bytes, vec_dot_kernel, vec_dot_type,
};
use quant_fixture::{random_row, Rng, WEIGHT_TYPES};
use std::hint::black_box;
use std::time::{Duration, Instant};

/// Nanoseconds this thread has spent on a CPU (Linux schedstat), so that the numbers hold up
/// on a machine shared with other builds; None elsewhere (then wall time is used).
fn thread_cpu_ns() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    s.split_whitespace().next()?.parse().ok()
}

/// Run `f` repeatedly for about `budget` of CPU time, return seconds per call (best of 3).
fn time_per_call(budget: Duration, mut f: impl FnMut()) -> f64 {
    f();
    let use_cpu = thread_cpu_ns().is_some();
    let now = || {
        if use_cpu {
            thread_cpu_ns().unwrap() as f64 * 1e-9
        } else {
            WALL.with(|w| w.elapsed().as_secs_f64())
        }
    };
    let mut best = f64::INFINITY;
    for _ in 0..3 {
        let start = now();
        let mut calls = 0u64;
        while now() - start < budget.as_secs_f64() / 3.0 {
            f();
            calls += 1;
        }
        best = best.min((now() - start) / calls as f64);
    }
    best
}

thread_local! {
    static WALL: Instant = Instant::now();
}

#[test]
#[ignore]
fn scalar_throughput() {
    // A 2048 x 2048 matrix worth of rows: large enough to leave L1, small enough for L2/L3,
    // which is what a matvec streams through row by row.
    let n = 2048;
    let rows = 256;
    let budget = Duration::from_millis(600);
    let mut rng = Rng(1);
    let x: Vec<f32> = (0..n).map(|_| rng.normal()).collect();
    eprintln!(
        "{:5} {:>14} {:>14} {:>14} {:>14}",
        "type", "dequant MB/s", "dequant Mel/s", "vec_dot MB/s", "vec_dot Mel/s"
    );
    for ty in WEIGHT_TYPES {
        let w: Vec<Vec<u8>> = (0..rows).map(|_| random_row(&mut rng, ty, n)).collect();
        let bytes = row_bytes(ty, n).unwrap() as f64 * rows as f64;
        let elems = (n * rows) as f64;
        let deq = dequantize_kernel(ty).unwrap();
        let mut out = vec![0f32; n];
        let t_deq = time_per_call(budget, || {
            for r in &w {
                deq(black_box(r), &mut out);
            }
            black_box(&out);
        });
        let mut act = Vec::new();
        quantize_activation(vec_dot_type(ty), &x, &mut act).unwrap();
        let dot = vec_dot_kernel(ty).unwrap();
        let t_dot = time_per_call(budget, || {
            let mut s = 0f32;
            for r in &w {
                s += dot(black_box(r), black_box(&act), n);
            }
            black_box(s);
        });
        eprintln!(
            "{:5} {:>14.0} {:>14.0} {:>14.0} {:>14.0}",
            ty.name(),
            bytes / t_deq / 1e6,
            elems / t_deq / 1e6,
            bytes / t_dot / 1e6,
            elems / t_dot / 1e6
        );
    }
    let big: Vec<f32> = (0..n * 16).map(|_| rng.normal()).collect();
    for a in [
        edgellm::gguf::GgmlType::Q8_0,
        edgellm::gguf::GgmlType::Q8_1,
        edgellm::gguf::GgmlType::Q8_K,
        edgellm::gguf::GgmlType::F16,
    ] {
        let mut out = Vec::new();
        let t = time_per_call(budget, || {
            quantize_activation(a, black_box(&big), &mut out).unwrap()
        });
        eprintln!(
            "quantize_activation {:5}: {:.0} Mel/s",
            a.name(),
            big.len() as f64 / t / 1e6
        );
    }
}
