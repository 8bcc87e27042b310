//! SIMD128 twins of the plane kernels (`planes.rs`), bit for bit: each block's nibble sums are
//! exact integers in i32 lanes (nibble × i8 products widened to i16, lanes reduced once per
//! block), combined by the same integer formula, and the float part is the scalar kernel's
//! expression in the same order (pass 1: blocks in four lanes, `planes::Pass1`).

use core::arch::wasm32::*;

use super::float::read_f16;
use super::planes::{full_cst, lanes_total, rest16, Pass1, PlanesAct, PASS1_ROWS};
use super::q8::QK;
use super::simd128::{add_lanes_in_order, f16x4_finite_low_to_f32x4_k, f16x4_low_to_f32x4, f16x4_low_to_f32x4_k, hsum, ld, opaque, reduce4, store4, swizzle, F16K};

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

/// Pass 1 of one row (`a`: its `A` part, which may run on past the row): its blocks four at a
/// time, lane `j` of the float sums holding blocks `j, j + 4, ...` (the scalar kernel's order,
/// `planes::pass1_row`). A row is one ascending stream of memory, which the hardware
/// prefetcher follows through a group's consecutive `A` parts; the four-row kernel's eight
/// short streams (scales and `h` plane of four rows) it did not, and the loads that touched the
/// rows ahead for it stalled retirement (about a third of pass 1's time on a 2-core EPYC VM).
pub(super) fn pass1_row(a: &[u8], x: &PlanesAct) -> Pass1 {
    assert!(x.nb > 0 && a.len() >= x.a_part_bytes(), "a whole A part");
    // SAFETY: `a` holds a whole A part (asserted above).
    let [a2, e] = if x.finite_scales {
        unsafe { row_sums_of::<1, true>([a.as_ptr()], x, &Pass1Consts::new::<true>())[0] }
    } else {
        unsafe { row_sums_of::<1, false>([a.as_ptr()], x, &Pass1Consts::new::<false>())[0] }
    };
    Pass1 { a2: lanes_total(store4(a2)), e: lanes_total(store4(e)) }
}

/// The constants of pass 1's loop, made once per call (`opaque`).
struct Pass1Consts {
    s32: v128,
    s2: v128,
    nib: v128,
    neg0: v128,
    abs: v128,
    f16: F16K,
}

impl Pass1Consts {
    /// `FINITE`: the scales are converted without the Inf/NaN test (`PlanesAct::finite_scales`),
    /// whose two constants are then not made.
    #[inline(always)]
    fn new<const FINITE: bool>() -> Pass1Consts {
        Pass1Consts {
            s32: opaque(i16x8_splat(32)),
            s2: opaque(i16x8_splat(2)),
            nib: opaque(NIB_MASK),
            neg0: opaque(f32x4_splat(-0.0)),
            abs: opaque(u32x4_splat(0x7fff_ffff)),
            f16: if FINITE { F16K::hoisted_finite() } else { F16K::hoisted() },
        }
    }
}

/// [`row_sums`] in the loop `x`'s layout needs (`FINITE`: `x.finite_scales`, as `k` was made).
///
/// # Safety
/// As [`row_sums`].
#[inline(always)]
unsafe fn row_sums_of<const R: usize, const FINITE: bool>(p: [*const u8; R], x: &PlanesAct, k: &Pass1Consts) -> [[v128; 2]; R] {
    debug_assert!(!FINITE || x.finite_scales);
    if x.simd_blockwise {
        row_sums::<R, true, FINITE>(p, x, k)
    } else {
        row_sums::<R, false, FINITE>(p, x, k)
    }
}

/// Pass 1's two sums of each of `R` rows (row `i`'s A part starts at `p[i]`), in four lanes
/// each (lane `j`: blocks `j, j + 4, ...`, `planes::Pass1`), before [`lanes_total`]. The rows
/// go block by block together, so that a block's activation operands and a group's scalars
/// are loaded once for all of them (each row's own arithmetic is unchanged: the same bits).
/// `BLOCKWISE`: some block reads its known bytes through its own window
/// (`Pass1Block::known_at`) rather than its group's (`Pass1Quad::known`): two loops, so the
/// usual one tests nothing per block.
///
/// # Safety
/// Each `p[i]` starts a whole A part of `x`'s layout: `x.a_part_bytes()` readable bytes
/// (`x.nb > 0`).
#[inline(always)]
unsafe fn row_sums<const R: usize, const BLOCKWISE: bool, const FINITE: bool>(p: [*const u8; R], x: &PlanesAct, k: &Pass1Consts) -> [[v128; 2]; R] {
    let nb = x.nb;
    let groups = nb.div_ceil(4);
    let (blocks, quads) = (&x.simd[..nb], &x.quads[..groups]);
    let (s32, s2, nib, neg0) = (k.s32, k.s2, k.nib, k.neg0);
    // Block `blk`'s integer sums in each row: its h plane, and its own known window where it
    // has known bytes and the row's known bytes are not read a group at a time
    // (`Pass1Quad::known`): the 16 bytes ending at its last known byte, the operand zero at
    // the others.
    // SAFETY (the loads): block `blk < nb`'s h plane is at 2·nb + 16·blk, inside each A part,
    // and its known window ends inside it (at most at the A part's end); `blk < nb =
    // blocks.len()` at every call.
    let block = |blk: usize| -> [v128; R] {
        let b = unsafe { blocks.get_unchecked(blk) };
        let h = p.map(|p| unsafe { v128_load(p.add(nb * 2 + blk * 16) as *const v128) });
        // Relaxed, without own windows: the i16 sums, weighted four blocks at a time (`add`).
        #[cfg(target_feature = "relaxed-simd")]
        if !BLOCKWISE {
            return h.map(|h| nib_pairs(h, &b.h, nib));
        }
        core::array::from_fn(|i| {
            let s = nibs(h[i], &b.h, s32, nib);
            if !BLOCKWISE || b.known_at == 0 {
                s
            } else {
                i32x4_add(s, nibs(unsafe { v128_load(p[i].add(b.known_at as usize) as *const v128) }, &b.l, s2, nib))
            }
        })
    };
    let mut acc = [[neg0; 2]; R];
    // One group: `pass1_block_int` in lane j (block 4g + j) from each row's sums `v[i]`, then
    // the float terms; in a short last group (`tail`), lanes without a block (`live`) add
    // −0.0, the exact identity of f32 addition.
    let add = |g: usize, v: [[v128; R]; 4], tail: bool, acc: &mut [[v128; 2]; R]| {
        // SAFETY: g < groups = quads.len() at every call.
        let q = unsafe { quads.get_unchecked(g) };
        for (i, [a2, e]) in acc.iter_mut().enumerate() {
            let v = [v[0][i], v[1][i], v[2][i], v[3][i]];
            #[cfg(target_feature = "relaxed-simd")]
            let sums = if BLOCKWISE { reduce4(v[0], v[1], v[2], v[3]) } else { pairs_total4(v, s32) };
            #[cfg(not(target_feature = "relaxed-simd"))]
            let sums = reduce4(v[0], v[1], v[2], v[3]);
            let mut ai = i32x4_add(sums, q.cst);
            let p = p[i];
            if !BLOCKWISE && q.known_at != 0 {
                // The group's known bytes in one window, each block's moved into its lane's
                // four bytes (`Pass1Quad::known_idx`): the window's i32 lanes are the blocks'
                // sums.
                // SAFETY: the window ends at the group's last known byte, inside the A part,
                // and starts after the scales (`prepare_pass1_blocks`).
                let w = swizzle(unsafe { v128_load(p.add(q.known_at as usize) as *const v128) }, q.known_idx);
                ai = i32x4_add(ai, nibs(w, &q.known, s2, nib));
            }
            // SAFETY: 8 bytes at 8·g ≤ 2·nb + 6 ≤ 18·nb: inside the A part (the scales, and
            // for lanes past the row's last block h-plane bytes, discarded by `live`).
            let raw = unsafe { v128_load64_zero(p.add(8 * g) as *const u64) };
            let dw = if FINITE { f16x4_finite_low_to_f32x4_k(raw, &k.f16) } else { f16x4_low_to_f32x4_k(raw, &k.f16) };
            let keep = |v: v128| if tail { v128_bitselect(v, neg0, q.live) } else { v };
            *a2 = f32x4_add(*a2, keep(f32x4_mul(f32x4_convert_i32x4(ai), f32x4_mul(dw, q.dx))));
            // |dw| (`f32x4_abs`, its mask made once).
            *e = f32x4_add(*e, keep(f32x4_mul(v128_and(dw, k.abs), q.w)));
        }
    };
    for g in 0..nb / 4 {
        add(g, [block(4 * g), block(4 * g + 1), block(4 * g + 2), block(4 * g + 3)], false, &mut acc);
    }
    if nb % 4 != 0 {
        let g = nb / 4;
        let v = core::array::from_fn(|j| if 4 * g + j < nb { block(4 * g + j) } else { [i32x4_splat(0); R] });
        add(g, v, true, &mut acc);
    }
    acc
}

/// [`lanes_total`] of four rows' lane sums at once, lane k = row k's: the 4×4 transpose, then
/// `(l0 + l1) + (l2 + l3)` lane by lane — the same additions in the same order.
#[inline(always)]
fn lanes_total4(r0: v128, r1: v128, r2: v128, r3: v128) -> v128 {
    let (t0, t1) = (i32x4_shuffle::<0, 4, 1, 5>(r0, r1), i32x4_shuffle::<0, 4, 1, 5>(r2, r3));
    let (t2, t3) = (i32x4_shuffle::<2, 6, 3, 7>(r0, r1), i32x4_shuffle::<2, 6, 3, 7>(r2, r3));
    let (l0, l1) = (i32x4_shuffle::<0, 1, 4, 5>(t0, t1), i32x4_shuffle::<2, 3, 6, 7>(t0, t1));
    let (l2, l3) = (i32x4_shuffle::<0, 1, 4, 5>(t2, t3), i32x4_shuffle::<2, 3, 6, 7>(t2, t3));
    f32x4_add(f32x4_add(l0, l1), f32x4_add(l2, l3))
}

/// One block of the activation as pass 1 and the four-row full head read it, made once per
/// matmul: the quants laid out for the nibble dots with pass 1's integer weights folded in
/// (×32 for `h`, ×2 for the known `l`, zero where `l` is unknown, so a plain load needs no
/// mask), and the full head's scalars.
///
/// Relaxed build: `h` = the quants of the low and of the high nibbles (i8x16 each, positions
/// 0..16 and 16..32); the ×32 / ×2 is applied by the widening dot. SIMD128 build: four i16x8,
/// the quants of the low nibble of the even bytes, the high nibble of the even bytes, the low
/// and the high nibble of the odd bytes (a u16 lane holds bytes 2j, 2j+1), pre-multiplied.
/// `l` is laid out the same way for the block's 16-byte known window (the 16 bytes of the row
/// ending at its last known byte), zero but at the known bytes.
#[derive(Clone, Copy, Debug)]
#[repr(C, align(16))]
pub struct Pass1Block {
    h: [v128; 4],
    l: [v128; 4],
    dx: f32,
    /// `−128·Σq`: the exact dot's (`full_block_int`).
    full_cst: i32,
    /// Where the known window starts in a row's `A` part; 0 for a block without known bytes
    /// (a window starts after the scales) and where the group's window reads them
    /// (`Pass1Quad::known`).
    known_at: u32,
}

/// Bytes of one [`Pass1Block`] (the memory ledger counts them in `PlanesAct::bytes_for`).
pub const PASS1_BLOCK_BYTES: usize = core::mem::size_of::<Pass1Block>();

const RELAXED: bool = cfg!(target_feature = "relaxed-simd");

/// A block operand from `q(k, hi)` (the quant byte `k`'s low or high nibble multiplies) and
/// its integer weight: relaxed, two i8x16 (the weight is applied by the widening dot);
/// SIMD128, four i16x8 pre-multiplied.
fn operand(q: &dyn Fn(usize, bool) -> i8, weight: i16) -> [v128; 4] {
    let load = |b: &[u8; 16]| -> v128 {
        // SAFETY: `b` is 16 readable bytes; v128.load has no alignment requirement.
        unsafe { v128_load(b.as_ptr() as *const v128) }
    };
    if RELAXED {
        let v8 = |hi: bool| load(&core::array::from_fn(|k| q(k, hi) as u8));
        [v8(false), v8(true), i32x4_splat(0), i32x4_splat(0)]
    } else {
        let v16 = |odd: usize, hi: bool| {
            let l: [i16; 8] = core::array::from_fn(|j| q(2 * j + odd, hi) as i16 * weight);
            let mut b = [0u8; 16];
            for (j, v) in l.iter().enumerate() {
                b[2 * j..2 * j + 2].copy_from_slice(&v.to_le_bytes());
            }
            load(&b)
        };
        [v16(0, false), v16(0, true), v16(1, false), v16(1, true)]
    }
}

/// Four consecutive blocks' pass-1 scalars as lanes (lane `j` = block `4g + j`), for the
/// one-row kernel, which computes a row's blocks four at a time. `live`: all ones for the
/// blocks that exist (the last group may have fewer than four).
#[derive(Clone, Copy, Debug)]
#[repr(C, align(16))]
pub struct Pass1Quad {
    /// Where all blocks' known bytes go through one window per group (every block of the row
    /// has at most 4 known bytes): the pass-1 operand of that window (laid out as
    /// `Pass1Block::l`, lane j's four bytes = block 4g + j's known bytes), the swizzle that
    /// moves the loaded bytes there (0x80: a zero byte), and where the 16-byte load starts
    /// (0: the group has no known bytes, or the blocks' own windows are used).
    known: [v128; 4],
    known_idx: v128,
    known_at: u32,
    dx: v128,
    /// The bound's weights (`PlanesAct::w`).
    w: v128,
    cst: v128,
    /// The exact dot's constant part per block (`planes::full_cst`).
    full_cst: v128,
    live: v128,
}

/// Bytes of one [`Pass1Quad`] (the memory ledger counts them in `PlanesAct::bytes_for`).
pub const PASS1_QUAD_BYTES: usize = core::mem::size_of::<Pass1Quad>();

/// `x`'s blocks for the pass-1 kernels into `out` and their scalars four by four into `quads`;
/// whether some block reads its known bytes through its own window (`Pass1Block::known_at`).
pub(super) fn prepare_pass1_blocks(x: &PlanesAct, out: &mut Vec<Pass1Block>, quads: &mut Vec<Pass1Quad>) -> bool {
    out.clear();
    quads.clear();
    // One known window per group when every block's known bytes fit its lane's four bytes.
    let grouped = x.c[..x.nb].iter().all(|&c| c <= 4);
    for g in 0..x.nb.div_ceil(4) {
        let lane = |j: usize, f: &dyn Fn(usize) -> u32| if 4 * g + j < x.nb { f(4 * g + j) } else { 0 };
        let v = |f: &dyn Fn(usize) -> u32| u32x4(lane(0, f), lane(1, f), lane(2, f), lane(3, f));
        let blocks = 4 * g..(4 * g + 4).min(x.nb);
        let cg: usize = blocks.clone().map(|b| x.c[b] as usize).sum();
        // The group's known bytes are consecutive in the known section, from block 4g's on.
        let start = x.o0 + x.o_off[4 * g] as usize;
        let (mut idx, mut known_q) = ([0x80u8; 16], [0i8; QK]);
        let on = grouped && cg > 0;
        if on {
            for b in blocks {
                let (j, cb) = (b - 4 * g, x.c[b] as usize);
                for r in 0..cb {
                    // Lane j's byte r is the block's plane byte k = 16 - c + r: the window
                    // (16 bytes ending at the group's last known byte, cg ≤ 16) holds it here.
                    idx[4 * j + r] = (16 - cg + (x.o_off[b] as usize - x.o_off[4 * g] as usize) + r) as u8;
                    let k = 16 - cb + r;
                    known_q[4 * j + r] = x.qxp[b][k];
                    known_q[4 * j + r + 16] = x.qxp[b][k + 16];
                }
            }
        }
        let kq = |k: usize, hi: bool| known_q[k + 16 * hi as usize];
        quads.push(Pass1Quad {
            known: operand(&kq, 2),
            // SAFETY: 16 readable bytes.
            known_idx: unsafe { v128_load(idx.as_ptr() as *const v128) },
            // The window ends at the group's last known byte; it starts at ≥ 18·nb − 16 > 0.
            known_at: if on { (start + cg - 16) as u32 } else { 0 },
            dx: v(&|b| x.dx[b].to_bits()),
            w: v(&|b| x.w[b].to_bits()),
            // `c15 − 256·Σq`: the block integer's constant part (`pass1_block_int`).
            cst: v(&|b| (x.c15[b] - 256 * x.sum[b]) as u32),
            full_cst: v(&|b| full_cst(x, b) as u32),
            live: v(&|_| u32::MAX),
        });
    }
    for blk in 0..x.nb {
        let q = &x.qxp[blk];
        let cb = x.c[blk] as usize;
        // The quant a byte's low (`hi` false) or high nibble multiplies: `h`'s for every byte
        // of the h plane, the known `l`'s only at the known bytes of the window.
        let hq = |k: usize, hi: bool| q[k + 16 * hi as usize];
        let lq = |k: usize, hi: bool| if k >= 16 - cb { q[k + 16 * hi as usize] } else { 0 };
        let h = operand(&hq, 32);
        let l = operand(&lq, 2);
        // The window ends at the block's last known byte; it starts at ≥ 18·nb − 16 > 0.
        let known_at = if cb == 0 || grouped { 0 } else { x.o0 + x.o_off[blk] as usize + cb - 16 };
        out.push(Pass1Block { h, l, dx: x.dx[blk], full_cst: full_cst(x, blk), known_at: known_at as u32 });
    }
    out.iter().any(|b| b.known_at != 0)
}

/// The mask [`nibs`] cuts nibbles with: relaxed, every byte's low nibble; SIMD128, every u16
/// lane's.
#[cfg(target_feature = "relaxed-simd")]
const NIB_MASK: v128 = u8x16(15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15);
#[cfg(not(target_feature = "relaxed-simd"))]
const NIB_MASK: v128 = u16x8(15, 15, 15, 15, 15, 15, 15, 15);

/// i32x4 partial sums of Σ nibble·quant·weight over the 16 bytes `v` with one of a block's
/// prepared operands (`q`; `scale`: the relaxed build's weight, ×32 or ×2, in i16 lanes;
/// `nib`: [`NIB_MASK`], made once by the caller).
/// Every step is exact: relaxed, an i16 lane sums four nibble·quant products (≤ 4·15·128 =
/// 7,680 in magnitude) before `dot_i16x8` weights them in i32; SIMD128, the i16 lanes hold
/// quant·weight (≤ 4,096) and `dot_i16x8` multiplies and sums in i32.
#[inline(always)]
fn nibs(v: v128, q: &[v128; 4], scale: v128, nib: v128) -> v128 {
    #[cfg(target_feature = "relaxed-simd")]
    {
        i32x4_dot_i16x8(nib_pairs(v, q, nib), scale)
    }
    #[cfg(not(target_feature = "relaxed-simd"))]
    {
        let _ = scale;
        let m = nib;
        let (a, b) = (v128_and(v, m), v128_and(u16x8_shr(v, 4), m));
        let (c, d) = (v128_and(u16x8_shr(v, 8), m), u16x8_shr(v, 12));
        i32x4_add(i32x4_add(i32x4_dot_i16x8(a, q[0]), i32x4_dot_i16x8(b, q[1])), i32x4_add(i32x4_dot_i16x8(c, q[2]), i32x4_dot_i16x8(d, q[3])))
    }
}

/// The relaxed build's [`nibs`] before its weighting: i16 lanes of four nibble·quant products
/// each (≤ 4·15·128 = 7,680 in magnitude). The nibbles are the 7-bit operand: exact on every
/// lowering (no i16 saturation either: a lane of one dot is ≤ 2·15·128).
#[cfg(target_feature = "relaxed-simd")]
#[inline(always)]
fn nib_pairs(v: v128, q: &[v128; 4], nib: v128) -> v128 {
    let lo = v128_and(v, nib);
    let hi = v128_and(u16x8_shr(v, 4), nib);
    i16x8_add(i16x8_relaxed_dot_i8x16_i7x16(q[0], lo), i16x8_relaxed_dot_i8x16_i7x16(q[1], hi))
}

/// Four blocks' [`nib_pairs`] to their weighted sums, lane j = block j's (what `reduce4` of
/// their [`nibs`] gives): the i16 lanes added in two transposing steps while they fit (a lane
/// ≤ 2·7,680, then ≤ 4·7,680 = 30,720 < 2^15), then weighted and summed in pairs in i32 by one
/// `dot_i16x8` — one widening per four blocks instead of four. Exact integers, so the same sums.
#[cfg(target_feature = "relaxed-simd")]
#[inline(always)]
fn pairs_total4(p: [v128; 4], scale: v128) -> v128 {
    let half = |a: v128, b: v128| i16x8_add(i32x4_shuffle::<0, 4, 1, 5>(a, b), i32x4_shuffle::<2, 6, 3, 7>(a, b));
    // 32-bit units: [b0, b1, b0, b1] and [b2, b3, b2, b3], each two i16 partial sums.
    let (s01, s23) = (half(p[0], p[1]), half(p[2], p[3]));
    let s = i16x8_add(i32x4_shuffle::<0, 1, 4, 5>(s01, s23), i32x4_shuffle::<2, 3, 6, 7>(s01, s23));
    i32x4_dot_i16x8(s, scale)
}

/// The f32 scales of block `blk` of the four rows whose A parts start at `p`, lane k = row k:
/// the f16s gathered by `v128.load16_lane` into the low i16 lanes, converted by
/// `f16x4_low_to_f32x4`.
///
/// # Safety
/// The four rows' first `2·blk + 2` bytes are readable.
#[inline(always)]
unsafe fn scales4(p: [*const u8; 4], blk: usize) -> v128 {
    let z = v128_load16_lane::<0>(u32x4_splat(0), p[0].add(2 * blk) as *const u16);
    let z = v128_load16_lane::<1>(z, p[1].add(2 * blk) as *const u16);
    let z = v128_load16_lane::<2>(z, p[2].add(2 * blk) as *const u16);
    f16x4_low_to_f32x4(v128_load16_lane::<3>(z, p[3].add(2 * blk) as *const u16))
}

/// Pass 1 of [`PASS1_ROWS`] rows (`rows[k]`: row k's A part), [`PASS1_TOGETHER`] at a time
/// block by block (`row_sums`), in the order given: the caller interleaves rows of
/// `streams::STREAMS` streams (`streams::ordered`, so the rows taken together come from
/// different streams; wasm has no prefetch, `_ahead` is for the kernels that do). The
/// constants and checks are made once for all the rows, and four rows' sums are totalled
/// together (`lanes_total4`): a row of Gemma 3's head is only 20 blocks, and per-row work was
/// about a third of pass 1.
pub(super) fn pass1_rows(rows: &[&[u8]; PASS1_ROWS], _ahead: usize, x: &PlanesAct) -> [Pass1; PASS1_ROWS] {
    assert!(x.nb > 0 && rows.iter().all(|a| a.len() >= x.a_part_bytes()), "whole A parts");
    let p = rows.map(|a| a.as_ptr());
    if x.finite_scales {
        pass1_rows_with::<true>(&p, x)
    } else {
        pass1_rows_with::<false>(&p, x)
    }
}

/// Rows [`pass1_rows`] takes through [`row_sums`] together (a divisor of 4). Two rows from
/// two streams streamed 8.3 → 10.1–10.4 GB/s in Chromium (relaxed; release micro-benchmark,
/// 85 MB); four spilled registers in V8's code and were slower than two, in cache as well. The
/// SIMD128 tier under Node: 76–78 → 63 ns a row streamed, 64–68 → 57 in cache.
const PASS1_TOGETHER: usize = 2;

/// [`pass1_rows`] after its check, for `FINITE` = `x.finite_scales`.
#[inline(always)]
fn pass1_rows_with<const FINITE: bool>(rows: &[*const u8; PASS1_ROWS], x: &PlanesAct) -> [Pass1; PASS1_ROWS] {
    let k = Pass1Consts::new::<FINITE>();
    let mut out = [Pass1 { a2: 0.0, e: 0.0 }; PASS1_ROWS];
    for (r4, o) in out.chunks_exact_mut(4).enumerate() {
        let mut s = [[i32x4_splat(0); 2]; 4];
        for (i, si) in s.chunks_exact_mut(PASS1_TOGETHER).enumerate() {
            let at = 4 * r4 + PASS1_TOGETHER * i;
            // SAFETY: every row starts a whole A part (asserted by `pass1_rows`).
            si.copy_from_slice(&unsafe { row_sums_of::<PASS1_TOGETHER, FINITE>(core::array::from_fn(|j| rows[at + j]), x, &k) });
        }
        let [a2, e] = [0, 1].map(|f| store4(lanes_total4(s[0][f], s[1][f], s[2][f], s[3][f])));
        for (i, oi) in o.iter_mut().enumerate() {
            *oi = Pass1 { a2: a2[i], e: e[i] };
        }
    }
    out
}

/// The exact dot's nibble weights and mask, made once per call (`opaque`): relaxed, `h`
/// weighted 16 and `l` 1 by the widening dot; SIMD128, unused (its operands carry pass 1's ×32,
/// shifted out in [`exact_block`]).
struct ExactK {
    w_h: v128,
    w_l: v128,
    nib: v128,
}

impl ExactK {
    #[inline(always)]
    fn new() -> ExactK {
        #[cfg(target_feature = "relaxed-simd")]
        let (w_h, w_l) = (opaque(i16x8_splat(16)), opaque(i16x8_splat(1)));
        #[cfg(not(target_feature = "relaxed-simd"))]
        let (w_h, w_l) = (i16x8_splat(0), i16x8_splat(0));
        ExactK { w_h, w_l, nib: opaque(NIB_MASK) }
    }
}

/// i32x4 partial sums of block `blk`'s `16·sh + sl` (`full_block_int` without its constant)
/// in the row whose A part starts at `pa` and B part at `pb`: its `l` bytes are its known
/// window merged with its B bytes, and both planes are dotted with the pass-1 operands.
///
/// # Safety
/// `pa` starts a whole A part (the h plane at 2·nb + 16·blk, the known window ending at
/// `o0 + o_off[blk] + c[blk] ≥ 16`), and the 16 bytes at `pb + b_off[blk]` are readable.
#[inline(always)]
unsafe fn exact_block(pa: *const u8, pb: *const u8, blk: usize, x: &PlanesAct, k: &ExactK) -> v128 {
    let bl = &x.simd[blk];
    let end = x.o0 + x.o_off[blk] as usize + x.c[blk] as usize;
    let mask = v128_load(x.mask[blk].as_ptr() as *const v128);
    let known = v128_load(pa.add(end - 16) as *const v128);
    let rest = v128_load(pb.add(x.b_off[blk] as usize) as *const v128);
    let (h, l) = (v128_load(pa.add(x.nb * 2 + blk * 16) as *const v128), v128_bitselect(known, rest, mask));
    let (sh, sl) = (nibs(h, &bl.h, k.w_h, k.nib), nibs(l, &bl.h, k.w_l, k.nib));
    // SIMD128's operands carry pass 1's ×32: every lane is a multiple of 32, so the shifts
    // below are exact (16·sh and 1·sl).
    #[cfg(not(target_feature = "relaxed-simd"))]
    let (sh, sl) = (i32x4_shr(sh, 1), i32x4_shr(sl, 5));
    i32x4_add(sh, sl)
}

/// The exact dot of one row (`a`, `b`: its A and B parts, each running on past the row; the
/// screen's pass 2 and the fallback): each block's integer from the same nibble dots as
/// [`full_rows4`], four blocks reduced together, then the float part block by block in the
/// scalar kernel's order. Where a 16-byte load of the row's last B bytes would pass the end of
/// the matrix (its last row), block by block with a copy ([`full_row_blocks`]).
pub(super) fn full_row(a: &[u8], b: &[u8], x: &PlanesAct) -> f32 {
    let nb = x.nb;
    if nb == 0 || b.len() < x.b_off[nb - 1] as usize + 16 || a.len() < x.a_part_bytes() {
        return full_row_blocks(a, b, x);
    }
    let blocks = &x.simd[..nb];
    let (pa, pb) = (a.as_ptr(), b.as_ptr());
    let k = ExactK::new();
    let f16k = F16K::hoisted();
    // SAFETY: the A part is whole and the B bytes at `b_off[blk] ≤ b_off[nb − 1]` have 16
    // readable bytes (both checked above).
    let int = |blk: usize| unsafe { exact_block(pa, pb, blk, x, &k) };
    let mut sumf = 0f32;
    let quads = nb / 4;
    for g in 0..quads {
        let s = reduce4(int(4 * g), int(4 * g + 1), int(4 * g + 2), int(4 * g + 3));
        // The float part of four blocks in four lanes, each lane the scalar expression
        // `(sumi + full_cst) as f32 · (dw · dx)`, then added to `sumf` in block order.
        let q = &x.quads[g];
        let sumi = i32x4_add(s, q.full_cst);
        // SAFETY: the scales of blocks 4g..4g + 4 are the A part's bytes 8g..8g + 8.
        let dw = f16x4_low_to_f32x4_k(unsafe { v128_load64_zero(pa.add(8 * g) as *const u64) }, &f16k);
        sumf = add_lanes_in_order(sumf, f32x4_mul(f32x4_convert_i32x4(sumi), f32x4_mul(dw, q.dx)));
    }
    for (blk, bl) in blocks.iter().enumerate().skip(4 * quads) {
        sumf += (hsum(int(blk)) + bl.full_cst) as f32 * (read_f16(a, 2 * blk) * bl.dx);
    }
    sumf
}


/// [`full_row`] block by block, the B bytes copied where a 16-byte load would pass the end of
/// the matrix.
fn full_row_blocks(a: &[u8], b: &[u8], x: &PlanesAct) -> f32 {
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
        let sumi = hsum(i32x4_add(i32x4_shl(sh, 4), sl)) + full_cst(x, blk);
        sumf += sumi as f32 * (dw * x.dx[blk]);
    }
    sumf
}

/// The exact dots of four rows (`a[k]`: row k's A part; `b[k]`: its B part, running on to the
/// end of the matrix), bit-identical to [`full_row`]: per block, each row's `l` bytes are its
/// known window merged with its `B` bytes, both nibble planes are dotted with the pass-1
/// operands (`h` weighted 16, `l` 1), the four rows' integers reduced together, and the float
/// part runs in four lanes in the scalar order. The rows may come from anywhere: the full head
/// takes them from `streams::STREAMS` streams (wasm has no prefetch). Near the end of the
/// matrix, where a 16-byte load of a row's last `B` bytes would pass it, the one-row kernel
/// runs instead.
pub(super) fn full_rows4(a: [&[u8]; 4], b: [&[u8]; 4], x: &PlanesAct) -> [f32; 4] {
    let nb = x.nb;
    if b.iter().any(|b| b.len() < x.b_off[nb - 1] as usize + 16) || a.iter().any(|a| a.len() < x.a_part_bytes()) {
        return core::array::from_fn(|k| full_row(a[k], b[k], x));
    }
    let blocks = &x.simd[..nb];
    let (pa, pb) = (a.map(|a| a.as_ptr()), b.map(|b| b.as_ptr()));
    let ek = ExactK::new();
    let mut acc = f32x4_splat(0.0);
    for (blk, bl) in blocks.iter().enumerate() {
        // SAFETY: each A part is whole and each B part holds the 16 bytes at `b_off[blk] ≤
        // b_off[nb − 1]` (both checked above).
        let v: [v128; 4] = core::array::from_fn(|k| unsafe { exact_block(pa[k], pb[k], blk, x, &ek) });
        // `full_block_int`: 16·sh + sl − 128·Σq.
        let sumi = i32x4_add(reduce4(v[0], v[1], v[2], v[3]), i32x4_splat(bl.full_cst));
        // SAFETY: the scales are an A part's first 2·nb bytes.
        let s = f32x4_mul(unsafe { scales4(pa, blk) }, f32x4_splat(bl.dx));
        acc = f32x4_add(acc, f32x4_mul(f32x4_convert_i32x4(sumi), s));
    }
    [f32x4_extract_lane::<0>(acc), f32x4_extract_lane::<1>(acc), f32x4_extract_lane::<2>(acc), f32x4_extract_lane::<3>(acc)]
}
