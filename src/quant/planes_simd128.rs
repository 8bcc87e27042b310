//! SIMD128 twins of the plane kernels (`planes.rs`), bit for bit: each block's nibble sums are
//! exact integers in i32 lanes (nibble × i8 products widened to i16, lanes reduced once per
//! block), combined by the same integer formula, and the float part is the scalar kernel's
//! expression in the same block order.

use core::arch::wasm32::*;

use super::float::read_f16;
use super::planes::{rest16, pass1_block_int, Pass1, PlanesAct};
use super::simd128::{hsum, ld};

/// i32x4 partial sums of Σ_k lo(v_k)·q[k] + hi(v_k)·q[k+16] (`q0`, `q1`: q's two halves).
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

/// Four rows of a group, one at a time (no four-row SIMD128 twin yet).
pub(super) fn pass1_rows4(a: &[u8], ra: usize, x: &PlanesAct) -> [Pass1; 4] {
    [0, 1, 2, 3].map(|k| pass1_row(&a[k * ra..(k + 1) * ra], x))
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
