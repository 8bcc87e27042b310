//! AVX2 twins of the plane kernels (`planes.rs`), bit for bit: each block's nibble sums are
//! exact integers (`maddubs`: unsigned nibble × i8 pairs in i16, then `madd` by ones into i32
//! lanes, reduced once per block), combined by the same integer formula, and the float part is
//! the scalar kernel's expression in the same block order.

use core::arch::x86_64::*;

use super::avx2::f16x4_exact;
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

/// Four rows' nibble vector: bytes 0..16 the low nibbles of `x`, 16..32 the high ones (the
/// storage positions 0..32, as `qxp` is laid out).
#[inline(always)]
unsafe fn nibbles256(x: __m128i) -> __m256i {
    let b = _mm256_broadcastsi128_si256(x);
    _mm256_and_si256(_mm256_srlv_epi32(b, _mm256_setr_epi32(0, 0, 0, 0, 4, 4, 4, 4)), _mm256_set1_epi8(0x0F))
}

/// i32x8 partial sums of Σ_p nib_p · q_p (exact: `maddubs` pairs ≤ 2·15·128).
#[inline(always)]
unsafe fn nib_dot256(n: __m256i, q: __m256i) -> __m256i {
    _mm256_madd_epi16(_mm256_maddubs_epi16(n, q), _mm256_set1_epi16(1))
}

#[target_feature(enable = "avx2")]
unsafe fn pass1_rows4_avx2(a: &[u8], ra: usize, x: &PlanesAct) -> [Pass1; 4] {
    let nb = x.nb;
    let rows: [&[u8]; 4] = [&a[..ra], &a[ra..2 * ra], &a[2 * ra..3 * ra], &a[3 * ra..4 * ra]];
    let (mut a2, mut e1, mut t) = (_mm_setzero_ps(), _mm_setzero_ps(), _mm_setzero_ps());
    let abs_mask = _mm_castsi128_ps(_mm_set1_epi32(0x7fff_ffff));
    for blk in 0..nb {
        let q = &x.qxp[blk];
        // SAFETY: `q` is 32 readable bytes.
        let q = unsafe { _mm256_loadu_si256(q.as_ptr() as *const __m256i) };
        let known = x.c[blk] != 0;
        let end = x.o0 + x.o_off[blk] as usize + x.c[blk] as usize;
        let mask = _mm256_broadcastsi128_si256(mask(x, blk));
        let mut v = [_mm256_setzero_si256(); 4];
        for (k, row) in rows.iter().enumerate() {
            let sh = nib_dot256(nibbles256(ld128(row, nb * 2 + blk * 16)), q);
            let mut s = _mm256_slli_epi32(sh, 5);
            if known {
                let l = _mm256_and_si256(nibbles256(ld128(row, end - 16)), mask);
                s = _mm256_add_epi32(s, _mm256_slli_epi32(nib_dot256(l, q), 1));
            }
            v[k] = s;
        }
        // Lane k of the four-row sum: Σ over row k's eight partials.
        let h = _mm256_hadd_epi32(_mm256_hadd_epi32(v[0], v[1]), _mm256_hadd_epi32(v[2], v[3]));
        let sums = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
        // `pass1_block_int`: 32·(sh − 8·Σq) + 2·sl + c15.
        let ai = _mm_add_epi32(sums, _mm_set1_epi32(x.c15[blk] - 256 * x.sum[blk]));
        let dw = f16x4_exact(rows.map(|r| u16::from_le_bytes([r[2 * blk], r[2 * blk + 1]])));
        let s = _mm_mul_ps(dw, _mm_set1_ps(x.dx[blk]));
        a2 = _mm_add_ps(a2, _mm_mul_ps(_mm_cvtepi32_ps(ai), s));
        let dwa = _mm_and_ps(dw, abs_mask);
        e1 = _mm_add_ps(e1, _mm_mul_ps(dwa, _mm_set1_ps(x.m[blk])));
        t = _mm_add_ps(t, _mm_mul_ps(dwa, _mm_set1_ps(x.n[blk])));
    }
    let (mut av, mut ev, mut tv) = ([0f32; 4], [0f32; 4], [0f32; 4]);
    _mm_storeu_ps(av.as_mut_ptr(), a2);
    _mm_storeu_ps(ev.as_mut_ptr(), e1);
    _mm_storeu_ps(tv.as_mut_ptr(), t);
    [0, 1, 2, 3].map(|k| Pass1 { a2: av[k], e1: ev[k], t: tv[k] })
}

pub(super) fn pass1_rows4(a: &[u8], ra: usize, x: &PlanesAct) -> [Pass1; 4] {
    // SAFETY: handed out only when the CPU has AVX2 (`planes::kernels`).
    unsafe { pass1_rows4_avx2(a, ra, x) }
}

#[target_feature(enable = "avx2")]
unsafe fn full_rows4_avx2(a: &[u8], ra: usize, b: &[u8], rb: usize, x: &PlanesAct) -> [f32; 4] {
    let nb = x.nb;
    let mut sumf = _mm_setzero_ps();
    for blk in 0..nb {
        let q = &x.qxp[blk];
        // SAFETY: `q` is 32 readable bytes.
        let q = unsafe { _mm256_loadu_si256(q.as_ptr() as *const __m256i) };
        let m = mask(x, blk);
        let bo = x.b_off[blk] as usize;
        let mut v = [_mm256_setzero_si256(); 4];
        let mut dwb = [0u16; 4];
        for (k, vk) in v.iter_mut().enumerate() {
            let row = &a[k * ra..];
            let mut tmp = [0u8; 16];
            let rest = ld128(rest16(b, k * rb + bo, &mut tmp), 0);
            let l = _mm_blendv_epi8(rest, known_l(row, x, blk), m);
            let sh = nib_dot256(nibbles256(ld128(row, nb * 2 + blk * 16)), q);
            let sl = nib_dot256(nibbles256(l), q);
            *vk = _mm256_add_epi32(_mm256_slli_epi32(sh, 4), sl);
            dwb[k] = u16::from_le_bytes([row[2 * blk], row[2 * blk + 1]]);
        }
        let h = _mm256_hadd_epi32(_mm256_hadd_epi32(v[0], v[1]), _mm256_hadd_epi32(v[2], v[3]));
        let sums = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
        // `full_block_int`: 16·sh + sl − 128·Σq.
        let sumi = _mm_sub_epi32(sums, _mm_set1_epi32(128 * x.sum[blk]));
        let s = _mm_mul_ps(f16x4_exact(dwb), _mm_set1_ps(x.dx[blk]));
        sumf = _mm_add_ps(sumf, _mm_mul_ps(_mm_cvtepi32_ps(sumi), s));
    }
    let mut out = [0f32; 4];
    _mm_storeu_ps(out.as_mut_ptr(), sumf);
    out
}

pub(super) fn full_rows4(a: &[u8], ra: usize, b: &[u8], rb: usize, x: &PlanesAct) -> [f32; 4] {
    // SAFETY: handed out only when the CPU has AVX2 (`planes::kernels`).
    unsafe { full_rows4_avx2(a, ra, b, rb, x) }
}
