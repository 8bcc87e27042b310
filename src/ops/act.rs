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

/// GELU as llama.cpp's CPU backend computes it (`GGML_GELU_FP16`): `x ≤ -10 → 0`,
/// `x ≥ 10 → x`, otherwise `f16(gelu_tanh(f16(x)))` from a 65536-entry table indexed by the f16
/// bits of `x` (built on first use).
#[inline]
pub fn gelu_tanh_f16(x: f32) -> f32 {
    if x <= -10.0 {
        0.0
    } else if x >= 10.0 {
        x
    } else {
        f16_to_f32(gelu_table()[f32_to_f16(x) as usize])
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
