//! Q8_0 (weights and activations) and Q8_1 (activations): 32 values per block, i8 quants.
//!
//! Layout (little endian):
//! - Q8_0, 34 bytes: `d: f16`, `qs: [i8; 32]`; value = d * q.
//! - Q8_1, 36 bytes: `d: f16`, `s: f16`, `qs: [i8; 32]`; value = d * q, and `s = d * Σ qs`
//!   (rounded to f16) lets Q4_1/Q5_1 dots add their offset `m` without touching the quants.
//!
//! Activation quantization is ggml's reference `quantize_row_q8_0_ref` / `_q8_1_ref`:
//! `amax = max |x|` (via `MAX(a, b) = a > b ? a : b`), `d = amax / 127`, `id = d ? 1/d : 0`,
//! `q = roundf(x * id)` (half away from zero), `d` stored as f16 (RNE), `s = f16(sum * d)`
//! with `sum` the i32 sum of the quants and `d` the f32 (not the rounded f16) scale. One
//! departure, for NaN only: a block holding a NaN has `d = NaN` (see `block_scale`).

use super::float::{f32_to_f16, read_f16};

pub(super) const QK: usize = 32;
pub(super) const Q8_0_BYTES: usize = 34;
pub(super) const Q8_1_BYTES: usize = 36;

pub(super) fn dequantize_q8_0(src: &[u8], dst: &mut [f32]) {
    for (b, y) in src.chunks_exact(Q8_0_BYTES).zip(dst.chunks_exact_mut(QK)) {
        let d = read_f16(b, 0);
        for (o, &q) in y.iter_mut().zip(b[2..34].iter()) {
            *o = q as i8 as f32 * d;
        }
    }
}

/// Q8_1 values are `d * q`; `s` is derived data and not part of the values.
pub(super) fn dequantize_q8_1(src: &[u8], dst: &mut [f32]) {
    for (b, y) in src.chunks_exact(Q8_1_BYTES).zip(dst.chunks_exact_mut(QK)) {
        let d = read_f16(b, 0);
        for (o, &q) in y.iter_mut().zip(b[4..36].iter()) {
            *o = q as i8 as f32 * d;
        }
    }
}

/// `(d, id)` of one block as the reference quantizer computes them. A block holding a NaN gets
/// `d = NaN` (and zero quants), wherever the NaN is: the reference's `MAX` keeps a NaN only when
/// it comes last, and a NaN dropped here would vanish from every product (a NaN weight scale
/// hidden from the checks downstream); with a NaN scale it reaches the residual stream, where
/// `MODEL_NON_FINITE` catches it. Finite blocks are the reference's, bit for bit.
#[inline]
pub(super) fn block_scale(x: &[f32]) -> (f32, f32) {
    let mut amax = 0f32;
    let mut nan = false;
    for &v in x {
        let a = v.abs();
        nan |= a.is_nan();
        amax = if amax > a { amax } else { a }; // C's MAX macro
    }
    if nan {
        return (f32::NAN, 0.0);
    }
    let d = amax / 127.0;
    let id = if d != 0.0 { 1.0 / d } else { 0.0 };
    (d, id)
}

/// C's `roundf` (half away from zero) then the float->int8 conversion, without a libm call.
/// |x*id| <= 127 (up to one ulp) for finite input; out-of-range values saturate and NaN maps
/// to 0, where C would be undefined. Exact: after the clamp `t` is the truncation of `v` and
/// `v - t` is computed exactly (Sterbenz), so comparing it with ±0.5 decides the tie rule.
#[inline]
fn round_q(v: f32) -> i8 {
    let v = v.clamp(-128.0, 127.0);
    let t = v as i32; // truncates toward zero; NaN -> 0
    let frac = v - t as f32;
    // Branch-free: the comparisons are unpredictable on real data.
    let r = t + (frac >= 0.5) as i32 - (frac <= -0.5) as i32;
    r.clamp(-128, 127) as i8
}

pub(super) fn quantize_q8_0(x: &[f32], dst: &mut [u8]) {
    for (xb, yb) in x.chunks_exact(QK).zip(dst.chunks_exact_mut(Q8_0_BYTES)) {
        let (d, id) = block_scale(xb);
        yb[0..2].copy_from_slice(&f32_to_f16(d).to_le_bytes());
        for (o, &v) in yb[2..34].iter_mut().zip(xb.iter()) {
            *o = round_q(v * id) as u8;
        }
    }
}

pub(super) fn quantize_q8_1(x: &[f32], dst: &mut [u8]) {
    for (xb, yb) in x.chunks_exact(QK).zip(dst.chunks_exact_mut(Q8_1_BYTES)) {
        let (d, id) = block_scale(xb);
        let mut sum = 0i32;
        for (o, &v) in yb[4..36].iter_mut().zip(xb.iter()) {
            let q = round_q(v * id);
            sum += q as i32;
            *o = q as u8;
        }
        yb[0..2].copy_from_slice(&f32_to_f16(d).to_le_bytes());
        yb[2..4].copy_from_slice(&f32_to_f16(sum as f32 * d).to_le_bytes());
    }
}

/// Q8_0 x Q8_0, as ggml's generic dot: exact i32 sum per block, `sumf += sumi * (dx*dy)`.
pub(super) fn vec_dot_q8_0_q8_0(w: &[u8], a: &[u8], n: usize) -> f32 {
    let nb = n / QK;
    let (w, a) = (&w[..nb * Q8_0_BYTES], &a[..nb * Q8_0_BYTES]);
    let mut sumf = 0f32;
    for (x, y) in w.chunks_exact(Q8_0_BYTES).zip(a.chunks_exact(Q8_0_BYTES)) {
        let mut sumi = 0i32;
        for (&p, &q) in x[2..34].iter().zip(y[2..34].iter()) {
            sumi += p as i8 as i32 * q as i8 as i32;
        }
        sumf += sumi as f32 * (read_f16(x, 0) * read_f16(y, 0));
    }
    sumf
}

#[cfg(test)]
mod tests {
    use super::round_q;

    /// The libm-free rounding equals `roundf` + saturating cast on every f32 in [-130, 130]
    /// near the interesting points (ties, one ulp either side) and on a dense sweep.
    #[test]
    fn round_q_is_roundf() {
        let check =
            |v: f32| assert_eq!(round_q(v), v.round() as i8, "{v:e} ({:#010x})", v.to_bits());
        for k in -260..=260 {
            let tie = k as f32 * 0.5;
            for v in [tie, -tie] {
                check(v);
                check(f32::from_bits(v.to_bits().wrapping_add(1)));
                if v != 0.0 {
                    check(f32::from_bits(v.to_bits() - 1));
                }
            }
        }
        let mut v = -130f32;
        while v < 130.0 {
            check(v);
            v += 0.000_977;
        }
        for v in [
            0.499_999_97f32,
            -0.499_999_97,
            f32::MIN_POSITIVE,
            1e-45,
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::NAN,
        ] {
            check(v);
        }
    }
}
