//! SIMD128 twins of the plane kernels (`planes.rs`), bit for bit: each block's nibble sums are
//! exact integers in i32 lanes (nibble × i8 products widened to i16, lanes reduced once per
//! block), combined by the same integer formula, and the float part is the scalar kernel's
//! expression in the same block order.

use core::arch::wasm32::*;

use super::float::read_f16;
use super::planes::{rest16, pass1_block_int, Pass1, PlanesAct, PASS1_ROWS};
use super::simd128::{hsum, ld};

/// i32x4 partial sums of Σ_k lo(v_k)·q[k] + hi(v_k)·q[k+16] (`q0`, `q1`: q's two halves).
/// In the relaxed build, two relaxed dots: the nibbles (0..15) are the 7-bit operand, so every
/// lowering gives the exact sums (see `relaxed.rs`); the lanes group the terms differently from
/// SIMD128's, and every caller only uses the lanes' total.
#[cfg(target_feature = "relaxed-simd")]
#[inline(always)]
fn nib_dot(v: v128, q0: v128, q1: v128) -> v128 {
    let lo = v128_and(v, i8x16_splat(0x0F));
    let hi = u8x16_shr(v, 4);
    i32x4_relaxed_dot_i8x16_i7x16_add(q1, hi, i32x4_relaxed_dot_i8x16_i7x16_add(q0, lo, i32x4_splat(0)))
}

/// i32x4 partial sums of Σ_k lo(v_k)·q[k] + hi(v_k)·q[k+16] (`q0`, `q1`: q's two halves).
#[cfg(not(target_feature = "relaxed-simd"))]
#[inline(always)]
fn nib_dot(v: v128, q0: v128, q1: v128) -> v128 {
    let lo = v128_and(v, i8x16_splat(0x0F));
    let hi = u8x16_shr(v, 4);
    // Products ≤ 15·128 in magnitude: four of them fit in i16.
    let s = i16x8_add(
        i16x8_add(i16x8_extmul_low_i8x16(lo, q0), i16x8_extmul_high_i8x16(lo, q0)),
        i16x8_add(i16x8_extmul_low_i8x16(hi, q1), i16x8_extmul_high_i8x16(hi, q1)),
    );
    i32x4_extadd_pairwise_i16x8(s)
}

#[inline(always)]
fn q_halves(x: &PlanesAct, blk: usize) -> (v128, v128) {
    let q = &x.qxp[blk];
    // SAFETY: `q` is 32 readable bytes; v128.load has no alignment requirement.
    unsafe { (v128_load(q.as_ptr() as *const v128), v128_load(q.as_ptr().add(16) as *const v128)) }
}

/// The 16 bytes whose last `c` are block `blk`'s known `l` bytes (the others zeroed).
#[inline(always)]
fn known_l(a: &[u8], x: &PlanesAct, blk: usize) -> v128 {
    let cb = x.c[blk] as usize;
    let end = x.o0 + x.o_off[blk] as usize + cb;
    // The 16 - c bytes before the known ones are the end of the h plane or earlier known
    // bytes: in the row, masked out.
    // SAFETY: `mask` is 16 readable bytes.
    let mask = unsafe { v128_load(x.mask[blk].as_ptr() as *const v128) };
    v128_and(ld(a, end - 16), mask)
}

pub(super) fn pass1_row(a: &[u8], x: &PlanesAct) -> Pass1 {
    let nb = x.nb;
    let (mut a2, mut e1, mut t) = (0f32, 0f32, 0f32);
    for blk in 0..nb {
        let dw = read_f16(a, 2 * blk);
        let (q0, q1) = q_halves(x, blk);
        let sh = hsum(nib_dot(ld(a, nb * 2 + blk * 16), q0, q1));
        let sl = if x.c[blk] == 0 { 0 } else { hsum(nib_dot(known_l(a, x, blk), q0, q1)) };
        a2 += pass1_block_int(sh, sl, x, blk) as f32 * (dw * x.dx[blk]);
        e1 += dw.abs() * x.m[blk];
        t += dw.abs() * x.n[blk];
    }
    Pass1 { a2, e1, t }
}

/// f32 of four f16 values (exact; the scalar `f16_to_f32` in four lanes).
#[inline(always)]
fn f16x4(h: [u16; 4]) -> v128 {
    let h = u32x4(h[0] as u32, h[1] as u32, h[2] as u32, h[3] as u32);
    let em = v128_and(h, u32x4_splat(0x7fff));
    let sign = i32x4_shl(v128_and(h, u32x4_splat(0x8000)), 16);
    let mag = f32x4_mul(i32x4_shl(em, 13), f32x4_splat(f32::from_bits(0x7780_0000)));
    let special = v128_or(u32x4_splat(0x7f80_0000), i32x4_shl(v128_and(em, u32x4_splat(0x03ff)), 13));
    let v = v128_bitselect(special, mag, i32x4_gt(em, i32x4_splat(0x7bff)));
    v128_or(v, sign)
}

/// Lane k = the sum of the four lanes of `v[k]` (exact integers).
#[inline(always)]
fn reduce4(v: [v128; 4]) -> v128 {
    let u01 = i32x4_add(i32x4_shuffle::<0, 4, 1, 5>(v[0], v[1]), i32x4_shuffle::<2, 6, 3, 7>(v[0], v[1]));
    let u23 = i32x4_add(i32x4_shuffle::<0, 4, 1, 5>(v[2], v[3]), i32x4_shuffle::<2, 6, 3, 7>(v[2], v[3]));
    i32x4_add(i32x4_shuffle::<0, 1, 4, 5>(u01, u23), i32x4_shuffle::<2, 3, 6, 7>(u01, u23))
}

/// Pass 1 of four rows of a group (`A` parts `ra` apart): the integers of one block for the
/// four rows reduced together, the float part in four lanes in the scalar order.
fn pass1_rows4(a: &[u8], ra: usize, x: &PlanesAct) -> [Pass1; 4] {
    let nb = x.nb;
    let rows: [&[u8]; 4] = [&a[..ra], &a[ra..2 * ra], &a[2 * ra..3 * ra], &a[3 * ra..4 * ra]];
    let (mut a2, mut e1, mut t) = (f32x4_splat(0.0), f32x4_splat(0.0), f32x4_splat(0.0));
    for blk in 0..nb {
        let (q0, q1) = q_halves(x, blk);
        let known = x.c[blk] != 0;
        let mut v = [i32x4_splat(0); 4];
        for (k, row) in rows.iter().enumerate() {
            let mut s = i32x4_shl(nib_dot(ld(row, nb * 2 + blk * 16), q0, q1), 5);
            if known {
                s = i32x4_add(s, i32x4_shl(nib_dot(known_l(row, x, blk), q0, q1), 1));
            }
            v[k] = s;
        }
        // `pass1_block_int`: 32·(sh − 8·Σq) + 2·sl + c15.
        let ai = i32x4_add(reduce4(v), i32x4_splat(x.c15[blk] - 256 * x.sum[blk]));
        let dw = f16x4(rows.map(|r| u16::from_le_bytes([r[2 * blk], r[2 * blk + 1]])));
        let s = f32x4_mul(dw, f32x4_splat(x.dx[blk]));
        a2 = f32x4_add(a2, f32x4_mul(f32x4_convert_i32x4(ai), s));
        let dwa = f32x4_abs(dw);
        e1 = f32x4_add(e1, f32x4_mul(dwa, f32x4_splat(x.m[blk])));
        t = f32x4_add(t, f32x4_mul(dwa, f32x4_splat(x.n[blk])));
    }
    let lane = |v: v128| [f32x4_extract_lane::<0>(v), f32x4_extract_lane::<1>(v), f32x4_extract_lane::<2>(v), f32x4_extract_lane::<3>(v)];
    let (av, ev, tv) = (lane(a2), lane(e1), lane(t));
    [0, 1, 2, 3].map(|k| Pass1 { a2: av[k], e1: ev[k], t: tv[k] })
}

/// Pass 1 of [`PASS1_ROWS`] rows: four at a time (wasm has no prefetch: `_ahead` unused).
pub(super) fn pass1_rows(a: &[u8], ra: usize, _ahead: usize, x: &PlanesAct) -> [Pass1; PASS1_ROWS] {
    let mut out = [Pass1 { a2: 0.0, e1: 0.0, t: 0.0 }; PASS1_ROWS];
    for (i, four) in out.chunks_exact_mut(4).enumerate() {
        four.copy_from_slice(&pass1_rows4(&a[4 * i * ra..], ra, x));
    }
    out
}

pub(super) fn full_row(a: &[u8], b: &[u8], x: &PlanesAct) -> f32 {
    let nb = x.nb;
    let mut sumf = 0f32;
    for blk in 0..nb {
        let dw = read_f16(a, 2 * blk);
        let (q0, q1) = q_halves(x, blk);
        let bo = x.b_off[blk] as usize;
        let mut tmp = [0u8; 16];
        let rest = ld(rest16(b, bo, &mut tmp), 0);
        // SAFETY: `mask` is 16 readable bytes.
        let mask = unsafe { v128_load(x.mask[blk].as_ptr() as *const v128) };
        let l = v128_bitselect(known_l(a, x, blk), rest, mask);
        let sh = nib_dot(ld(a, nb * 2 + blk * 16), q0, q1);
        let sl = nib_dot(l, q0, q1);
        // 16·sh + sl - 128·Σq, as the scalar kernel's `full_block_int`.
        let sumi = hsum(i32x4_add(i32x4_shl(sh, 4), sl)) - 128 * x.sum[blk];
        sumf += sumi as f32 * (dw * x.dx[blk]);
    }
    sumf
}
