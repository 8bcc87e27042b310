//! Q3_K: 256 weights per super-block, 16 sub-blocks of 16 with signed 6-bit scales.
//!
//! Layout (110 bytes, little endian): `hmask: [u8; 32]`, `qs: [u8; 64]`, `scales: [u8; 12]`,
//! `d: f16`.
//! - Element `e = 128*h + 32*s + l` has low bits `(qs[32*h + l] >> 2*s) & 3` and high bit
//!   `(hmask[l] >> (e / 32)) & 1`; q = low - (high ? 0 : 4), in -4..=3 (a set high bit means
//!   *no* offset).
//! - Scale j (0..16), 6 bits: low nibble from `scales[j] & 15` (j < 8) or `scales[j-8] >> 4`
//!   (j >= 8); top two bits from `(scales[8 + j%4] >> 2*(j/4)) & 3`; signed by subtracting 32.
//!
//! Value = (d * scale) * q.

use super::float::read_f16;
use super::q8_k::{Q8KBlock, Q8_K_BYTES, QK_K};

pub(super) const Q3_K_BYTES: usize = 110;

#[inline]
pub(super) fn unpack_scales(s: &[u8]) -> [i32; 16] {
    let mut out = [0i32; 16];
    for (j, o) in out.iter_mut().enumerate() {
        let lo = if j < 8 { s[j] & 0x0f } else { s[j - 8] >> 4 };
        let hi = (s[8 + j % 4] >> (2 * (j / 4))) & 3;
        *o = (lo | (hi << 4)) as i32 - 32;
    }
    out
}

/// The 256 signed quants (-4..=3) of one block, in element order.
#[inline]
fn unpack(hmask: &[u8], qs: &[u8]) -> [i8; QK_K] {
    let mut q = [0i8; QK_K];
    for h in 0..2 {
        for s in 0..4 {
            let bit = 4 * h + s; // = e / 32
            for l in 0..32 {
                let low = ((qs[32 * h + l] >> (2 * s)) & 3) as i8;
                let high_set = (hmask[l] >> bit) & 1 != 0;
                q[128 * h + 32 * s + l] = low - if high_set { 0 } else { 4 };
            }
        }
    }
    q
}

pub(super) fn dequantize_q3_k(src: &[u8], dst: &mut [f32]) {
    for (b, y) in src.chunks_exact(Q3_K_BYTES).zip(dst.chunks_exact_mut(QK_K)) {
        let q = unpack(&b[0..32], &b[32..96]);
        let sc = unpack_scales(&b[96..108]);
        let d = read_f16(b, 108);
        for j in 0..16 {
            let dl = d * sc[j] as f32;
            for i in 16 * j..16 * j + 16 {
                y[i] = dl * q[i] as f32;
            }
        }
    }
}

/// Q3_K x Q8_K: `isum = Σ_j scale_j * Σ q*q8` exactly in i32, `sumf += (d*dy) * isum`.
pub(super) fn vec_dot_q3_k_q8_k(w: &[u8], a: &[u8], n: usize) -> f32 {
    let nb = n / QK_K;
    let (w, a) = (&w[..nb * Q3_K_BYTES], &a[..nb * Q8_K_BYTES]);
    let mut sumf = 0f32;
    for (x, y) in w.chunks_exact(Q3_K_BYTES).zip(a.chunks_exact(Q8_K_BYTES)) {
        let y = Q8KBlock::new(y);
        let q = unpack(&x[0..32], &x[32..96]);
        let sc = unpack_scales(&x[96..108]);
        let mut isum = 0i32;
        for j in 0..16 {
            isum += sc[j] * y.dot(16 * j, &q[16 * j..16 * j + 16]);
        }
        sumf += (read_f16(x, 108) * y.d) * isum as f32;
    }
    sumf
}
