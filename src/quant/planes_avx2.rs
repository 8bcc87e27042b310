//! AVX2 twins of the plane kernels (`planes.rs`), bit for bit: each block's nibble sums are
//! exact integers (`maddubs`: unsigned nibble × i8 pairs in i16, then `madd` by ones into i32
//! lanes, reduced once per block), combined by the same integer formula, and the float part is
//! the scalar kernel's expression in the same block order.

use core::arch::x86_64::*;

use super::float::read_f16;
use super::planes::{rest16, full_block_int, pass1_block_int, Pass1, PlanesAct};

#[inline(always)]
unsafe fn ld128(b: &[u8], at: usize) -> __m128i {
    let s = &b[at..at + 16];
    // SAFETY: `s` is 16 readable bytes; loadu has no alignment requirement.
    unsafe { _mm_loadu_si128(s.as_ptr() as *const __m128i) }
}

/// Σ_k lo(v_k)·q[k] + hi(v_k)·q[k+16] (exact: pair sums ≤ 2·15·128 fit in i16).
#[inline(always)]
unsafe fn nib_dot(v: __m128i, q0: __m128i, q1: __m128i) -> i32 {
    let m = _mm_set1_epi8(0x0F);
    let lo = _mm_and_si128(v, m);
    let hi = _mm_and_si128(_mm_srli_epi16(v, 4), m);
    let s16 = _mm_add_epi16(_mm_maddubs_epi16(lo, q0), _mm_maddubs_epi16(hi, q1));
    let s = _mm_madd_epi16(s16, _mm_set1_epi16(1));
    let s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0b01_00_11_10));
    let s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0b10_11_00_01));
    _mm_cvtsi128_si32(s)
}

#[inline(always)]
unsafe fn q_halves(x: &PlanesAct, blk: usize) -> (__m128i, __m128i) {
    let q = &x.qxp[blk];
    // SAFETY: `q` is 32 readable bytes.
    unsafe { (_mm_loadu_si128(q.as_ptr() as *const __m128i), _mm_loadu_si128(q.as_ptr().add(16) as *const __m128i)) }
}

#[inline(always)]
unsafe fn mask(x: &PlanesAct, blk: usize) -> __m128i {
    // SAFETY: `mask` is 16 readable bytes.
    unsafe { _mm_loadu_si128(x.mask[blk].as_ptr() as *const __m128i) }
}

/// The 16 bytes whose last `c` are block `blk`'s known `l` bytes (the others zeroed; they are
/// the end of the h plane or earlier known bytes, in the row).
#[inline(always)]
unsafe fn known_l(a: &[u8], x: &PlanesAct, blk: usize) -> __m128i {
    let end = x.o0 + x.o_off[blk] as usize + x.c[blk] as usize;
    unsafe { _mm_and_si128(ld128(a, end - 16), mask(x, blk)) }
}

#[target_feature(enable = "avx2")]
unsafe fn pass1_avx2(a: &[u8], x: &PlanesAct) -> Pass1 {
    let nb = x.nb;
    let (mut a2, mut e1, mut t) = (0f32, 0f32, 0f32);
    for blk in 0..nb {
        let dw = read_f16(a, 2 * blk);
        let (q0, q1) = q_halves(x, blk);
        let sh = nib_dot(ld128(a, nb * 2 + blk * 16), q0, q1);
        let sl = if x.c[blk] == 0 { 0 } else { nib_dot(known_l(a, x, blk), q0, q1) };
        a2 += pass1_block_int(sh, sl, x, blk) as f32 * (dw * x.dx[blk]);
        e1 += dw.abs() * x.m[blk];
        t += dw.abs() * x.n[blk];
    }
    Pass1 { a2, e1, t }
}

#[target_feature(enable = "avx2")]
unsafe fn full_avx2(a: &[u8], b: &[u8], x: &PlanesAct) -> f32 {
    let nb = x.nb;
    let mut sumf = 0f32;
    for blk in 0..nb {
        let dw = read_f16(a, 2 * blk);
        let (q0, q1) = q_halves(x, blk);
        let bo = x.b_off[blk] as usize;
        let mut tmp = [0u8; 16];
        let rest = ld128(rest16(b, bo, &mut tmp), 0);
        let l = _mm_blendv_epi8(rest, known_l(a, x, blk), mask(x, blk));
        let sh = nib_dot(ld128(a, nb * 2 + blk * 16), q0, q1);
        let sl = nib_dot(l, q0, q1);
        sumf += full_block_int(sh, sl, x, blk) as f32 * (dw * x.dx[blk]);
    }
    sumf
}

pub(super) fn pass1_row(a: &[u8], x: &PlanesAct) -> Pass1 {
    // SAFETY: handed out only when the CPU has AVX2 (`planes::kernels`).
    unsafe { pass1_avx2(a, x) }
}

pub(super) fn full_row(a: &[u8], b: &[u8], x: &PlanesAct) -> f32 {
    // SAFETY: as above.
    unsafe { full_avx2(a, b, x) }
}
