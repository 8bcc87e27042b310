//! Row storage: the f16 / int8 row codecs and the paged slot arrays they live in.

use crate::quant::{dequantize_f16, dequantize_q8_0, f16_to_f32, f32_to_f16, q8_0_block_scale};

use super::config::{KvDtype, Q8_BLOCK};

/// Stores `src` (f32) as one row of `dtype` in `dst` (`dtype.row_bytes(src.len())` bytes).
///
/// q8: per block of 32, `d = max|x| / 127` (stored as f16), `q = round(x / d)`: ggml's Q8_0.
pub fn encode_row(dtype: KvDtype, src: &[f32], dst: &mut [u8]) {
    match dtype {
        KvDtype::F16 => {
            for (d, &x) in dst.chunks_exact_mut(2).zip(src) {
                d.copy_from_slice(&f32_to_f16(x).to_le_bytes());
            }
        }
        KvDtype::Q8 => {
            let mut o = 0;
            for blk in src.chunks(Q8_BLOCK) {
                // Q8_0's scale: a NaN makes it NaN, so the block reads back as NaN rather than
                // as 0 (and is caught downstream as MODEL_NON_FINITE).
                let (d, id) = q8_0_block_scale(blk);
                dst[o..o + 2].copy_from_slice(&f32_to_f16(d).to_le_bytes());
                for (q, &x) in dst[o + 2..o + 2 + blk.len()].iter_mut().zip(blk) {
                    *q = ((x * id).round() as i32).clamp(-127, 127) as i8 as u8;
                }
                o += 2 + blk.len();
            }
        }
    }
}

/// Reads one row of `dtype` (`dst.len()` values) back as f32, through the quant module's
/// dequantizers (SIMD in the wasm build; every step of decode reads each held row this way):
/// f16 as F16 weights, int8's whole blocks as Q8_0 blocks (the same 34-byte layout) and a
/// partial last block value by value, `q · d` as Q8_0's.
#[inline]
pub fn decode_row(dtype: KvDtype, src: &[u8], dst: &mut [f32]) {
    match dtype {
        KvDtype::F16 => dequantize_f16(src, dst),
        KvDtype::Q8 => {
            let whole = dst.len() / Q8_BLOCK;
            let o = whole * (Q8_BLOCK + 2);
            dequantize_q8_0(&src[..o], &mut dst[..whole * Q8_BLOCK]);
            let tail = &mut dst[whole * Q8_BLOCK..];
            if !tail.is_empty() {
                let d = f16_to_f32(u16::from_le_bytes([src[o], src[o + 1]]));
                let qs = &src[o + 2..o + 2 + tail.len()];
                for (y, &q) in tail.iter_mut().zip(qs) {
                    *y = (q as i8) as f32 * d;
                }
            }
        }
    }
}

/// Rows per page: storage is allocated a page at a time as slots are first written, never
/// reallocated or moved, and never beyond the capacity.
pub const PAGE_ROWS: usize = 256;

/// Bytes [`Pages`] of `cap` rows of `row_bytes` hold once slots `0..rows` have been written:
/// whole pages, the last one cut at the capacity.
pub fn paged_bytes(row_bytes: usize, cap: usize, rows: usize) -> usize {
    (rows.min(cap).div_ceil(PAGE_ROWS) * PAGE_ROWS).min(cap) * row_bytes
}

/// `cap` rows of `row_bytes` each, in pages allocated on first write.
#[derive(Clone, Debug, Default)]
pub struct Pages {
    row_bytes: usize,
    cap: usize,
    pages: Vec<Vec<u8>>,
}

impl Pages {
    pub fn new(row_bytes: usize, cap: usize) -> Pages {
        Pages { row_bytes, cap, pages: Vec::new() }
    }

    /// Row `slot` (which must have been written before).
    #[inline]
    pub fn row(&self, slot: usize) -> &[u8] {
        let (p, i) = (slot / PAGE_ROWS, slot % PAGE_ROWS);
        &self.pages[p][i * self.row_bytes..(i + 1) * self.row_bytes]
    }

    /// Row `slot` for writing, allocating its page (and any before it) on first use.
    pub fn row_mut(&mut self, slot: usize) -> &mut [u8] {
        debug_assert!(slot < self.cap);
        let (p, i) = (slot / PAGE_ROWS, slot % PAGE_ROWS);
        while self.pages.len() <= p {
            let first = self.pages.len() * PAGE_ROWS;
            let rows = PAGE_ROWS.min(self.cap - first);
            self.pages.push(vec![0u8; rows * self.row_bytes]);
        }
        &mut self.pages[p][i * self.row_bytes..(i + 1) * self.row_bytes]
    }

    /// Bytes allocated so far (at most `cap × row_bytes`).
    pub fn allocated(&self) -> usize {
        self.pages.iter().map(|p| p.len()).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn f16_round_trip_is_f16_rounding() {
        let x = [1.0f32 + 1.0 / 4096.0, -3.5, 65504.0, 1e-3];
        let mut b = vec![0u8; KvDtype::F16.row_bytes(4)];
        encode_row(KvDtype::F16, &x, &mut b);
        let mut y = [0.0f32; 4];
        decode_row(KvDtype::F16, &b, &mut y);
        for (a, b) in x.iter().zip(&y) {
            assert_eq!(f16_to_f32(f32_to_f16(*a)), *b);
        }
    }

    /// A NaN in an int8 row reads back as NaN over its block (it read back as 0, hidden).
    #[test]
    fn q8_keeps_a_nan_visible() {
        let mut x = vec![0.5f32; 64];
        x[40] = f32::NAN;
        let mut b = vec![0u8; KvDtype::Q8.row_bytes(64)];
        encode_row(KvDtype::Q8, &x, &mut b);
        let mut y = vec![0.0f32; 64];
        decode_row(KvDtype::Q8, &b, &mut y);
        assert!(y[..32].iter().all(|v| (v - 0.5).abs() < 0.01), "the other block is intact");
        assert!(y[32..].iter().all(|v| v.is_nan()), "{:?}", &y[32..]);
    }

    #[test]
    fn q8_round_trip_within_half_a_step_per_block() {
        // 70 values: two full blocks and a partial one; one block all zeros.
        let mut x: Vec<f32> = (0..70).map(|i| ((i * 37 % 23) as f32 - 11.0) * 0.173).collect();
        x[32..64].iter_mut().for_each(|v| *v = 0.0);
        let mut b = vec![0u8; KvDtype::Q8.row_bytes(70)];
        assert_eq!(b.len(), 70 + 3 * 2);
        encode_row(KvDtype::Q8, &x, &mut b);
        let mut y = vec![0.0f32; 70];
        decode_row(KvDtype::Q8, &b, &mut y);
        for blk in 0..3 {
            let r = blk * 32..(blk * 32 + 32).min(70);
            let amax = x[r.clone()].iter().fold(0.0f32, |m, v| m.max(v.abs()));
            let step = amax / 127.0;
            for i in r {
                assert!((x[i] - y[i]).abs() <= 0.5 * step * 1.01 + 1e-6, "i {i}: {} vs {}", x[i], y[i]);
            }
        }
        assert!(y[32..64].iter().all(|&v| v == 0.0));
    }

    #[test]
    fn pages_allocate_on_first_write_up_to_capacity() {
        let mut p = Pages::new(4, PAGE_ROWS + 10);
        assert_eq!(p.allocated(), 0);
        p.row_mut(3).copy_from_slice(&[1, 2, 3, 4]);
        assert_eq!(p.allocated(), PAGE_ROWS * 4);
        assert_eq!(p.allocated(), paged_bytes(4, PAGE_ROWS + 10, 4));
        p.row_mut(PAGE_ROWS + 9)[0] = 7;
        assert_eq!(p.allocated(), (PAGE_ROWS + 10) * 4);
        assert_eq!(p.allocated(), paged_bytes(4, PAGE_ROWS + 10, PAGE_ROWS + 10));
        assert_eq!(p.row(3), &[1, 2, 3, 4]);
        assert_eq!(p.row(PAGE_ROWS + 9)[0], 7);
    }
}
