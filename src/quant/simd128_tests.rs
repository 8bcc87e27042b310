//! SIMD128 kernels vs their scalar twins, bit for bit, under Node (wasm-bindgen-test):
//!
//!   cargo test --target wasm32-unknown-unknown --lib quant::simd128_tests
//!
//! A unit test rather than tests/*.rs because integration tests would also build the native
//! CLI binary for wasm (see tokenizer/wasm_timing.rs). Cases: random blocks with sane f16
//! scales against random raw activation blocks and against activations quantized from random
//! floats; edge blocks (every weight byte 0x00 / 0xFF / 0x80 / 0x7F, activation quants all -128
//! / 127 / 0, huge and tiny scales, zero scales); several lengths (1..=8 super-blocks).

use super::{quantize_activation, vec_dot_kernel, vec_dot_rows4_kernel, vec_dot_toks4_kernel, vec_dot_toks8_kernel, vec_dot_kernel_scalar, vec_dot_type, f32_to_f16};
use crate::gguf::GgmlType::{self, *};
use wasm_bindgen_test::*;

const TYPES: [GgmlType; 10] = [Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K];

/// Byte offsets of the f16 scale fields of one block of `ty`.
fn f16_fields(ty: GgmlType) -> &'static [usize] {
    match ty {
        Q4_0 | Q5_0 | Q8_0 => &[0],
        Q4_1 | Q5_1 | Q8_1 | Q4_K | Q5_K => &[0, 2],
        Q2_K => &[80, 82],
        Q3_K => &[108],
        Q6_K => &[208],
        _ => &[],
    }
}

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
    /// A finite f32 spread over many binades, sign random.
    fn scale(&mut self) -> f32 {
        let e = (self.next() % 40) as i32 - 30;
        let m = 1.0 + (self.next() % 1024) as f32 / 1024.0;
        let s = if self.next() & 1 == 0 { 1.0 } else { -1.0 };
        s * m * 2f32.powi(e)
    }
    fn normal(&mut self) -> f32 {
        let u1 = ((self.next() >> 11) as f64 / (1u64 << 53) as f64).max(1e-300);
        let u2 = (self.next() >> 11) as f64 / (1u64 << 53) as f64;
        ((-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()) as f32
    }
}

/// Sets the scale fields of every block of `row`; a Q8_K activation also gets its bsums (the
/// sums of each 16 quants: derived data, which the quantizer always writes and kernels read).
fn set_scales(ty: GgmlType, row: &mut [u8], f: &mut dyn FnMut() -> f32) {
    let ts = ty.type_size() as usize;
    if ty == Q8_K {
        for b in row.chunks_exact_mut(ts) {
            b[0..4].copy_from_slice(&f().to_le_bytes());
            super::q8_k::write_bsums(b);
        }
        return;
    }
    for b in row.chunks_exact_mut(ts) {
        for &o in f16_fields(ty) {
            b[o..o + 2].copy_from_slice(&f32_to_f16(f()).to_le_bytes());
        }
    }
}

fn blocks(ty: GgmlType, n: usize) -> usize {
    n / ty.block_size() as usize * ty.type_size() as usize
}

/// Asserts SIMD == scalar (bits), returns the value.
fn same(ty: GgmlType, w: &[u8], a: &[u8], n: usize, what: &str) -> f32 {
    let simd = vec_dot_kernel(ty).unwrap();
    let scalar = vec_dot_kernel_scalar(ty).unwrap();
    assert!(simd as usize != scalar as usize, "{ty}: no SIMD kernel dispatched");
    let (s, r) = (simd(w, a, n), scalar(w, a, n));
    assert_eq!(s.to_bits(), r.to_bits(), "{ty} {what} n={n}: simd {s:e} scalar {r:e}");
    r
}

#[wasm_bindgen_test]
fn random_blocks_match_scalar_bits() {
    let mut rng = Rng(7);
    for ty in TYPES {
        let a_ty = vec_dot_type(ty);
        // 256-multiples for every type; for the 32-element formats also 1..=9 blocks (the
        // four-block groups and every remainder).
        let small: Vec<usize> = if ty.block_size() == 32 { (1..=9).map(|m| 32 * m).collect() } else { vec![] };
        for n in (1..=8usize).map(|k| 256 * k).chain(small) {
            for _ in 0..25 {
                let mut w = rng.bytes(blocks(ty, n));
                set_scales(ty, &mut w, &mut || rng.scale());
                // Raw activation blocks (any quants, -128 included) ...
                let mut a = rng.bytes(blocks(a_ty, n));
                set_scales(a_ty, &mut a, &mut || rng.scale());
                same(ty, &w, &a, n, "raw");
                // ... and activations quantized from floats, as the matmul makes them.
                let x: Vec<f32> = (0..n).map(|_| rng.normal() * rng.scale()).collect();
                let mut q = Vec::new();
                quantize_activation(a_ty, &x, &mut q).unwrap();
                same(ty, &w, &q, n, "quantized");
            }
        }
    }
}

#[wasm_bindgen_test]
fn edge_blocks_match_scalar_bits() {
    let scales: [f32; 6] = [1.0, 0.0, 65504.0, -65504.0, 6.1e-5, 5.96e-8];
    for ty in TYPES {
        let a_ty = vec_dot_type(ty);
        let n = 512;
        for wb in [0x00u8, 0xff, 0x80, 0x7f, 0x55, 0xaa] {
            for ab in [0x80u8, 0x7f, 0x00, 0xff] {
                for &ws in &scales {
                    for &as_ in &scales[..3] {
                        let mut w = vec![wb; blocks(ty, n)];
                        set_scales(ty, &mut w, &mut || ws);
                        let mut a = vec![ab; blocks(a_ty, n)];
                        set_scales(a_ty, &mut a, &mut || as_);
                        same(ty, &w, &a, n, &format!("edge w={wb:#x} a={ab:#x} ws={ws} as={as_}"));
                    }
                }
            }
        }
    }
}

#[wasm_bindgen_test]
fn extreme_integer_sums_match_scalar_bits() {
    // The largest |Σ| each format can reach: every weight quant at its extreme and every
    // activation quant -128, unit scales; the result must be the exact integer sum.
    for ty in TYPES {
        let a_ty = vec_dot_type(ty);
        let n = 256;
        let mut w = vec![0xffu8; blocks(ty, n)];
        set_scales(ty, &mut w, &mut || 1.0);
        let mut a = vec![0x80u8; blocks(a_ty, n)];
        set_scales(a_ty, &mut a, &mut || 1.0);
        let v = same(ty, &w, &a, n, "extreme");
        assert!(v.is_finite(), "{ty}: {v}");
    }
}

/// Inf and NaN f16 scales (weights or activations, mixed with finite ones block by block and row
/// by row, so a group of four holds both): the kernels' fast f16 conversion must hand such a
/// group to the general one. The result is compared as bits, every NaN as one value (wasm does
/// not fix a NaN's payload through arithmetic).
#[wasm_bindgen_test]
fn nonfinite_scales_match_scalar() {
    let bits = |v: f32| if v.is_nan() { u32::MAX } else { v.to_bits() };
    let cycle = [f32::INFINITY, 1.5, f32::NEG_INFINITY, -0.0, f32::NAN, 65504.0, 5.96e-8, 0.25, 2.0];
    let mut rng = Rng(17);
    for ty in TYPES {
        let a_ty = vec_dot_type(ty);
        let scalar = vec_dot_kernel_scalar(ty).unwrap();
        let n = if ty.block_size() == 32 { 9 * 32 } else { 512 };
        let (rb, ab) = (blocks(ty, n), blocks(a_ty, n));
        for (on_w, start) in [(true, 0), (true, 4), (false, 2)] {
            let mut w = rng.bytes(X4_ROWS * rb);
            let mut a = rng.bytes(ab);
            set_scales(a_ty, &mut a, &mut || rng.scale());
            set_scales(ty, &mut w, &mut || rng.scale());
            let mut k = start;
            let mut next = || {
                k += 1;
                cycle[k % cycle.len()]
            };
            if on_w {
                // Rows 1 and 6 get the non-finite cycle; the others keep finite scales.
                for r in [1, 6] {
                    set_scales(ty, &mut w[r * rb..(r + 1) * rb], &mut next);
                }
            } else if a_ty != Q8_K {
                set_scales(a_ty, &mut a, &mut next);
            }
            let what = format!("on_w={on_w} start={start}");
            for r in 0..X4_ROWS {
                let (got, want) = (vec_dot_kernel(ty).unwrap()(&w[r * rb..(r + 1) * rb], &a, n), scalar(&w[r * rb..(r + 1) * rb], &a, n));
                assert_eq!(bits(got), bits(want), "{ty} dot {what} row {r}: {got} vs {want}");
            }
            if let Some(rows4) = vec_dot_rows4_kernel(ty) {
                let mut buf = Vec::new();
                let act = rows4.prepare(&a, n, &mut buf);
                // The weight's non-finite scales are seen; with finite ones (Inf and NaN in the
                // activation only), `dot_finite` computes the same bits as well.
                let finite = super::block_scales_finite(ty, &w);
                assert!(!(on_w && finite), "{ty} {what}: a non-finite scale not seen");
                for r0 in [0, 4, X4_ROWS - 4] {
                    let got = (rows4.dot)(&w[r0 * rb..], rb, act, n);
                    let got_f = finite.then(|| (rows4.dot_finite)(&w[r0 * rb..], rb, act, n));
                    for (k, g) in got.iter().enumerate() {
                        let want = scalar(&w[(r0 + k) * rb..(r0 + k + 1) * rb], &a, n);
                        assert_eq!(bits(*g), bits(want), "{ty} rows4 {what} rows {r0}.. k={k}: {g} vs {want}");
                        if let Some(f) = got_f {
                            assert_eq!(bits(f[k]), bits(want), "{ty} rows4 finite {what} rows {r0}.. k={k}: {} vs {want}", f[k]);
                        }
                    }
                }
            }
        }
    }
}

/// The row dequantizers the K/V cache reads through (`quant::dequantize_f16`, `dequantize_q8_0`)
/// against their scalar loops, as bits: every f16 pattern (NaN payloads included), at lengths and
/// offsets that leave a scalar tail and put Inf/NaN beside finite values in one group; Q8_0
/// blocks of random quants with scales of many binades, zero, Inf and NaN.
#[wasm_bindgen_test]
fn dequantizers_match_scalar_bits() {
    let all: Vec<u8> = (0..=u16::MAX).flat_map(|h| h.to_le_bytes()).collect();
    for (start, len) in [(0usize, 65536usize), (3, 65533), (0x7bfe, 13), (0xfc00 - 5, 11), (1, 7), (0, 0)] {
        let src = &all[2 * start..2 * (start + len)];
        let (mut got, mut want) = (vec![0f32; len], vec![0f32; len]);
        super::dequantize_f16(src, &mut got);
        super::float::dequantize_f16(src, &mut want);
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert_eq!(g.to_bits(), w.to_bits(), "f16 {:#06x}", start + i);
        }
    }
    let mut rng = Rng(29);
    let special = [0.0, -0.0, f32::INFINITY, f32::NEG_INFINITY, f32::NAN, 65504.0, 5.96e-8];
    for nb in [1usize, 2, 7] {
        for round in 0..40 {
            let mut src = rng.bytes(nb * 34);
            let mut k = round;
            set_scales(Q8_0, &mut src, &mut || {
                k += 1;
                if k % 3 == 0 { special[k / 3 % special.len()] } else { rng.scale() }
            });
            let (mut got, mut want) = (vec![0f32; nb * 32], vec![0f32; nb * 32]);
            super::dequantize_q8_0(&src, &mut got);
            super::q8::dequantize_q8_0(&src, &mut want);
            let bits = |v: f32| if v.is_nan() { u32::MAX } else { v.to_bits() };
            for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                assert_eq!(bits(*g), bits(*w), "q8_0 nb {nb} round {round} value {i}");
            }
        }
    }
}

/// Rows in the weight matrices of `x4_kernels_match_scalar_bits`: rows4 runs on the slices from
/// row 0 (the next four rows follow), from row 4 (seven rows) and from row 7 (the last four
/// rows exactly, as the matmul's last group).
const X4_ROWS: usize = 11;

/// The four-at-once kernels (matmul): lane k of rows4 = scalar(W[k], a), lane k of toks4 =
/// scalar(w, A[k]), bit for bit; random and edge blocks, 1..=9 blocks and long rows; rows4 on
/// slices that run past its four rows (`X4_ROWS`), whose extra rows must not change a lane.
#[wasm_bindgen_test]
fn x4_kernels_match_scalar_bits() {
    let mut rng = Rng(11);
    for ty in [Q4_0, Q5_0, Q8_0, Q4_K, Q6_K] {
        let rows4 = vec_dot_rows4_kernel(ty);
        let toks4 = vec_dot_toks4_kernel(ty).expect("toks4 kernel");
        let scalar = vec_dot_kernel_scalar(ty).unwrap();
        let a_ty = vec_dot_type(ty);
        let check = |w: &[u8], a: &[u8], n: usize, what: &str| {
            let (rb, ab) = (blocks(ty, n), blocks(a_ty, n));
            let mut d4 = Vec::new();
            super::activation_scales4(a_ty, a, ab, 4, n, &mut d4);
            let t = toks4(&w[..rb], a, ab, &d4, n);
            if let Some(toks8) = vec_dot_toks8_kernel(ty) {
                // eight activation rows: the four given ones twice
                let a8: Vec<u8> = a.iter().chain(a.iter()).copied().collect();
                let mut d8 = Vec::new();
                super::activation_scales4(a_ty, &a8, ab, 8, n, &mut d8);
                let t8 = toks8(&w[..rb], &a8, ab, &d8, n);
                for k in 0..8 {
                    let want = scalar(&w[..rb], &a[(k % 4) * ab..(k % 4 + 1) * ab], n);
                    assert_eq!(t8[k].to_bits(), want.to_bits(), "{ty} toks8 {what} n={n} k={k}");
                }
            }
            if let Some(rows4) = rows4 {
                let mut buf = Vec::new();
                let act = rows4.prepare(&a[..ab], n, &mut buf);
                // Finite scales (every weight here): `dot_finite`, as decode runs it, too.
                assert!(super::block_scales_finite(ty, w) == matches!(ty, Q4_0 | Q5_0 | Q8_0), "{ty} {what}");
                for dot in [rows4.dot, rows4.dot_finite] {
                    for r0 in [0, 4, X4_ROWS - 4] {
                        let r = dot(&w[r0 * rb..], rb, act, n);
                        for k in 0..4 {
                            let want = scalar(&w[(r0 + k) * rb..(r0 + k + 1) * rb], &a[..ab], n);
                            assert_eq!(r[k].to_bits(), want.to_bits(), "{ty} rows4 {what} n={n} rows {r0}.. k={k}: {} vs {want}", r[k]);
                        }
                    }
                }
            }
            for k in 0..4 {
                let want = scalar(&w[..rb], &a[k * ab..(k + 1) * ab], n);
                assert_eq!(t[k].to_bits(), want.to_bits(), "{ty} toks4 {what} n={n} k={k}: {} vs {want}", t[k]);
            }
        };
        let ns: Vec<usize> = if ty.block_size() == 32 { (1..=9).map(|m| 32 * m).chain([640, 2048]).collect() } else { (1..=8).map(|m| 256 * m).collect() };
        for n in ns {
            for _ in 0..20 {
                let mut w = rng.bytes(X4_ROWS * blocks(ty, n));
                set_scales(ty, &mut w, &mut || rng.scale());
                let mut a = rng.bytes(4 * blocks(a_ty, n));
                set_scales(a_ty, &mut a, &mut || rng.scale());
                check(&w, &a, n, "random");
                let x: Vec<f32> = (0..4 * n).map(|_| rng.normal()).collect();
                let mut q = Vec::new();
                quantize_activation(a_ty, &x, &mut q).unwrap();
                check(&w, &q, n, "quantized");
            }
            for wb in [0x00u8, 0xff, 0x80, 0x7f] {
                for abyte in [0x80u8, 0x7f, 0x00] {
                    let mut w = vec![wb; X4_ROWS * blocks(ty, n)];
                    set_scales(ty, &mut w, &mut || 1.0);
                    let mut a = vec![abyte; 4 * blocks(a_ty, n)];
                    set_scales(a_ty, &mut a, &mut || 1.0);
                    check(&w, &a, n, "edge");
                }
            }
        }
    }
}

/// `ops::matmul` with the four-at-once kernels (decode: rows4; prefill: toks4 plus the
/// per-token remainder) gives every output the scalar kernel's bits.
#[wasm_bindgen_test]
fn matmul_x4_matches_scalar_bits() {
    use crate::ops::matmul::{matmul, MatmulScratch, Weight};
    let mut rng = Rng(5);
    // 7 rows: one call of four and three single rows; 13 and 70: calls taking a row of each
    // stream (`streams::schedule`; natively, consecutive rows whose next rows are prefetched
    // but for the last call's), then single rows.
    for (ty, n_out) in [Q4_0, Q5_0, Q8_0, Q4_K, Q6_K, Q5_K].into_iter().flat_map(|t| [(t, 7), (t, 13), (t, 70)]) {
        let n_in = 512;
        let rb = blocks(ty, n_in);
        let mut data = rng.bytes(rb * n_out);
        set_scales(ty, &mut data, &mut || rng.scale());
        let w = Weight::new(ty, n_in, n_out, data.clone()).unwrap();
        let scalar = vec_dot_kernel_scalar(ty).unwrap();
        let mut s = MatmulScratch::default();
        for n_tok in [1usize, 2, 4, 6, 13, 37] {
            let x: Vec<f32> = (0..n_tok * n_in).map(|_| rng.normal()).collect();
            let mut out = vec![0f32; n_tok * n_out];
            matmul(&w, &x, &mut out, &mut s).unwrap();
            let mut q = Vec::new();
            for t in 0..n_tok {
                quantize_activation(vec_dot_type(ty), &x[t * n_in..(t + 1) * n_in], &mut q).unwrap();
                for r in 0..n_out {
                    let want = scalar(&data[r * rb..(r + 1) * rb], &q, n_in);
                    let got = out[t * n_out + r];
                    assert_eq!(got.to_bits(), want.to_bits(), "{ty} n_tok={n_tok} t={t} r={r}: {got} vs {want}");
                }
            }
        }
    }
}

#[wasm_bindgen::prelude::wasm_bindgen]
extern "C" {
    #[wasm_bindgen(js_namespace = performance)]
    fn now() -> f64;
    #[wasm_bindgen(js_namespace = console)]
    fn log(s: &str);
}

/// Micro-benchmark (prints, asserts nothing about speed): a matvec of `rows` weight rows of
/// 2048 elements (Q8_0 also at Gemma's 640-wide output projection shape) against one
/// activation row, SIMD vs scalar in the same process: GMAC/s and weight GB/s.
#[wasm_bindgen_test]
fn kernel_throughput() {
    let mut rng = Rng(3);
    {
        // The memory ceiling: the plainest wasm read of 178 MB (Gemma 3's output projection),
        // 64 bytes per iteration into four independent accumulators.
        use core::arch::wasm32::*;
        let buf: Vec<u8> = (0..178usize << 20).map(|i| i as u8).collect();
        let mut best = f64::INFINITY;
        let mut sink = i32x4_splat(0);
        for _ in 0..3 {
            let t0 = now();
            let mut acc = [i32x4_splat(0); 4];
            for c in std::hint::black_box(&buf[..]).chunks_exact(64) {
                for (k, a) in acc.iter_mut().enumerate() {
                    // SAFETY: `c` is 64 readable bytes; unaligned v128 loads are allowed.
                    let v = unsafe { v128_load(c[16 * k..].as_ptr() as *const v128) };
                    *a = i8x16_add(*a, v);
                }
            }
            sink = i32x4_add(sink, i32x4_add(i32x4_add(acc[0], acc[1]), i32x4_add(acc[2], acc[3])));
            best = best.min((now() - t0) / 1e3);
        }
        std::hint::black_box(sink);
        log(&format!("stream read 178 MB: {:.2} GB/s (the memory ceiling for decode)", buf.len() as f64 / best / 1e9));
    }
    log("kernel   n     rows   simd GMAC/s  GB/s | scalar GMAC/s  GB/s | speed-up");
    let mut cases: Vec<(GgmlType, usize, usize)> = TYPES.iter().map(|&t| (t, 2048, 1024)).collect();
    cases.push((Q8_0, 640, 8192));
    // The same rows4 work on 32 KB of weights (L1/L2-resident), repeated: compute vs memory.
    cases.push((Q8_0, 640, 48));
    // Beyond every cache: half of Gemma 3's output projection (89 MB), streamed from memory.
    cases.push((Q8_0, 640, 131072));
    for (ty, n, rows) in cases {
        let a_ty = vec_dot_type(ty);
        let rb = blocks(ty, n);
        let mut w = rng.bytes(rb * rows);
        // Scales as real weights have them (normal f16, 2^-12..2^-4): random ones over many
        // binades include f16 subnormals, whose conversion multiplies a subnormal f32 and takes
        // the CPU's slow path, which real models never hit.
        set_scales(ty, &mut w, &mut || rng.scale().abs().clamp(1.0 / 4096.0, 1.0 / 16.0));
        let x: Vec<f32> = (0..n).map(|_| rng.normal()).collect();
        let mut a = Vec::new();
        quantize_activation(a_ty, &x, &mut a).unwrap();
        let time = |k: super::VecDotKernel| {
            let mut best = f64::INFINITY;
            let mut sink = 0f32;
            for _ in 0..5 {
                let t0 = now();
                for r in 0..rows {
                    sink += k(&w[r * rb..(r + 1) * rb], &a, n);
                }
                best = best.min((now() - t0) / 1e3);
            }
            assert!(!sink.is_nan() || sink.is_nan());
            best
        };
        if let Some(toks4) = vec_dot_toks4_kernel(ty) {
            let rows4 = vec_dot_rows4_kernel(ty);
            let mut best_r = f64::INFINITY;
            let mut best_t = f64::INFINITY;
            let mut best_8 = f64::INFINITY;
            let mut sink = 0f32;
            // rows4: the matvec four rows at a time; toks4: row r against 4 activation rows.
            let ab = a.len();
            let a4: Vec<u8> = (0..4).flat_map(|_| a.iter().copied()).collect();
            let a8: Vec<u8> = a4.iter().chain(a4.iter()).copied().collect();
            let (mut d4, mut d8) = (Vec::new(), Vec::new());
            super::activation_scales4(a_ty, &a4, ab, 4, n, &mut d4);
            super::activation_scales4(a_ty, &a8, ab, 8, n, &mut d8);
            let reps = (8192 / rows).max(1);
            let mut prep = Vec::new();
            for _ in 0..5 {
                let t0 = now();
                if let Some(rows4) = rows4 {
                    // once per matmul, as ops::matmul does
                    let act = rows4.prepare(&a, n, &mut prep);
                    for _ in 0..reps {
                        for r in (0..rows / 4 * 4).step_by(4) {
                            sink += (rows4.dot)(&w[r * rb..(r + 4) * rb], rb, act, n)[0];
                        }
                    }
                }
                best_r = best_r.min((now() - t0) / 1e3 / reps as f64);
                let t0 = now();
                for r in 0..rows / 4 {
                    sink += toks4(&w[r * rb..(r + 1) * rb], &a4, ab, &d4, n)[0];
                }
                best_t = best_t.min((now() - t0) / 1e3);
                if let Some(toks8) = vec_dot_toks8_kernel(ty) {
                    let t0 = now();
                    for r in 0..rows / 8 {
                        sink += toks8(&w[r * rb..(r + 1) * rb], &a8, ab, &d8, n)[0];
                    }
                    best_8 = best_8.min((now() - t0) / 1e3);
                }
            }
            assert!(!sink.is_nan() || sink.is_nan());
            let macs = (n * rows) as f64;
            let t8 = if vec_dot_toks8_kernel(ty).is_some() { format!("{:>6.2}", macs / best_8 / 1e9) } else { "     -".into() };
            let r4 = if rows4.is_some() { format!("{:>6.2}", macs / best_r / 1e9) } else { "     -".into() };
            log(&format!(
                "{:<6} {:>5} {:>6}   rows4 {} GMAC/s  toks4 {:>6.2} GMAC/s  toks8 {} GMAC/s",
                ty.to_string(), n, rows, r4, macs / best_t / 1e9, t8
            ));
        }
        let ts = time(vec_dot_kernel(ty).unwrap());
        let tr = time(vec_dot_kernel_scalar(ty).unwrap());
        let macs = (n * rows) as f64;
        let bytes = (rb * rows) as f64;
        log(&format!(
            "{:<6} {:>5} {:>6}   {:>8.2} {:>7.2} | {:>10.2} {:>7.2} | {:>5.2}x",
            ty.to_string(),
            n,
            rows,
            macs / ts / 1e9,
            bytes / ts / 1e9,
            macs / tr / 1e9,
            bytes / tr / 1e9,
            tr / ts
        ));
    }
}

/// Benchmark, not a test (prints, asserts nothing about speed; ignored by default, run with
/// `cargo test --target wasm32-unknown-unknown --lib --release -- --include-ignored
/// rows4_stream`, in Chromium for the relaxed tier (README, "Where a decode step's time goes"):
/// `--release` builds the kernels as the package ships them, with LTO and one codegen unit;
/// the test profile's build of the same source kept bounds checks and stack round trips in
/// their loops and ran Q5_0 ~40 % slower in cache): the
/// decode kernels (`rows4`) over 64 MB of weights (beyond every cache), their calls taking
/// consecutive rows (one stream) or a row of each of `streams::STREAMS` streams (as
/// `ops::matmul` does, `streams::schedule`), and over the first 256 KB again and again (in
/// cache: what the kernel costs when it never waits on memory), alternated, beside the one-row
/// kernel and a plain four-stream read of the same bytes.
#[wasm_bindgen_test]
#[ignore]
fn rows4_stream_throughput() {
    use core::arch::wasm32::*;
    let mut rng = Rng(9);
    let bytes = 64usize << 20;
    for (ty, n) in [(Q5_0, 640), (Q5_0, 2048), (Q8_0, 640), (Q4_0, 640), (Q4_K, 1024), (Q4_K, 2048), (Q6_K, 2048)] {
        // Types without a four-row kernel (decode reads them one row at a time): the one-row
        // kernel and the probe only.
        let rows4 = vec_dot_rows4_kernel(ty);
        let rb = blocks(ty, n);
        let rows = bytes / rb / 4 * 4;
        let mut w = vec![0u8; rb * rows];
        for c in w.chunks_exact_mut(8) {
            c.copy_from_slice(&rng.next().to_le_bytes());
        }
        set_scales(ty, &mut w, &mut || rng.scale().abs().clamp(1.0 / 4096.0, 1.0 / 16.0));
        let x: Vec<f32> = (0..n).map(|_| rng.normal()).collect();
        let mut a = Vec::new();
        quantize_activation(vec_dot_type(ty), &x, &mut a).unwrap();
        let mut prep = Vec::new();
        let act = rows4.as_ref().map(|k| k.prepare(&a, n, &mut prep));
        // The kernel decode runs on this weight (`ops::matmul`).
        let finite = super::block_scales_finite(ty, &w);
        let dot = rows4.as_ref().map(|k| if finite { k.dot_finite } else { k.dot });
        let (mut t_on, mut t_off, mut t_cache, mut t_probe, mut t_one) = (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
        let mut t_one4 = Vec::new();
        let one = vec_dot_kernel(ty).unwrap();
        let mut sink = 0f32;
        for _ in 0..5 {
            let t0 = now();
            for r in 0..rows {
                sink += one(&w[r * rb..(r + 1) * rb], &a, n);
            }
            t_one.push(now() - t0);
            let t0 = now();
            let (sets, tail) = super::streams::ordered::<4>(0..rows);
            for r in sets.flatten().chain(tail) {
                sink += one(&w[r * rb..(r + 1) * rb], &a, n);
            }
            t_one4.push(now() - t0);
            for streamed in [true, false] {
                let (Some(dot), Some(act)) = (dot, act) else { break };
                let t0 = now();
                if streamed {
                    for set in super::streams::ordered::<4>(0..rows).0 {
                        sink += dot(&w[set[0] * rb..], (set[1] - set[0]) * rb, act, n)[0];
                    }
                } else {
                    for r in (0..rows).step_by(4) {
                        sink += dot(&w[r * rb..], rb, act, n)[0];
                    }
                }
                let dt = now() - t0;
                if streamed { t_on.push(dt) } else { t_off.push(dt) }
            }
            if let (Some(dot), Some(act)) = (dot, act) {
                // In cache: the first 256 KB's rows again and again, as many bytes in all.
                let small = (256 << 10) / rb / 4 * 4;
                let t0 = now();
                for _ in 0..rows / small {
                    for r in (0..small).step_by(4) {
                        sink += dot(&w[r * rb..], rb, act, n)[0];
                    }
                }
                t_cache.push((now() - t0) * rows as f64 / (rows / small * small) as f64);
            }
            // Four streams, 64 bytes per stream per step (the membw probe's four-stream loop).
            let t0 = now();
            let q = w.len() / 4 / 64 * 64;
            let mut acc = [i32x4_splat(0); 4];
            for i in (0..q).step_by(64) {
                for (s, a) in acc.iter_mut().enumerate() {
                    let c = &w[s * q + i..s * q + i + 64];
                    // SAFETY: `c` is 64 readable bytes; unaligned v128 loads are allowed.
                    let v = unsafe { i32x4_add(i32x4_add(v128_load(c.as_ptr() as *const v128), v128_load(c[16..].as_ptr() as *const v128)), i32x4_add(v128_load(c[32..].as_ptr() as *const v128), v128_load(c[48..].as_ptr() as *const v128))) };
                    *a = i32x4_add(*a, v);
                }
            }
            std::hint::black_box(acc);
            t_probe.push(now() - t0);
        }
        std::hint::black_box(sink);
        let med = |v: &mut Vec<f64>| {
            v.sort_by(|a, b| a.partial_cmp(b).unwrap());
            v[v.len() / 2]
        };
        let gb = |ms: f64| w.len() as f64 / ms / 1e6;
        let (probe, one, one4) = (med(&mut t_probe), med(&mut t_one), med(&mut t_one4));
        let four = if t_on.is_empty() {
            "no four-row kernel".to_string()
        } else {
            let (on, off, cache) = (med(&mut t_on), med(&mut t_off), med(&mut t_cache));
            format!("rows4 {} streams {:>5.2} GB/s, one stream {:>5.2} GB/s ({:.2}x), in cache {:>5.2} GB/s", super::streams::STREAMS, gb(on), gb(off), off / on, gb(cache))
        };
        log(&format!("{:<5} n={n:>5} {:>3} MB: {four}; one-row kernel {:>5.2} GB/s ({} streams {:>5.2}); four-stream read {:>5.2} GB/s", ty.to_string(), w.len() >> 20, gb(one), super::streams::STREAMS, gb(one4), gb(probe)));
    }
}

/// Benchmark, not a test (ignored; `--release -- --include-ignored pass1_stream`, as
/// `rows4_stream_throughput`): the screen's pass 1 over
/// a plane-layout head 640 wide streamed from memory (85 MB, beyond every cache) and over two
/// groups read again and again (in cache): whether pass 1 waits on memory or on its
/// instructions; and over rows 2560 wide in cache: the part of a row's time that does not grow
/// with its length. Each alternates the rows of a call taken consecutively (one stream) with
/// `streams::ordered`'s (`streams::STREAMS` streams), and the scales' checked conversion (what a
/// head with an Inf or NaN scale gets) with the unchecked one (`finite_scales`).
#[wasm_bindgen_test]
#[ignore]
fn pass1_stream_throughput() {
    use super::planes::{kernels, PlaneLayout, PlanesAct, PASS1_ROWS, GROUP};
    use super::streams::STREAMS;
    let mut rng = Rng(11);
    let (_, pass1_n, _) = kernels();
    for (n_in, rows) in [(640, 131072usize), (640, 2 * GROUP), (2560, 2 * GROUP / 4)] {
        let outl: Vec<usize> = (0..n_in).filter(|d| d % 23 == 5).take(32).collect();
        let x: Vec<f32> = (0..n_in).map(|_| rng.normal()).collect();
        let mut a = Vec::new();
        quantize_activation(Q8_0, &x, &mut a).unwrap();
        let row = n_in / 32 * 34;
        let mut w = vec![0u8; rows * row];
        for c in w.chunks_exact_mut(8) {
            c.copy_from_slice(&rng.next().to_le_bytes());
        }
        for b in w.chunks_exact_mut(34) {
            b[0..2].copy_from_slice(&f32_to_f16(rng.scale().abs().clamp(1.0 / 4096.0, 1.0 / 16.0)).to_le_bytes());
        }
        let mut layout = PlaneLayout::new(n_in, rows, &outl);
        let finite = super::block_scales_finite(Q8_0, &w);
        layout.relayout_in_place(&mut w, finite);
        let mut xp = PlanesAct::default();
        xp.prepare(&layout, &a);
        let ra = layout.pass1_row_bytes();
        let a_part = |r: usize| &w[layout.a_at(r)..layout.a_at(r) + ra];
        let reps = 131072 * 640 / n_in / rows;
        assert!(layout.finite_scales());
        let names = ["one stream, checked scales", "one stream, finite scales", "schedule, checked scales", "schedule, finite scales"];
        let mut times = [Vec::new(), Vec::new(), Vec::new(), Vec::new()];
        let mut sink = 0f32;
        for i in 0..28 {
            let v = i % 4;
            xp.finite_scales = v % 2 == 1;
            let t0 = now();
            for _ in 0..reps {
                if v < 2 {
                    for r in (0..rows).step_by(PASS1_ROWS) {
                        sink += pass1_n(&core::array::from_fn(|k| a_part(r + k)), 0, &xp)[0].a2;
                    }
                } else {
                    for set in super::streams::ordered::<PASS1_ROWS>(0..rows).0 {
                        sink += pass1_n(&set.map(a_part), 0, &xp)[0].a2;
                    }
                }
            }
            times[v].push(now() - t0);
        }
        std::hint::black_box(sink);
        for (t, what) in times.iter_mut().zip(names) {
            t.sort_by(|a, b| a.partial_cmp(b).unwrap());
            let ms = t[t.len() / 2];
            let bytes = (reps * rows * ra) as f64;
            log(&format!("pass1 n_in {n_in} {rows:>6} rows ({:>3} MB), {what:<27} ({STREAMS} streams): {:.2} ms, {:.2} GB/s of pass-1 bytes, {:.1} ns/row", (rows * row) >> 20, ms, bytes / ms / 1e6, ms * 1e6 / (reps * rows) as f64));
        }
    }
}
