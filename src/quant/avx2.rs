//! x86-64 AVX2 twins of the scalar `vec_dot` kernels, picked at run time (`enabled`) by the
//! dispatch in `quant/mod.rs` on CPUs that have AVX2; everything else runs the scalar kernels.
//!
//! Every kernel reproduces its scalar twin **bit for bit**, by the same discipline as
//! `simd128.rs`: the integer part of each block (Σ q_w·q_a, weighted by the sub-block scales)
//! is computed exactly in i32 lanes and reduced once per block (integer addition is
//! associative, so lane order does not matter); the float part is then the scalar kernel's
//! expression, in its order, with no FMA (a fused multiply-add rounds once where the scalar
//! code rounds twice). The bounds that keep every step exact:
//! - `vpmaddubsw` (u8 × i8, pairs summed into i16, saturating) only ever sees unsigned weight
//!   quants ≤ 63 and offsets ≤ 32, so a pair is at most 2 · 63 · 128 < 2^15: it never
//!   saturates. A signed offset format (`q - 8`) is summed as `Σ q·a − Σ 8·a` (two such
//!   products subtracted in i16, |result| ≤ 2 · 32 · 128), never with the `vpsignb` trick,
//!   which is wrong for an activation of −128.
//! - Q8_0 × Q8_0 (both signed, −128 possible on both sides) widens to i16 and uses
//!   `vpmaddwd`, whose pairs are at most 2 · 2^14.
//! - The largest block sum is a Q6_K one, 16 sub-blocks · 16 · 32 · 128 · 128 = 2^27, far
//!   below i32's range, so the i32 lanes and their reduction never wrap.
//!
//! One shape drives all formats: eight dots' block terms at once ("lanes"), their integer
//! sums reduced together (`reduce8`) and their float terms computed in one f32x8 (`term8`).
//! - `dot`: lanes are eight consecutive blocks of one row, added to `sumf` in block order.
//! - `rows4` (decode): lanes are four weight rows × two consecutive blocks; lane k and lane
//!   k + 4 are added to row k's sum one after the other, so each row sees its blocks in order.
//! - `toks4` / `toks8` (prefill): lanes are tokens (× two blocks for toks4); the weight block is
//!   unpacked once and shared by all of them.
//!
//! Loads are unaligned, from slices cut to whole blocks first, so every access is in bounds by
//! construction.

use core::arch::x86_64::*;

use super::float::{read_f16, read_f32};
use super::q3_k::unpack_scales as q3_k_scales;
use super::q4_k::scales_mins;
use super::q8_k::{BSUMS_AT, QK_K, QS_AT};
use super::{VecDotKernel, VecDotRows4, VecDotToks4, VecDotToks8};
use crate::gguf::GgmlType;

/// Whether the AVX2 kernels run on this CPU (std caches the CPUID probe, so this is a load).
pub(super) fn enabled() -> bool {
    // F16C (scale conversion, `f16x8`) ships on every AVX2 CPU; checked all the same.
    is_x86_feature_detected!("avx2") && is_x86_feature_detected!("f16c")
}

/// The activation format a weight format is dotted with, and where it keeps its scales.
#[derive(PartialEq, Eq)]
#[allow(non_camel_case_types)]
enum Act {
    /// d: f16 at 0, 32 i8 quants at 2.
    Q8_0,
    /// d: f16 at 0, s = d·Σq: f16 at 2, 32 i8 quants at 4.
    Q8_1,
    /// d: f32 at 0, 256 i8 quants at 4, 16 i16 bsums at 260.
    Q8_K,
}

impl Act {
    const fn bytes(&self) -> usize {
        match self {
            Act::Q8_0 => 34,
            Act::Q8_1 => 36,
            Act::Q8_K => 292,
        }
    }
}

/// How a block's integer sum `s` (and, for formats with mins, the min sum `m`) becomes its
/// float term: the scalar kernel's expression, operand order included (f32 multiplication is
/// commutative bit for bit, but not associative).
enum Comb {
    /// Q4_0: `s * dx * dy`.
    SDxDy,
    /// Q5_0, Q8_0, Q3_K, Q6_K: `(dx * dy) * s` (Q8_0's `s * (dx*dy)` is the same bits).
    DxDyS,
    /// Q4_1, Q5_1: `(dx * dy) * s + mx * sy`.
    PlusMxSy,
    /// Q2_K, Q4_K, Q5_K: `(dx * dy) * s - (mx * dy) * m`, mx the block's dmin.
    MinusMins,
}

/// One weight format: its block layout and the AVX2 pieces of its block dot.
trait Fmt {
    const QK: usize;
    /// Bytes of one weight block.
    const WB: usize;
    const ACT: Act;
    /// Byte offsets of the weight block's f16 scale and second f16 (min, dmin) if any.
    const WD: usize;
    const WM: usize = 0;
    const COMB: Comb;
    /// A weight block unpacked into registers (shared by every token of a toks kernel).
    type W;
    /// An activation block prepared (shared by every row of a rows4 kernel).
    type A;
    /// # Safety: AVX2 present; `x` is one whole weight block.
    unsafe fn w(x: &[u8]) -> Self::W;
    /// # Safety: AVX2 present; `y` is one whole activation block.
    unsafe fn a(y: &[u8]) -> Self::A;
    /// i32x8 partial sums of the block's integer sum and (formats with mins) of its min sum.
    /// # Safety: AVX2 present; `y` is the block `a` was made from.
    unsafe fn isum(w: &Self::W, a: &Self::A, y: &[u8]) -> (__m256i, __m256i);
}

// ---- small helpers -----------------------------------------------------------------------
// All `unsafe` for one reason: they use AVX2 instructions, so they may only run inside the
// `#[target_feature(enable = "avx2,f16c")]` shape functions, into which they are always inlined.

/// `[e(0), e(1), ..]` built inline (`core::array::from_fn` is not reliably inlined into the
/// AVX2 functions, and a call per lane would cost more than the lane's work).
macro_rules! lanes {
    (4, |$k:ident| $e:expr) => {
        [{ let $k = 0usize; $e }, { let $k = 1usize; $e }, { let $k = 2usize; $e }, { let $k = 3usize; $e }]
    };
    (8, |$k:ident| $e:expr) => {
        [
            { let $k = 0usize; $e }, { let $k = 1usize; $e }, { let $k = 2usize; $e }, { let $k = 3usize; $e },
            { let $k = 4usize; $e }, { let $k = 5usize; $e }, { let $k = 6usize; $e }, { let $k = 7usize; $e },
        ]
    };
}

#[inline(always)]
unsafe fn ld(b: &[u8], at: usize) -> __m256i {
    let s = &b[at..at + 32];
    // SAFETY: `s` is 32 readable bytes; loadu has no alignment requirement.
    unsafe { _mm256_loadu_si256(s.as_ptr() as *const __m256i) }
}

#[inline(always)]
unsafe fn ld128(b: &[u8], at: usize) -> __m128i {
    let s = &b[at..at + 16];
    // SAFETY: `s` is 16 readable bytes; loadu has no alignment requirement.
    unsafe { _mm_loadu_si128(s.as_ptr() as *const __m128i) }
}

#[inline(always)]
unsafe fn splat8(v: i8) -> __m256i {
    _mm256_set1_epi8(v)
}

/// Per-byte `v >> n` (n < 8) for quants that fit in the bits kept by the caller's mask.
#[inline(always)]
unsafe fn shr16(v: __m256i, n: usize) -> __m256i {
    _mm256_srl_epi16(v, _mm_cvtsi32_si128(n as i32))
}

/// i32x8 partial sums of Σ p_i (i16 pairs) · the two i16 `scales` of the 128-bit halves.
#[inline(always)]
unsafe fn scaled(p: __m256i, lo: i16, hi: i16) -> __m256i {
    _mm256_madd_epi16(p, _mm256_set_m128i(_mm_set1_epi16(hi), _mm_set1_epi16(lo)))
}

/// i16 pair sums of Σ (q − off_i)·a: `q` unsigned quants, `off` the offsets, both ≤ 63.
#[inline(always)]
unsafe fn offset_pairs(q: __m256i, off: __m256i, a: __m256i) -> __m256i {
    _mm256_sub_epi16(_mm256_maddubs_epi16(q, a), _mm256_maddubs_epi16(off, a))
}

/// The 32 nibbles of 16 bytes at `x[at..]`, in element order (low nibbles are elements 0..16,
/// high nibbles 16..32, as Q4_0/Q4_1/Q5_0/Q5_1 and their Q8 activations lay them out).
#[inline(always)]
unsafe fn nibbles32(x: &[u8], at: usize) -> __m256i {
    let b = ld128(x, at);
    _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(b, 4), b), splat8(0x0f))
}

/// Byte j = 0x10 where bit j of the little-endian u32 at `x[at..]` is set (Q5_0/Q5_1's
/// fifth bits, already in place).
#[inline(always)]
unsafe fn fifth_bits32(x: &[u8], at: usize) -> __m256i {
    let qh = u32::from_le_bytes([x[at], x[at + 1], x[at + 2], x[at + 3]]);
    let sel = _mm256_shuffle_epi8(
        _mm256_set1_epi32(qh as i32),
        _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3),
    );
    let bit = _mm256_set1_epi64x(0x8040_2010_0804_0201u64 as i64);
    _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(sel, bit), bit), splat8(0x10))
}

/// f16 bits (zero-extended in u32 lanes) -> f32x8, the same bits as `float::f16_to_f32` lane by
/// lane: the same exact rescale by 2^112 for finite values (subnormals included: no FTZ/DAZ),
/// the same payload shift for Inf/NaN. (F16C's `vcvtph2ps` would quiet signalling NaNs.)
#[inline(always)]
unsafe fn f16_bits_to_f32x8(h: __m256i) -> __m256 {
    let em = _mm256_and_si256(h, _mm256_set1_epi32(0x7fff));
    let sign = _mm256_slli_epi32(_mm256_and_si256(h, _mm256_set1_epi32(0x8000)), 16);
    let mag = _mm256_mul_ps(_mm256_castsi256_ps(_mm256_slli_epi32(em, 13)), _mm256_set1_ps(f32::from_bits(0x7780_0000)));
    let special = _mm256_or_si256(_mm256_set1_epi32(0x7f80_0000), _mm256_slli_epi32(_mm256_and_si256(em, _mm256_set1_epi32(0x03ff)), 13));
    let is_special = _mm256_cmpgt_epi32(em, _mm256_set1_epi32(0x7bff));
    let v = _mm256_blendv_epi8(_mm256_castps_si256(mag), special, is_special);
    _mm256_castsi256_ps(_mm256_or_si256(v, sign))
}

/// Four f16 values -> f32x4, bit-exact as `float::f16_to_f32` (the low half of [`f16x8_bits`]).
#[inline(always)]
pub(super) unsafe fn f16x4_exact(h: [u16; 4]) -> __m128 {
    let p = _mm_setr_epi16(h[0] as i16, h[1] as i16, h[2] as i16, h[3] as i16, 0, 0, 0, 0);
    _mm256_castps256_ps128(f16x8_bits(p))
}

/// The f16 at byte `at` of each of eight blocks, as f32x8. F16C's `vcvtph2ps` converts every
/// finite f16 and ±Inf exactly (an f16 is exactly representable in f32, subnormals included),
/// so it gives `float::f16_to_f32`'s bits for all of them in one instruction; only a NaN may
/// differ (it quiets a signalling one), so eight scales holding any NaN take the bit-exact
/// integer path instead. Real scales are never NaN: the branch is always predicted.
#[inline(always)]
unsafe fn f16x8(b: &[&[u8]; 8], at: usize) -> __m256 {
    let h: [i16; 8] = lanes!(8, |k| i16::from_le_bytes([b[k][at], b[k][at + 1]]));
    f16x8_bits(_mm_setr_epi16(h[0], h[1], h[2], h[3], h[4], h[5], h[6], h[7]))
}

/// Eight f16 bit patterns (u16x8) as f32x8, bit-exact as `float::f16_to_f32`: F16C unless one
/// of them is a NaN (see [`f16x8`]).
#[inline(always)]
pub(super) unsafe fn f16x8_bits(p: __m128i) -> __m256 {
    // |h| > 0x7c00 (exponent all ones, mantissa non-zero): a NaN, as a signed compare of the
    // 15-bit magnitudes.
    let nan = _mm_cmpgt_epi16(_mm_and_si128(p, _mm_set1_epi16(0x7fff)), _mm_set1_epi16(0x7c00));
    if _mm_movemask_epi8(nan) == 0 {
        _mm256_cvtph_ps(p)
    } else {
        f16_bits_to_f32x8(_mm256_cvtepu16_epi32(p))
    }
}

/// Lane k = the sum of the eight i32 lanes of `v[k]` (exact: the sums are far below 2^31).
#[inline(always)]
unsafe fn reduce8(v: &[__m256i; 8]) -> __m256i {
    let h01 = _mm256_hadd_epi32(v[0], v[1]);
    let h23 = _mm256_hadd_epi32(v[2], v[3]);
    let h45 = _mm256_hadd_epi32(v[4], v[5]);
    let h67 = _mm256_hadd_epi32(v[6], v[7]);
    // [v0..v3 partial over halves | same], [v4..v7 ...]
    let a = _mm256_hadd_epi32(h01, h23);
    let b = _mm256_hadd_epi32(h45, h67);
    _mm256_add_epi32(_mm256_permute2x128_si256::<0x20>(a, b), _mm256_permute2x128_si256::<0x31>(a, b))
}

/// Eight lanes' scalar from byte `at` of their blocks `b` (`read` decodes one), where the
/// shape guarantees only `D` distinct blocks: 8 (gathered lane by lane), 2 (lanes 0..4 share
/// `b[0]`, lanes 4..8 `b[4]`) or 1 (all share `b[0]`). Sharing saves the gather, not bits.
#[inline(always)]
unsafe fn lanes_scale<const D: usize>(b: &[&[u8]; 8], at: usize, f16: bool) -> __m256 {
    #[inline(always)]
    fn read(b: &[u8], at: usize, f16: bool) -> f32 {
        if f16 { read_f16(b, at) } else { read_f32(b, at) }
    }
    match D {
        1 => _mm256_set1_ps(read(b[0], at, f16)),
        2 => _mm256_set_m128(_mm_set1_ps(read(b[4], at, f16)), _mm_set1_ps(read(b[0], at, f16))),
        _ if f16 => f16x8(b, at),
        _ => {
            let v: [f32; 8] = lanes!(8, |k| read(b[k], at, false));
            _mm256_setr_ps(v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7])
        }
    }
}

/// The float terms of eight (weight block, activation block) lanes with integer partial sums
/// `s` (and min sums `m`): lane k = the scalar kernel's block term for lane k. `DW` / `DA`: how
/// many distinct weight / activation blocks the lanes hold (see `lanes_scale`).
#[inline(always)]
unsafe fn term8<F: Fmt, const DW: usize, const DA: usize>(x: &[&[u8]; 8], y: &[&[u8]; 8], s: &[__m256i; 8], m: &[__m256i; 8]) -> __m256 {
    let si = _mm256_cvtepi32_ps(reduce8(s));
    let dx = lanes_scale::<DW>(x, F::WD, true);
    let dy = lanes_scale::<DA>(y, 0, F::ACT != Act::Q8_K);
    let dxdy_s = _mm256_mul_ps(_mm256_mul_ps(dx, dy), si);
    match F::COMB {
        Comb::SDxDy => _mm256_mul_ps(_mm256_mul_ps(si, dx), dy),
        Comb::DxDyS => dxdy_s,
        Comb::PlusMxSy => _mm256_add_ps(dxdy_s, _mm256_mul_ps(lanes_scale::<DW>(x, F::WM, true), lanes_scale::<DA>(y, 2, true))),
        Comb::MinusMins => {
            let mi = _mm256_cvtepi32_ps(reduce8(m));
            _mm256_sub_ps(dxdy_s, _mm256_mul_ps(_mm256_mul_ps(lanes_scale::<DW>(x, F::WM, true), dy), mi))
        }
    }
}

#[inline]
fn wblk<F: Fmt>(row: &[u8], i: usize) -> &[u8] {
    &row[i * F::WB..(i + 1) * F::WB]
}

#[inline]
fn ablk<F: Fmt>(row: &[u8], i: usize) -> &[u8] {
    &row[i * F::ACT.bytes()..(i + 1) * F::ACT.bytes()]
}

// ---- the four shapes ---------------------------------------------------------------------

#[target_feature(enable = "avx2,f16c")]
unsafe fn dot<F: Fmt>(w: &[u8], a: &[u8], n: usize) -> f32 {
    let nb = n / F::QK;
    let (w, a) = (&w[..nb * F::WB], &a[..nb * F::ACT.bytes()]);
    let mut sumf = 0f32;
    let z = _mm256_setzero_si256();
    for g in (0..nb).step_by(8) {
        let live = (nb - g).min(8);
        // Lanes past the row's end repeat its last block; their terms are not added.
        let blk = |k: usize| g + k.min(live - 1);
        let x: [&[u8]; 8] = lanes!(8, |k| wblk::<F>(w, blk(k)));
        let y: [&[u8]; 8] = lanes!(8, |k| ablk::<F>(a, blk(k)));
        let (mut s, mut m) = ([z; 8], [z; 8]);
        for k in 0..8 {
            // SAFETY: AVX2 is enabled here; x[k], y[k] are whole blocks.
            (s[k], m[k]) = unsafe { F::isum(&F::w(x[k]), &F::a(y[k]), y[k]) };
        }
        // SAFETY: __m256 and [f32; 8] have the same size; lane k is element k.
        let t: [f32; 8] = unsafe { core::mem::transmute(term8::<F, 8, 8>(&x, &y, &s, &m)) };
        for &v in &t[..live] {
            sumf += v;
        }
    }
    sumf
}

/// Four dots × two consecutive blocks per step: lane k < 4 is dot k's block i, lane k + 4 its
/// block i + 1. Dot k is weight row `xr[k]` × activation row `yr[k]`; `TOKS` says which side
/// the four share (one weight row: toks4, its blocks unpacked once; else one activation row:
/// rows4, its blocks prepared once). The unused side's unpacking is dead code, removed.
#[inline(always)]
unsafe fn quad<F: Fmt, const TOKS: bool>(xr: [&[u8]; 4], yr: [&[u8]; 4], nb: usize, ahead: usize) -> [f32; 4] {
    let z = _mm256_setzero_si256();
    let mut acc = _mm_setzero_ps();
    for i in (0..nb).step_by(2) {
        if ahead != 0 {
            // The same two blocks of the rows `ahead` bytes on (the next call's four rows, in
            // the caller's slice: `rows4`): the hardware prefetcher alone leaves decode waiting
            // on memory.
            for r in xr {
                for line in (0..2 * F::WB).step_by(64) {
                    _mm_prefetch::<_MM_HINT_T0>(r.as_ptr().wrapping_add(i * F::WB + ahead + line) as *const i8);
                }
            }
        }
        // An odd last block fills both halves; the second is not added.
        let j = (i + 1).min(nb - 1);
        let blk = |k: usize| if k < 4 { i } else { j };
        let x: [&[u8]; 8] = lanes!(8, |k| wblk::<F>(xr[k % 4], blk(k)));
        let y: [&[u8]; 8] = lanes!(8, |k| ablk::<F>(yr[k % 4], blk(k)));
        // SAFETY (all unsafe calls below): AVX2 is enabled here; the slices are whole blocks.
        let (wi, wj, ai, aj) = unsafe { (F::w(x[0]), F::w(x[4]), F::a(y[0]), F::a(y[4])) };
        let (mut s, mut m) = ([z; 8], [z; 8]);
        for k in 0..8 {
            let hi = k >= 4;
            (s[k], m[k]) = unsafe {
                if TOKS {
                    F::isum(if hi { &wj } else { &wi }, &F::a(y[k]), y[k])
                } else {
                    F::isum(&F::w(x[k]), if hi { &aj } else { &ai }, y[k])
                }
            };
        }
        let t = if TOKS { term8::<F, 2, 8>(&x, &y, &s, &m) } else { term8::<F, 8, 2>(&x, &y, &s, &m) };
        acc = _mm_add_ps(acc, _mm256_castps256_ps128(t));
        if j > i {
            acc = _mm_add_ps(acc, _mm256_extractf128_ps::<1>(t));
        }
    }
    // SAFETY: __m128 and [f32; 4] have the same size; lane k is element k.
    unsafe { core::mem::transmute(acc) }
}

#[target_feature(enable = "avx2,f16c")]
unsafe fn rows4<F: Fmt>(w: &[u8], rb: usize, a: &[u8], n: usize) -> [f32; 4] {
    let nb = n / F::QK;
    let a = &a[..nb * F::ACT.bytes()];
    // The next call's rows where `w` holds them (`VecDotRows4`); none after the last group.
    let ahead = if w.len() >= 8 * rb { 4 * rb } else { 0 };
    quad::<F, false>(lanes!(4, |k| &w[k * rb..k * rb + nb * F::WB]), [a; 4], nb, ahead)
}

#[target_feature(enable = "avx2,f16c")]
unsafe fn toks4<F: Fmt>(w: &[u8], a: &[u8], ab: usize, n: usize) -> [f32; 4] {
    let nb = n / F::QK;
    let w = &w[..nb * F::WB];
    quad::<F, true>([w; 4], lanes!(4, |k| &a[k * ab..k * ab + nb * F::ACT.bytes()]), nb, 0)
}

#[target_feature(enable = "avx2,f16c")]
unsafe fn toks8<F: Fmt>(w: &[u8], a: &[u8], ab: usize, n: usize) -> [f32; 8] {
    let nb = n / F::QK;
    let w = &w[..nb * F::WB];
    let t: [&[u8]; 8] = lanes!(8, |k| &a[k * ab..k * ab + nb * F::ACT.bytes()]);
    let z = _mm256_setzero_si256();
    let mut acc = _mm256_setzero_ps();
    for i in 0..nb {
        let x: [&[u8]; 8] = [wblk::<F>(w, i); 8];
        let y: [&[u8]; 8] = lanes!(8, |k| ablk::<F>(t[k], i));
        // SAFETY (all unsafe calls below): AVX2 is enabled here; the slices are whole blocks.
        let wi = unsafe { F::w(x[0]) };
        let (mut s, mut m) = ([z; 8], [z; 8]);
        for k in 0..8 {
            (s[k], m[k]) = unsafe { F::isum(&wi, &F::a(y[k]), y[k]) };
        }
        acc = _mm256_add_ps(acc, term8::<F, 1, 8>(&x, &y, &s, &m));
    }
    // SAFETY: __m256 and [f32; 8] have the same size; lane k is element k.
    unsafe { core::mem::transmute(acc) }
}

// ---- the formats -------------------------------------------------------------------------

/// Q4_0 (nibbles, offset 8) and Q5_0 (nibbles + fifth bit, offset 16) × Q8_0.
struct Q4_0;
struct Q5_0;
/// Q4_1 / Q5_1 (unsigned quants, an f16 offset `m`) × Q8_1.
struct Q4_1;
struct Q5_1;
struct Q8_0;

/// A Q8_0/Q8_1 activation block for the nibble formats: its quants and the i16 pair sums of
/// OFF·a (zero for Q4_1/Q5_1, whose offset is the f16 `m` instead).
struct OffAct {
    q: __m256i,
    off: __m256i,
}

/// The 32-element nibble formats: unsigned quants `unpack(x)` minus the integer offset `$off`
/// (Q4_0: 8, Q5_0: 16, Q4_1/Q5_1: 0), against `$act` whose quants start at `$qs`.
macro_rules! nibble_format {
    ($t:ty, $wb:expr, $act:expr, $qs:expr, $wm:expr, $comb:expr, $off:expr, |$x:ident| $unpack:expr) => {
        impl Fmt for $t {
            const QK: usize = 32;
            const WB: usize = $wb;
            const ACT: Act = $act;
            const WD: usize = 0;
            const WM: usize = $wm;
            const COMB: Comb = $comb;
            type W = __m256i;
            type A = OffAct;
            #[inline(always)]
            unsafe fn w($x: &[u8]) -> __m256i {
                $unpack
            }
            #[inline(always)]
            unsafe fn a(y: &[u8]) -> OffAct {
                let q = ld(y, $qs);
                let off = if $off == 0 { _mm256_setzero_si256() } else { _mm256_maddubs_epi16(splat8($off), q) };
                OffAct { q, off }
            }
            #[inline(always)]
            unsafe fn isum(w: &__m256i, a: &OffAct, _y: &[u8]) -> (__m256i, __m256i) {
                let mut p = _mm256_maddubs_epi16(*w, a.q);
                if $off != 0 {
                    p = _mm256_sub_epi16(p, a.off);
                }
                (_mm256_madd_epi16(p, _mm256_set1_epi16(1)), _mm256_setzero_si256())
            }
        }
    };
}

nibble_format!(Q4_0, 18, Act::Q8_0, 2, 0, Comb::SDxDy, 8, |x| nibbles32(x, 2));
nibble_format!(Q5_0, 22, Act::Q8_0, 2, 0, Comb::DxDyS, 16, |x| _mm256_or_si256(nibbles32(x, 6), fifth_bits32(x, 2)));
nibble_format!(Q4_1, 20, Act::Q8_1, 4, 2, Comb::PlusMxSy, 0, |x| nibbles32(x, 4));
nibble_format!(Q5_1, 24, Act::Q8_1, 4, 2, Comb::PlusMxSy, 0, |x| _mm256_or_si256(nibbles32(x, 8), fifth_bits32(x, 4)));

/// The 32 i8 at `b[at..]` widened to two i16x16.
#[inline(always)]
unsafe fn widen32(b: &[u8], at: usize) -> [__m256i; 2] {
    [_mm256_cvtepi8_epi16(ld128(b, at)), _mm256_cvtepi8_epi16(ld128(b, at + 16))]
}

impl Fmt for Q8_0 {
    const QK: usize = 32;
    const WB: usize = 34;
    const ACT: Act = Act::Q8_0;
    const WD: usize = 0;
    const COMB: Comb = Comb::DxDyS;
    type W = [__m256i; 2];
    type A = [__m256i; 2];
    #[inline(always)]
    unsafe fn w(x: &[u8]) -> [__m256i; 2] {
        widen32(x, 2)
    }
    #[inline(always)]
    unsafe fn a(y: &[u8]) -> [__m256i; 2] {
        widen32(y, 2)
    }
    #[inline(always)]
    unsafe fn isum(w: &[__m256i; 2], a: &[__m256i; 2], _y: &[u8]) -> (__m256i, __m256i) {
        let s = _mm256_add_epi32(_mm256_madd_epi16(w[0], a[0]), _mm256_madd_epi16(w[1], a[1]));
        (s, _mm256_setzero_si256())
    }
}

/// A k-quant block unpacked: the unsigned quants of its eight 32-element chunks (chunk c =
/// elements 32c..32c+32), each chunk's offsets (Q3_K, Q6_K; subtracted as `Σ off·a`), the two
/// i16 scales of each chunk's halves (elements 0..16, 16..32; Q4_K/Q5_K chunks have one scale)
/// and the i16 mins each bsum is multiplied by (Q2_K, Q4_K, Q5_K).
struct KBlock {
    q: [__m256i; 8],
    off: Option<[__m256i; 8]>,
    sc: [(i16, i16); 8],
    mins: __m256i,
}

#[inline(always)]
unsafe fn k_isum(w: &KBlock, y: &[u8]) -> (__m256i, __m256i) {
    let mut acc = _mm256_setzero_si256();
    for c in 0..8 {
        let a = ld(y, QS_AT + 32 * c);
        let p = match &w.off {
            Some(off) => offset_pairs(w.q[c], off[c], a),
            None => _mm256_maddubs_epi16(w.q[c], a),
        };
        acc = _mm256_add_epi32(acc, scaled(p, w.sc[c].0, w.sc[c].1));
    }
    (acc, _mm256_madd_epi16(ld(y, BSUMS_AT), w.mins))
}

macro_rules! k_format {
    ($t:ident, $wb:expr, $wd:expr, $wm:expr, $comb:expr, |$x:ident| $unpack:expr) => {
        #[allow(non_camel_case_types)]
        struct $t;
        impl Fmt for $t {
            const QK: usize = QK_K;
            const WB: usize = $wb;
            const ACT: Act = Act::Q8_K;
            const WD: usize = $wd;
            const WM: usize = $wm;
            const COMB: Comb = $comb;
            type W = KBlock;
            type A = ();
            #[inline(always)]
            unsafe fn w($x: &[u8]) -> KBlock {
                $unpack
            }
            #[inline(always)]
            unsafe fn a(_y: &[u8]) {}
            #[inline(always)]
            unsafe fn isum(w: &KBlock, _a: &(), y: &[u8]) -> (__m256i, __m256i) {
                k_isum(w, y)
            }
        }
    };
}

/// Q4_K / Q5_K: chunk c = sub-block c: the nibbles of `qs[32(c/2)..]` (low for even c, high for
/// odd), with Q5_K's fifth bit c of `qh[l]`; scale and min c from the packed 12 bytes.
#[inline(always)]
unsafe fn unpack_q45_k(x: &[u8], qs_at: usize, qh_at: Option<usize>) -> KBlock {
    let (sc, m) = scales_mins(&x[4..16]);
    let m4 = splat8(0x0f);
    let mut q = [_mm256_setzero_si256(); 8];
    for p in 0..4 {
        let b = ld(x, qs_at + 32 * p);
        q[2 * p] = _mm256_and_si256(b, m4);
        q[2 * p + 1] = _mm256_and_si256(_mm256_srli_epi16(b, 4), m4);
    }
    if let Some(at) = qh_at {
        let qh = ld(x, at);
        for (c, v) in q.iter_mut().enumerate() {
            let bit = _mm256_and_si256(shr16(qh, c), splat8(1));
            *v = _mm256_or_si256(*v, _mm256_slli_epi16(bit, 4));
        }
    }
    // Each min multiplies the two bsums of its sub-block.
    let mi = |j: usize| m[j] as i16;
    let mins = _mm256_setr_epi16(mi(0), mi(0), mi(1), mi(1), mi(2), mi(2), mi(3), mi(3), mi(4), mi(4), mi(5), mi(5), mi(6), mi(6), mi(7), mi(7));
    KBlock { q, off: None, sc: lanes!(8, |c| (sc[c] as i16, sc[c] as i16)), mins }
}

k_format!(Q4_K, 144, 0, 2, Comb::MinusMins, |x| unpack_q45_k(x, 16, None));
k_format!(Q5_K, 176, 0, 2, Comb::MinusMins, |x| unpack_q45_k(x, 48, Some(16)));

/// Q2_K: chunk c = 4h + s is `(qs[32h + l] >> 2s) & 3`; sub-block j's scale is the low nibble
/// of `scales[j]`, its min the high nibble.
#[inline(always)]
unsafe fn unpack_q2_k(x: &[u8]) -> KBlock {
    let mut q = [_mm256_setzero_si256(); 8];
    for (c, v) in q.iter_mut().enumerate() {
        *v = _mm256_and_si256(shr16(ld(x, 16 + 32 * (c / 4)), 2 * (c % 4)), splat8(3));
    }
    let s = &x[0..16];
    let sc = lanes!(8, |c| ((s[2 * c] & 0x0f) as i16, (s[2 * c + 1] & 0x0f) as i16));
    let mins = _mm256_srli_epi16(_mm256_cvtepu8_epi16(ld128(x, 0)), 4);
    KBlock { q, off: None, sc, mins }
}

/// Q3_K: chunk c = 4h + s has low bits `(qs[32h + l] >> 2s) & 3` and offset 4 where bit c of
/// `hmask[l]` is clear; its two scales are the signed 6-bit scales 2c, 2c + 1.
#[inline(always)]
unsafe fn unpack_q3_k(x: &[u8]) -> KBlock {
    let hm = ld(x, 0);
    let one = splat8(1);
    let mut q = [_mm256_setzero_si256(); 8];
    let mut off = [_mm256_setzero_si256(); 8];
    for c in 0..8 {
        q[c] = _mm256_and_si256(shr16(ld(x, 32 + 32 * (c / 4)), 2 * (c % 4)), splat8(3));
        off[c] = _mm256_slli_epi16(_mm256_andnot_si256(shr16(hm, c), one), 2);
    }
    let s = q3_k_scales(&x[96..108]);
    let sc = lanes!(8, |c| (s[2 * c] as i16, s[2 * c + 1] as i16));
    KBlock { q, off: Some(off), sc, mins: _mm256_setzero_si256() }
}

/// Q6_K: chunk c = 4h + s is `low | high << 4` (0..63, the format subtracts 32): low the low
/// (s < 2) or high nibble of `ql[64h + 32(s % 2) + l]`, high `(qh[32h + l] >> 2s) & 3`; its two
/// scales are the i8 scales 2c, 2c + 1.
#[inline(always)]
unsafe fn unpack_q6_k(x: &[u8]) -> KBlock {
    let (m4, m3) = (splat8(0x0f), splat8(3));
    let mut q = [_mm256_setzero_si256(); 8];
    for c in 0..8 {
        let (h, s) = (c / 4, c % 4);
        let ql = ld(x, 64 * h + 32 * (s % 2));
        let low = if s < 2 { _mm256_and_si256(ql, m4) } else { _mm256_and_si256(_mm256_srli_epi16(ql, 4), m4) };
        let high = _mm256_and_si256(shr16(ld(x, 128 + 32 * h), 2 * s), m3);
        q[c] = _mm256_or_si256(low, _mm256_slli_epi16(high, 4));
    }
    let s = &x[192..208];
    let sc = lanes!(8, |c| (s[2 * c] as i8 as i16, s[2 * c + 1] as i8 as i16));
    KBlock { q, off: Some([splat8(32); 8]), sc, mins: _mm256_setzero_si256() }
}

k_format!(Q2_K, 84, 80, 82, Comb::MinusMins, |x| unpack_q2_k(x));
k_format!(Q3_K, 110, 108, 0, Comb::DxDyS, |x| unpack_q3_k(x));
k_format!(Q6_K, 210, 208, 0, Comb::DxDyS, |x| unpack_q6_k(x));

// ---- entry points (plain fns for the kernel tables) --------------------------------------
// Safe wrappers: `quant/mod.rs` hands them out only when `enabled()` said AVX2 is present.

fn dot_entry<F: Fmt>(w: &[u8], a: &[u8], n: usize) -> f32 {
    // SAFETY: only dispatched when `enabled()`.
    unsafe { dot::<F>(w, a, n) }
}
fn rows4_entry<F: Fmt>(w: &[u8], rb: usize, a: &[u8], n: usize) -> [f32; 4] {
    // SAFETY: only dispatched when `enabled()`.
    unsafe { rows4::<F>(w, rb, a, n) }
}
fn toks4_entry<F: Fmt>(w: &[u8], a: &[u8], ab: usize, _d: &[f32], n: usize) -> [f32; 4] {
    // SAFETY: only dispatched when `enabled()`.
    unsafe { toks4::<F>(w, a, ab, n) }
}
fn toks8_entry<F: Fmt>(w: &[u8], a: &[u8], ab: usize, _d: &[f32], n: usize) -> [f32; 8] {
    // SAFETY: only dispatched when `enabled()`.
    unsafe { toks8::<F>(w, a, ab, n) }
}

/// The four AVX2 kernels of one weight format.
pub(super) struct Kernels {
    pub dot: VecDotKernel,
    pub rows4: VecDotRows4,
    pub toks4: VecDotToks4,
    pub toks8: VecDotToks8,
}

const fn kernels<F: Fmt>() -> Kernels {
    Kernels { dot: dot_entry::<F>, rows4: rows4_entry::<F>, toks4: toks4_entry::<F>, toks8: toks8_entry::<F> }
}

/// The AVX2 kernels for weights of type `ty` (every quantized weight type; the float types
/// keep their scalar kernels, whose f64 running sum has no reorderable SIMD twin). Callers
/// check `enabled()` first.
pub(super) fn kernels_for(ty: GgmlType) -> Option<&'static Kernels> {
    use GgmlType as T;
    static TABLE: [Kernels; 10] = [
        kernels::<Q4_0>(),
        kernels::<Q4_1>(),
        kernels::<Q5_0>(),
        kernels::<Q5_1>(),
        kernels::<Q8_0>(),
        kernels::<Q2_K>(),
        kernels::<Q3_K>(),
        kernels::<Q4_K>(),
        kernels::<Q5_K>(),
        kernels::<Q6_K>(),
    ];
    let i = match ty {
        T::Q4_0 => 0,
        T::Q4_1 => 1,
        T::Q5_0 => 2,
        T::Q5_1 => 3,
        T::Q8_0 => 4,
        T::Q2_K => 5,
        T::Q3_K => 6,
        T::Q4_K => 7,
        T::Q5_K => 8,
        T::Q6_K => 9,
        _ => return None,
    };
    Some(&TABLE[i])
}
