//! Scalar `vec_dot` for every weight type against its activation type, on random rows.
//!
//! Two checks per row:
//! 1. Consistency (catches layout/pairing bugs): `vec_dot(w, Q(x))` equals the f64 dot of
//!    `dequantize(w)` and `dequantize(Q(x))` up to float rounding:
//!    `tol_round = (8 + blocks) * 2^-23 * Σ|w_i a_i|` (a few roundings per term, one per
//!    block accumulation; `2^-23 * Σ|w_i a_i|` for float rows, summed in f64), plus, for Q4_1/Q5_1, `Σ_b |m_b * s_b| * 2^-10` because the dot uses
//!    Q8_1's f16-rounded `s = d * Σq` where the reference sums the exact values.
//! 2. Accuracy against the unquantized activation: `|vec_dot(w, Q(x)) - Σ w_i x_i|` is bounded
//!    by the q8 rounding: per block, every activation is off by at most
//!    `e_b = d_b * (1/2 + 127 * 2^-11 + 2^-16)` for Q8_0/Q8_1 (half a step, plus the f16
//!    rounding of the scale d_b = amax_b / 127 applied to |q| <= 127, plus slack for the
//!    rounding of x * (1/d)), and `e_b = d_b * (1/2 + 2^-16)` for Q8_K (f32 scale), and 0 for
//!    F32 and f16/bf16's own relative rounding (2^-11 / 2^-8 of |x_i|) for F16/BF16. So
//!    `tol = Σ_b e_b * Σ_{i in b} |w_i| + tol_round`. Each per-element bound is itself
//!    asserted, so the aggregate bound is not loose by construction.

mod common;
mod quant_fixture;

use edgellm::gguf::GgmlType;
use edgellm::quant::{
    check_vec_dot, dequantize, quantize_activation, vec_dot, vec_dot_kernel, vec_dot_type,
};
use quant_fixture::{random_row, Rng, WEIGHT_TYPES};

/// Per-element bound on |x_i - dequant(Q(x))_i| for the activation block of element i.
fn act_error_bound(a_ty: GgmlType, xb: &[f32]) -> Vec<f64> {
    let amax = xb.iter().fold(0f64, |m, v| m.max(v.abs() as f64));
    let d = amax / 127.0;
    match a_ty {
        GgmlType::Q8_0 | GgmlType::Q8_1 => {
            vec![d * (0.5 + 127.0 / 2048.0 + 1.0 / 65536.0); xb.len()]
        }
        GgmlType::Q8_K => vec![d * (0.5 + 1.0 / 65536.0); xb.len()],
        GgmlType::F32 => vec![0.0; xb.len()],
        GgmlType::F16 => xb.iter().map(|v| v.abs() as f64 / 2048.0 + 3e-8).collect(),
        GgmlType::BF16 => xb.iter().map(|v| v.abs() as f64 / 256.0).collect(),
        _ => unreachable!(),
    }
}

fn check_row(label: &str, ty: GgmlType, w_row: &[u8], x: &[f32]) {
    let n = x.len();
    let a_ty = vec_dot_type(ty);
    let mut act = Vec::new();
    quantize_activation(a_ty, x, &mut act).unwrap();
    let got = vec_dot(ty, w_row, &act, n).unwrap();
    // The unchecked kernel is the same function.
    check_vec_dot(ty, w_row.len(), act.len(), n).unwrap();
    let kernel = vec_dot_kernel(ty).unwrap();
    assert_eq!(
        kernel(w_row, &act, n).to_bits(),
        got.to_bits(),
        "{label}: kernel != checked"
    );
    let got = got as f64;

    let mut w = vec![0f32; n];
    dequantize(ty, w_row, &mut w).unwrap();
    let mut a = vec![0f32; n];
    dequantize(a_ty, &act, &mut a).unwrap();

    // 1. consistency with the dequantized operands
    let (mut want, mut abs) = (0f64, 0f64);
    for (wi, ai) in w.iter().zip(a.iter()) {
        want += *wi as f64 * *ai as f64;
        abs += (*wi as f64 * *ai as f64).abs();
    }
    let mut tol_round = if ty.block_size() == 1 {
        // float rows: one rounding per product, f64 sum, one final rounding
        f32::EPSILON as f64 * abs
    } else {
        let blocks = (n as u64 / ty.block_size().max(a_ty.block_size())) as f64;
        (8.0 + blocks) * f32::EPSILON as f64 * abs
    };
    if a_ty == GgmlType::Q8_1 {
        let ts = ty.type_size() as usize;
        for (wb, ab) in w_row.chunks_exact(ts).zip(act.chunks_exact(36)) {
            let m = edgellm::quant::f16_to_f32(u16::from_le_bytes([wb[2], wb[3]])) as f64;
            let s = edgellm::quant::f16_to_f32(u16::from_le_bytes([ab[2], ab[3]])) as f64;
            tol_round += (m * s).abs() / 1024.0;
        }
    }
    assert!(
        (got - want).abs() <= tol_round,
        "{label}: vec_dot {got} vs dequantized dot {want}: diff {:e} > tol {tol_round:e}",
        (got - want).abs()
    );

    // 2. accuracy against the exact activation
    let bs = a_ty.block_size() as usize;
    let (mut exact, mut tol) = (0f64, tol_round);
    for (b, xb) in x.chunks(bs).enumerate() {
        let bound = act_error_bound(a_ty, xb);
        for (j, xi) in xb.iter().enumerate() {
            let i = b * bs + j;
            let err = (*xi as f64 - a[i] as f64).abs();
            assert!(
                err <= bound[j],
                "{label}: activation [{i}] off by {err:e} > {:e}",
                bound[j]
            );
            exact += w[i] as f64 * *xi as f64;
            tol += w[i].abs() as f64 * bound[j];
        }
    }
    assert!(
        (got - exact).abs() <= tol,
        "{label}: vec_dot {got} vs exact {exact}: diff {:e} > tol {tol:e}",
        (got - exact).abs()
    );
}

fn activation(rng: &mut Rng, n: usize, outliers: bool) -> Vec<f32> {
    (0..n)
        .map(|_| {
            let v = rng.normal();
            if outliers && rng.below(64) == 0 {
                v * 40.0
            } else {
                v
            }
        })
        .collect()
}

#[test]
fn vec_dot_matches_dequantized_dot_for_every_type() {
    let mut rng = Rng(0x5eed);
    for ty in WEIGHT_TYPES {
        for (k, n) in [256usize, 512, 1024, 2048, 4096]
            .into_iter()
            .cycle()
            .take(40)
            .enumerate()
        {
            let w = random_row(&mut rng, ty, n);
            let x = activation(&mut rng, n, k % 2 == 1);
            check_row(&format!("{ty} row {k} n={n}"), ty, &w, &x);
        }
    }
}

/// Degenerate activations and weights: all-zero activation (Q8_K's zero block path, Q8_0's
/// id = 0), a single spike per block, all-max quant bytes, and large scales.
#[test]
fn vec_dot_edge_rows() {
    let mut rng = Rng(99);
    let n = 512;
    for ty in WEIGHT_TYPES {
        let w = random_row(&mut rng, ty, n);
        check_row(&format!("{ty} zero activation"), ty, &w, &vec![0.0; n]);
        let spike: Vec<f32> = (0..n)
            .map(|i| if i % 32 == 5 { -7.25 } else { 0.0 })
            .collect();
        check_row(&format!("{ty} spikes"), ty, &w, &spike);
        if ty.block_size() > 1 {
            let ts = ty.type_size() as usize;
            let mut full = vec![0xffu8; n / ty.block_size() as usize * ts];
            let mut big = full.clone();
            for (bf, bb) in full.chunks_exact_mut(ts).zip(big.chunks_exact_mut(ts)) {
                for &f in quant_fixture::scale_fields(ty) {
                    bf[f..f + 2].copy_from_slice(&0x2000u16.to_le_bytes()); // 2^-7
                    bb[f..f + 2].copy_from_slice(&0x7bffu16.to_le_bytes()); // 65504
                }
            }
            let x = activation(&mut rng, n, true);
            check_row(&format!("{ty} all-ones quant bytes"), ty, &full, &x);
            check_row(&format!("{ty} max scales"), ty, &big, &x);
        }
    }
}

#[test]
fn vec_dot_of_zero_elements_is_zero() {
    for ty in WEIGHT_TYPES {
        assert_eq!(vec_dot(ty, &[], &[], 0).unwrap(), 0.0, "{ty}");
    }
}
