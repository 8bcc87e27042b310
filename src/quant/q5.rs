//! Q5_0 and Q5_1: 32 weights per block, 5-bit quants split into a nibble and one high bit.
//!
//! Layout (little endian):
//! - Q5_0, 22 bytes: `d: f16`, `qh: u32`, `qs: [u8; 16]`; value = d * (q - 16).
//! - Q5_1, 24 bytes: `d: f16`, `m: f16`, `qh: u32`, `qs: [u8; 16]`; value = d * q + m.
//!
//! Element `j < 16` is `qs[j] & 15` plus bit `j` of `qh` as its fifth bit; element `j + 16` is
//! `qs[j] >> 4` plus bit `j + 16` of `qh`. Q5_0 pairs with Q8_0, Q5_1 with Q8_1.

use super::float::read_f16;
use super::q8::{Q8_0_BYTES, Q8_1_BYTES};

pub(super) const QK: usize = 32;
pub(super) const Q5_0_BYTES: usize = 22;
pub(super) const Q5_1_BYTES: usize = 24;

/// The 32 unsigned 5-bit quants (0..=31) of one block, in element order.
#[inline]
fn unpack(qh: u32, qs: &[u8]) -> [u8; 32] {
    let mut q = [0u8; 32];
    for j in 0..16 {
        q[j] = (qs[j] & 0x0f) | ((((qh >> j) & 1) as u8) << 4);
        q[j + 16] = (qs[j] >> 4) | ((((qh >> (j + 16)) & 1) as u8) << 4);
    }
    q
}

#[inline]
fn qh_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

pub(super) fn dequantize_q5_0(src: &[u8], dst: &mut [f32]) {
    for (b, y) in src.chunks_exact(Q5_0_BYTES).zip(dst.chunks_exact_mut(QK)) {
        let d = read_f16(b, 0);
        let q = unpack(qh_at(b, 2), &b[6..22]);
        for (o, &v) in y.iter_mut().zip(q.iter()) {
            *o = (v as i32 - 16) as f32 * d;
        }
    }
}

pub(super) fn dequantize_q5_1(src: &[u8], dst: &mut [f32]) {
    for (b, y) in src.chunks_exact(Q5_1_BYTES).zip(dst.chunks_exact_mut(QK)) {
        let d = read_f16(b, 0);
        let m = read_f16(b, 2);
        let q = unpack(qh_at(b, 4), &b[8..24]);
        for (o, &v) in y.iter_mut().zip(q.iter()) {
            *o = v as f32 * d + m; // multiply, then add: two roundings, as ggml and gguf-py
        }
    }
}

/// Q5_0 x Q8_0, as ggml's generic dot: exact i32 sum per block, `sumf += (dx*dy) * sumi`.
pub(super) fn vec_dot_q5_0_q8_0(w: &[u8], a: &[u8], n: usize) -> f32 {
    let nb = n / QK;
    let (w, a) = (&w[..nb * Q5_0_BYTES], &a[..nb * Q8_0_BYTES]);
    let mut sumf = 0f32;
    for (x, y) in w.chunks_exact(Q5_0_BYTES).zip(a.chunks_exact(Q8_0_BYTES)) {
        let q = unpack(qh_at(x, 2), &x[6..22]);
        let q8 = &y[2..34];
        let mut sumi = 0i32;
        for (&wq, &aq) in q.iter().zip(q8.iter()) {
            sumi += (wq as i32 - 16) * aq as i8 as i32;
        }
        sumf += (read_f16(x, 0) * read_f16(y, 0)) * sumi as f32;
    }
    sumf
}

/// Q5_1 x Q8_1, as ggml's generic dot: `sumf += (dx*dy)*sumi + mx*sy` per block.
pub(super) fn vec_dot_q5_1_q8_1(w: &[u8], a: &[u8], n: usize) -> f32 {
    let nb = n / QK;
    let (w, a) = (&w[..nb * Q5_1_BYTES], &a[..nb * Q8_1_BYTES]);
    let mut sumf = 0f32;
    for (x, y) in w.chunks_exact(Q5_1_BYTES).zip(a.chunks_exact(Q8_1_BYTES)) {
        let q = unpack(qh_at(x, 4), &x[8..24]);
        let q8 = &y[4..36];
        let mut sumi = 0i32;
        for (&wq, &aq) in q.iter().zip(q8.iter()) {
            sumi += wq as i32 * aq as i8 as i32;
        }
        let (dx, mx) = (read_f16(x, 0), read_f16(x, 2));
        let (dy, sy) = (read_f16(y, 0), read_f16(y, 2));
        sumf += (dx * dy) * sumi as f32 + mx * sy;
    }
    sumf
}
