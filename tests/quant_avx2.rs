//! The kernels `quant` dispatches on this CPU (AVX2 on x86-64 CPUs that have it) against the
//! scalar reference, bit for bit, in every shape the matmul calls them: one dot, four weight
//! rows (decode), four and eight tokens (prefill), and `ops::matmul` itself with every
//! remainder path. Cases: random blocks (raw activations with any quants, -128 included, and
//! activations quantized from floats), edge blocks (constant bytes, extreme, zero and subnormal
//! f16 scales, Inf/NaN scales), 1..=9-block rows, and real rows of the default model. NaN is
//! compared as a class (payloads are not specified by IEEE).
//!
//! First of all, the dispatch itself: on an AVX2 CPU every quantized type must get the AVX2
//! kernels (so a broken dispatch fails here instead of silently running scalar code).

mod common;
mod quant_fixture;

use edgellm::gguf::GgmlType::{self, *};
use edgellm::ops::{matmul, MatmulScratch, Weight};
use edgellm::quant::{
    activation_scales4, activation_scales4_at, has_simd_vec_dot, kernel_tier, quantize_activation,
    vec_dot_kernel, vec_dot_kernel_scalar, vec_dot_rows4_kernel, vec_dot_toks4_kernel, vec_dot_toks8_kernel,
    vec_dot_type,
};
use quant_fixture::{random_row, scale_fields, Rng};
use std::io::{Read, Seek, SeekFrom};

const TYPES: [GgmlType; 10] = [Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K];

fn cpu_has_avx2() -> bool {
    #[cfg(target_arch = "x86_64")]
    return is_x86_feature_detected!("avx2");
    #[cfg(not(target_arch = "x86_64"))]
    false
}

#[test]
fn dispatch_picks_avx2_on_an_avx2_cpu() {
    let avx2 = cpu_has_avx2();
    eprintln!("kernel tier: {}", kernel_tier());
    assert_eq!(kernel_tier(), if avx2 { "avx2" } else { "scalar" });
    for ty in TYPES {
        let picked = vec_dot_kernel(ty).unwrap() as usize != vec_dot_kernel_scalar(ty).unwrap() as usize;
        assert_eq!(picked, avx2, "{ty}: one-row kernel");
        assert_eq!(has_simd_vec_dot(ty), avx2, "{ty}");
        assert_eq!(vec_dot_rows4_kernel(ty).is_some(), avx2, "{ty}: rows4");
        assert_eq!(vec_dot_toks4_kernel(ty).is_some(), avx2, "{ty}: toks4");
        assert_eq!(vec_dot_toks8_kernel(ty).is_some(), avx2, "{ty}: toks8");
    }
    // The float types keep their scalar kernels (an f64 running sum, in element order).
    for ty in [F32, F16, BF16] {
        assert!(!has_simd_vec_dot(ty), "{ty}");
        assert_eq!(vec_dot_kernel(ty).unwrap() as usize, vec_dot_kernel_scalar(ty).unwrap() as usize);
    }
}

fn row_bytes(ty: GgmlType, n: usize) -> usize {
    n / ty.block_size() as usize * ty.type_size() as usize
}

fn same_bits(got: f32, want: f32) -> bool {
    if want.is_nan() {
        got.is_nan()
    } else {
        got.to_bits() == want.to_bits()
    }
}

/// Asserts every dispatched kernel shape equals the scalar dot of the same rows: `w` holds
/// four weight rows (`rb` bytes apart), `a` eight activation rows (`ab` bytes apart).
fn check_all_shapes(ty: GgmlType, w: &[u8], rb: usize, a: &[u8], ab: usize, n: usize, what: &str) {
    let scalar = vec_dot_kernel_scalar(ty).unwrap();
    let wr = |r: usize| &w[r * rb..r * rb + row_bytes(ty, n)];
    let ar = |t: usize| &a[t * ab..t * ab + row_bytes(vec_dot_type(ty), n)];
    let want = |r: usize, t: usize| scalar(wr(r), ar(t), n);
    let check = |got: f32, r: usize, t: usize, shape: &str| {
        let w = want(r, t);
        assert!(same_bits(got, w), "{ty} {what} n={n} {shape} row {r} tok {t}: got {got:e} ({:#x}) scalar {w:e} ({:#x})", got.to_bits(), w.to_bits());
    };
    let dot = vec_dot_kernel(ty).unwrap();
    for r in 0..4 {
        check(dot(wr(r), ar(r), n), r, r, "dot");
    }
    if let Some(k) = vec_dot_rows4_kernel(ty) {
        let mut buf = Vec::new();
        for t in [0, 5] {
            let act = k.prepare(ar(t), n, &mut buf);
            let got = (k.dot)(&w[..3 * rb + row_bytes(ty, n)], rb, act, n);
            for (r, &g) in got.iter().enumerate() {
                check(g, r, t, "rows4");
            }
        }
    }
    let mut d = Vec::new();
    activation_scales4(vec_dot_type(ty), a, ab, 8, n, &mut d);
    if let Some(k) = vec_dot_toks4_kernel(ty) {
        for t0 in [0, 4] {
            let got = k(wr(1), &a[t0 * ab..], ab, activation_scales4_at(&d, t0, n), n);
            for (k, &g) in got.iter().enumerate() {
                check(g, 1, t0 + k, "toks4");
            }
        }
    }
    if let Some(k) = vec_dot_toks8_kernel(ty) {
        let got = k(wr(2), a, ab, &d, n);
        for (k, &g) in got.iter().enumerate() {
            check(g, 2, k, "toks8");
        }
    }
}

fn set_f16_scales(ty: GgmlType, row: &mut [u8], f: &mut dyn FnMut() -> u16) {
    for b in row.chunks_exact_mut(ty.type_size() as usize) {
        for &o in scale_fields(ty) {
            b[o..o + 2].copy_from_slice(&f().to_le_bytes());
        }
    }
}

/// Activation rows with their scales set by `f16` (Q8_0/Q8_1: d, and s) or `f32` (Q8_K: d).
fn set_act_scales(a_ty: GgmlType, row: &mut [u8], f16: &mut dyn FnMut() -> u16, f32: &mut dyn FnMut() -> f32) {
    for b in row.chunks_exact_mut(a_ty.type_size() as usize) {
        match a_ty {
            Q8_K => b[0..4].copy_from_slice(&f32().to_le_bytes()),
            Q8_1 => {
                b[0..2].copy_from_slice(&f16().to_le_bytes());
                b[2..4].copy_from_slice(&f16().to_le_bytes());
            }
            _ => b[0..2].copy_from_slice(&f16().to_le_bytes()),
        }
    }
}

/// Rows of 1..=9 blocks (super-blocks for the k-quants): every lane-group remainder of the
/// eight-block and two-block loops.
fn lengths(ty: GgmlType) -> impl Iterator<Item = usize> {
    let bs = ty.block_size() as usize;
    (1..=9).map(move |m| m * bs)
}

#[test]
fn random_blocks_match_scalar_bits() {
    let mut rng = Rng(19);
    for ty in TYPES {
        let a_ty = vec_dot_type(ty);
        for n in lengths(ty) {
            for trial in 0..6 {
                // Rows a little apart (rb > the row) so a kernel that ignores the stride fails.
                let (rb, ab) = (row_bytes(ty, n) + 3 * ty.type_size() as usize, row_bytes(a_ty, n) + 7);
                let w: Vec<u8> = (0..4).flat_map(|_| {
                    let mut r = random_row(&mut rng, ty, n);
                    r.resize(rb, 0xee);
                    r
                }).collect();
                // Raw activation blocks (any quants, -128 included) with sane scales ...
                let mut a = rng.bytes(8 * ab);
                for t in 0..8 {
                    let row = &mut a[t * ab..t * ab + row_bytes(a_ty, n)];
                    let mut h = || rng.sane_f16();
                    let mut s = Rng(trial * 31 + t as u64);
                    set_act_scales(a_ty, row, &mut h, &mut || s.normal() * 0.01);
                }
                check_all_shapes(ty, &w, rb, &a, ab, n, "raw");
                // ... and activations quantized from floats, as the matmul makes them.
                let mut q = vec![0u8; 8 * ab];
                let mut row = Vec::new();
                for t in 0..8 {
                    let x: Vec<f32> = (0..n).map(|_| rng.normal() * (1 + trial) as f32).collect();
                    quantize_activation(a_ty, &x, &mut row).unwrap();
                    q[t * ab..t * ab + row.len()].copy_from_slice(&row);
                }
                check_all_shapes(ty, &w, rb, &q, ab, n, "quantized");
            }
        }
    }
}

#[test]
fn edge_blocks_match_scalar_bits() {
    // f16 bits: 1, 0, -0, max, -max, min normal, min subnormal, a mid subnormal, Inf, NaN.
    let scales: [u16; 10] = [0x3c00, 0x0000, 0x8000, 0x7bff, 0xfbff, 0x0400, 0x0001, 0x0234, 0x7c00, 0x7e01];
    let act_f32 = [1.0f32, 0.0, 3.0e38, -1.0e-40];
    for ty in TYPES {
        let a_ty = vec_dot_type(ty);
        for n in [ty.block_size() as usize * 3] {
            let (rb, ab) = (row_bytes(ty, n), row_bytes(a_ty, n));
            for wb in [0x00u8, 0xff, 0x80, 0x7f, 0x55, 0xaa] {
                for abyte in [0x80u8, 0x7f, 0x00, 0xff] {
                    for (i, &ws) in scales.iter().enumerate() {
                        let mut w = vec![wb; 4 * rb];
                        // Rows differ in their scales (lane mix-ups must show).
                        let mut k = i;
                        set_f16_scales(ty, &mut w, &mut || { k += 1; if k % 3 == 0 { ws } else { scales[k % scales.len()] } });
                        let mut a = vec![abyte; 8 * ab];
                        let mut j = i;
                        let mut m = i;
                        set_act_scales(a_ty, &mut a, &mut || { j += 1; scales[j % 4] }, &mut || { m += 1; act_f32[m % 4] });
                        check_all_shapes(ty, &w, rb, &a, ab, n, &format!("edge w={wb:#x} a={abyte:#x} s={ws:#x}"));
                    }
                }
            }
        }
    }
}

/// `ops::matmul` (which picks rows4 for one token, toks8/toks4/one-row for the rest, and the
/// one-row kernel for the rows past a multiple of four) equals the scalar dot at every output.
#[test]
fn matmul_matches_scalar_dots() {
    let mut rng = Rng(5);
    for ty in TYPES {
        let a_ty = vec_dot_type(ty);
        let n_in = 2 * ty.block_size() as usize * if ty.block_size() == 32 { 5 } else { 1 };
        // Past the first group of four, rows4 prefetches the next rows it is handed.
        let n_out = 13;
        let data: Vec<u8> = (0..n_out).flat_map(|_| random_row(&mut rng, ty, n_in)).collect();
        let w = Weight::new(ty, n_in, n_out, data).unwrap();
        let scalar = vec_dot_kernel_scalar(ty).unwrap();
        for n_tok in [1usize, 13] {
            let x: Vec<f32> = (0..n_tok * n_in).map(|_| rng.normal()).collect();
            let mut out = vec![0f32; n_tok * n_out];
            matmul(&w, &x, &mut out, &mut MatmulScratch::default()).unwrap();
            let mut act = Vec::new();
            for t in 0..n_tok {
                quantize_activation(a_ty, &x[t * n_in..(t + 1) * n_in], &mut act).unwrap();
                for r in 0..n_out {
                    let want = scalar(w.row(r), &act, n_in);
                    assert_eq!(out[t * n_out + r].to_bits(), want.to_bits(), "{ty} n_tok={n_tok} tok {t} row {r}");
                }
            }
        }
    }
}

/// Real rows of the default model: eight rows of the first tensor of each quantized type
/// (Q5_0, Q8_0, Q4_K, Q6_K), against random quantized activations.
#[test]
fn real_model_rows_match_scalar_bits() {
    let Some(path) = common::real_model() else { return };
    let (header, _) = edgellm::gguf::read_header_file(&path).unwrap();
    let mut f = std::fs::File::open(&path).unwrap();
    let mut rng = Rng(3);
    let mut seen = Vec::new();
    for t in &header.tensors {
        let ty = t.ggml_type;
        if !TYPES.contains(&ty) || seen.contains(&ty) || t.dims.len() != 2 {
            continue;
        }
        seen.push(ty);
        let n = t.dims[0] as usize;
        let rb = row_bytes(ty, n);
        let mut w = vec![0u8; 4 * rb];
        f.seek(SeekFrom::Start(header.data_offset + t.offset)).unwrap();
        f.read_exact(&mut w).unwrap();
        let a_ty = vec_dot_type(ty);
        let ab = row_bytes(a_ty, n);
        let mut a = vec![0u8; 8 * ab];
        let mut row = Vec::new();
        for k in 0..8 {
            let x: Vec<f32> = (0..n).map(|_| rng.normal()).collect();
            quantize_activation(a_ty, &x, &mut row).unwrap();
            a[k * ab..(k + 1) * ab].copy_from_slice(&row);
        }
        check_all_shapes(ty, &w, rb, &a, ab, n, &t.name);
    }
    seen.sort_by_key(|t| t.id());
    assert_eq!(seen, [Q5_0, Q8_0, Q4_K, Q6_K], "quantized types in the model");
}
