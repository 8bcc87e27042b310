//! The relaxed-SIMD tier: matmul kernels built on `i32x4.relaxed_dot_i8x16_i7x16_add_s`
//! (compiled only with `target_feature = "relaxed-simd"`; the npm package ships this build beside
//! the SIMD128 one and picks it where a probe runs relaxed SIMD with the standard's exact result,
//! see pkg/src/tier.js).
//!
//! The instruction is "relaxed" only where its second operand leaves 7 bits: on x86 it lowers
//! to `pmaddubsw` (that operand read as unsigned) or VNNI `vpdpbusd`, on Arm to `sdot` (signed).
//! With the second operand in 0..=127 every lowering gives the exact Σ a·b (no pair sum can
//! saturate: 2 · 128 · 127 < 2^15), so every kernel here keeps the SIMD128 tier's contract:
//! each block's integer sum is the exact i32 of the scalar kernel and the float part is the
//! scalar expression, so results are **bit-identical** to the scalar reference. How each format
//! gets a 7-bit operand:
//! - Q4_0 / Q5_0 / Q4_K / Q6_K: the stored unsigned quant (0..15, 0..31, 0..15, 0..63) is the
//!   7-bit operand, the activation the signed one. Where the format subtracts an offset (Q4_0 8,
//!   Q5_0 16, Q6_K 32) it is put back exactly as `−off · Σa`: for Q4_0 / Q5_0 decode once per
//!   block of the prepared activation, added after the four rows' sums are reduced; for their
//!   prefill in i16 lanes, as a relaxed dot of the activation with `splat(off)`; for Q6_K from
//!   the Q8_K activation's 16-element sums times the scales; Q4_K's mins use the activation's
//!   block sums, as the scalar kernel does.
//! - Where a pair of products fits i16 (every format but Q8_0, whose split halves use the i32
//!   form), the kernels use the i16 form `i16x8.relaxed_dot_i8x16_i7x16_s` (one `pmaddubsw` on
//!   x86 without VNNI) and widen once (Q4_0 / Q5_0: `extadd_pairwise`; Q6_K: `dot_i16x8` against
//!   the scale, which widens and weights in one), rather than the i32 form, which V8 lowers
//!   there to several (`pmaddubsw`, `pmaddwd` against ones, an add): measured in Chromium,
//!   Q5_0-heavy prefill 1.24×, greedy decode 1.045×.
//! - Q8_0 (signed weights): the activation is split into `max(a, 0)` and `max(−a, 0)`, both
//!   0..=127, and Σ w·a = Σ w·a⁺ − Σ w·a⁻. −128 has no 7-bit magnitude: a block whose activation
//!   holds −128 (only degenerate, subnormal inputs quantize to it) takes the widening path.
//!
//! Decode (`rows4_*`) prepares the activation row once per matmul (`prep_*`: the 7-bit split,
//! the offset sums, the f32 scale) and shares it between all weight rows (Q4_K and Q6_K read
//! their Q8_K activation as it is, and total four rows' block sums together); prefill
//! (`toks4_*` / `toks8_*`) shares each weight block's unpacking between the tokens.

use core::arch::wasm32::*;

use super::float::{read_f16, read_f32};
use super::q4::Q4_0_BYTES;
use super::q4_k::Q4_K_BYTES;
use super::q5::Q5_0_BYTES;
use super::q6_k::Q6_K_BYTES;
use super::q8::Q8_0_BYTES;
use super::q8_k::{Q8KBlock, BSUMS_AT, Q8_K_BYTES, QK_K, QS_AT};
use super::simd128::{
    act_rows4, blocks4, comb_q4_0, comb_q5_0, comb_q8_0, dot_i8, f16x4_at_conv, high_nibbles, hsum, ld, ld_f32x4, opaque, q6_k_unsigned_k,
    qh_at, qh_bits16_k, reduce4, rows4_of, rows4_q4_k_with, rows4_q6_k_with, store4, swizzle, NibMasks, F16K, QhK,
};

const QK: usize = 32;

/// `acc + Σ a·b` per i32 lane (four products each); `b` must be in 0..=127.
#[inline(always)]
fn rdot(a: v128, b: v128, acc: v128) -> v128 {
    i32x4_relaxed_dot_i8x16_i7x16_add(a, b, acc)
}

// ---- 32-element formats paired with Q8_0 activations ----

/// Bytes per block of a Q8_0 activation row prepared for `rows4_q8_0` (`prep_q8_0`):
/// `[0, 32)` a⁺ = max(a, 0), `[32, 64)` a⁻ = max(−a, 0), `[64, 68)` d as f32, `[68, 72)` 1 if
/// the block holds −128 (then `[0, 32)` are the quants themselves), `[72, 80)` zero.
pub(super) const PREP_Q8_0: usize = 80;

/// Prepares one Q8_0 activation row for `rows4_q8_0`, once per matmul: the split into 7-bit
/// halves and the f32 scale, which every group of four rows would otherwise redo.
pub(super) fn prep_q8_0(a: &[u8], n: usize, out: &mut Vec<u8>) {
    let nb = n / QK;
    out.clear();
    out.resize(nb * PREP_Q8_0, 0);
    let zero = i32x4_splat(0);
    let min = i8x16_splat(-128);
    for (y, o) in a[..nb * Q8_0_BYTES].chunks_exact(Q8_0_BYTES).zip(out.chunks_exact_mut(PREP_Q8_0)) {
        let (al, ah) = (ld(y, 2), ld(y, 18));
        let has_min = v128_any_true(v128_or(i8x16_eq(al, min), i8x16_eq(ah, min)));
        let v = if has_min {
            [al, ah, zero, zero]
        } else {
            let (nl, nh) = (i8x16_max(i8x16_neg(al), zero), i8x16_max(i8x16_neg(ah), zero));
            [i8x16_max(al, zero), i8x16_max(ah, zero), nl, nh]
        };
        for (k, x) in v.into_iter().enumerate() {
            // SAFETY: `o` is PREP_Q8_0 (80) bytes; each store writes 16 of them at 16k (k < 4).
            unsafe { v128_store(o[16 * k..16 * k + 16].as_mut_ptr() as *mut v128, x) };
        }
        o[64..68].copy_from_slice(&read_f16(y, 0).to_le_bytes());
        o[68..72].copy_from_slice(&(has_min as u32).to_le_bytes());
    }
}

/// Q8_0 weights × one prepared Q8_0 activation row (`prep_q8_0`), four rows at a time;
/// `FINITE` for weights whose block scales are all finite (`Weight`'s `finite_scales`): the
/// same bits, the scales converted without the Inf/NaN test.
pub(super) fn rows4_q8_0<const FINITE: bool>(w: &[u8], rb: usize, p: &[u8], n: usize) -> [f32; 4] {
    let f16k = F16K::for_scales::<FINITE>();
    let (nb, wb) = (n / QK, Q8_0_BYTES);
    let r = rows4_of(w, rb, nb * wb);
    let p = &p[..nb * PREP_Q8_0];
    let zero = i32x4_splat(0);
    let mut acc = f32x4_splat(0.0);
    for i in 0..nb {
        let y = &p[i * PREP_Q8_0..(i + 1) * PREP_Q8_0];
        let x = blocks4(&r, i, wb);
        let s = if y[68] != 0 {
            // −128 has no 7-bit magnitude: the widening path on the quants themselves.
            let (al, ah) = (ld(y, 0), ld(y, 16));
            let d = |x: &[u8]| i32x4_add(dot_i8(ld(x, 2), al), dot_i8(ld(x, 18), ah));
            reduce4(d(x[0]), d(x[1]), d(x[2]), d(x[3]))
        } else {
            let (pl, ph, nl, nh) = (ld(y, 0), ld(y, 16), ld(y, 32), ld(y, 48));
            let d = |x: &[u8]| {
                let (wl, wh) = (ld(x, 2), ld(x, 18));
                i32x4_sub(rdot(wh, ph, rdot(wl, pl, zero)), rdot(wh, nh, rdot(wl, nl, zero)))
            };
            reduce4(d(x[0]), d(x[1]), d(x[2]), d(x[3]))
        };
        let dx = f16x4_at_conv::<FINITE>(x[0], x[1], x[2], x[3], 0, &f16k);
        let dy = f32x4_splat(read_f32(y, 64));
        acc = f32x4_add(acc, comb_q8_0(f32x4_convert_i32x4(s), dx, dy));
    }
    store4(acc)
}

/// Q5_0: the 5-bit quants 0..31 (offset 16) as two u8x16 (elements 0..16, 16..32).
#[inline(always)]
fn unsigned_q5_0(x: &[u8], k: &NibK) -> (v128, v128) {
    let qh = qh_at(x, 2);
    let b = ld(x, 6);
    (v128_or(v128_and(b, k.m4), qh_bits16_k(qh, 0, &k.qh)), v128_or(high_nibbles(b, k.m4), qh_bits16_k(qh, 16, &k.qh)))
}

/// Q4_0: the nibbles 0..15 (offset 8).
#[inline(always)]
fn unsigned_q4_0(x: &[u8], k: &NibK) -> (v128, v128) {
    let b = ld(x, 2);
    (v128_and(b, k.m4), high_nibbles(b, k.m4))
}

/// The constants of the nibble unpacking (`unsigned_q5_0`, `unsigned_q4_0`) and of the i16 →
/// i32 widening, made once per call of a kernel (`simd128::opaque`: LLVM would rebuild each at
/// every use, three instructions each in V8's code).
struct NibK {
    m4: v128,
    qh: QhK,
    ones: v128,
}

impl NibK {
    #[inline(always)]
    fn new() -> NibK {
        NibK { m4: opaque(u8x16_splat(0x0f)), qh: QhK::hoisted(), ones: opaque(i16x8_splat(1)) }
    }

    /// i16 lanes summed in pairs into i32 (`i32x4_extadd_pairwise_i16x8`, as one `pmaddwd`
    /// against the hoisted ones).
    #[inline(always)]
    fn widen(&self, p: v128) -> v128 {
        i32x4_dot_i16x8(p, self.ones)
    }
}

/// Σ a·u over a block's 32 elements as i16x8 lanes (two pairs of products each), `u` in 0..=31:
/// one `i16x8.relaxed_dot_i8x16_i7x16_s` (x86 without VNNI: one `pmaddubsw`) per half. Exact on
/// every lowering: a pair is ≤ 2·128·31 = 7,936 in magnitude, two pairs ≤ 15,872 < 2^15. (The
/// i32 form, `i32x4.relaxed_dot_i8x16_i7x16_add_s`, is several instructions each on x86
/// without VNNI: `pmaddubsw`, then `pmaddwd` against a ones constant and an add.)
#[inline(always)]
fn pair_dot(al: v128, ah: v128, ul: v128, uh: v128) -> v128 {
    i16x8_add(i16x8_relaxed_dot_i8x16_i7x16(al, ul), i16x8_relaxed_dot_i8x16_i7x16(ah, uh))
}

/// `−off · Σ a` over a Q8_0 activation block's 32 quants (|·| ≤ 16·32·128 = 65,536).
#[inline(always)]
fn neg_offset(al: v128, ah: v128, off: i8) -> i32 {
    let (l, h) = (i16x8_extend_low_i8x16(al), i16x8_extend_high_i8x16(al));
    let (l2, h2) = (i16x8_extend_low_i8x16(ah), i16x8_extend_high_i8x16(ah));
    // Eight i16 lanes of four quants each (≤ 512 in magnitude), then i32.
    let sum = i32x4_extadd_pairwise_i16x8(i16x8_add(i16x8_add(l, h), i16x8_add(l2, h2)));
    -(off as i32) * hsum(sum)
}

/// Bytes per block of a Q8_0 activation row prepared for the offset-unsigned rows4 kernels
/// (`prep_unsigned`): `[0, 32)` the quants, `[32, 36)` `neg_offset` (i32), `[36, 40)` d as
/// f32, `[40, 48)` zero.
pub(super) const PREP_UNSIGNED: usize = 48;

/// Prepares one Q8_0 activation row for a rows4 kernel of a format with offset `off`.
#[inline(always)]
fn prep_unsigned(a: &[u8], n: usize, off: i8, out: &mut Vec<u8>) {
    let nb = n / QK;
    out.clear();
    out.resize(nb * PREP_UNSIGNED, 0);
    for (y, o) in a[..nb * Q8_0_BYTES].chunks_exact(Q8_0_BYTES).zip(out.chunks_exact_mut(PREP_UNSIGNED)) {
        o[..32].copy_from_slice(&y[2..34]);
        o[32..36].copy_from_slice(&neg_offset(ld(y, 2), ld(y, 18), off).to_le_bytes());
        o[36..40].copy_from_slice(&read_f16(y, 0).to_le_bytes());
    }
}

pub(super) fn prep_q5_0(a: &[u8], n: usize, out: &mut Vec<u8>) {
    prep_unsigned(a, n, 16, out)
}
pub(super) fn prep_q4_0(a: &[u8], n: usize, out: &mut Vec<u8>) {
    prep_unsigned(a, n, 8, out)
}

/// Four weight rows of an offset-unsigned format (Q4_0, Q5_0) × one prepared activation row:
/// each row's Σ a·u in i16 lanes (`pair_dot`), widened once, the four rows' lanes reduced
/// together, then the block's offset term, the same for all four rows, added once.
#[inline(always)]
fn rows4_unsigned_family<const WB: usize, const FINITE: bool>(
    w: &[u8],
    rb: usize,
    p: &[u8],
    nb: usize,
    unpack: impl Fn(&[u8], &NibK) -> (v128, v128),
    comb: impl Fn(v128, v128, v128) -> v128,
) -> [f32; 4] {
    let (k, f16k) = (NibK::new(), F16K::for_scales::<FINITE>());
    let r = rows4_of(w, rb, nb * WB);
    let p = &p[..nb * PREP_UNSIGNED];
    let mut acc = f32x4_splat(0.0);
    for i in 0..nb {
        let y = &p[i * PREP_UNSIGNED..(i + 1) * PREP_UNSIGNED];
        let (al, ah) = (ld(y, 0), ld(y, 16));
        let x = blocks4(&r, i, WB);
        let d = |x: &[u8]| {
            let (ul, uh) = unpack(x, &k);
            k.widen(pair_dot(al, ah, ul, uh))
        };
        // The offset term (the i32 at 32, in every lane) is the same for the four rows.
        let s = i32x4_add(reduce4(d(x[0]), d(x[1]), d(x[2]), d(x[3])), qh_at(y, 32));
        let dx = f16x4_at_conv::<FINITE>(x[0], x[1], x[2], x[3], 0, &f16k);
        let dy = f32x4_splat(read_f32(y, 36));
        acc = f32x4_add(acc, comb(f32x4_convert_i32x4(s), dx, dy));
    }
    store4(acc)
}

/// One weight row of an offset-unsigned format × `T` (4 or 8) Q8_0 activation rows: per token
/// Σ a·u (`pair_dot`) minus off·Σ a (the same dot against `splat(off)`, ≤ 2·16·128·2 = 8,192
/// per lane), still in i16 (≤ 24,064 in magnitude), then widened.
#[inline(always)]
fn toks_unsigned_family<const T: usize>(
    w: &[u8],
    a: &[u8],
    ab: usize,
    dy: &[f32],
    nb: usize,
    wb: usize,
    off: i8,
    unpack: impl Fn(&[u8], &NibK) -> (v128, v128),
    comb: impl Fn(v128, v128, v128) -> v128,
) -> [f32; T] {
    let k = NibK::new();
    let w = &w[..nb * wb];
    let q = Q8_0_BYTES;
    let ar: [&[u8]; T] = core::array::from_fn(|k| &a[k * ab..k * ab + nb * q]);
    let off = i8x16_splat(off);
    let mut acc = [f32x4_splat(0.0); 2];
    for i in 0..nb {
        let x = &w[i * wb..(i + 1) * wb];
        let (ul, uh) = unpack(x, &k);
        let dx = f32x4_splat(read_f16(x, 0));
        let ys: [&[u8]; T] = core::array::from_fn(|k| &ar[k][i * q..(i + 1) * q]);
        let d = |y: &[u8]| {
            let (al, ah) = (ld(y, 2), ld(y, 18));
            k.widen(i16x8_sub(pair_dot(al, ah, ul, uh), pair_dot(al, ah, off, off)))
        };
        for g in 0..T / 4 {
            let y4 = &ys[4 * g..4 * g + 4];
            let s = reduce4(d(y4[0]), d(y4[1]), d(y4[2]), d(y4[3]));
            acc[g] = f32x4_add(acc[g], comb(f32x4_convert_i32x4(s), dx, ld_f32x4(dy, 4 * (g * nb + i))));
        }
    }
    core::array::from_fn(|k| store4(acc[k / 4])[k % 4])
}

/// The four-row kernels; `FINITE` for weights whose block scales are all finite (`Weight`'s
/// `finite_scales`): the same bits, the scales converted without the Inf/NaN test (one
/// compare, a vector test and a branch per block, and two constants the loop spilled
/// registers for).
pub(super) fn rows4_q5_0<const FINITE: bool>(w: &[u8], rb: usize, p: &[u8], n: usize) -> [f32; 4] {
    rows4_unsigned_family::<Q5_0_BYTES, FINITE>(w, rb, p, n / QK, unsigned_q5_0, comb_q5_0)
}
pub(super) fn rows4_q4_0<const FINITE: bool>(w: &[u8], rb: usize, p: &[u8], n: usize) -> [f32; 4] {
    rows4_unsigned_family::<Q4_0_BYTES, FINITE>(w, rb, p, n / QK, unsigned_q4_0, comb_q4_0)
}
pub(super) fn toks4_q5_0(w: &[u8], a: &[u8], ab: usize, dy: &[f32], n: usize) -> [f32; 4] {
    toks_unsigned_family::<4>(w, a, ab, dy, n / QK, Q5_0_BYTES, 16, unsigned_q5_0, comb_q5_0)
}
pub(super) fn toks8_q5_0(w: &[u8], a: &[u8], ab: usize, dy: &[f32], n: usize) -> [f32; 8] {
    toks_unsigned_family::<8>(w, a, ab, dy, n / QK, Q5_0_BYTES, 16, unsigned_q5_0, comb_q5_0)
}
pub(super) fn toks4_q4_0(w: &[u8], a: &[u8], ab: usize, dy: &[f32], n: usize) -> [f32; 4] {
    toks_unsigned_family::<4>(w, a, ab, dy, n / QK, Q4_0_BYTES, 8, unsigned_q4_0, comb_q4_0)
}
pub(super) fn toks8_q4_0(w: &[u8], a: &[u8], ab: usize, dy: &[f32], n: usize) -> [f32; 8] {
    toks_unsigned_family::<8>(w, a, ab, dy, n / QK, Q4_0_BYTES, 8, unsigned_q4_0, comb_q4_0)
}

// ---- k-quants × Q8_K activations ----

/// A Q4_K block's eight 6-bit scales (u8 lanes 0..8) and mins (lanes 8..16), `q4_k::scale_min`
/// on all sixteen lanes at once from the 12 packed bytes at `x[4..16]`: each lane takes its low
/// bits from the packed byte the first swizzle picks (the whole 6 bits, the low nibble, or for
/// mins 4..8 the high nibble) and, for sub-blocks 4..8, bits 4..6 from the top two bits of the
/// byte the second swizzle picks. Bit-identical scales, so bit-identical results (the twin
/// tests run every Q4_K kernel against the scalar one).
#[inline(always)]
fn q4_k_scales_mins(x: &[u8], k: &Q4KK) -> v128 {
    let s = ld(x, 4); // the 12 packed bytes, then 4 quant bytes that no index selects
    let low = swizzle(s, k.sel_low);
    let high = swizzle(s, k.sel_high);
    // Mins 4..8 take the high nibble of their byte, everything else the low bits (a u16 shift:
    // the bits it moves across bytes are masked off by `keep`).
    let low = v128_and(v128_bitselect(u16x8_shr(low, 4), low, k.nib_hi), k.keep);
    v128_or(low, v128_and(u16x8_shr(high, 2), k.x30))
}

/// The constants of the relaxed Q4_K kernel, made once per call (`simd128::opaque`).
struct Q4KK {
    sel_low: v128,
    sel_high: v128,
    nib_hi: v128,
    keep: v128,
    x30: v128,
    m4: v128,
    /// The swizzles that widen mins 0..4 and 4..8 to i16 lanes, each twice (`q4_k_isum`).
    mins_lo: v128,
    mins_hi: v128,
    /// The same for scales 0..4 and 4..8.
    sc_lo: v128,
    sc_hi: v128,
}

impl Q4KK {
    #[inline(always)]
    fn new() -> Q4KK {
        let z = 0x80; // a swizzle index that yields 0
        Q4KK {
            sel_low: opaque(u8x16(0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 8, 9, 10, 11)),
            sel_high: opaque(u8x16(z, z, z, z, 0, 1, 2, 3, z, z, z, z, 4, 5, 6, 7)),
            nib_hi: opaque(u8x16(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff)),
            keep: opaque(u8x16(63, 63, 63, 63, 15, 15, 15, 15, 63, 63, 63, 63, 15, 15, 15, 15)),
            x30: opaque(u8x16_splat(0x30)),
            m4: opaque(u8x16_splat(0x0f)),
            mins_lo: opaque(u8x16(8, z, 8, z, 9, z, 9, z, 10, z, 10, z, 11, z, 11, z)),
            mins_hi: opaque(u8x16(12, z, 12, z, 13, z, 13, z, 14, z, 14, z, 15, z, 15, z)),
            sc_lo: opaque(u8x16(0, z, 0, z, 1, z, 1, z, 2, z, 2, z, 3, z, 3, z)),
            sc_hi: opaque(u8x16(4, z, 4, z, 5, z, 5, z, 6, z, 6, z, 7, z, 7, z)),
        }
    }
}

/// One Q4_K block × one Q8_K block: (Σ_j sc_j·Σ q·a, Σ_j m_j·(bsum_2j + bsum_2j+1)) as i32x4
/// partial sums, exact: per sub-block of 32 two i16 relaxed dots (the nibbles 0..15 the 7-bit
/// operand; four products ≤ 4·15·128 = 7,680 per i16 lane); the sub-blocks' lanes then added
/// in i16 in two transposing steps while they fit (≤ 2·7,680, then ≤ 4·7,680 = 30,720 < 2^15),
/// so that each i32 unit holds one sub-block's two partial sums, and weighted and widened by
/// one `dot_i16x8` per four sub-blocks against their scales, each repeated for its two i16
/// halves (a splat per sub-block before: several instructions each in V8); the mins by
/// `dot_i16x8` of the bsums against the mins the same way.
#[inline(always)]
fn q4_k_isum(x: &[u8], yb: &[u8], k: &Q4KK) -> (v128, v128) {
    let sm = q4_k_scales_mins(x, k);
    let m4 = k.m4;
    // Chunk c (elements 64c..64c+64, sub-blocks 2c and 2c+1): i16 lanes 0..4 sub-block 2c's,
    // 4..8 sub-block 2c+1's, each the sum of two of its dot lanes.
    let chunk = |c: usize| {
        let (b0, b1) = (ld(x, 16 + 32 * c), ld(x, 32 + 32 * c));
        let q = QS_AT + 64 * c;
        let lo = i16x8_add(
            i16x8_relaxed_dot_i8x16_i7x16(ld(yb, q), v128_and(b0, m4)),
            i16x8_relaxed_dot_i8x16_i7x16(ld(yb, q + 16), v128_and(b1, m4)),
        );
        let hi = i16x8_add(
            i16x8_relaxed_dot_i8x16_i7x16(ld(yb, q + 32), high_nibbles(b0, m4)),
            i16x8_relaxed_dot_i8x16_i7x16(ld(yb, q + 48), high_nibbles(b1, m4)),
        );
        i16x8_add(i64x2_shuffle::<0, 2>(lo, hi), i64x2_shuffle::<1, 3>(lo, hi))
    };
    // Two chunks: i32 unit j = sub-block (2·first chunk + j)'s two partial sums.
    let pair = |a: v128, b: v128| i16x8_add(i32x4_shuffle::<0, 2, 4, 6>(a, b), i32x4_shuffle::<1, 3, 5, 7>(a, b));
    let (s03, s47) = (pair(chunk(0), chunk(1)), pair(chunk(2), chunk(3)));
    let acc = i32x4_add(i32x4_dot_i16x8(s03, swizzle(sm, k.sc_lo)), i32x4_dot_i16x8(s47, swizzle(sm, k.sc_hi)));
    let (m_lo, m_hi) = (swizzle(sm, k.mins_lo), swizzle(sm, k.mins_hi));
    let summs = i32x4_add(i32x4_dot_i16x8(ld(yb, BSUMS_AT), m_lo), i32x4_dot_i16x8(ld(yb, BSUMS_AT + 16), m_hi));
    (acc, summs)
}

/// Q4_K × Q8_K, one row: `q4_k_isum` per block, its lanes totalled, then the scalar expression
/// (1.08–1.29× the SIMD128 kernel). Decode reads four rows a call ([`rows4_q4_k`]): taking
/// them from four streams and totalling their sums together, it measured 1.25–1.6× this kernel
/// on the same streams (an earlier four-row kernel, on one stream with two `hsum`s per row,
/// was no faster).
pub(super) fn vec_dot_q4_k_q8_k(w: &[u8], a: &[u8], n: usize) -> f32 {
    let nb = n / QK_K;
    let (w, a) = (&w[..nb * Q4_K_BYTES], &a[..nb * Q8_K_BYTES]);
    let k = Q4KK::new();
    let mut sumf = 0f32;
    for (x, yb) in w.chunks_exact(Q4_K_BYTES).zip(a.chunks_exact(Q8_K_BYTES)) {
        let (isum, summs) = q4_k_isum(x, yb, &k);
        let yd = Q8KBlock::new(yb).d;
        let (d, dmin) = (read_f16(x, 0) * yd, read_f16(x, 2) * yd);
        sumf += d * hsum(isum) as f32 - dmin * hsum(summs) as f32;
    }
    sumf
}

/// Q4_K × Q8_K, four rows (`w`, `rb` bytes apart: `ops::matmul` takes them from
/// `streams::STREAMS` streams): per block each row's [`q4_k_isum`], the four rows' sums then
/// totalled together (lane k = row k: `reduce4`, where the one-row kernel takes two `hsum`s
/// per row), and the one-row kernel's float expression in four lanes, each row's `d` and
/// `dmin` gathered by one `load32_lane` and converted together (`simd128::rows4_q4_k_with`) — exact integers and the same
/// float operations in the same order, so the same bits as the one-row and scalar kernels.
pub(super) fn rows4_q4_k(w: &[u8], rb: usize, p: &[u8], n: usize) -> [f32; 4] {
    let k = Q4KK::new();
    rows4_q4_k_with(w, rb, p, n, #[inline(always)] |x, yb| q4_k_isum(x, yb, &k))
}

/// The constants of the relaxed Q6_K kernel, made once per call (`simd128::opaque`): the
/// unpacking masks, and for the group pairs `(g, g + 2)` of [`q6_k_isum`] (`g % 8` = 0, 1, 4, 5)
/// the swizzles that lay a half-block's widened scales out as the pair's i16 lanes: `g`'s
/// scale twice, `g + 2`'s twice, and again.
struct Q6KK {
    nib: NibMasks,
    pair: [v128; 4],
}

impl Q6KK {
    #[inline(always)]
    fn new() -> Q6KK {
        let idx = |g: u8| {
            let (a, b) = (2 * g, 2 * (g + 2));
            u8x16(a, a + 1, a, a + 1, b, b + 1, b, b + 1, a, a + 1, a, a + 1, b, b + 1, b, b + 1)
        };
        Q6KK { nib: NibMasks::hoisted(), pair: [opaque(idx(0)), opaque(idx(1)), opaque(idx(4)), opaque(idx(5))] }
    }
}

/// Σ_g sc_g · Σ (u − 32)·a for one Q6_K weight block `x` (`u` its unsigned quants 0..63,
/// offset 32; `sc` its 16 signed scales, group g = elements 16g..16g+16) and one activation
/// block, as i32x4 partial sums: per group one `i16x8.relaxed_dot_i8x16_i7x16_s` (a lane ≤
/// 2·63·128 = 16,128 in magnitude: exact); two groups `g`, `g + 2` (unpacked together) added in
/// i16 by one transposing step (≤ 2·16,128 = 32,256 < 2^15), so that each i32 unit holds one
/// group's two partial sums, then weighted and widened by one `i32x4.dot_i16x8_s` against the
/// pair's scales swizzled into those lanes (`Q6KK::pair`) — per group a splat of its scale
/// and a `dot_i16x8` before, several instructions each in V8 — then the offset
/// −32·Σ_g sc_g·bsum_g from the Q8_K block's bsums (its 16-element sums, which the quantizer
/// writes) in two more `dot_i16x8` (|Σ| ≤ 256·63·128·128 < 2^31 throughout). The same exact
/// integers, in another order. Each group's quants are used as soon as they are unpacked: a
/// block's sixteen held at once (as this once did) do not fit V8's registers.
#[inline(always)]
fn q6_k_isum(x: &[u8], k: &Q6KK, yb: &[u8]) -> v128 {
    let sc16 = ld(x, 192);
    let (sl, sh) = (i16x8_extend_low_i8x16(sc16), i16x8_extend_high_i8x16(sc16));
    // Half-block h, elements 16j..16j+16 of each 32: element e = 128h + 32s + 16j + l (l < 16)
    // lies in group e / 16 = 8h + 2s + j. Written out call by call: as loops over [sl, sh] and
    // [0, 16], LLVM kept them rolled, the scales and indices in stack memory.
    #[inline(always)]
    fn quarter(x: &[u8], yb: &[u8], k: &Q6KK, h: usize, j: usize, scales: v128, acc: v128) -> v128 {
        let u = q6_k_unsigned_k(x, h, 16 * j, &k.nib);
        let mut acc = acc;
        for s in [0usize, 2] {
            let g = 8 * h + 2 * s + j;
            let p0 = i16x8_relaxed_dot_i8x16_i7x16(ld(yb, QS_AT + 16 * g), u[s]);
            let p1 = i16x8_relaxed_dot_i8x16_i7x16(ld(yb, QS_AT + 16 * (g + 2)), u[s + 1]);
            let pair = i16x8_add(i32x4_shuffle::<0, 4, 1, 5>(p0, p1), i32x4_shuffle::<2, 6, 3, 7>(p0, p1));
            acc = i32x4_add(acc, i32x4_dot_i16x8(pair, swizzle(scales, k.pair[s + j])));
        }
        acc
    }
    let acc = quarter(x, yb, k, 0, 0, sl, i32x4_splat(0));
    let acc = quarter(x, yb, k, 0, 1, sl, acc);
    let acc = quarter(x, yb, k, 1, 0, sh, acc);
    let acc = quarter(x, yb, k, 1, 1, sh, acc);
    let off = i32x4_add(i32x4_dot_i16x8(sl, ld(yb, BSUMS_AT)), i32x4_dot_i16x8(sh, ld(yb, BSUMS_AT + 16)));
    i32x4_sub(acc, i32x4_shl(off, 5))
}

/// Q6_K × Q8_K, four rows (`w`, `rb` bytes apart, from the four streams): each row's
/// [`q6_k_isum`] per block, the four rows' sums totalled together (`reduce4`) and the one-row
/// kernel's float expression in four lanes, each row's `d` gathered by `load16_lane`
/// (`simd128::rows4_q6_k_with`) — the same integers and float operations per row, so the same bits.
pub(super) fn rows4_q6_k(w: &[u8], rb: usize, p: &[u8], n: usize) -> [f32; 4] {
    let k = Q6KK::new();
    rows4_q6_k_with(w, rb, p, n, #[inline(always)] |x, yb| q6_k_isum(x, &k, yb))
}

/// One k-quant weight row (`WB`-byte blocks) × four Q8_K activation rows (prefill's tokens):
/// `block(x, y, yd)` gives weight block `x`'s float term for the four tokens' activation blocks
/// `y` (lane t = token t, `yd` their scales), summed block after block as the scalar kernel does.
#[inline(always)]
fn toks4_k<const WB: usize>(w: &[u8], a: &[u8], ab: usize, n: usize, block: impl Fn(&[u8], [&[u8]; 4], v128) -> v128) -> [f32; 4] {
    let nb = n / QK_K;
    let ar = act_rows4(a, ab, nb, Q8_K_BYTES);
    let mut sumf = f32x4_splat(0.0);
    for (i, x) in w[..nb * WB].chunks_exact(WB).enumerate() {
        let y = blocks4(&ar, i, Q8_K_BYTES);
        let d = |t: usize| Q8KBlock::new(y[t]).d;
        sumf = f32x4_add(sumf, block(x, y, f32x4(d(0), d(1), d(2), d(3))));
    }
    store4(sumf)
}

/// Q4_K, one weight row × four Q8_K activation rows (prefill): each token's [`q4_k_isum`] (the
/// weight block's unpacking, a few instructions, redone per token; the SIMD128 kernel this
/// replaces in the relaxed build widened and scaled the quants in i16 once and then needed
/// four times the multiplies), the four tokens' sums totalled together (`reduce4`, lane t =
/// token t), then the scalar float expression in four lanes: the same bits.
pub(super) fn toks4_q4_k(w: &[u8], a: &[u8], ab: usize, _dy: &[f32], n: usize) -> [f32; 4] {
    let k = Q4KK::new();
    toks4_k::<Q4_K_BYTES>(w, a, ab, n, |x, y, yd| {
        let s = [q4_k_isum(x, y[0], &k), q4_k_isum(x, y[1], &k), q4_k_isum(x, y[2], &k), q4_k_isum(x, y[3], &k)];
        let isum = f32x4_convert_i32x4(reduce4(s[0].0, s[1].0, s[2].0, s[3].0));
        let summs = f32x4_convert_i32x4(reduce4(s[0].1, s[1].1, s[2].1, s[3].1));
        let (d, dmin) = (f32x4_mul(f32x4_splat(read_f16(x, 0)), yd), f32x4_mul(f32x4_splat(read_f16(x, 2)), yd));
        // scalar: sumf += d * isum as f32 - dmin * summs as f32
        f32x4_sub(f32x4_mul(d, isum), f32x4_mul(dmin, summs))
    })
}

/// Q6_K, one weight row × four Q8_K activation rows (prefill): each token's [`q6_k_isum`], the
/// four totalled together, then the scalar float expression in four lanes (as [`toks4_q4_k`]).
pub(super) fn toks4_q6_k(w: &[u8], a: &[u8], ab: usize, _dy: &[f32], n: usize) -> [f32; 4] {
    let k = Q6KK::new();
    toks4_k::<Q6_K_BYTES>(w, a, ab, n, |x, y, yd| {
        let isum = reduce4(q6_k_isum(x, &k, y[0]), q6_k_isum(x, &k, y[1]), q6_k_isum(x, &k, y[2]), q6_k_isum(x, &k, y[3]));
        // scalar: sumf += (read_f16(x, 208) * y.d) * isum as f32
        f32x4_mul(f32x4_mul(f32x4_splat(read_f16(x, 208)), yd), f32x4_convert_i32x4(isum))
    })
}

/// Q6_K × Q8_K, one row: [`q6_k_isum`] per block, the scalar kernel's float expression (in
/// Chromium over 63 MB of rows, `rows4_stream_throughput`, 8.41 GB/s against 4.91 for SIMD128's
/// one-row kernel and 3.76 for an older four-row relaxed kernel that held a block's sixteen
/// unpacked groups per row). Decode reads four rows a call ([`rows4_q6_k`], 1.08× this kernel
/// on the same four streams).
pub(super) fn vec_dot_q6_k_q8_k(w: &[u8], a: &[u8], n: usize) -> f32 {
    let nb = n / QK_K;
    let (w, a) = (&w[..nb * Q6_K_BYTES], &a[..nb * Q8_K_BYTES]);
    let k = Q6KK::new();
    let mut sumf = 0f32;
    for (x, yb) in w.chunks_exact(Q6_K_BYTES).zip(a.chunks_exact(Q8_K_BYTES)) {
        let isum = hsum(q6_k_isum(x, &k, yb));
        // scalar: sumf += (read_f16(x, 208) * y.d) * isum as f32
        sumf += (read_f16(x, 208) * Q8KBlock::new(yb).d) * isum as f32;
    }
    sumf
}

