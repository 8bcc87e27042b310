//! Q2_K: 256 weights per super-block, 16 sub-blocks of 16 with a 4-bit scale and 4-bit min.
//!
//! Layout (84 bytes, little endian): `scales: [u8; 16]` (low nibble = scale, high nibble =
//! min, for sub-block j), `qs: [u8; 64]`, `d: f16`, `dmin: f16`.
//! Element `e = 128*h + 32*s + l` (h in 0..2, s in 0..4, l in 0..32) is
//! `(qs[32*h + l] >> 2*s) & 3`; its sub-block is `e / 16`.
//! Value = (d * scale) * q - (dmin * min), each product rounded to f32 first (ggml and gguf-py
//! agree on this order).

use super::float::read_f16;
use super::q8_k::{Q8KBlock, Q8_K_BYTES, QK_K};

pub(super) const Q2_K_BYTES: usize = 84;

/// The 256 quants (0..=3) of one block, in element order.
#[inline]
fn unpack(qs: &[u8]) -> [i8; QK_K] {
    let mut q = [0i8; QK_K];
    for h in 0..2 {
        for s in 0..4 {
            for l in 0..32 {
                q[128 * h + 32 * s + l] = ((qs[32 * h + l] >> (2 * s)) & 3) as i8;
            }
        }
    }
    q
}

pub(super) fn dequantize_q2_k(src: &[u8], dst: &mut [f32]) {
    for (b, y) in src.chunks_exact(Q2_K_BYTES).zip(dst.chunks_exact_mut(QK_K)) {
        let scales = &b[0..16];
        let q = unpack(&b[16..80]);
        let d = read_f16(b, 80);
        let dmin = read_f16(b, 82);
        for j in 0..16 {
            let dl = d * (scales[j] & 0x0f) as f32;
            let ml = dmin * (scales[j] >> 4) as f32;
            for i in 16 * j..16 * j + 16 {
                y[i] = dl * q[i] as f32 - ml;
            }
        }
    }
}

/// Q2_K x Q8_K. Per block: `isum = Σ_j scale_j * Σ q*q8` and `summs = Σ_j min_j * bsums_j`
/// exactly in i32, then `sumf += (dy*d) * isum - (dy*dmin) * summs`, as ggml's generic dot.
pub(super) fn vec_dot_q2_k_q8_k(w: &[u8], a: &[u8], n: usize) -> f32 {
    let nb = n / QK_K;
    let (w, a) = (&w[..nb * Q2_K_BYTES], &a[..nb * Q8_K_BYTES]);
    let mut sumf = 0f32;
    for (x, y) in w.chunks_exact(Q2_K_BYTES).zip(a.chunks_exact(Q8_K_BYTES)) {
        let y = Q8KBlock::new(y);
        let scales = &x[0..16];
        let q = unpack(&x[16..80]);
        let mut summs = 0i32;
        let mut isum = 0i32;
        for j in 0..16 {
            summs += y.bsum(j) * (scales[j] >> 4) as i32;
            isum += (scales[j] & 0x0f) as i32 * y.dot(16 * j, &q[16 * j..16 * j + 16]);
        }
        let dall = y.d * read_f16(x, 80);
        let dmin = y.d * read_f16(x, 82);
        sumf += dall * isum as f32 - dmin * summs as f32;
    }
    sumf
}
