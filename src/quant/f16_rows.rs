//! Attention's arithmetic on f32 rows and on the K/V cache's f16 rows read in place.
//!
//! [`dot`] is the attention score's dot product: eight partial sums, combined in one fixed
//! order. [`dot_f16_heads`] and [`axpy_f16_heads`] are what decode computes against one cached
//! f16 row for every query head of its group: the same f32 operations in the same order as
//! converting the row to f32 first (the conversion is exact) and then calling [`dot`] per head,
//! or adding `w · v` per head — so the same bits — without writing the converted row and
//! reading it back once per head. On wasm32 with SIMD128 the row is converted eight halves at
//! a time into registers (`simd128::f16x4_low_to_f32x4_k`) and used there by every head.

use super::float::read_f16;

/// Partial sums of [`dot`]: lane `k` sums the products at `k`, `k + 8`, ...
const LANES: usize = 8;

/// `Σ a·b` as attention computes it: eight partial sums (lane k: elements k, k + 8, ...; lets
/// the compiler vectorize without reassociating), combined `((s0+s4)+(s1+s5))+((s2+s6)+(s3+s7))`,
/// then the elements past the last whole eight added one by one.
#[inline(always)]
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0.0f32; LANES];
    let (ca, ra) = (a.chunks_exact(LANES), a.len() % LANES);
    for (x, y) in ca.zip(b.chunks_exact(LANES)) {
        for k in 0..LANES {
            acc[k] += x[k] * y[k];
        }
    }
    let mut s = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
    let base = a.len() - ra;
    for k in base..a.len() {
        s += a[k] * b[k];
    }
    s
}

/// `out[m] = dot(q_m, k)` for each query row `q_m = q[m·hk..(m + 1)·hk]` (`m < out.len()`) and
/// the f16 row `k` (`hk` halves) converted to f32: bit-identical to converting `k` and calling
/// [`dot`] per query.
pub fn dot_f16_heads(k: &[u8], q: &[f32], hk: usize, out: &mut [f32]) {
    let (k, q) = (&k[..2 * hk], &q[..out.len() * hk]);
    #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
    return simd::dot_f16_heads(k, q, hk, out);
    #[cfg(not(all(target_arch = "wasm32", target_feature = "simd128")))]
    dot_f16_heads_scalar(k, q, hk, out)
}

/// [`dot_f16_heads`]' reference: the row converted, then [`dot`] per query.
pub fn dot_f16_heads_scalar(k: &[u8], q: &[f32], hk: usize, out: &mut [f32]) {
    let row: Vec<f32> = (0..hk).map(|i| read_f16(k, 2 * i)).collect();
    for (m, o) in out.iter_mut().enumerate() {
        *o = dot(&q[m * hk..(m + 1) * hk], &row);
    }
}

/// `o_m[x] += w[b·M + m] · v_b[x]` for the f16 rows `v_b` (`hv` halves each) in ascending `b`
/// and each output row `o_m = o[m·hv..(m + 1)·hv]` (`M = o.len() / hv` heads, `w.len() = M ·
/// v.len()`), a zero weight skipped (its row untouched, as attention skips it): bit-identical
/// to converting each row and adding row after row, head by head. A block of rows at once keeps
/// each output slice in registers across the block.
pub fn axpy_f16_heads(v: &[&[u8]], w: &[f32], o: &mut [f32], hv: usize) {
    let heads = o.len() / hv;
    assert!(w.len() == heads * v.len() && o.len() == heads * hv && v.iter().all(|r| r.len() >= 2 * hv), "rows, weights and outputs agree");
    #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
    return simd::axpy_f16_heads(v, w, o, hv);
    #[cfg(not(all(target_arch = "wasm32", target_feature = "simd128")))]
    axpy_f16_heads_scalar(v, w, o, hv)
}

/// [`axpy_f16_heads`]' reference: each row converted, then added head by head.
pub fn axpy_f16_heads_scalar(v: &[&[u8]], w: &[f32], o: &mut [f32], hv: usize) {
    let heads = o.len() / hv;
    for (b, vb) in v.iter().enumerate() {
        let row: Vec<f32> = (0..hv).map(|i| read_f16(vb, 2 * i)).collect();
        for m in 0..heads {
            let wm = w[b * heads + m];
            if wm == 0.0 {
                continue;
            }
            for (o, &x) in o[m * hv..(m + 1) * hv].iter_mut().zip(&row) {
                *o += wm * x;
            }
        }
    }
}

#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
mod simd {
    use core::arch::wasm32::*;

    use super::super::float::read_f16;
    use super::super::simd128::{f16x4_finite_low_to_f32x4_k, f16x8_at, ld, ld_f32x4 as ld4, opaque, F16K};
    use super::LANES;

    /// How a kernel converts a row's halves: `CHECKED`, each group of four tested for Inf and
    /// NaN as it is converted (`f16x8_at`); otherwise converted without the test, the caller
    /// knowing (or finding out afterwards, [`Finite::bad`]) that no half is Inf or NaN. The
    /// test was two compares, a vector test and a branch per four halves, and its two constants
    /// held registers the loops spilled for.
    #[derive(Clone, Copy)]
    struct Conv<const CHECKED: bool> {
        k: F16K,
    }

    impl<const CHECKED: bool> Conv<CHECKED> {
        #[inline(always)]
        fn new() -> Self {
            Conv { k: if CHECKED { F16K::hoisted() } else { F16K::hoisted_finite() } }
        }

        /// Halves `8c..8c + 8` of `row` as two f32x4: the exact conversion (unchecked: for
        /// finite halves, the same bits).
        #[inline(always)]
        fn eight(&self, row: &[u8], c: usize) -> (v128, v128) {
            if CHECKED {
                f16x8_at(row, 16 * c, &self.k)
            } else {
                let raw = ld(row, 16 * c);
                (f16x4_finite_low_to_f32x4_k(raw, &self.k), f16x4_finite_low_to_f32x4_k(i64x2_shuffle::<1, 1>(raw, raw), &self.k))
            }
        }
    }

    /// Finds an Inf or NaN among halves: its exponent bits all set.
    struct Finite {
        exp: v128,
    }

    impl Finite {
        #[inline(always)]
        fn new() -> Finite {
            Finite { exp: opaque(u16x8_splat(0x7c00)) }
        }

        /// `seen` with lanes set where halves `8c..8c + 8` of `row` hold an Inf or NaN.
        #[inline(always)]
        fn bad(&self, seen: v128, row: &[u8], c: usize) -> v128 {
            v128_or(seen, i16x8_eq(v128_and(ld(row, 16 * c), self.exp), self.exp))
        }
    }

    #[inline(always)]
    fn st4(x: &mut [f32], at: usize, v: v128) {
        let s = &mut x[at..at + 4];
        // SAFETY: `s` is four writable f32.
        unsafe { v128_store(s.as_mut_ptr() as *mut v128, v) }
    }

    /// `M` queries at a time: the row's eight halves converted once per step and used by every
    /// query; lanes 0..4 and 4..8 of `dot`'s partial sums are the two accumulators. Unchecked
    /// (`CHECKED` false), the halves are tested for Inf and NaN alongside (three instructions
    /// per eight) and `None` returned if one was, for the caller to run the checked kernel.
    #[inline(always)]
    fn dots<const M: usize, const CHECKED: bool>(k: &[u8], q: [&[f32]; M], hk: usize, conv: &Conv<CHECKED>, fin: &Finite) -> Option<[f32; M]> {
        let whole = hk / LANES;
        let mut acc = [[f32x4_splat(0.0); 2]; M];
        let mut bad = i16x8_splat(0);
        for c in 0..whole {
            if !CHECKED {
                bad = fin.bad(bad, k, c);
            }
            let (lo, hi) = conv.eight(k, c);
            for m in 0..M {
                acc[m][0] = f32x4_add(acc[m][0], f32x4_mul(ld4(q[m], 8 * c), lo));
                acc[m][1] = f32x4_add(acc[m][1], f32x4_mul(ld4(q[m], 8 * c + 4), hi));
            }
        }
        if !CHECKED && v128_any_true(bad) {
            return None;
        }
        Some(core::array::from_fn(|m| {
            // Lanes (s0 + s4, s1 + s5, s2 + s6, s3 + s7), then `dot`'s pairs.
            let p = f32x4_add(acc[m][0], acc[m][1]);
            let mut s = (f32x4_extract_lane::<0>(p) + f32x4_extract_lane::<1>(p)) + (f32x4_extract_lane::<2>(p) + f32x4_extract_lane::<3>(p));
            for i in whole * LANES..hk {
                s += q[m][i] * read_f16(k, 2 * i);
            }
            s
        }))
    }

    /// [`dots`] unchecked, then checked where the row held an Inf or NaN (the checked
    /// conversion's constants made only then: this runs once per key row).
    #[inline(always)]
    fn dots_of<const M: usize>(k: &[u8], q: [&[f32]; M], hk: usize, fast: &Conv<false>, fin: &Finite) -> [f32; M] {
        match dots::<M, false>(k, q, hk, fast, fin) {
            Some(s) => s,
            None => dots::<M, true>(k, q, hk, &Conv::<true>::new(), fin).expect("the checked kernel always returns"),
        }
    }

    pub(super) fn dot_f16_heads(k: &[u8], q: &[f32], hk: usize, out: &mut [f32]) {
        let (fast, fin) = (Conv::<false>::new(), Finite::new());
        let row = |m: usize| &q[m * hk..(m + 1) * hk];
        let mut m0 = 0;
        while m0 < out.len() {
            match out.len() - m0 {
                1 => out[m0..m0 + 1].copy_from_slice(&dots_of::<1>(k, [row(m0)], hk, &fast, &fin)),
                2 => out[m0..m0 + 2].copy_from_slice(&dots_of::<2>(k, [row(m0), row(m0 + 1)], hk, &fast, &fin)),
                3 => out[m0..m0 + 3].copy_from_slice(&dots_of::<3>(k, [row(m0), row(m0 + 1), row(m0 + 2)], hk, &fast, &fin)),
                _ => out[m0..m0 + 4].copy_from_slice(&dots_of::<4>(k, [row(m0), row(m0 + 1), row(m0 + 2), row(m0 + 3)], hk, &fast, &fin)),
            }
            m0 += 4;
        }
    }

    /// `M` heads at a time: each eight-element slice of their outputs held in registers while
    /// every row of the block adds to it (the row's slice converted once for the `M` heads).
    #[inline(always)]
    fn axpy<const M: usize, const CHECKED: bool>(v: &[&[u8]], w: &[f32], heads: usize, m0: usize, o: &mut [f32], hv: usize, conv: &Conv<CHECKED>) {
        for c in 0..hv / LANES {
            let mut acc: [[v128; 2]; M] = core::array::from_fn(|m| [ld4(o, (m0 + m) * hv + 8 * c), ld4(o, (m0 + m) * hv + 8 * c + 4)]);
            for (b, vb) in v.iter().enumerate() {
                let (lo, hi) = conv.eight(vb, c);
                for (m, a) in acc.iter_mut().enumerate() {
                    let wm = w[b * heads + m0 + m];
                    if wm != 0.0 {
                        let ws = f32x4_splat(wm);
                        a[0] = f32x4_add(a[0], f32x4_mul(ws, lo));
                        a[1] = f32x4_add(a[1], f32x4_mul(ws, hi));
                    }
                }
            }
            for (m, a) in acc.iter().enumerate() {
                st4(o, (m0 + m) * hv + 8 * c, a[0]);
                st4(o, (m0 + m) * hv + 8 * c + 4, a[1]);
            }
        }
    }

    /// [`axpy`] over every head, `M` at a time.
    #[inline(always)]
    fn axpy_heads<const CHECKED: bool>(v: &[&[u8]], w: &[f32], o: &mut [f32], hv: usize) {
        let conv = Conv::<CHECKED>::new();
        let heads = o.len() / hv;
        let mut m0 = 0;
        while m0 < heads {
            match heads - m0 {
                1 => axpy::<1, CHECKED>(v, w, heads, m0, o, hv, &conv),
                2 => axpy::<2, CHECKED>(v, w, heads, m0, o, hv, &conv),
                3 => axpy::<3, CHECKED>(v, w, heads, m0, o, hv, &conv),
                _ => axpy::<4, CHECKED>(v, w, heads, m0, o, hv, &conv),
            }
            m0 += 4;
        }
    }

    pub(super) fn axpy_f16_heads(v: &[&[u8]], w: &[f32], o: &mut [f32], hv: usize) {
        let heads = o.len() / hv;
        // The block's rows read in address order, before `axpy` reads them slice by slice
        // across the rows: wasm has no prefetch, and read column-wise the rows' lines were
        // demand misses in a stride the hardware prefetcher did not follow (a third of this
        // kernel's samples in Chromium at 1,000 tokens of context). The same reads find
        // whether a half is Inf or NaN, so that the block is converted without the test
        // where none is (nearly always).
        let fin = Finite::new();
        let mut bad = i16x8_splat(0);
        for vb in v {
            for c in 0..hv / LANES {
                bad = fin.bad(bad, vb, c);
            }
        }
        if v128_any_true(bad) {
            axpy_heads::<true>(v, w, o, hv);
        } else {
            axpy_heads::<false>(v, w, o, hv);
        }
        // The elements past the last whole eight, row after row.
        for (b, vb) in v.iter().enumerate() {
            for m in 0..heads {
                let wm = w[b * heads + m];
                if wm != 0.0 {
                    for i in hv / LANES * LANES..hv {
                        o[m * hv + i] += wm * read_f16(vb, 2 * i);
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quant::f32_to_f16;

    fn rng(seed: &mut u64) -> f32 {
        *seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        ((*seed >> 33) as f32 / (1u64 << 31) as f32) * 2.0 - 1.0
    }

    /// A row of f16 halves: `special` 1, some special (Inf, NaN, subnormal, ±0) throughout; 2,
    /// one Inf or NaN at a random place (the kernels' unchecked conversion must notice it
    /// wherever it is); 0, none.
    fn halves(n: usize, seed: &mut u64, special: u8) -> Vec<u8> {
        let lone = (rng(seed).abs() * n as f32) as usize;
        let odd = [0x7c00, 0xfc00, 0x7e00, 0xfd21][(rng(seed).abs() * 4.0) as usize % 4];
        (0..n)
            .flat_map(|i| {
                let h = match (special, i % 11) {
                    (1, 3) => 0x7c00,
                    (1, 5) => 0xfe01,
                    (1, 7) => 0x0003,
                    (1, 9) => 0x8000,
                    (2, _) if i == lone => odd,
                    _ => f32_to_f16(rng(seed) * 4.0),
                };
                h.to_le_bytes()
            })
            .collect()
    }

    fn same(a: f32, b: f32) -> bool {
        a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())
    }

    /// The in-place kernels against converting the row first, bit for bit (any NaN for a NaN:
    /// wasm leaves a NaN result's payload open), over widths with and without a tail and every
    /// head count up to 9 (natively, and in wasm under Node: the SIMD128 tier).
    #[cfg_attr(not(target_arch = "wasm32"), test)]
    #[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
    fn f16_row_kernels_equal_converting_first() {
        let mut seed = 7u64;
        for hk in [1usize, 7, 8, 9, 64, 100, 256] {
            for heads in 1..=9 {
                for special in [0, 1, 2] {
                    let k = halves(hk, &mut seed, special);
                    let q: Vec<f32> = (0..heads * hk).map(|_| rng(&mut seed)).collect();
                    let (mut got, mut want) = (vec![0.0; heads], vec![0.0; heads]);
                    dot_f16_heads(&k, &q, hk, &mut got);
                    dot_f16_heads_scalar(&k, &q, hk, &mut want);
                    let row: Vec<f32> = (0..hk).map(|i| read_f16(&k, 2 * i)).collect();
                    for m in 0..heads {
                        assert!(same(got[m], want[m]) && same(want[m], dot(&q[m * hk..(m + 1) * hk], &row)), "dot hk {hk} heads {heads} m {m}");
                    }
                    for rows in [1usize, 5, 16, 17, 40] {
                        // Special 2: one row of the block holds the lone Inf or NaN.
                        let odd_row = (rng(&mut seed).abs() * rows as f32) as usize;
                        let vs: Vec<Vec<u8>> = (0..rows).map(|r| halves(hk, &mut seed, if special == 2 && r != odd_row { 0 } else { special })).collect();
                        let v: Vec<&[u8]> = vs.iter().map(|r| &r[..]).collect();
                        // Zero weights in the even rows only, so that rows without one are
                        // tested with every head count (with three heads or more, every row had
                        // one).
                        let w: Vec<f32> = (0..rows * heads).map(|i| if (i / heads) % 2 == 0 && i % 3 == 1 { 0.0 } else { rng(&mut seed) }).collect();
                        // −0.0 starts stay −0.0 under a zero weight (skipped), not +0.0.
                        let o0: Vec<f32> = (0..heads * hk).map(|i| if i % 5 == 0 { -0.0 } else { rng(&mut seed) }).collect();
                        let (mut got, mut want) = (o0.clone(), o0.clone());
                        axpy_f16_heads(&v, &w, &mut got, hk);
                        axpy_f16_heads_scalar(&v, &w, &mut want, hk);
                        assert!(got.iter().zip(&want).all(|(&a, &b)| same(a, b)), "axpy hk {hk} heads {heads} rows {rows}");
                    }
                }
            }
        }
    }
}
