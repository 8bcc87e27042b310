//! Q6_K: 256 weights per super-block, 16 sub-blocks of 16 with signed 8-bit scales.
//!
//! Layout (210 bytes, little endian): `ql: [u8; 128]` (low 4 bits), `qh: [u8; 64]` (high 2
//! bits), `scales: [i8; 16]`, `d: f16`.
//! Element `e = 128*h + 32*s + l` (h in 0..2, s in 0..4, l in 0..32):
//! low nibble of `ql[64*h + 32*s + l]` for s < 2, high nibble of `ql[64*h + 32*(s-2) + l]` for
//! s >= 2; high bits `(qh[32*h + l] >> 2*s) & 3`; q = (low | high << 4) - 32, in -32..=31.
//! Value = (d * scales[e / 16]) * q.

use super::float::read_f16;
use super::q8_k::{Q8KBlock, Q8_K_BYTES, QK_K};

pub(super) const Q6_K_BYTES: usize = 210;

#[inline]
fn unpack(ql: &[u8], qh: &[u8]) -> [i8; QK_K] {
    let mut q = [0i8; QK_K];
    for h in 0..2 {
        let (ql, qh) = (&ql[64 * h..64 * h + 64], &qh[32 * h..32 * h + 32]);
        let out = &mut q[128 * h..128 * h + 128];
        for l in 0..32 {
            let hb = qh[l];
            out[l] = ((ql[l] & 0x0f) | ((hb & 3) << 4)) as i8 - 32;
            out[32 + l] = ((ql[32 + l] & 0x0f) | (((hb >> 2) & 3) << 4)) as i8 - 32;
            out[64 + l] = ((ql[l] >> 4) | (((hb >> 4) & 3) << 4)) as i8 - 32;
            out[96 + l] = ((ql[32 + l] >> 4) | (((hb >> 6) & 3) << 4)) as i8 - 32;
        }
    }
    q
}

pub(super) fn dequantize_q6_k(src: &[u8], dst: &mut [f32]) {
    for (b, y) in src.chunks_exact(Q6_K_BYTES).zip(dst.chunks_exact_mut(QK_K)) {
        let q = unpack(&b[0..128], &b[128..192]);
        let sc = &b[192..208];
        let d = read_f16(b, 208);
        for j in 0..16 {
            let dl = d * sc[j] as i8 as f32;
            for i in 16 * j..16 * j + 16 {
                y[i] = dl * q[i] as f32;
            }
        }
    }
}

/// Q6_K x Q8_K: `isum = Σ_j scale_j * Σ q*q8` exactly in i32, `sumf += (d*dy) * isum`.
pub(super) fn vec_dot_q6_k_q8_k(w: &[u8], a: &[u8], n: usize) -> f32 {
    let nb = n / QK_K;
    let (w, a) = (&w[..nb * Q6_K_BYTES], &a[..nb * Q8_K_BYTES]);
    let mut sumf = 0f32;
    for (x, y) in w.chunks_exact(Q6_K_BYTES).zip(a.chunks_exact(Q8_K_BYTES)) {
        let y = Q8KBlock::new(y);
        let q = unpack(&x[0..128], &x[128..192]);
        let sc = &x[192..208];
        let mut isum = 0i32;
        for j in 0..16 {
            isum += sc[j] as i8 as i32 * y.dot(16 * j, &q[16 * j..16 * j + 16]);
        }
        sumf += (read_f16(x, 208) * y.d) * isum as f32;
    }
    sumf
}
