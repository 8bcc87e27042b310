//! Q4_0 and Q4_1: 32 weights per block, 4-bit quants.
//!
//! Layout (little endian):
//! - Q4_0, 18 bytes: `d: f16`, `qs: [u8; 16]`; value = d * (q - 8).
//! - Q4_1, 20 bytes: `d: f16`, `m: f16`, `qs: [u8; 16]`; value = d * q + m.
//!
//! In both, byte `qs[j]` holds element `j` in its low nibble and element `j + 16` in its high
//! nibble. Q4_0 pairs with Q8_0 activations, Q4_1 with Q8_1 (whose `s = d * Σq` term carries
//! the contribution of the offset `m`).

use super::float::read_f16;
use super::q8::{Q8_0_BYTES, Q8_1_BYTES};

pub(super) const QK: usize = 32;
pub(super) const Q4_0_BYTES: usize = 18;
pub(super) const Q4_1_BYTES: usize = 20;

pub(super) fn dequantize_q4_0(src: &[u8], dst: &mut [f32]) {
    for (b, y) in src.chunks_exact(Q4_0_BYTES).zip(dst.chunks_exact_mut(QK)) {
        let d = read_f16(b, 0);
        let qs = &b[2..18];
        for j in 0..16 {
            // (q - 8) as float times d: one rounding, the same as ggml and gguf-py.
            y[j] = ((qs[j] & 0x0f) as i32 - 8) as f32 * d;
            y[j + 16] = ((qs[j] >> 4) as i32 - 8) as f32 * d;
        }
    }
}

pub(super) fn dequantize_q4_1(src: &[u8], dst: &mut [f32]) {
    for (b, y) in src.chunks_exact(Q4_1_BYTES).zip(dst.chunks_exact_mut(QK)) {
        let d = read_f16(b, 0);
        let m = read_f16(b, 2);
        let qs = &b[4..20];
        for j in 0..16 {
            // Two roundings (multiply, then add), never fused: this is what both ggml's C and
            // gguf-py's numpy compute.
            y[j] = (qs[j] & 0x0f) as f32 * d + m;
            y[j + 16] = (qs[j] >> 4) as f32 * d + m;
        }
    }
}

/// Q4_0 x Q8_0, shaped like ggml's generic `ggml_vec_dot_q4_0_q8_0`: an exact i32 sum per
/// block, then `sumf += sumi * dx * dy` (in that left-to-right order).
pub(super) fn vec_dot_q4_0_q8_0(w: &[u8], a: &[u8], n: usize) -> f32 {
    let nb = n / QK;
    let (w, a) = (&w[..nb * Q4_0_BYTES], &a[..nb * Q8_0_BYTES]);
    let mut sumf = 0f32;
    for (x, y) in w.chunks_exact(Q4_0_BYTES).zip(a.chunks_exact(Q8_0_BYTES)) {
        let qs = &x[2..18];
        let q8 = &y[2..34];
        let mut sumi = 0i32;
        for j in 0..16 {
            let v0 = (qs[j] & 0x0f) as i32 - 8;
            let v1 = (qs[j] >> 4) as i32 - 8;
            sumi += v0 * q8[j] as i8 as i32 + v1 * q8[j + 16] as i8 as i32;
        }
        sumf += sumi as f32 * read_f16(x, 0) * read_f16(y, 0);
    }
    sumf
}

/// Q4_1 x Q8_1, as ggml's generic dot: `sumf += (dx*dy)*sumi + mx*sy` per block.
pub(super) fn vec_dot_q4_1_q8_1(w: &[u8], a: &[u8], n: usize) -> f32 {
    let nb = n / QK;
    let (w, a) = (&w[..nb * Q4_1_BYTES], &a[..nb * Q8_1_BYTES]);
    let mut sumf = 0f32;
    for (x, y) in w.chunks_exact(Q4_1_BYTES).zip(a.chunks_exact(Q8_1_BYTES)) {
        let qs = &x[4..20];
        let q8 = &y[4..36];
        let mut sumi = 0i32;
        for j in 0..16 {
            let v0 = (qs[j] & 0x0f) as i32;
            let v1 = (qs[j] >> 4) as i32;
            sumi += v0 * q8[j] as i8 as i32 + v1 * q8[j + 16] as i8 as i32;
        }
        let (dx, mx) = (read_f16(x, 0), read_f16(x, 2));
        let (dy, sy) = (read_f16(y, 0), read_f16(y, 2));
        sumf += (dx * dy) * sumi as f32 + mx * sy;
    }
    sumf
}
