//! AVX2 twins of the plane kernels (`planes.rs`), bit for bit: each block's nibble sums are
//! exact integers (`maddubs`: unsigned nibble × i8 pairs in i16, then `madd` by ones into i32
//! lanes, reduced once per block), combined by the same integer formula, and the float part is
//! the scalar kernel's expression in the same block order.

use core::arch::x86_64::*;

use super::avx2::{f16x4_exact, f16x8_bits};
use super::float::read_f16;
use super::planes::{full_block_int, full_cst, lanes_total, rest16, pass1_block_int, Pass1, PlanesAct, PASS1_LANES};

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

#[target_feature(enable = "avx2,f16c")]
unsafe fn pass1_avx2(a: &[u8], x: &PlanesAct) -> Pass1 {
    let nb = x.nb;
    let (mut a2, mut e) = ([-0f32; PASS1_LANES], [-0f32; PASS1_LANES]);
    for blk in 0..nb {
        let dw = read_f16(a, 2 * blk);
        let (q0, q1) = q_halves(x, blk);
        let sh = nib_dot(ld128(a, nb * 2 + blk * 16), q0, q1);
        let sl = if x.c[blk] == 0 { 0 } else { nib_dot(known_l(a, x, blk), q0, q1) };
        let j = blk % PASS1_LANES;
        a2[j] += pass1_block_int(sh, sl, x, blk) as f32 * (dw * x.dx[blk]);
        e[j] += dw.abs() * x.w[blk];
    }
    Pass1 { a2: lanes_total(a2), e: lanes_total(e) }
}

#[target_feature(enable = "avx2,f16c")]
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

/// Eight rows' f16 scales of blocks `b0..b0 + 8`, transposed: `[k]` holds block `b0 + k` of
/// rows 0..8 (u16x8). Reads the 16 bytes at `2·b0` of each row's `A` part (past its scales
/// that is the `h` plane: in bounds, and lanes beyond the row's last block are never used).
#[inline(always)]
unsafe fn scales8x8(rows: &[&[u8]; 8], b0: usize) -> [__m128i; 8] {
    let r: [__m128i; 8] = core::array::from_fn(|k| unsafe { ld128(rows[k], 2 * b0) });
    // Rows interleaved in pairs (16-bit), then fours (32-bit), then all eight (64-bit).
    let t = [
        _mm_unpacklo_epi16(r[0], r[1]),
        _mm_unpackhi_epi16(r[0], r[1]),
        _mm_unpacklo_epi16(r[2], r[3]),
        _mm_unpackhi_epi16(r[2], r[3]),
        _mm_unpacklo_epi16(r[4], r[5]),
        _mm_unpackhi_epi16(r[4], r[5]),
        _mm_unpacklo_epi16(r[6], r[7]),
        _mm_unpackhi_epi16(r[6], r[7]),
    ];
    let u = [
        _mm_unpacklo_epi32(t[0], t[2]),
        _mm_unpackhi_epi32(t[0], t[2]),
        _mm_unpacklo_epi32(t[1], t[3]),
        _mm_unpackhi_epi32(t[1], t[3]),
        _mm_unpacklo_epi32(t[4], t[6]),
        _mm_unpackhi_epi32(t[4], t[6]),
        _mm_unpacklo_epi32(t[5], t[7]),
        _mm_unpackhi_epi32(t[5], t[7]),
    ];
    [
        _mm_unpacklo_epi64(u[0], u[4]),
        _mm_unpackhi_epi64(u[0], u[4]),
        _mm_unpacklo_epi64(u[1], u[5]),
        _mm_unpackhi_epi64(u[1], u[5]),
        _mm_unpacklo_epi64(u[2], u[6]),
        _mm_unpackhi_epi64(u[2], u[6]),
        _mm_unpacklo_epi64(u[3], u[7]),
        _mm_unpackhi_epi64(u[3], u[7]),
    ]
}

/// The 16 bytes at `at` of rows `k` (low lane) and `k + 4` (high lane).
#[inline(always)]
unsafe fn pair(rows: &[&[u8]; 8], at: usize, k: usize) -> __m256i {
    unsafe { _mm256_set_m128i(ld128(rows[k + 4], at), ld128(rows[k], at)) }
}

/// Per 128-bit lane, i32x4 partial sums of Σ_k lo(v_k)·q[k] + hi(v_k)·q[k+16] (`q_lo`, `q_hi`:
/// the halves of `q` in both lanes). Exact: a `maddubs` pair is ≤ 2·15·128, two still fit i16.
#[inline(always)]
unsafe fn pair_dot(v: __m256i, q_lo: __m256i, q_hi: __m256i) -> __m256i {
    let m4 = _mm256_set1_epi8(0x0F);
    let lo = _mm256_and_si256(v, m4);
    let hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
    _mm256_madd_epi16(_mm256_add_epi16(_mm256_maddubs_epi16(lo, q_lo), _mm256_maddubs_epi16(hi, q_hi)), _mm256_set1_epi16(1))
}

/// Pass 1 of eight rows (`rows[k]`: row k's `A` part). Rows `k` and `k + 4` share a
/// register (one per 128-bit lane), so one nibble split and two `maddubs` serve two rows; three
/// `hadd`s leave the eight rows' block integers in row order, and the float part runs in eight
/// lanes in the scalar kernel's order (no FMA: a product, then a sum, as `pass1_row`).
///
/// `ahead` is where the next call's rows start, in bytes from `rows[0]` (0: none; the rows
/// are consecutive, `streams::STREAMS`): the call prefetches the eight A parts from
/// there a slice per block, as the hardware prefetcher alone leaves pass 1 waiting on memory
/// (a prefetch never faults, past the end of the matrix included).
#[target_feature(enable = "avx2,f16c")]
unsafe fn pass1_rows8_avx2(rows: &[&[u8]; 8], ahead: usize, x: &PlanesAct) -> [Pass1; 8] {
    let nb = x.nb;
    let (a, ra) = (rows[0], rows[0].len());
    let lines = (8 * ra).div_ceil(64).div_ceil(nb);
    let abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fff_ffff));
    // Each a pass-1 lane (block `blk` into `blk % 4`) for eight rows, from −0.0 (`pass1_row`).
    let z = _mm256_set1_ps(-0.0);
    let (mut a2, mut e) = ([z; PASS1_LANES], [z; PASS1_LANES]);
    let mut scales = [_mm_setzero_si128(); 8];
    for blk in 0..nb {
        if ahead != 0 {
            for l in blk * lines..(blk + 1) * lines {
                _mm_prefetch::<_MM_HINT_T0>(a.as_ptr().wrapping_add(ahead + 64 * l) as *const i8);
            }
        }
        if blk % 8 == 0 {
            scales = scales8x8(rows, blk);
        }
        let q = &x.qxp[blk];
        // SAFETY: `q` is 32 readable bytes.
        let (q_lo, q_hi) = unsafe {
            let p = q.as_ptr() as *const __m128i;
            (_mm256_broadcastsi128_si256(_mm_loadu_si128(p)), _mm256_broadcastsi128_si256(_mm_loadu_si128(p.add(1))))
        };
        let known = x.c[blk] != 0;
        let off = nb * 2 + blk * 16;
        let end = x.o0 + x.o_off[blk] as usize + x.c[blk] as usize;
        let mask = _mm256_broadcastsi128_si256(mask(x, blk));
        let mut p = [_mm256_setzero_si256(); 4];
        for (k, pk) in p.iter_mut().enumerate() {
            let mut s = _mm256_slli_epi32(pair_dot(pair(rows, off, k), q_lo, q_hi), 4);
            if known {
                s = _mm256_add_epi32(s, pair_dot(_mm256_and_si256(pair(rows, end - 16, k), mask), q_lo, q_hi));
            }
            *pk = s;
        }
        // [r0 r0 r1 r1 | r4 r4 r5 r5], [r2 r2 r3 r3 | r6 r6 r7 r7] -> [r0 r1 r2 r3 | r4 r5 r6 r7].
        let s8 = _mm256_hadd_epi32(_mm256_hadd_epi32(p[0], p[1]), _mm256_hadd_epi32(p[2], p[3]));
        // `pass1_block_int`: 32·(sh − 8·Σq) + 2·sl + c15 = 2·(16·sh + sl) + c15 − 256·Σq.
        let ai = _mm256_add_epi32(_mm256_slli_epi32(s8, 1), _mm256_set1_epi32(x.c15[blk] - 256 * x.sum[blk]));
        let dw = f16x8_bits(scales[blk % 8]);
        let s = _mm256_mul_ps(dw, _mm256_set1_ps(x.dx[blk]));
        let j = blk % PASS1_LANES;
        a2[j] = _mm256_add_ps(a2[j], _mm256_mul_ps(_mm256_cvtepi32_ps(ai), s));
        let dwa = _mm256_and_ps(dw, abs_mask);
        e[j] = _mm256_add_ps(e[j], _mm256_mul_ps(dwa, _mm256_set1_ps(x.w[blk])));
    }
    // `lanes_total`, eight rows at a time.
    let total = |l: [__m256; PASS1_LANES]| _mm256_add_ps(_mm256_add_ps(l[0], l[1]), _mm256_add_ps(l[2], l[3]));
    let (a2, e) = (total(a2), total(e));
    let (mut av, mut ev) = ([0f32; 8], [0f32; 8]);
    _mm256_storeu_ps(av.as_mut_ptr(), a2);
    _mm256_storeu_ps(ev.as_mut_ptr(), e);
    core::array::from_fn(|k| Pass1 { a2: av[k], e: ev[k] })
}

pub(super) fn pass1_rows8(rows: &[&[u8]; 8], ahead: usize, x: &PlanesAct) -> [Pass1; 8] {
    // SAFETY: handed out only when the CPU has AVX2 and F16C (`planes::kernels`).
    unsafe { pass1_rows8_avx2(rows, ahead, x) }
}

#[target_feature(enable = "avx2,f16c")]
unsafe fn full_rows4_avx2(a: [&[u8]; 4], b: [&[u8]; 4], x: &PlanesAct) -> [f32; 4] {
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
            let row = a[k];
            let mut tmp = [0u8; 16];
            let rest = ld128(rest16(b[k], bo, &mut tmp), 0);
            let l = _mm_blendv_epi8(rest, known_l(row, x, blk), m);
            let sh = nib_dot256(nibbles256(ld128(row, nb * 2 + blk * 16)), q);
            let sl = nib_dot256(nibbles256(l), q);
            *vk = _mm256_add_epi32(_mm256_slli_epi32(sh, 4), sl);
            dwb[k] = u16::from_le_bytes([row[2 * blk], row[2 * blk + 1]]);
        }
        let h = _mm256_hadd_epi32(_mm256_hadd_epi32(v[0], v[1]), _mm256_hadd_epi32(v[2], v[3]));
        let sums = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
        // `full_block_int`: 16·sh + sl − 128·Σq.
        let sumi = _mm_add_epi32(sums, _mm_set1_epi32(full_cst(x, blk)));
        let s = _mm_mul_ps(f16x4_exact(dwb), _mm_set1_ps(x.dx[blk]));
        sumf = _mm_add_ps(sumf, _mm_mul_ps(_mm_cvtepi32_ps(sumi), s));
    }
    let mut out = [0f32; 4];
    _mm_storeu_ps(out.as_mut_ptr(), sumf);
    out
}

pub(super) fn full_rows4(a: [&[u8]; 4], b: [&[u8]; 4], x: &PlanesAct) -> [f32; 4] {
    // SAFETY: handed out only when the CPU has AVX2 (`planes::kernels`).
    unsafe { full_rows4_avx2(a, b, x) }
}
