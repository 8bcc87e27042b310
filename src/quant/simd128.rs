//! wasm SIMD128 twins of the scalar `vec_dot` kernels (compiled only for
//! `target_arch = "wasm32"` with `target_feature = "simd128"`).
//!
//! Every kernel reproduces its scalar twin **bit for bit**: the integer part of each block
//! (Σ q_w·q_a, weighted by the sub-block scales) is computed exactly in i32 lanes — i8 values
//! widened to i16 (`i16x8.extend_{low,high}_i8x16_s`), multiplied and pair-summed by
//! `i32x4.dot_i16x8_s`, lanes reduced once per block — and integer addition is associative, so
//! the lane order does not matter. The float part (scales, the running `sumf`) is then the same
//! expression, in the same order, as the scalar kernel, evaluated once per block. No overflow is
//! possible: the largest block sum is a Q4_K/Q5_K one, 8 · 63 · 32 · 31 · 128 < 2^27.
//!
//! Loads are unaligned `v128.load`s from inside `chunks_exact` blocks, so every access is in
//! bounds by construction (the slices are cut to whole blocks first, as the scalar kernels do).

use core::arch::wasm32::*;

use super::float::{read_f16, read_f32};
use super::q2_k::Q2_K_BYTES;
use super::q3_k::Q3_K_BYTES;
use super::q4::{Q4_0_BYTES, Q4_1_BYTES};
use super::q4_k::{scales_mins, Q4_K_BYTES};
use super::q5::{Q5_0_BYTES, Q5_1_BYTES};
use super::q5_k::Q5_K_BYTES;
use super::q6_k::Q6_K_BYTES;
use super::q8::{Q8_0_BYTES, Q8_1_BYTES};
use super::q8_k::{Q8KBlock, BSUMS_AT, Q8_K_BYTES, QK_K, QS_AT};

const QK: usize = 32;

/// 16 bytes at `b[at..at + 16]` (bounds-checked once, then an unaligned load).
#[inline(always)]
pub(super) fn ld(b: &[u8], at: usize) -> v128 {
    let s = &b[at..at + 16];
    // SAFETY: `s` is 16 readable bytes; v128.load has no alignment requirement.
    unsafe { v128_load(s.as_ptr() as *const v128) }
}

/// i32x4 partial sums of the 16 products a_i · b_i (both i8x16, signed).
#[inline(always)]
pub(super) fn dot_i8(a: v128, b: v128) -> v128 {
    let lo = i32x4_dot_i16x8(i16x8_extend_low_i8x16(a), i16x8_extend_low_i8x16(b));
    let hi = i32x4_dot_i16x8(i16x8_extend_high_i8x16(a), i16x8_extend_high_i8x16(b));
    i32x4_add(lo, hi)
}

/// Sum of the four i32 lanes (exact, wrapping never happens for our ranges).
#[inline(always)]
pub(super) fn hsum(v: v128) -> i32 {
    let v = i32x4_add(v, i32x4_shuffle::<2, 3, 0, 1>(v, v));
    let v = i32x4_add(v, i32x4_shuffle::<1, 0, 3, 2>(v, v));
    i32x4_extract_lane::<0>(v)
}

/// The constants of [`qh_bits16_k`]: the swizzles that spread `qh`'s bytes 0, 1 (2, 3) over
/// the 16 lanes, each lane's bit within its byte, and 0x10.
#[derive(Clone, Copy)]
pub(super) struct QhK {
    sel: [v128; 2],
    bit: v128,
    x10: v128,
}

impl QhK {
    #[inline(always)]
    fn plain() -> QhK {
        QhK {
            sel: [i8x16(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1), i8x16(2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3)],
            bit: u8x16(1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128),
            x10: u8x16_splat(0x10),
        }
    }

    /// Made opaque ([`opaque`]), for a loop; an opaque `bit` also keeps LLVM from turning the
    /// byte test into `!= 0`, which V8 lowers to a compare and a negation.
    #[inline(always)]
    pub(super) fn hoisted() -> QhK {
        let k = QhK::plain();
        QhK { sel: [opaque(k.sel[0]), opaque(k.sel[1])], bit: opaque(k.bit), x10: opaque(k.x10) }
    }
}

/// `i8x16.swizzle` for indices below 16 or at least 128 (a zero byte), the only ones our
/// kernels use: in the relaxed build `i8x16.relaxed_swizzle`, which gives the same bytes for
/// those indices and is one `pshufb` in V8 where the plain swizzle first saturates the indices
/// (`paddusb` against a constant) whenever they are not a visible constant — and ours are
/// made opaque ([`opaque`]).
#[inline(always)]
pub(super) fn swizzle(v: v128, idx: v128) -> v128 {
    #[cfg(target_feature = "relaxed-simd")]
    return i8x16_relaxed_swizzle(v, idx);
    #[cfg(not(target_feature = "relaxed-simd"))]
    i8x16_swizzle(v, idx)
}

/// Lane i (0..16) holds bit k = base + i of the little-endian u32 `qh` where it sits in its
/// byte (0 or 1 << k % 8), paired with that mask (`v`: `qh` in every u32 lane, from `qh_at`).
#[inline(always)]
fn qh_lane_bits(v: v128, base: u32, k: &QhK) -> (v128, v128) {
    let sel = swizzle(v, k.sel[(base != 0) as usize]);
    (v128_and(sel, k.bit), k.bit)
}

/// 16 i8 lanes of (bit k of the little-endian u32 `qh`) << 4, for k = base..base+16.
#[inline(always)]
pub(super) fn qh_bits16(v: v128, base: u32) -> v128 {
    qh_bits16_k(v, base, &QhK::plain())
}

/// [`qh_bits16`] with its constants made by the caller ([`QhK::hoisted`]).
#[inline(always)]
pub(super) fn qh_bits16_k(v: v128, base: u32, k: &QhK) -> v128 {
    let (b, bit) = qh_lane_bits(v, base, k);
    v128_and(i8x16_eq(b, bit), k.x10)
}

/// 16 i8 lanes of −16 where bit k of `qh` is clear, else 0, for k = base..base+16: OR-ed with
/// a nibble n (0..15) it gives Q5_0's quant n + 16·bit − 16 in one step (−16 = 0xF0, n's bits
/// apart).
#[inline(always)]
fn qh_minus16(v: v128, base: u32, k: &UnpackK) -> v128 {
    let (b, _) = qh_lane_bits(v, base, &k.qh);
    v128_and(i8x16_eq(b, i8x16_splat(0)), k.xf0)
}

/// The little-endian u32 at `b[at..at + 4]` in every u32 lane (one `v128.load32_splat`).
#[inline(always)]
pub(super) fn qh_at(b: &[u8], at: usize) -> v128 {
    let s = &b[at..at + 4];
    // SAFETY: `s` is 4 readable bytes; the load has no alignment requirement.
    unsafe { v128_load32_splat(s.as_ptr() as *const u32) }
}

/// Lane i = the sum of the four lanes of the i-th argument (exact).
#[inline(always)]
pub(super) fn reduce4(a: v128, b: v128, c: v128, d: v128) -> v128 {
    let ab = i32x4_add(i32x4_shuffle::<0, 4, 1, 5>(a, b), i32x4_shuffle::<2, 6, 3, 7>(a, b));
    let cd = i32x4_add(i32x4_shuffle::<0, 4, 1, 5>(c, d), i32x4_shuffle::<2, 6, 3, 7>(c, d));
    i32x4_add(i32x4_shuffle::<0, 1, 4, 5>(ab, cd), i32x4_shuffle::<2, 3, 6, 7>(ab, cd))
}

/// f32x4 -> f16 bits (zero-extended in u32 lanes), rounded to nearest even: the same bits as
/// `float::f32_to_f16` lane by lane for values that are neither NaN nor beyond the f16 range
/// (|x| < 65520; the caller keeps them out). Normal results by adding the rounding bias to the
/// bits; subnormal ones (|x| < 2^−14) by an f32 addition of 0.5, which rounds at the f16
/// subnormal step.
#[inline(always)]
pub(crate) fn f32x4_to_f16_bits(x: v128) -> v128 {
    let sign = v128_and(x, u32x4_splat(0x8000_0000));
    let a = v128_xor(x, sign);
    let normal = {
        let odd = v128_and(u32x4_shr(a, 13), u32x4_splat(1));
        u32x4_shr(i32x4_add(i32x4_add(a, u32x4_splat((15u32.wrapping_sub(127) << 23).wrapping_add(0xfff))), odd), 13)
    };
    let magic = u32x4_splat(126 << 23);
    let sub = i32x4_sub(f32x4_add(a, magic), magic);
    let bits = v128_bitselect(sub, normal, u32x4_lt(a, u32x4_splat(113 << 23)));
    v128_or(bits, u32x4_shr(sign, 16))
}

/// f16 bits (zero-extended in u32 lanes) -> f32x4, the same bits as `float::f16_to_f32` lane by
/// lane: the same exact rescale by 2^112 for finite values, the same payload shift for Inf/NaN.
#[inline(always)]
pub(crate) fn f16_bits_to_f32x4(h: v128) -> v128 {
    let em = v128_and(h, u32x4_splat(0x7fff));
    let sign = i32x4_shl(v128_and(h, u32x4_splat(0x8000)), 16);
    let mag = f32x4_mul(i32x4_shl(em, 13), f32x4_splat(f32::from_bits(0x7780_0000)));
    let special = v128_or(u32x4_splat(0x7f80_0000), i32x4_shl(v128_and(em, u32x4_splat(0x03ff)), 13));
    let is_special = i32x4_ge(em, i32x4_splat(0x7c00));
    v128_or(v128_bitselect(special, mag, is_special), sign)
}

/// The bytes' high nibbles (`m4`: 0x0F in every byte, made once by the caller): the bytes of
/// `u8x16_shr(b, 4)` as a u16 shift and the mask. V8 lowers the u8 shift to the same two
/// instructions but builds the mask each time.
#[inline(always)]
pub(super) fn high_nibbles(b: v128, m4: v128) -> v128 {
    v128_and(u16x8_shr(b, 4), m4)
}

/// `v`, opaque to the compiler: for the constants of a hot loop, made once before it. LLVM's
/// wasm backend rematerializes a `v128.const` at each use (it counts as free), and V8 then
/// builds a splat from general registers every time (`movabs`, `vmovq`, `vpunpcklqdq`: three
/// instructions, a fifth of pass 1's loop); an opaque value stays in a register or a spill
/// slot that instructions read as an operand.
#[inline(always)]
pub(super) fn opaque(v: v128) -> v128 {
    core::hint::black_box(v)
}

/// The constants of [`f16x4_low_to_f32x4_k`] (see [`opaque`]).
#[derive(Clone, Copy)]
pub(super) struct F16K {
    /// The sign and the shifted exponent and mantissa: `0x8fff_ffff`.
    mask: v128,
    /// 2^112, the exponent rebias.
    scale: v128,
    /// The magnitude bits of f32: `0x7fff_ffff`.
    abs: v128,
    /// 2^16 as f32 bits: no finite f16 reaches it.
    limit: v128,
}

impl F16K {
    /// Made opaque: for a loop that converts scales at each step.
    #[inline(always)]
    pub(super) fn hoisted() -> F16K {
        let k = F16K::plain();
        F16K { mask: opaque(k.mask), scale: opaque(k.scale), abs: opaque(k.abs), limit: opaque(k.limit) }
    }

    /// For [`f16x4_finite_low_to_f32x4_k`] only: the two constants it uses made opaque, the
    /// others left plain (unused, so not made at all: fewer registers held in the loop).
    #[inline(always)]
    pub(super) fn hoisted_finite() -> F16K {
        let k = F16K::plain();
        F16K { mask: opaque(k.mask), scale: opaque(k.scale), ..k }
    }

    /// [`F16K::hoisted_finite`] for `FINITE` scales, else [`F16K::hoisted`].
    #[inline(always)]
    pub(super) fn for_scales<const FINITE: bool>() -> F16K {
        if FINITE {
            F16K::hoisted_finite()
        } else {
            F16K::hoisted()
        }
    }

    #[inline(always)]
    fn plain() -> F16K {
        F16K { mask: u32x4_splat(0x8fff_ffff), scale: f32x4_splat(f32::from_bits(0x7780_0000)), abs: u32x4_splat(0x7fff_ffff), limit: f32x4_splat(65536.0) }
    }
}

/// The four f16 in the low 8 bytes of `raw` as `f16_bits_to_f32x4` converts them, in fewer
/// instructions where none is Inf or NaN: the sign-extended bits shifted into place (the sign
/// to bit 31, its copies cleared) and rescaled by 2^112 — exact, so the same bits as the
/// separate magnitude and sign for every finite value. An Inf or NaN f16 (exponent 31) comes
/// out of that at or above 2^16, which no finite f16 reaches (max 65,504): then the general
/// conversion.
#[inline(always)]
pub(super) fn f16x4_low_to_f32x4(raw: v128) -> v128 {
    f16x4_low_to_f32x4_k(raw, &F16K::plain())
}

/// [`f16x4_low_to_f32x4`] with its constants made by the caller ([`F16K::hoisted`]).
#[inline(always)]
pub(super) fn f16x4_low_to_f32x4_k(raw: v128, k: &F16K) -> v128 {
    let v = f16x4_finite_low_to_f32x4_k(raw, k);
    if v128_any_true(f32x4_ge(v128_and(v, k.abs), k.limit)) {
        return f16_bits_to_f32x4(u32x4_extend_low_u16x8(raw));
    }
    v
}

/// [`f16x4_low_to_f32x4_k`] for four finite f16 (no Inf or NaN: the caller knows, e.g.
/// `PlaneLayout::finite_scales`): the sign-extended bits shifted into place and rescaled, with
/// no test.
#[inline(always)]
pub(super) fn f16x4_finite_low_to_f32x4_k(raw: v128, k: &F16K) -> v128 {
    let bits = v128_and(i32x4_shl(i32x4_extend_low_i16x8(raw), 13), k.mask);
    f32x4_mul(bits, k.scale)
}

/// The f16 at byte `at` of each of four blocks, converted by `f16x4_low_to_f32x4`: the four halves
/// are gathered straight into the low i16 lanes with `v128.load16_lane` (one instruction each)
/// instead of being assembled from bytes.
#[inline(always)]
pub(super) fn f16x4_at(x0: &[u8], x1: &[u8], x2: &[u8], x3: &[u8], at: usize) -> v128 {
    f16x4_at_k(x0, x1, x2, x3, at, &F16K::plain())
}

/// [`f16x4_at`] with the conversion's constants made by the caller ([`F16K::hoisted`]).
#[inline(always)]
pub(super) fn f16x4_at_k(x0: &[u8], x1: &[u8], x2: &[u8], x3: &[u8], at: usize, k: &F16K) -> v128 {
    f16x4_at_conv::<false>(x0, x1, x2, x3, at, k)
}

/// [`f16x4_at_k`], or with `FINITE` (the caller knows that no such half is Inf or NaN:
/// `quant::block_scales_finite`) converted without the test (`k` from [`F16K::for_scales`]).
#[inline(always)]
pub(super) fn f16x4_at_conv<const FINITE: bool>(x0: &[u8], x1: &[u8], x2: &[u8], x3: &[u8], at: usize, k: &F16K) -> v128 {
    let (s0, s1, s2, s3) = (&x0[at..at + 2], &x1[at..at + 2], &x2[at..at + 2], &x3[at..at + 2]);
    // SAFETY: each `s_k` is two readable bytes; the lane loads have no alignment requirement.
    let h = unsafe {
        let v = i32x4_splat(0);
        let v = v128_load16_lane::<0>(v, s0.as_ptr() as *const u16);
        let v = v128_load16_lane::<1>(v, s1.as_ptr() as *const u16);
        let v = v128_load16_lane::<2>(v, s2.as_ptr() as *const u16);
        v128_load16_lane::<3>(v, s3.as_ptr() as *const u16)
    };
    if FINITE {
        f16x4_finite_low_to_f32x4_k(h, k)
    } else {
        f16x4_low_to_f32x4_k(h, k)
    }
}

/// The eight little-endian f16 at `b[at..at + 16]` as two f32x4 (halves 0..4, 4..8), the
/// exact conversion (a group with an Inf or NaN through `f16_bits_to_f32x4`).
#[inline(always)]
pub(super) fn f16x8_at(b: &[u8], at: usize, k: &F16K) -> (v128, v128) {
    let v = ld(b, at);
    (f16x4_low_to_f32x4_k(v, k), f16x4_low_to_f32x4_k(i64x2_shuffle::<1, 1>(v, v), k))
}

/// `float::dequantize_f16`, eight values at a time: the same bits (the conversion is exact; a
/// group with an Inf or NaN goes through `f16_bits_to_f32x4`, as `f16x4_low_to_f32x4_k` does).
/// The K/V cache's f16 rows are read this way at every decode step.
pub(super) fn dequantize_f16(src: &[u8], dst: &mut [f32]) {
    let n = dst.len().min(src.len() / 2);
    let (body, tail) = dst[..n].split_at_mut(n / 8 * 8);
    let k = F16K::hoisted();
    for (s, d) in src.chunks_exact(16).zip(body.chunks_exact_mut(8)) {
        let (lo, hi) = f16x8_at(s, 0, &k);
        // SAFETY: `d` is 8 writable f32s; v128.store has no alignment requirement.
        unsafe {
            v128_store(d.as_mut_ptr() as *mut v128, lo);
            v128_store(d.as_mut_ptr().add(4) as *mut v128, hi);
        }
    }
    super::float::dequantize_f16(&src[n / 8 * 16..], tail);
}

/// `q8::dequantize_q8_0`, a block's 32 quants widened to f32 four at a time and scaled: the
/// same single rounding of `q · d`, so the same bits.
pub(super) fn dequantize_q8_0(src: &[u8], dst: &mut [f32]) {
    for (b, y) in src.chunks_exact(Q8_0_BYTES).zip(dst.chunks_exact_mut(QK)) {
        let d = f32x4_splat(read_f16(b, 0));
        for (h, q) in [ld(b, 2), ld(b, 18)].into_iter().enumerate() {
            let (l16, h16) = (i16x8_extend_low_i8x16(q), i16x8_extend_high_i8x16(q));
            let w = [i32x4_extend_low_i16x8(l16), i32x4_extend_high_i16x8(l16), i32x4_extend_low_i16x8(h16), i32x4_extend_high_i16x8(h16)];
            for (i, w) in w.into_iter().enumerate() {
                let out = &mut y[16 * h + 4 * i..16 * h + 4 * i + 4];
                // SAFETY: `out` is 4 writable f32s; v128.store has no alignment requirement.
                unsafe { v128_store(out.as_mut_ptr() as *mut v128, f32x4_mul(f32x4_convert_i32x4(w), d)) };
            }
        }
    }
}

/// The four f32 at `d[at..at + 4]` as an f32x4.
#[inline(always)]
pub(super) fn ld_f32x4(d: &[f32], at: usize) -> v128 {
    let s = &d[at..at + 4];
    // SAFETY: `s` is four readable f32; v128.load has no alignment requirement.
    unsafe { v128_load(s.as_ptr() as *const v128) }
}

/// Adds the four lanes of `p` to `sumf` one after the other (block order, as the scalar loop).
#[inline(always)]
pub(super) fn add_lanes_in_order(sumf: f32, p: v128) -> f32 {
    let s = sumf + f32x4_extract_lane::<0>(p);
    let s = s + f32x4_extract_lane::<1>(p);
    let s = s + f32x4_extract_lane::<2>(p);
    s + f32x4_extract_lane::<3>(p)
}

/// The 32-element formats paired with Q8_0 (Q8_0, Q4_0, Q5_0): four blocks at a time, their
/// integer sums reduced together and their float terms (`comb(sumi, dx, dy)`, elementwise, the
/// scalar expression) computed in one f32x4, then added to `sumf` in block order; the last
/// nb % 4 blocks one by one. `isum(x, y)` gives a block's i32x4 partial sums.
#[inline(always)]
fn dot_q8_0_family(
    w: &[u8],
    a: &[u8],
    nb: usize,
    wb: usize,
    isum: impl Fn(&[u8], &[u8]) -> v128,
    comb: impl Fn(v128, v128, v128) -> v128,
) -> f32 {
    let (w, a) = (&w[..nb * wb], &a[..nb * Q8_0_BYTES]);
    let mut sumf = 0f32;
    let n4 = nb / 4 * 4;
    let mut i = 0;
    while i < n4 {
        let x = &w[i * wb..(i + 4) * wb];
        let y = &a[i * Q8_0_BYTES..(i + 4) * Q8_0_BYTES];
        let (x0, x1, x2, x3) = (&x[..wb], &x[wb..2 * wb], &x[2 * wb..3 * wb], &x[3 * wb..]);
        let (y0, y1, y2, y3) = (&y[..34], &y[34..68], &y[68..102], &y[102..]);
        let s = reduce4(isum(x0, y0), isum(x1, y1), isum(x2, y2), isum(x3, y3));
        let dx = f16x4_at(x0, x1, x2, x3, 0);
        let dy = f16x4_at(y0, y1, y2, y3, 0);
        sumf = add_lanes_in_order(sumf, comb(f32x4_convert_i32x4(s), dx, dy));
        i += 4;
    }
    for (x, y) in w[n4 * wb..].chunks_exact(wb).zip(a[n4 * Q8_0_BYTES..].chunks_exact(Q8_0_BYTES)) {
        let s = f32x4_convert_i32x4(i32x4_splat(hsum(isum(x, y))));
        let dx = f32x4_splat(read_f16(x, 0));
        let dy = f32x4_splat(read_f16(y, 0));
        sumf += f32x4_extract_lane::<0>(comb(s, dx, dy));
    }
    sumf
}

pub(super) fn vec_dot_q8_0_q8_0(w: &[u8], a: &[u8], n: usize) -> f32 {
    // scalar: sumf += sumi as f32 * (dx * dy)
    dot_q8_0_family(
        w,
        a,
        n / QK,
        Q8_0_BYTES,
        |x, y| i32x4_add(dot_i8(ld(x, 2), ld(y, 2)), dot_i8(ld(x, 18), ld(y, 18))),
        |s, dx, dy| f32x4_mul(s, f32x4_mul(dx, dy)),
    )
}

pub(super) fn vec_dot_q4_0_q8_0(w: &[u8], a: &[u8], n: usize) -> f32 {
    let m4 = u8x16_splat(0x0f);
    let e8 = i8x16_splat(8);
    // scalar: sumf += sumi as f32 * dx * dy
    dot_q8_0_family(
        w,
        a,
        n / QK,
        Q4_0_BYTES,
        |x, y| {
            let b = ld(x, 2);
            let lo = i8x16_sub(v128_and(b, m4), e8);
            let hi = i8x16_sub(u8x16_shr(b, 4), e8);
            i32x4_add(dot_i8(lo, ld(y, 2)), dot_i8(hi, ld(y, 18)))
        },
        |s, dx, dy| f32x4_mul(f32x4_mul(s, dx), dy),
    )
}

pub(super) fn vec_dot_q4_1_q8_1(w: &[u8], a: &[u8], n: usize) -> f32 {
    let nb = n / QK;
    let (w, a) = (&w[..nb * Q4_1_BYTES], &a[..nb * Q8_1_BYTES]);
    let m4 = u8x16_splat(0x0f);
    let mut sumf = 0f32;
    for (x, y) in w.chunks_exact(Q4_1_BYTES).zip(a.chunks_exact(Q8_1_BYTES)) {
        let b = ld(x, 4);
        let lo = v128_and(b, m4);
        let hi = u8x16_shr(b, 4);
        let sumi = hsum(i32x4_add(dot_i8(lo, ld(y, 4)), dot_i8(hi, ld(y, 20))));
        let (dx, mx) = (read_f16(x, 0), read_f16(x, 2));
        let (dy, sy) = (read_f16(y, 0), read_f16(y, 2));
        sumf += (dx * dy) * sumi as f32 + mx * sy;
    }
    sumf
}

pub(super) fn vec_dot_q5_0_q8_0(w: &[u8], a: &[u8], n: usize) -> f32 {
    // scalar: sumf += (dx * dy) * sumi as f32
    dot_q8_0_family(
        w,
        a,
        n / QK,
        Q5_0_BYTES,
        |x, y| {
            let (lo, hi) = unpack_q5_0(x);
            i32x4_add(dot_i8(lo, ld(y, 2)), dot_i8(hi, ld(y, 18)))
        },
        |s, dx, dy| f32x4_mul(f32x4_mul(dx, dy), s),
    )
}

pub(super) fn vec_dot_q5_1_q8_1(w: &[u8], a: &[u8], n: usize) -> f32 {
    let nb = n / QK;
    let (w, a) = (&w[..nb * Q5_1_BYTES], &a[..nb * Q8_1_BYTES]);
    let m4 = u8x16_splat(0x0f);
    let mut sumf = 0f32;
    for (x, y) in w.chunks_exact(Q5_1_BYTES).zip(a.chunks_exact(Q8_1_BYTES)) {
        let qh = qh_at(x, 4);
        let b = ld(x, 8);
        let lo = v128_or(v128_and(b, m4), qh_bits16(qh, 0));
        let hi = v128_or(u8x16_shr(b, 4), qh_bits16(qh, 16));
        let sumi = hsum(i32x4_add(dot_i8(lo, ld(y, 4)), dot_i8(hi, ld(y, 20))));
        let (dx, mx) = (read_f16(x, 0), read_f16(x, 2));
        let (dy, sy) = (read_f16(y, 0), read_f16(y, 2));
        sumf += (dx * dy) * sumi as f32 + mx * sy;
    }
    sumf
}

/// Σ_j min_j · (bsum_2j + bsum_2j+1) of Q4_K/Q5_K as i32x4 partial sums (lanes add up to it):
/// the sixteen i16 bsums of the Q8_K block `yb` summed in pairs
/// (`i32x4.extadd_pairwise_i16x8_s`) times the eight mins `mv` (`mins_x4`). Exact: |pair sum|
/// <= 32 * 128, min <= 63.
#[inline(always)]
pub(super) fn k_summs_x4(yb: &[u8], mv: (v128, v128)) -> v128 {
    let p0 = i32x4_extadd_pairwise_i16x8(ld(yb, BSUMS_AT));
    let p1 = i32x4_extadd_pairwise_i16x8(ld(yb, BSUMS_AT + 16));
    i32x4_add(i32x4_mul(p0, mv.0), i32x4_mul(p1, mv.1))
}

/// The eight 6-bit mins of a Q4_K/Q5_K block as the two u32x4 `k_summs_x4` multiplies by.
#[inline(always)]
pub(super) fn mins_x4(m: &[u8; 8]) -> (v128, v128) {
    (u32x4(m[0] as u32, m[1] as u32, m[2] as u32, m[3] as u32), u32x4(m[4] as u32, m[5] as u32, m[6] as u32, m[7] as u32))
}

/// Q4_K and Q5_K × Q8_K: the same super-block (scales and mins, 4-bit quants at `qs_at`);
/// `high(x, c)` gives the fifth bits (already at bit 4) of sub-blocks 2c and 2c+1 as the vectors
/// or-ed into (lo nibbles of bytes 0..16, 16..32, hi nibbles of bytes 0..16, 16..32); Q4_K has
/// none (zeros).
#[inline(always)]
fn vec_dot_q45_k(
    w: &[u8],
    a: &[u8],
    n: usize,
    block_bytes: usize,
    qs_at: usize,
    high: impl Fn(&[u8], usize) -> [v128; 4],
) -> f32 {
    let nb = n / QK_K;
    let (w, a) = (&w[..nb * block_bytes], &a[..nb * Q8_K_BYTES]);
    let m4 = u8x16_splat(0x0f);
    let mut sumf = 0f32;
    for (x, yb) in w.chunks_exact(block_bytes).zip(a.chunks_exact(Q8_K_BYTES)) {
        let y = Q8KBlock::new(yb);
        let (acc, summs) = q45_k_isum(x, yb, qs_at, &high, m4);
        let (isum, summs) = (hsum(acc), hsum(summs));
        let d = read_f16(x, 0) * y.d;
        let dmin = read_f16(x, 2) * y.d;
        sumf += d * isum as f32 - dmin * summs as f32;
    }
    sumf
}

/// One Q4_K / Q5_K block × one Q8_K block (`vec_dot_q45_k`'s `qs_at` and `high`): the scaled
/// quant sums and the mins' sums, as i32x4 partial sums (exact).
#[inline(always)]
fn q45_k_isum(x: &[u8], yb: &[u8], qs_at: usize, high: &impl Fn(&[u8], usize) -> [v128; 4], m4: v128) -> (v128, v128) {
    let (sc, m) = scales_mins(&x[4..16]);
    let mut acc = i32x4_splat(0);
    for c in 0..4 {
        let (b0, b1) = (ld(x, qs_at + 32 * c), ld(x, qs_at + 16 + 32 * c));
        let [hl0, hl1, hu0, hu1] = high(x, c);
        let (l0, l1) = (v128_or(v128_and(b0, m4), hl0), v128_or(v128_and(b1, m4), hl1));
        let (u0, u1) = (v128_or(u8x16_shr(b0, 4), hu0), v128_or(u8x16_shr(b1, 4), hu1));
        let q = QS_AT + 64 * c;
        let lo = i32x4_add(dot_i8(l0, ld(yb, q)), dot_i8(l1, ld(yb, q + 16)));
        let hi = i32x4_add(dot_i8(u0, ld(yb, q + 32)), dot_i8(u1, ld(yb, q + 48)));
        acc = i32x4_add(acc, i32x4_mul(lo, i32x4_splat(sc[2 * c] as i32)));
        acc = i32x4_add(acc, i32x4_mul(hi, i32x4_splat(sc[2 * c + 1] as i32)));
    }
    (acc, k_summs_x4(yb, mins_x4(&m)))
}

/// Q4_K × Q8_K, four rows (`w`, `rb` bytes apart; decode takes them from `streams::STREAMS`
/// streams): each row's [`q45_k_isum`], the four rows' sums totalled together (`reduce4`) and
/// the one-row kernel's float expression in four lanes, each row's `d` and `dmin` gathered by
/// `load32_lane` — the same integers and float operations per row, so the same bits.
// The relaxed build dispatches `relaxed::rows4_q4_k` instead.
#[cfg_attr(target_feature = "relaxed-simd", allow(dead_code))]
pub(super) fn rows4_q4_k(w: &[u8], rb: usize, p: &[u8], n: usize) -> [f32; 4] {
    let m4 = opaque(u8x16_splat(0x0f));
    let zero = i32x4_splat(0);
    let high = |_: &[u8], _: usize| [zero; 4];
    rows4_q4_k_with(w, rb, p, n, #[inline(always)] |x, yb| q45_k_isum(x, yb, 16, &high, m4))
}

/// The four-row Q4_K kernel of either tier around its block sums `isum(x, yb)` (a Q4_K block
/// × a Q8_K block: the scaled quant sums and the mins' sums, i32x4 partial sums): per block the
/// four rows' sums totalled together (`reduce4`), then the one-row kernel's float expression
/// in four lanes with `d` and `dmin` from [`dmin4`].
#[inline(always)]
pub(super) fn rows4_q4_k_with(w: &[u8], rb: usize, p: &[u8], n: usize, isum: impl Fn(&[u8], &[u8]) -> (v128, v128)) -> [f32; 4] {
    let nb = n / QK_K;
    let a = &p[..nb * Q8_K_BYTES];
    let rows = rows4_of(w, rb, nb * Q4_K_BYTES);
    let low16 = opaque(u32x4_splat(0xffff));
    let mut sumf = f32x4_splat(0.0);
    for (b, yb) in a.chunks_exact(Q8_K_BYTES).enumerate() {
        let x = blocks4(&rows, b, Q4_K_BYTES);
        // Four calls written out: as `array::from_fn` LLVM kept a loop over the rows, their
        // slices on the stack (bounds-checked at every load) and one row's loads at a time.
        let s = [isum(x[0], yb), isum(x[1], yb), isum(x[2], yb), isum(x[3], yb)];
        let isum = reduce4(s[0].0, s[1].0, s[2].0, s[3].0);
        let summs = reduce4(s[0].1, s[1].1, s[2].1, s[3].1);
        let (d, dmin) = dmin4(&x, Q8KBlock::new(yb).d, low16);
        // scalar: sumf += d * isum as f32 - dmin * summs as f32
        sumf = f32x4_add(sumf, f32x4_sub(f32x4_mul(d, f32x4_convert_i32x4(isum)), f32x4_mul(dmin, f32x4_convert_i32x4(summs))));
    }
    store4(sumf)
}

/// Four Q4_K blocks' `d · yd` and `dmin · yd` (lane r = block r's; `yd`: the activation
/// block's scale): each block's first four bytes gathered by one `load32_lane`, both f16
/// converted as `read_f16` does (`low16`: `u32x4_splat(0xffff)`, made once by the caller).
#[inline(always)]
fn dmin4(x: &[&[u8]; 4], yd: f32, low16: v128) -> (v128, v128) {
    let (x0, x1, x2, x3) = (&x[0][..4], &x[1][..4], &x[2][..4], &x[3][..4]);
    // SAFETY: each slice is 4 readable bytes.
    let dd = unsafe {
        let v = v128_load32_lane::<0>(u32x4_splat(0), x0.as_ptr() as *const u32);
        let v = v128_load32_lane::<1>(v, x1.as_ptr() as *const u32);
        let v = v128_load32_lane::<2>(v, x2.as_ptr() as *const u32);
        v128_load32_lane::<3>(v, x3.as_ptr() as *const u32)
    };
    let yd = f32x4_splat(yd);
    (f32x4_mul(f16_bits_to_f32x4(v128_and(dd, low16)), yd), f32x4_mul(f16_bits_to_f32x4(u32x4_shr(dd, 16)), yd))
}

// The relaxed build dispatches `relaxed::vec_dot_q4_k_q8_k` instead.
#[cfg_attr(target_feature = "relaxed-simd", allow(dead_code))]
pub(super) fn vec_dot_q4_k_q8_k(w: &[u8], a: &[u8], n: usize) -> f32 {
    let zero = i32x4_splat(0);
    vec_dot_q45_k(w, a, n, Q4_K_BYTES, 16, |_, _| [zero; 4])
}

pub(super) fn vec_dot_q5_k_q8_k(w: &[u8], a: &[u8], n: usize) -> f32 {
    let one = u8x16_splat(1);
    vec_dot_q45_k(w, a, n, Q5_K_BYTES, 48, |x, c| {
        // Fifth bit of sub-block j: bit j of qh[l], moved to bit 4.
        let (h0, h1) = (ld(x, 16), ld(x, 32));
        let hb = |h: v128, j: u32| i8x16_shl(v128_and(u8x16_shr(h, j), one), 4);
        let (j0, j1) = (2 * c as u32, 2 * c as u32 + 1);
        [hb(h0, j0), hb(h1, j0), hb(h0, j1), hb(h1, j1)]
    })
}

/// Q6_K: the unsigned quants (0..63; the format subtracts 32) of the four 32-element sub-blocks
/// s = 0..4 of half `h`, elements `l0..l0 + 16` of each (element 128h + 32s + l0 + l).
#[inline(always)]
pub(super) fn q6_k_unsigned(x: &[u8], h: usize, l0: usize) -> [v128; 4] {
    q6_k_unsigned_k(x, h, l0, &NibMasks::plain())
}

/// The masks of the 6-bit unpacking (`q6_k_unsigned_k`): the low nibble, bits 4..6.
#[derive(Clone, Copy)]
pub(super) struct NibMasks {
    m4: v128,
    m30: v128,
}

impl NibMasks {
    #[inline(always)]
    fn plain() -> NibMasks {
        NibMasks { m4: u8x16_splat(0x0f), m30: u8x16_splat(0x30) }
    }

    /// Made opaque ([`opaque`]), for a loop.
    #[inline(always)]
    pub(super) fn hoisted() -> NibMasks {
        let k = NibMasks::plain();
        NibMasks { m4: opaque(k.m4), m30: opaque(k.m30) }
    }
}

/// [`q6_k_unsigned`] with its masks made by the caller. Every shift is a u16 shift followed by
/// a mask that clears the bits it moves across bytes: the same bytes as u8 shifts, which V8
/// lowers to the u16 shift and a mask it builds each time.
#[inline(always)]
pub(super) fn q6_k_unsigned_k(x: &[u8], h: usize, l0: usize, k: &NibMasks) -> [v128; 4] {
    let (m4, m30) = (k.m4, k.m30);
    let qa = ld(x, 64 * h + l0);
    let qb = ld(x, 64 * h + 32 + l0);
    let hb = ld(x, 128 + 32 * h + l0);
    [
        v128_or(v128_and(qa, m4), v128_and(i16x8_shl(hb, 4), m30)),
        v128_or(v128_and(qb, m4), v128_and(i16x8_shl(hb, 2), m30)),
        v128_or(high_nibbles(qa, m4), v128_and(hb, m30)),
        v128_or(high_nibbles(qb, m4), v128_and(u16x8_shr(hb, 2), m30)),
    ]
}

// The relaxed build dispatches `relaxed::vec_dot_q6_k_q8_k` instead.
#[cfg_attr(target_feature = "relaxed-simd", allow(dead_code))]
pub(super) fn vec_dot_q6_k_q8_k(w: &[u8], a: &[u8], n: usize) -> f32 {
    let nb = n / QK_K;
    let (w, a) = (&w[..nb * Q6_K_BYTES], &a[..nb * Q8_K_BYTES]);
    let (e32, k) = (opaque(i8x16_splat(32)), NibMasks::hoisted());
    let mut sumf = 0f32;
    for (x, yb) in w.chunks_exact(Q6_K_BYTES).zip(a.chunks_exact(Q8_K_BYTES)) {
        let y = Q8KBlock::new(yb);
        let isum = hsum(q6_k_isum(x, yb, e32, &k));
        sumf += (read_f16(x, 208) * y.d) * isum as f32;
    }
    sumf
}

/// One Q6_K block × one Q8_K block: Σ_g sc_g · Σ (u − 32)·a as i32x4 partial sums (exact).
#[cfg_attr(target_feature = "relaxed-simd", allow(dead_code))]
#[inline(always)]
fn q6_k_isum(x: &[u8], yb: &[u8], e32: v128, k: &NibMasks) -> v128 {
    let sc = &x[192..208];
    let mut acc = i32x4_splat(0);
    for h in 0..2 {
        for l0 in [0usize, 16] {
            for (s, u) in q6_k_unsigned_k(x, h, l0, k).into_iter().enumerate() {
                let e = 128 * h + 32 * s + l0;
                let p = dot_i8(i8x16_sub(u, e32), ld(yb, QS_AT + e));
                acc = i32x4_add(acc, i32x4_mul(p, i32x4_splat(sc[e / 16] as i8 as i32)));
            }
        }
    }
    acc
}

/// Q6_K × Q8_K, four rows (`w`, `rb` bytes apart, from the four streams): each row's
/// [`q6_k_isum`], the four rows' sums totalled together (`reduce4`) and the one-row kernel's
/// float expression in four lanes, each row's `d` gathered by `f16x4_at_k` — the same integers
/// and float operations per row, so the same bits.
// The relaxed build dispatches `relaxed::rows4_q6_k` instead.
#[cfg_attr(target_feature = "relaxed-simd", allow(dead_code))]
pub(super) fn rows4_q6_k(w: &[u8], rb: usize, p: &[u8], n: usize) -> [f32; 4] {
    let (e32, k) = (opaque(i8x16_splat(32)), NibMasks::hoisted());
    rows4_q6_k_with(w, rb, p, n, #[inline(always)] |x, yb| q6_k_isum(x, yb, e32, &k))
}

/// The four-row Q6_K kernel of either tier around its block sums `isum(x, yb)` (a Q6_K block
/// × a Q8_K block, i32x4 partial sums): per block the four rows' sums totalled together
/// (`reduce4`), then the one-row kernel's float expression in four lanes with each row's `d`
/// gathered by [`f16x4_at_k`].
#[inline(always)]
pub(super) fn rows4_q6_k_with(w: &[u8], rb: usize, p: &[u8], n: usize, isum: impl Fn(&[u8], &[u8]) -> v128) -> [f32; 4] {
    let nb = n / QK_K;
    let a = &p[..nb * Q8_K_BYTES];
    let rows = rows4_of(w, rb, nb * Q6_K_BYTES);
    let f16k = F16K::hoisted();
    let mut sumf = f32x4_splat(0.0);
    for (b, yb) in a.chunks_exact(Q8_K_BYTES).enumerate() {
        let x = blocks4(&rows, b, Q6_K_BYTES);
        let isum = reduce4(isum(x[0], yb), isum(x[1], yb), isum(x[2], yb), isum(x[3], yb));
        let d = f32x4_mul(f16x4_at_k(x[0], x[1], x[2], x[3], 208, &f16k), f32x4_splat(Q8KBlock::new(yb).d));
        // scalar: sumf += (read_f16(x, 208) * y.d) * isum as f32
        sumf = f32x4_add(sumf, f32x4_mul(d, f32x4_convert_i32x4(isum)));
    }
    store4(sumf)
}

pub(super) fn vec_dot_q3_k_q8_k(w: &[u8], a: &[u8], n: usize) -> f32 {
    let nb = n / QK_K;
    let (w, a) = (&w[..nb * Q3_K_BYTES], &a[..nb * Q8_K_BYTES]);
    let m3 = u8x16_splat(3);
    let e4 = i8x16_splat(4);
    let mut sumf = 0f32;
    for (x, yb) in w.chunks_exact(Q3_K_BYTES).zip(a.chunks_exact(Q8_K_BYTES)) {
        let y = Q8KBlock::new(yb);
        let s = &x[96..108];
        let mut sc = [0i32; 16];
        for (j, o) in sc.iter_mut().enumerate() {
            let lo = if j < 8 { s[j] & 0x0f } else { s[j - 8] >> 4 };
            let hi = (s[8 + j % 4] >> (2 * (j / 4))) & 3;
            *o = (lo | (hi << 4)) as i32 - 32;
        }
        let mut acc = i32x4_splat(0);
        for h in 0..2 {
            for l0 in [0usize, 16] {
                let qs = ld(x, 32 + 32 * h + l0);
                let hm = ld(x, l0);
                for sidx in 0..4u32 {
                    let bit = 4 * h as u32 + sidx;
                    let low = v128_and(u8x16_shr(qs, 2 * sidx), m3);
                    // subtract 4 where the hmask bit is clear
                    let set = v128_and(u8x16_shr(hm, bit), u8x16_splat(1));
                    let sub = v128_andnot(e4, i8x16_eq(set, u8x16_splat(1)));
                    let qv = i8x16_sub(low, sub);
                    let e = 128 * h + 32 * sidx as usize + l0;
                    let p = dot_i8(qv, ld(yb, QS_AT + e));
                    acc = i32x4_add(acc, i32x4_mul(p, i32x4_splat(sc[e / 16])));
                }
            }
        }
        let isum = hsum(acc);
        sumf += (read_f16(x, 108) * y.d) * isum as f32;
    }
    sumf
}

pub(super) fn vec_dot_q2_k_q8_k(w: &[u8], a: &[u8], n: usize) -> f32 {
    let nb = n / QK_K;
    let (w, a) = (&w[..nb * Q2_K_BYTES], &a[..nb * Q8_K_BYTES]);
    let m3 = u8x16_splat(3);
    let mut sumf = 0f32;
    for (x, yb) in w.chunks_exact(Q2_K_BYTES).zip(a.chunks_exact(Q8_K_BYTES)) {
        let y = Q8KBlock::new(yb);
        let scales = &x[0..16];
        let mut summs = 0i32;
        for j in 0..16 {
            summs += y.bsum(j) * (scales[j] >> 4) as i32;
        }
        let mut acc = i32x4_splat(0);
        for h in 0..2 {
            for l0 in [0usize, 16] {
                let qs = ld(x, 16 + 32 * h + l0);
                for s in 0..4u32 {
                    let qv = v128_and(u8x16_shr(qs, 2 * s), m3);
                    let e = 128 * h + 32 * s as usize + l0;
                    let p = dot_i8(qv, ld(yb, QS_AT + e));
                    acc = i32x4_add(acc, i32x4_mul(p, i32x4_splat((scales[e / 16] & 0x0f) as i32)));
                }
            }
        }
        let isum = hsum(acc);
        let dall = y.d * read_f16(x, 80);
        let dmin = y.d * read_f16(x, 82);
        sumf += dall * isum as f32 - dmin * summs as f32;
    }
    sumf
}

// ---- Four dots at once (matmul): four weight rows × one activation row (decode), or one
// weight row × four activation rows (prefill). Lane k of every vector belongs to dot k; each
// lane's integer block sum is the same exact i32 as the one-row kernel's, and its float term
// (`comb`, the scalar expression) is added to that lane's running sum once per block, in block
// order, starting from 0: the scalar kernel's sequence of f32 operations, so every lane is
// bit-identical to the scalar dot. The shared operand is unpacked/widened once per block.

/// i8x16 -> its two i16x8 halves.
#[inline(always)]
fn widen(v: v128) -> (v128, v128) {
    (i16x8_extend_low_i8x16(v), i16x8_extend_high_i8x16(v))
}

/// i32x4 partial sums of 32 products, one side already widened to i16 (`(l0, h0, l1, h1)`).
#[inline(always)]
fn dot_w(p: &(v128, v128, v128, v128), a: v128, b: v128) -> v128 {
    let (al, ah) = widen(a);
    let (bl, bh) = widen(b);
    i32x4_add(
        i32x4_add(i32x4_dot_i16x8(p.0, al), i32x4_dot_i16x8(p.1, ah)),
        i32x4_add(i32x4_dot_i16x8(p.2, bl), i32x4_dot_i16x8(p.3, bh)),
    )
}

#[inline(always)]
fn widen2(a: v128, b: v128) -> (v128, v128, v128, v128) {
    let (al, ah) = widen(a);
    let (bl, bh) = widen(b);
    (al, ah, bl, bh)
}

#[inline(always)]
pub(super) fn store4(v: v128) -> [f32; 4] {
    [f32x4_extract_lane::<0>(v), f32x4_extract_lane::<1>(v), f32x4_extract_lane::<2>(v), f32x4_extract_lane::<3>(v)]
}

/// The four weight rows of a rows4 call (`rb` bytes apart), each cut to `len` bytes.
#[inline(always)]
pub(super) fn rows4_of(w: &[u8], rb: usize, len: usize) -> [&[u8]; 4] {
    [&w[..len], &w[rb..rb + len], &w[2 * rb..2 * rb + len], &w[3 * rb..3 * rb + len]]
}

/// Block `i` (`wb` bytes) of each of four rows.
#[inline(always)]
pub(super) fn blocks4<'a>(r: &[&'a [u8]; 4], i: usize, wb: usize) -> [&'a [u8]; 4] {
    core::array::from_fn(|k| &r[k][i * wb..(i + 1) * wb])
}

/// Four weight rows (`w`, `rb` bytes apart) × one
/// Q8_0 activation row. `unpack(block)` gives the block's 32 weight quants as two i8x16
/// (elements 0..16, 16..32); `WB` is the block's size.
#[inline(always)]
fn rows4_q8_0_family<const WB: usize, const FINITE: bool>(
    w: &[u8],
    rb: usize,
    a: &[u8],
    nb: usize,
    unpack: impl Fn(&[u8]) -> (v128, v128),
    comb: impl Fn(v128, v128, v128) -> v128,
) -> [f32; 4] {
    let r = rows4_of(w, rb, nb * WB);
    let a = &a[..nb * Q8_0_BYTES];
    let f16k = F16K::for_scales::<FINITE>();
    let mut acc = f32x4_splat(0.0);
    for i in 0..nb {
        let y = &a[i * Q8_0_BYTES..(i + 1) * Q8_0_BYTES];
        let p = widen2(ld(y, 2), ld(y, 18));
        let [x0, x1, x2, x3] = blocks4(&r, i, WB);
        let d = |x: &[u8]| {
            let (l, h) = unpack(x);
            dot_w(&p, l, h)
        };
        let s = reduce4(d(x0), d(x1), d(x2), d(x3));
        let dx = f16x4_at_conv::<FINITE>(x0, x1, x2, x3, 0, &f16k);
        let dy = f32x4_splat(read_f16(y, 0));
        acc = f32x4_add(acc, comb(f32x4_convert_i32x4(s), dx, dy));
    }
    store4(acc)
}

/// One weight row × four Q8_0 activation rows (`a`, consecutive, `ab` bytes apart; `dy` their
/// scales as f32, `quant::activation_scales4`).
#[inline(always)]
fn toks4_q8_0_family(
    w: &[u8],
    a: &[u8],
    ab: usize,
    dy: &[f32],
    nb: usize,
    wb: usize,
    unpack: impl Fn(&[u8]) -> (v128, v128),
    comb: impl Fn(v128, v128, v128) -> v128,
) -> [f32; 4] {
    let w = &w[..nb * wb];
    let (a0, a1, a2, a3) = (&a[..ab], &a[ab..2 * ab], &a[2 * ab..3 * ab], &a[3 * ab..4 * ab]);
    let q = Q8_0_BYTES;
    let (a0, a1, a2, a3) = (&a0[..nb * q], &a1[..nb * q], &a2[..nb * q], &a3[..nb * q]);
    let mut acc = f32x4_splat(0.0);
    for i in 0..nb {
        let x = &w[i * wb..(i + 1) * wb];
        let (l, h) = unpack(x);
        let p = widen2(l, h);
        let (y0, y1, y2, y3) = (&a0[i * q..(i + 1) * q], &a1[i * q..(i + 1) * q], &a2[i * q..(i + 1) * q], &a3[i * q..(i + 1) * q]);
        let d = |y: &[u8]| dot_w(&p, ld(y, 2), ld(y, 18));
        let s = reduce4(d(y0), d(y1), d(y2), d(y3));
        let dx = f32x4_splat(read_f16(x, 0));
        acc = f32x4_add(acc, comb(f32x4_convert_i32x4(s), dx, ld_f32x4(dy, 4 * i)));
    }
    store4(acc)
}

/// One weight row × eight Q8_0 activation rows (`a`, consecutive, `ab` bytes apart): as
/// `toks4_q8_0_family`, the unpacked block shared by eight tokens (lanes: two f32x4).
#[inline(always)]
fn toks8_q8_0_family(
    w: &[u8],
    a: &[u8],
    ab: usize,
    dy: &[f32],
    nb: usize,
    wb: usize,
    unpack: impl Fn(&[u8]) -> (v128, v128),
    comb: impl Fn(v128, v128, v128) -> v128,
) -> [f32; 8] {
    let w = &w[..nb * wb];
    let q = Q8_0_BYTES;
    let ar: [&[u8]; 8] = core::array::from_fn(|k| &a[k * ab..k * ab + nb * q]);
    let mut acc0 = f32x4_splat(0.0);
    let mut acc1 = f32x4_splat(0.0);
    for i in 0..nb {
        let x = &w[i * wb..(i + 1) * wb];
        let (l, h) = unpack(x);
        let p = widen2(l, h);
        let dx = f32x4_splat(read_f16(x, 0));
        let ys: [&[u8]; 8] = core::array::from_fn(|k| &ar[k][i * q..(i + 1) * q]);
        let d = |y: &[u8]| dot_w(&p, ld(y, 2), ld(y, 18));
        let s0 = reduce4(d(ys[0]), d(ys[1]), d(ys[2]), d(ys[3]));
        acc0 = f32x4_add(acc0, comb(f32x4_convert_i32x4(s0), dx, ld_f32x4(dy, 4 * i)));
        let s1 = reduce4(d(ys[4]), d(ys[5]), d(ys[6]), d(ys[7]));
        acc1 = f32x4_add(acc1, comb(f32x4_convert_i32x4(s1), dx, ld_f32x4(dy, 4 * (nb + i))));
    }
    let (a0, a1) = (store4(acc0), store4(acc1));
    [a0[0], a0[1], a0[2], a0[3], a1[0], a1[1], a1[2], a1[3]]
}

#[inline(always)]
pub(super) fn unpack_q8_0(x: &[u8]) -> (v128, v128) {
    (ld(x, 2), ld(x, 18))
}

/// The constants of the signed Q4_0 / Q5_0 unpacking: made once per call by the decode kernels
/// (`UnpackK::hoisted`, see [`opaque`]), at each use elsewhere.
struct UnpackK {
    m4: v128,
    e8: v128,
    xf0: v128,
    qh: QhK,
}

impl UnpackK {
    #[inline(always)]
    fn plain() -> UnpackK {
        UnpackK { m4: u8x16_splat(0x0f), e8: i8x16_splat(8), xf0: u8x16_splat(0xF0), qh: QhK::plain() }
    }

    #[inline(always)]
    fn hoisted() -> UnpackK {
        let k = UnpackK::plain();
        UnpackK { m4: opaque(k.m4), e8: opaque(k.e8), xf0: opaque(k.xf0), qh: QhK::hoisted() }
    }
}

#[inline(always)]
fn unpack_q5_0(x: &[u8]) -> (v128, v128) {
    unpack_q5_0_k(x, &UnpackK::plain())
}

#[inline(always)]
fn unpack_q5_0_k(x: &[u8], k: &UnpackK) -> (v128, v128) {
    let qh = qh_at(x, 2);
    let b = ld(x, 6);
    let lo = v128_or(v128_and(b, k.m4), qh_minus16(qh, 0, k));
    let hi = v128_or(high_nibbles(b, k.m4), qh_minus16(qh, 16, k));
    (lo, hi)
}

#[inline(always)]
fn unpack_q4_0(x: &[u8]) -> (v128, v128) {
    unpack_q4_0_k(x, &UnpackK::plain())
}

#[inline(always)]
fn unpack_q4_0_k(x: &[u8], k: &UnpackK) -> (v128, v128) {
    let b = ld(x, 2);
    (i8x16_sub(v128_and(b, k.m4), k.e8), i8x16_sub(high_nibbles(b, k.m4), k.e8))
}

// The scalar float terms: Q8_0 `sumi * (dx*dy)`, Q4_0 `sumi * dx * dy`, Q5_0 `(dx*dy) * sumi`.
#[inline(always)]
pub(super) fn comb_q8_0(s: v128, dx: v128, dy: v128) -> v128 {
    f32x4_mul(s, f32x4_mul(dx, dy))
}
#[inline(always)]
pub(super) fn comb_q4_0(s: v128, dx: v128, dy: v128) -> v128 {
    f32x4_mul(f32x4_mul(s, dx), dy)
}
#[inline(always)]
pub(super) fn comb_q5_0(s: v128, dx: v128, dy: v128) -> v128 {
    f32x4_mul(f32x4_mul(dx, dy), s)
}

/// The four-row kernels; `FINITE` for weights whose block scales are all finite (`Weight`'s
/// `finite_scales`): the same bits, the scales converted without the Inf/NaN test.
pub(super) fn rows4_q8_0<const FINITE: bool>(w: &[u8], rb: usize, a: &[u8], n: usize) -> [f32; 4] {
    rows4_q8_0_family::<Q8_0_BYTES, FINITE>(w, rb, a, n / QK, unpack_q8_0, comb_q8_0)
}
pub(super) fn rows4_q4_0<const FINITE: bool>(w: &[u8], rb: usize, a: &[u8], n: usize) -> [f32; 4] {
    let k = UnpackK::hoisted();
    rows4_q8_0_family::<Q4_0_BYTES, FINITE>(w, rb, a, n / QK, |x| unpack_q4_0_k(x, &k), comb_q4_0)
}
pub(super) fn rows4_q5_0<const FINITE: bool>(w: &[u8], rb: usize, a: &[u8], n: usize) -> [f32; 4] {
    let k = UnpackK::hoisted();
    rows4_q8_0_family::<Q5_0_BYTES, FINITE>(w, rb, a, n / QK, |x| unpack_q5_0_k(x, &k), comb_q5_0)
}
pub(super) fn toks4_q8_0(w: &[u8], a: &[u8], ab: usize, dy: &[f32], n: usize) -> [f32; 4] {
    toks4_q8_0_family(w, a, ab, dy, n / QK, Q8_0_BYTES, unpack_q8_0, comb_q8_0)
}
pub(super) fn toks4_q4_0(w: &[u8], a: &[u8], ab: usize, dy: &[f32], n: usize) -> [f32; 4] {
    toks4_q8_0_family(w, a, ab, dy, n / QK, Q4_0_BYTES, unpack_q4_0, comb_q4_0)
}
pub(super) fn toks4_q5_0(w: &[u8], a: &[u8], ab: usize, dy: &[f32], n: usize) -> [f32; 4] {
    toks4_q8_0_family(w, a, ab, dy, n / QK, Q5_0_BYTES, unpack_q5_0, comb_q5_0)
}

/// The four activation rows of a toks4 call, cut to `nb` blocks of `bytes` each.
#[inline(always)]
pub(super) fn act_rows4(a: &[u8], ab: usize, nb: usize, bytes: usize) -> [&[u8]; 4] {
    let r = |k: usize| &a[k * ab..k * ab + nb * bytes];
    [r(0), r(1), r(2), r(3)]
}

/// i16x8 halves of a small-valued i8x16 (`v`), each multiplied by `s` in i16 (the caller
/// guarantees |q·s| < 2^15), so that Σ (s·q)·a = s·Σ q·a exactly in i32 afterwards.
#[inline(always)]
fn widen_scaled(v: v128, s: v128) -> (v128, v128) {
    let (l, h) = widen(v);
    (i16x8_mul(l, s), i16x8_mul(h, s))
}

/// Σ of 16 products: `w` (two i16x8, pre-scaled) · the i8x16 activation at `y[at..]`.
#[inline(always)]
fn dot16(w: (v128, v128), y: &[u8], at: usize) -> v128 {
    let (l, h) = widen(ld(y, at));
    i32x4_add(i32x4_dot_i16x8(w.0, l), i32x4_dot_i16x8(w.1, h))
}

/// One Q4_K weight row × four Q8_K activation rows. The nibbles (0..15) times their 6-bit
/// sub-block scale (≤ 945) are formed once per block in i16 and shared by the four tokens;
/// each token's isum is the same exact i32 as the one-row kernel's, its float term the same.
// The relaxed build dispatches `relaxed::toks4_q4_k` instead.
#[cfg_attr(target_feature = "relaxed-simd", allow(dead_code))]
pub(super) fn toks4_q4_k(w: &[u8], a: &[u8], ab: usize, _dy: &[f32], n: usize) -> [f32; 4] {
    let nb = n / QK_K;
    let w = &w[..nb * Q4_K_BYTES];
    let ar = act_rows4(a, ab, nb, Q8_K_BYTES);
    let m4 = u8x16_splat(0x0f);
    let mut sumf = f32x4_splat(0.0);
    for i in 0..nb {
        let x = &w[i * Q4_K_BYTES..(i + 1) * Q4_K_BYTES];
        let ys = [
            &ar[0][i * Q8_K_BYTES..(i + 1) * Q8_K_BYTES],
            &ar[1][i * Q8_K_BYTES..(i + 1) * Q8_K_BYTES],
            &ar[2][i * Q8_K_BYTES..(i + 1) * Q8_K_BYTES],
            &ar[3][i * Q8_K_BYTES..(i + 1) * Q8_K_BYTES],
        ];
        let (sc, m) = scales_mins(&x[4..16]);
        let mut acc = [i32x4_splat(0); 4];
        for c in 0..4 {
            let (b0, b1) = (ld(x, 16 + 32 * c), ld(x, 32 + 32 * c));
            let (sl, sh) = (i16x8_splat(sc[2 * c] as i16), i16x8_splat(sc[2 * c + 1] as i16));
            let w0 = widen_scaled(v128_and(b0, m4), sl);
            let w1 = widen_scaled(v128_and(b1, m4), sl);
            let w2 = widen_scaled(u8x16_shr(b0, 4), sh);
            let w3 = widen_scaled(u8x16_shr(b1, 4), sh);
            let q = QS_AT + 64 * c;
            for k in 0..4 {
                let y = ys[k];
                let s = i32x4_add(
                    i32x4_add(dot16(w0, y, q), dot16(w1, y, q + 16)),
                    i32x4_add(dot16(w2, y, q + 32), dot16(w3, y, q + 48)),
                );
                acc[k] = i32x4_add(acc[k], s);
            }
        }
        let isum = f32x4_convert_i32x4(reduce4(acc[0], acc[1], acc[2], acc[3]));
        let mv = mins_x4(&m);
        let summs = f32x4_convert_i32x4(reduce4(
            k_summs_x4(ys[0], mv),
            k_summs_x4(ys[1], mv),
            k_summs_x4(ys[2], mv),
            k_summs_x4(ys[3], mv),
        ));
        let yd = f32x4(read_f32(ys[0], 0), read_f32(ys[1], 0), read_f32(ys[2], 0), read_f32(ys[3], 0));
        let d = f32x4_mul(f32x4_splat(read_f16(x, 0)), yd);
        let dmin = f32x4_mul(f32x4_splat(read_f16(x, 2)), yd);
        // scalar: sumf += d * isum as f32 - dmin * summs as f32
        sumf = f32x4_add(sumf, f32x4_sub(f32x4_mul(d, isum), f32x4_mul(dmin, summs)));
    }
    store4(sumf)
}

/// One Q6_K weight row × four Q8_K activation rows: the quants (-32..31) times their i8
/// sub-block scale (|·| ≤ 4096) formed once per block in i16, shared by the four tokens.
// The relaxed build dispatches `relaxed::toks4_q6_k` instead.
#[cfg_attr(target_feature = "relaxed-simd", allow(dead_code))]
pub(super) fn toks4_q6_k(w: &[u8], a: &[u8], ab: usize, _dy: &[f32], n: usize) -> [f32; 4] {
    let nb = n / QK_K;
    let w = &w[..nb * Q6_K_BYTES];
    let ar = act_rows4(a, ab, nb, Q8_K_BYTES);
    let e32 = i8x16_splat(32);
    let mut sumf = f32x4_splat(0.0);
    for i in 0..nb {
        let x = &w[i * Q6_K_BYTES..(i + 1) * Q6_K_BYTES];
        let ys = [
            &ar[0][i * Q8_K_BYTES..(i + 1) * Q8_K_BYTES],
            &ar[1][i * Q8_K_BYTES..(i + 1) * Q8_K_BYTES],
            &ar[2][i * Q8_K_BYTES..(i + 1) * Q8_K_BYTES],
            &ar[3][i * Q8_K_BYTES..(i + 1) * Q8_K_BYTES],
        ];
        let sc = &x[192..208];
        let mut acc = [i32x4_splat(0); 4];
        for h in 0..2 {
            for l0 in [0usize, 16] {
                let [q0, q1, q2, q3] = q6_k_unsigned(x, h, l0).map(|u| i8x16_sub(u, e32));
                let e = |s: usize| 128 * h + 32 * s + l0;
                let s = |s: usize| i16x8_splat(sc[e(s) / 16] as i8 as i16);
                let ws = [widen_scaled(q0, s(0)), widen_scaled(q1, s(1)), widen_scaled(q2, s(2)), widen_scaled(q3, s(3))];
                for k in 0..4 {
                    let y = ys[k];
                    let t = i32x4_add(
                        i32x4_add(dot16(ws[0], y, QS_AT + e(0)), dot16(ws[1], y, QS_AT + e(1))),
                        i32x4_add(dot16(ws[2], y, QS_AT + e(2)), dot16(ws[3], y, QS_AT + e(3))),
                    );
                    acc[k] = i32x4_add(acc[k], t);
                }
            }
        }
        let isum = f32x4_convert_i32x4(reduce4(acc[0], acc[1], acc[2], acc[3]));
        let yd = f32x4(Q8KBlock::new(ys[0]).d, Q8KBlock::new(ys[1]).d, Q8KBlock::new(ys[2]).d, Q8KBlock::new(ys[3]).d);
        // scalar: sumf += (read_f16(x, 208) * y.d) * isum as f32
        sumf = f32x4_add(sumf, f32x4_mul(f32x4_mul(f32x4_splat(read_f16(x, 208)), yd), isum));
    }
    store4(sumf)
}
pub(super) fn toks8_q8_0(w: &[u8], a: &[u8], ab: usize, dy: &[f32], n: usize) -> [f32; 8] {
    toks8_q8_0_family(w, a, ab, dy, n / QK, Q8_0_BYTES, unpack_q8_0, comb_q8_0)
}
pub(super) fn toks8_q4_0(w: &[u8], a: &[u8], ab: usize, dy: &[f32], n: usize) -> [f32; 8] {
    toks8_q8_0_family(w, a, ab, dy, n / QK, Q4_0_BYTES, unpack_q4_0, comb_q4_0)
}
pub(super) fn toks8_q5_0(w: &[u8], a: &[u8], ab: usize, dy: &[f32], n: usize) -> [f32; 8] {
    toks8_q8_0_family(w, a, ab, dy, n / QK, Q5_0_BYTES, unpack_q5_0, comb_q5_0)
}

