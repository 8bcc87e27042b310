//! Activations and softmax.

use std::sync::OnceLock;

use super::math::{exp_f32, tanh_f32};
use crate::quant::{f16_to_f32, f32_to_f16};

const SQRT_2_OVER_PI: f32 = 0.797_884_6;
const GELU_COEF_A: f32 = 0.044715;

/// GELU, tanh approximation (`gelu_pytorch_tanh`, ggml's `ggml_gelu`).
#[inline]
pub fn gelu_tanh(x: f32) -> f32 {
    0.5 * x * (1.0 + tanh_f32(SQRT_2_OVER_PI * x * (1.0 + GELU_COEF_A * x * x)))
}

/// [`gelu_tanh_f16`] takes its table only strictly inside ±this (llama.cpp's bounds).
const GELU_TABLE_RANGE: f32 = 10.0;

/// GELU as llama.cpp's CPU backend computes it (`GGML_GELU_FP16`): `x ≤ -10 → 0`,
/// `x ≥ 10 → x`, otherwise `f16(gelu_tanh(f16(x)))` from a 65536-entry table indexed by the f16
/// bits of `x` (built on first use).
#[inline]
pub fn gelu_tanh_f16(x: f32) -> f32 {
    if x <= -GELU_TABLE_RANGE {
        0.0
    } else if x >= GELU_TABLE_RANGE {
        x
    } else {
        f16_to_f32(gelu_table()[f32_to_f16(x) as usize])
    }
}

/// `g[i] = gelu_tanh_f16(g[i]) · u[i]`: the FFN's gated GELU. In wasm four at a time: the f16
/// rounding of the inputs and the conversion of the looked-up values in SIMD128, the four table
/// loads independent (one element at a time, a branchy conversion each, the table's cache
/// misses were about a quarter of the loop's time); the same bits (tested).
pub fn gelu_mul_in_place(g: &mut [f32], u: &[f32]) {
    assert_eq!(g.len(), u.len(), "gate and up rows agree");
    #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
    simd::gelu_mul(g, u, gelu_table());
    #[cfg(not(all(target_arch = "wasm32", target_feature = "simd128")))]
    gelu_mul_scalar(g, u);
}

/// [`gelu_mul_in_place`] element by element (the SIMD path's NaN groups and tail too).
fn gelu_mul_scalar(g: &mut [f32], u: &[f32]) {
    g.iter_mut().zip(u).for_each(|(g, &u)| *g = gelu_tanh_f16(*g) * u);
}

#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
mod simd {
    use core::arch::wasm32::*;

    use super::{gelu_mul_scalar, GELU_TABLE_RANGE};
    use crate::quant::{f16_bits_to_f32x4, f32x4_to_f16_bits};

    pub(super) fn gelu_mul(g: &mut [f32], u: &[f32], table: &[u16]) {
        let table = &table[..1 << 16];
        let (lo, hi) = (f32x4_splat(-GELU_TABLE_RANGE), f32x4_splat(GELU_TABLE_RANGE));
        let mut gc = g.chunks_exact_mut(4);
        let mut uc = u.chunks_exact(4);
        for (g4, u4) in (&mut gc).zip(&mut uc) {
            // SAFETY: each chunk is four f32 (16 readable, writable bytes).
            let (x, uv) = unsafe { (v128_load(g4.as_ptr() as *const v128), v128_load(u4.as_ptr() as *const v128)) };
            if v128_any_true(f32x4_ne(x, x)) {
                // A NaN: its f16 rounding keeps payload bits this conversion does not.
                gelu_mul_scalar(g4, u4);
                continue;
            }
            let (below, above) = (f32x4_le(x, lo), f32x4_ge(x, hi));
            // Lanes outside the table's range look up a valid index too (the bound's), then take
            // their own value.
            let h = f32x4_to_f16_bits(f32x4_pmax(f32x4_pmin(x, hi), lo));
            let t = |bits: u32| table[bits as usize & 0xffff] as u32;
            let looked = u32x4(t(u32x4_extract_lane::<0>(h)), t(u32x4_extract_lane::<1>(h)), t(u32x4_extract_lane::<2>(h)), t(u32x4_extract_lane::<3>(h)));
            let v = v128_bitselect(f32x4_splat(0.0), v128_bitselect(x, f16_bits_to_f32x4(looked), above), below);
            // SAFETY: as the load.
            unsafe { v128_store(g4.as_mut_ptr() as *mut v128, f32x4_mul(v, uv)) };
        }
        gelu_mul_scalar(gc.into_remainder(), uc.remainder());
    }
}

fn gelu_table() -> &'static [u16] {
    static TABLE: OnceLock<Vec<u16>> = OnceLock::new();
    TABLE.get_or_init(|| (0..=u16::MAX).map(|h| f32_to_f16(gelu_tanh(f16_to_f32(h)))).collect())
}

/// SiLU / swish: `x * sigmoid(x)`.
#[inline]
pub fn silu(x: f32) -> f32 {
    x / (1.0 + exp_f32(-x))
}

/// Softmax of `x` in place (max subtracted first; the sum accumulated in f64).
/// An empty slice is left alone; all `-inf` gives all zeros.
pub fn softmax_in_place(x: &mut [f32]) {
    let max = x.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    if max == f32::NEG_INFINITY {
        x.iter_mut().for_each(|v| *v = 0.0);
        return;
    }
    let mut sum = 0.0f64;
    for v in x.iter_mut() {
        *v = exp_f32(*v - max);
        sum += *v as f64;
    }
    let inv = (1.0 / sum) as f32;
    x.iter_mut().for_each(|v| *v *= inv);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gelu_ref(x: f64) -> f64 {
        0.5 * x * (1.0 + ((2.0 / std::f64::consts::PI).sqrt() * (x + 0.044715 * x * x * x)).tanh())
    }

    #[test]
    fn gelu_matches_formula() {
        for &x in &[-12.0f32, -3.0, -1.0, -0.1, 0.0, 0.1, 0.5, 1.0, 2.5, 12.0] {
            let d = (gelu_tanh(x) as f64 - gelu_ref(x as f64)).abs();
            assert!(d < 1e-5 * (1.0 + x.abs() as f64), "x={x} d={d}");
        }
        assert_eq!(gelu_tanh(0.0), 0.0);
    }

    #[test]
    fn gelu_f16_table_is_gelu_of_rounded_input() {
        for &x in &[-12.0f32, -10.0, -9.99, -3.3, -0.7, 0.0, 0.001, 0.3, 1.7, 9.5, 10.0, 55.0] {
            let want = if x <= -10.0 {
                0.0
            } else if x >= 10.0 {
                x
            } else {
                f16_to_f32(f32_to_f16(gelu_tanh(f16_to_f32(f32_to_f16(x)))))
            };
            assert_eq!(gelu_tanh_f16(x), want, "x={x}");
            // Within f16 precision of the exact value.
            assert!((gelu_tanh_f16(x) - gelu_tanh(x)).abs() <= 2e-3 * (1.0 + x.abs()), "x={x}");
        }
    }

    /// `gelu_mul_in_place` (in wasm the SIMD128 path) against the element-by-element formula,
    /// bit for bit: every f16 value, the midpoints between neighbours (ties round to even) and
    /// a little off them, f16 subnormals, ±10 and their neighbours, signed zeros, ±Inf and NaN
    /// (in groups of four and in the tail), times factors of both signs.
    #[cfg_attr(not(target_arch = "wasm32"), test)]
    #[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
    fn gelu_mul_equals_the_formula() {
        let mut xs: Vec<f32> = Vec::new();
        for h in 0..=u16::MAX {
            let v = f16_to_f32(h);
            let next = f16_to_f32(h.wrapping_add(1));
            xs.push(v);
            if v.is_finite() && next.is_finite() && (h & 0x7fff) != 0x7bff {
                let mid = ((v as f64 + next as f64) / 2.0) as f32;
                xs.extend([mid, f32::from_bits(mid.to_bits() + 1), f32::from_bits(mid.to_bits().wrapping_sub(1))]);
            }
        }
        for b in [10f32, -10.0] {
            xs.extend([b, f32::from_bits(b.to_bits() + 1), f32::from_bits(b.to_bits() - 1)]);
        }
        xs.extend([0.0, -0.0, 1e-8, -1e-8, 3e-5, -6.1e-5, f32::INFINITY, f32::NEG_INFINITY, f32::NAN, -f32::NAN, f32::from_bits(0x7f80_1234)]);
        xs.extend([1.0, f32::NAN, 2.0]); // a NaN in the tail
        let u: Vec<f32> = (0..xs.len()).map(|i| [1.0f32, -0.75, 3.5, -2.0, 0.0][i % 5]).collect();
        let mut got = xs.clone();
        gelu_mul_in_place(&mut got, &u);
        for (i, (&x, &g)) in xs.iter().zip(&got).enumerate() {
            let want = gelu_tanh_f16(x) * u[i];
            assert!(g.to_bits() == want.to_bits() || (g.is_nan() && want.is_nan() && x.is_nan()), "x={x} ({:#x}) u={}: {g} vs {want}", x.to_bits(), u[i]);
        }
    }

    #[test]
    fn silu_values() {
        assert_eq!(silu(0.0), 0.0);
        assert!((silu(1.0) - 0.731_058_6).abs() < 1e-6);
        assert!((silu(-20.0)).abs() < 1e-7);
        assert!((silu(20.0) - 20.0).abs() < 1e-5);
    }

    #[test]
    fn softmax_sums_to_one_and_orders() {
        let mut x = [1.0f32, 2.0, 3.0, f32::NEG_INFINITY];
        softmax_in_place(&mut x);
        let s: f32 = x.iter().sum();
        assert!((s - 1.0).abs() < 1e-6);
        assert!(x[2] > x[1] && x[1] > x[0] && x[3] == 0.0);
        // e^-1 / e^0 ratio
        assert!((x[1] / x[2] - (-1f32).exp()).abs() < 1e-6);
        // Large values do not overflow.
        let mut y = [1000.0f32, 1000.0];
        softmax_in_place(&mut y);
        assert_eq!(y, [0.5, 0.5]);
    }
}
