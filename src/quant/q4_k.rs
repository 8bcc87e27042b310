//! Q4_K: 256 weights per super-block, 8 sub-blocks of 32 with 6-bit scales and mins.
//!
//! Layout (144 bytes, little endian): `d: f16`, `dmin: f16`, `scales: [u8; 12]` (8 scales and
//! 8 mins, 6 bits each, packed as in `scale_min`), `qs: [u8; 128]`.
//! Sub-block j (elements 32j..32j+32) takes the low nibbles of `qs[32*(j/2) ..][..32]` when j
//! is even, the high nibbles when odd.
//! Value = (d * scale_j) * q - (dmin * min_j), products rounded to f32 first.

use super::float::read_f16;
use super::q8_k::{Q8KBlock, Q8_K_BYTES, QK_K};

pub(super) const Q4_K_BYTES: usize = 144;

/// (scale, min) of sub-block j from the 12 packed bytes shared by Q4_K and Q5_K:
/// bytes 0..4 hold scales 0..4 (low 6 bits) and the top 2 bits of scales 4..8; bytes 4..8 the
/// same for mins; bytes 8..12 the low nibbles of scales 4..8 (low half) and mins 4..8 (high).
#[inline]
pub(super) fn scale_min(j: usize, s: &[u8]) -> (u8, u8) {
    if j < 4 {
        (s[j] & 63, s[j + 4] & 63)
    } else {
        (
            (s[j + 4] & 0x0f) | ((s[j - 4] >> 6) << 4),
            (s[j + 4] >> 4) | ((s[j] >> 6) << 4),
        )
    }
}

/// The 8 (scale, min) pairs, in sub-block order.
#[inline]
pub(super) fn scales_mins(s: &[u8]) -> ([u8; 8], [u8; 8]) {
    let mut sc = [0u8; 8];
    let mut m = [0u8; 8];
    for j in 0..8 {
        (sc[j], m[j]) = scale_min(j, s);
    }
    (sc, m)
}

#[inline]
fn unpack(qs: &[u8]) -> [i8; QK_K] {
    let mut q = [0i8; QK_K];
    for c in 0..4 {
        for l in 0..32 {
            let b = qs[32 * c + l];
            q[64 * c + l] = (b & 0x0f) as i8;
            q[64 * c + 32 + l] = (b >> 4) as i8;
        }
    }
    q
}

pub(super) fn dequantize_q4_k(src: &[u8], dst: &mut [f32]) {
    for (b, y) in src.chunks_exact(Q4_K_BYTES).zip(dst.chunks_exact_mut(QK_K)) {
        let d = read_f16(b, 0);
        let dmin = read_f16(b, 2);
        let (sc, m) = scales_mins(&b[4..16]);
        let q = unpack(&b[16..144]);
        for j in 0..8 {
            let d1 = d * sc[j] as f32;
            let m1 = dmin * m[j] as f32;
            for i in 32 * j..32 * j + 32 {
                y[i] = d1 * q[i] as f32 - m1;
            }
        }
    }
}

/// Q4_K x Q8_K. Per block, exactly in i32: `isum = Σ_j scale_j * Σ q*q8` and
/// `summs = Σ_j min_j * (bsums[2j] + bsums[2j+1])`; then
/// `sumf += (d*dy) * isum - (dmin*dy) * summs`.
pub(super) fn vec_dot_q4_k_q8_k(w: &[u8], a: &[u8], n: usize) -> f32 {
    let nb = n / QK_K;
    let (w, a) = (&w[..nb * Q4_K_BYTES], &a[..nb * Q8_K_BYTES]);
    let mut sumf = 0f32;
    for (x, y) in w.chunks_exact(Q4_K_BYTES).zip(a.chunks_exact(Q8_K_BYTES)) {
        let y = Q8KBlock::new(y);
        let (sc, m) = scales_mins(&x[4..16]);
        let q = unpack(&x[16..144]);
        let mut isum = 0i32;
        let mut summs = 0i32;
        for j in 0..8 {
            isum += sc[j] as i32 * y.dot(32 * j, &q[32 * j..32 * j + 32]);
            summs += m[j] as i32 * (y.bsum(2 * j) + y.bsum(2 * j + 1));
        }
        let d = read_f16(x, 0) * y.d;
        let dmin = read_f16(x, 2) * y.d;
        sumf += d * isum as f32 - dmin * summs as f32;
    }
    sumf
}
