//! Q8_K: the activation format paired with every k-quant. 256 values per block.
//!
//! Layout (292 bytes, little endian): `d: f32`, `qs: [i8; 256]`, `bsums: [i16; 16]` where
//! `bsums[j]` is the sum of `qs[16j .. 16j + 16]` (k-quant dots use it to apply their per
//! sub-block minimums without touching the quants). Value = d * q.
//!
//! Quantization is ggml's `quantize_row_q8_K_ref`: find the value with the largest magnitude
//! (`max`, sign kept, first one wins ties), `iscale = -127 / max`, `q = min(127,
//! nearest_int(iscale * x))`, `d = 1 / iscale` (so `d` has the opposite sign of `max`). An
//! all-zero block stores d = 0 and zero quants (the reference leaves its bsums unwritten; they
//! are zero here). A block holding a NaN stores d = NaN and zero quants (the reference's
//! `a > amax` skips a NaN, which then vanished from the dots).

use super::float::read_f32;

pub(super) const QK_K: usize = 256;
pub(super) const Q8_K_BYTES: usize = 292;
pub(super) const QS_AT: usize = 4;
pub(super) const BSUMS_AT: usize = 260;

/// ggml's `nearest_int`: round half to even by adding 1.5 * 2^23 and reading the low mantissa
/// bits. Valid for |v| <= 2^22 - 1, always true here (|v| <= 127 + an ulp); outside that range
/// (NaN from a NaN input) it still returns some i32 and never panics.
#[inline]
pub(super) fn nearest_int(v: f32) -> i32 {
    let val = v + 12_582_912.0;
    (val.to_bits() as i32 & 0x007f_ffff) - 0x0040_0000
}

pub(super) fn quantize_q8_k(x: &[f32], dst: &mut [u8]) {
    for (xb, yb) in x.chunks_exact(QK_K).zip(dst.chunks_exact_mut(Q8_K_BYTES)) {
        let mut max = 0f32;
        let mut amax = 0f32;
        let mut nan = false;
        for &v in xb {
            let a = v.abs();
            nan |= a.is_nan();
            if a > amax {
                amax = a;
                max = v;
            }
        }
        // A NaN (which `a > amax` skips) makes the block's scale NaN, so it reaches every product
        // instead of vanishing (as in Q8_0's `block_scale`).
        if nan {
            yb.fill(0);
            yb[0..4].copy_from_slice(&f32::NAN.to_le_bytes());
            continue;
        }
        if amax == 0.0 {
            yb.fill(0);
            continue;
        }
        let iscale = -127.0 / max;
        let mut q = [0i8; QK_K];
        for (o, &v) in q.iter_mut().zip(xb.iter()) {
            // min(127, v) as the reference; the lower side cannot pass -127 (|iscale*x| <= 127
            // up to rounding), but clamp it anyway so the cast can never wrap.
            *o = nearest_int(iscale * v).clamp(-128, 127) as i8;
        }
        yb[0..4].copy_from_slice(&(1.0 / iscale).to_le_bytes());
        for (o, &v) in yb[QS_AT..QS_AT + QK_K].iter_mut().zip(q.iter()) {
            *o = v as u8;
        }
        write_bsums(yb);
    }
}

/// Writes a Q8_K block's bsums from its quants: the sum of each 16 consecutive quants, as i16
/// (|Σ| ≤ 16·128). Kernels read them in place of summing the quants (Q4_K's mins, the relaxed
/// Q6_K's offset), so every block must carry them.
pub(super) fn write_bsums(yb: &mut [u8]) {
    for j in 0..16 {
        let s: i32 = yb[QS_AT + 16 * j..QS_AT + 16 * j + 16].iter().map(|&q| q as i8 as i32).sum();
        yb[BSUMS_AT + 2 * j..BSUMS_AT + 2 * j + 2].copy_from_slice(&(s as i16).to_le_bytes());
    }
}

pub(super) fn dequantize_q8_k(src: &[u8], dst: &mut [f32]) {
    for (b, y) in src.chunks_exact(Q8_K_BYTES).zip(dst.chunks_exact_mut(QK_K)) {
        let d = read_f32(b, 0);
        for (o, &q) in y.iter_mut().zip(b[QS_AT..QS_AT + QK_K].iter()) {
            *o = d * q as i8 as f32;
        }
    }
}

/// One decoded Q8_K block, the view every k-quant dot works from.
pub(super) struct Q8KBlock<'a> {
    pub d: f32,
    pub qs: &'a [u8],
    bsums: &'a [u8],
}

impl<'a> Q8KBlock<'a> {
    // Always: the four-row decode kernels make one per block, and LLVM left it a call there.
    #[inline(always)]
    pub fn new(b: &'a [u8]) -> Self {
        Q8KBlock {
            d: read_f32(b, 0),
            qs: &b[QS_AT..QS_AT + QK_K],
            bsums: &b[BSUMS_AT..BSUMS_AT + 32],
        }
    }

    /// Sum of quants 16j .. 16j+16, as stored.
    #[inline]
    pub fn bsum(&self, j: usize) -> i32 {
        i16::from_le_bytes([self.bsums[2 * j], self.bsums[2 * j + 1]]) as i32
    }

    /// Σ q8[i] * w[i] over `len` quants starting at `at` (exact in i32).
    #[inline]
    pub fn dot(&self, at: usize, w: &[i8]) -> i32 {
        let mut s = 0i32;
        for (&a, &b) in self.qs[at..at + w.len()].iter().zip(w.iter()) {
            s += a as i8 as i32 * b as i32;
        }
        s
    }
}
