//! Q5_K: Q4_K plus one high bit per weight (5-bit quants 0..=31).
//!
//! Layout (176 bytes, little endian): `d: f16`, `dmin: f16`, `scales: [u8; 12]` (packed as
//! Q4_K's), `qh: [u8; 32]`, `qs: [u8; 128]`.
//! Sub-block j's nibbles come from `qs` exactly as in Q4_K; its fifth bit is bit j of
//! `qh[l]` for the element at offset l inside the sub-block.
//! Value = (d * scale_j) * q - (dmin * min_j).

use super::float::read_f16;
use super::q4_k::scales_mins;
use super::q8_k::{Q8KBlock, Q8_K_BYTES, QK_K};

pub(super) const Q5_K_BYTES: usize = 176;

#[inline]
fn unpack(qh: &[u8], qs: &[u8]) -> [i8; QK_K] {
    let mut q = [0i8; QK_K];
    for c in 0..4 {
        let (j0, j1) = (2 * c, 2 * c + 1);
        for l in 0..32 {
            let b = qs[32 * c + l];
            q[32 * j0 + l] = ((b & 0x0f) | (((qh[l] >> j0) & 1) << 4)) as i8;
            q[32 * j1 + l] = ((b >> 4) | (((qh[l] >> j1) & 1) << 4)) as i8;
        }
    }
    q
}

pub(super) fn dequantize_q5_k(src: &[u8], dst: &mut [f32]) {
    for (b, y) in src.chunks_exact(Q5_K_BYTES).zip(dst.chunks_exact_mut(QK_K)) {
        let d = read_f16(b, 0);
        let dmin = read_f16(b, 2);
        let (sc, m) = scales_mins(&b[4..16]);
        let q = unpack(&b[16..48], &b[48..176]);
        for j in 0..8 {
            let d1 = d * sc[j] as f32;
            let m1 = dmin * m[j] as f32;
            for i in 32 * j..32 * j + 32 {
                y[i] = d1 * q[i] as f32 - m1;
            }
        }
    }
}

/// Q5_K x Q8_K, structured exactly as the Q4_K dot.
pub(super) fn vec_dot_q5_k_q8_k(w: &[u8], a: &[u8], n: usize) -> f32 {
    let nb = n / QK_K;
    let (w, a) = (&w[..nb * Q5_K_BYTES], &a[..nb * Q8_K_BYTES]);
    let mut sumf = 0f32;
    for (x, y) in w.chunks_exact(Q5_K_BYTES).zip(a.chunks_exact(Q8_K_BYTES)) {
        let y = Q8KBlock::new(y);
        let (sc, m) = scales_mins(&x[4..16]);
        let q = unpack(&x[16..48], &x[48..176]);
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
