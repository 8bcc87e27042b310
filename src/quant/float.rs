//! Plain float rows: F32, F16, BF16, and the half-precision conversions every block format uses
//! for its scales.
//!
//! Conversions are written out on bits (no `half` crate, no unstable `f16`) so they behave the
//! same natively and on wasm32. Measured against `half` 2.x (every f16/bf16 bit pattern, and
//! 20 M pseudo-random f32 patterns; native release build, side by side): `half` quiets
//! signalling NaNs — 1022 of the 65536 f16 values (all NaNs) convert to other f32 bits, so
//! they do not survive a round trip, and 126 bf16 NaNs likewise — which breaks the exactness
//! below (and its tests); natively it also switches to F16C at run time, so native and wasm
//! could round NaNs differently. Every non-NaN value agreed, and `f32_to_bf16` agreed on all
//! 20 M patterns. Speed: f16 → f32 here 0.62–0.71 s vs `half` 1.05–1.08 s per 64 Mi values,
//! f32 → f16 0.79–1.0 s vs 0.60–0.70 s (F16C), on a busy 2-core machine. So the hand-written
//! conversions stay (exactness wins); `f32_to_bf16` stays with them rather than pulling in a
//! crate for three lines that compute the same bits.
//! - `f16_to_f32` / `bf16_to_f32` are exact, NaN payloads included (f16 subnormals become f32
//!   normals; nothing is flushed).
//! - `f32_to_f16` rounds to nearest, ties to even, as F16C's `vcvtps2ph` (ggml's x86 path) and
//!   numpy do; overflow goes to ±Inf, underflow to signed zero or an f16 subnormal.
//! - `f32_to_bf16` is ggml's `ggml_compute_fp32_to_bf16`: NaN keeps its top bits and is forced
//!   quiet, everything else rounds to nearest even (no flush of subnormals).
//!
//! Dot products of float rows follow ggml's generic `ggml_vec_dot_{f32,f16,bf16}`: each product
//! is formed in f32 and the sum is carried in f64.

/// IEEE binary16 bits -> f32 (exact).
#[inline(always)]
pub fn f16_to_f32(h: u16) -> f32 {
    let sign = ((h as u32) & 0x8000) << 16;
    let em = (h as u32) & 0x7fff;
    // Put exponent and mantissa where f32 keeps them and rescale by 2^(127-15): the f16
    // exponent bias is 15, f32's 127. Multiplying by a power of two is exact, and this one
    // multiply also normalises f16 subnormals (which land as f32 subnormals before it).
    let finite = (f32::from_bits(em << 13) * f32::from_bits(0x7780_0000)).to_bits(); // 2^112
    // Inf / NaN: keep the payload (shifted into the top of the f32 mantissa). Chosen by a
    // select, not a branch, so row loops over this vectorize (`dequantize_f16`).
    let inf_nan = 0x7f80_0000 | ((em & 0x03ff) << 13);
    f32::from_bits(sign | if em >= 0x7c00 { inf_nan } else { finite })
}

/// f32 -> IEEE binary16 bits, round to nearest with ties to even.
///
/// NaN keeps its sign and the top 10 mantissa bits (so every f16 NaN survives a round trip
/// through f32 unchanged); a NaN whose kept bits would all be zero becomes the quiet NaN
/// 0x7E00 (with its sign) so it cannot turn into Inf.
#[inline]
pub fn f32_to_f16(x: f32) -> u16 {
    let bits = x.to_bits();
    let sign = ((bits >> 16) & 0x8000) as u16;
    let abs = bits & 0x7fff_ffff;
    if abs > 0x7f80_0000 {
        let m = ((abs >> 13) & 0x03ff) as u16;
        return sign | 0x7c00 | if m == 0 { 0x0200 } else { m };
    }
    // 65520 is the midpoint between 65504 (max f16, odd mantissa) and 65536: ties go to even,
    // i.e. up to Inf, so everything from 65520 on overflows.
    if abs >= 0x477f_f000 {
        return sign | 0x7c00;
    }
    let exp = abs >> 23;
    if exp >= 113 {
        // Normal f16 range (>= 2^-14). Drop 13 mantissa bits with RNE; a carry out of the
        // mantissa correctly bumps the exponent.
        let h = ((exp - 112) << 10) | ((abs >> 13) & 0x03ff);
        let rem = abs & 0x1fff;
        let h = if rem > 0x1000 || (rem == 0x1000 && (h & 1) == 1) {
            h + 1
        } else {
            h
        };
        return sign | h as u16;
    }
    // Below 2^-25 (half the smallest subnormal) or exactly it (a tie to the even value 0):
    // signed zero.
    if exp < 102 {
        return sign;
    }
    // Subnormal result: the value in units of 2^-24 is m * 2^(exp - 126), m with its
    // implicit bit; shift right by 126 - exp (14..=24) with RNE. Rounding up to 0x400 gives
    // the smallest normal, which is the right encoding.
    let m = (abs & 0x007f_ffff) | 0x0080_0000;
    let shift = 126 - exp;
    let q = m >> shift;
    let rem = m & ((1u32 << shift) - 1);
    let half = 1u32 << (shift - 1);
    let q = if rem > half || (rem == half && (q & 1) == 1) {
        q + 1
    } else {
        q
    };
    sign | q as u16
}

/// bfloat16 bits -> f32 (exact: bf16 is the top half of an f32).
#[inline]
pub fn bf16_to_f32(h: u16) -> f32 {
    f32::from_bits((h as u32) << 16)
}

/// f32 -> bfloat16 bits, as ggml's `ggml_compute_fp32_to_bf16`: NaN is truncated and forced
/// quiet, everything else rounds to nearest even (overflow rounds to Inf).
#[inline]
pub fn f32_to_bf16(x: f32) -> u16 {
    let u = x.to_bits();
    if (u & 0x7fff_ffff) > 0x7f80_0000 {
        return ((u >> 16) | 64) as u16;
    }
    // Cannot overflow u32: the largest finite |x| is 0x7f7fffff and 0xff7fffff + 0x8000 fits.
    ((u + (0x7fff + ((u >> 16) & 1))) >> 16) as u16
}

#[inline]
pub(super) fn read_f16(b: &[u8], at: usize) -> f32 {
    f16_to_f32(u16::from_le_bytes([b[at], b[at + 1]]))
}

// Always, and one bounds check: the decode kernels read a scale per block with it, and as
// four checked byte reads LLVM left it a call there.
#[inline(always)]
pub(super) fn read_f32(b: &[u8], at: usize) -> f32 {
    let s: [u8; 4] = b[at..at + 4].try_into().expect("a 4-byte slice");
    f32::from_le_bytes(s)
}

// ---- rows ---------------------------------------------------------------------------------

pub(super) fn dequantize_f32(src: &[u8], dst: &mut [f32]) {
    for (s, d) in src.chunks_exact(4).zip(dst.iter_mut()) {
        *d = f32::from_le_bytes([s[0], s[1], s[2], s[3]]);
    }
}

/// Rows of f16: [`f16_to_f32`], branchless (Inf/NaN chosen by a select), so the loop vectorizes (natively SSE2, AVX2 under `avx2`); the same bits for
/// every input (tested on all 65,536). The K/V cache reads every f16 row through here natively:
/// with the branch, 27.6 M values (a 2,400-token SmolLM2 context, one decode step) took 52 ms.
pub(super) fn dequantize_f16(src: &[u8], dst: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    if super::avx2::enabled() {
        // Safety: the CPU has AVX2 (probed).
        return unsafe { dequantize_f16_avx2(src, dst) };
    }
    dequantize_f16_body(src, dst)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn dequantize_f16_avx2(src: &[u8], dst: &mut [f32]) {
    dequantize_f16_body(src, dst)
}

#[inline(always)]
fn dequantize_f16_body(src: &[u8], dst: &mut [f32]) {
    for (s, d) in src.chunks_exact(2).zip(dst.iter_mut()) {
        *d = f16_to_f32(u16::from_le_bytes([s[0], s[1]]));
    }
}

pub(super) fn dequantize_bf16(src: &[u8], dst: &mut [f32]) {
    for (s, d) in src.chunks_exact(2).zip(dst.iter_mut()) {
        *d = bf16_to_f32(u16::from_le_bytes([s[0], s[1]]));
    }
}

/// F32 "activation": the row's little-endian bytes (`dst` already sized).
pub(super) fn quantize_f32(x: &[f32], dst: &mut [u8]) {
    for (v, d) in x.iter().zip(dst.chunks_exact_mut(4)) {
        d.copy_from_slice(&v.to_le_bytes());
    }
}

/// F16 activation: ggml converts the f32 row with `ggml_cpu_fp32_to_fp16` (RNE).
pub(super) fn quantize_f16(x: &[f32], dst: &mut [u8]) {
    for (v, d) in x.iter().zip(dst.chunks_exact_mut(2)) {
        d.copy_from_slice(&f32_to_f16(*v).to_le_bytes());
    }
}

/// BF16 activation: ggml converts with `ggml_cpu_fp32_to_bf16` (RNE, NaN quieted).
pub(super) fn quantize_bf16(x: &[f32], dst: &mut [u8]) {
    for (v, d) in x.iter().zip(dst.chunks_exact_mut(2)) {
        d.copy_from_slice(&f32_to_bf16(*v).to_le_bytes());
    }
}

pub(super) fn vec_dot_f32(w: &[u8], a: &[u8], n: usize) -> f32 {
    let (w, a) = (&w[..n * 4], &a[..n * 4]);
    let mut sum = 0f64;
    for (x, y) in w.chunks_exact(4).zip(a.chunks_exact(4)) {
        let p = read_f32(x, 0) * read_f32(y, 0);
        sum += p as f64;
    }
    sum as f32
}

pub(super) fn vec_dot_f16(w: &[u8], a: &[u8], n: usize) -> f32 {
    let (w, a) = (&w[..n * 2], &a[..n * 2]);
    let mut sum = 0f64;
    for (x, y) in w.chunks_exact(2).zip(a.chunks_exact(2)) {
        let p = read_f16(x, 0) * read_f16(y, 0);
        sum += p as f64;
    }
    sum as f32
}

pub(super) fn vec_dot_bf16(w: &[u8], a: &[u8], n: usize) -> f32 {
    let (w, a) = (&w[..n * 2], &a[..n * 2]);
    let mut sum = 0f64;
    for (x, y) in w.chunks_exact(2).zip(a.chunks_exact(2)) {
        let p = bf16_to_f32(u16::from_le_bytes([x[0], x[1]]))
            * bf16_to_f32(u16::from_le_bytes([y[0], y[1]]));
        sum += p as f64;
    }
    sum as f32
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reference f16 -> f64 decoding straight from the IEEE definition (no bit tricks).
    fn f16_value(h: u16) -> f64 {
        let s = if h & 0x8000 != 0 { -1.0 } else { 1.0 };
        let e = ((h >> 10) & 0x1f) as i32;
        let m = (h & 0x3ff) as f64;
        match e {
            0 => s * m * 2f64.powi(-24),
            31 if m == 0.0 => s * f64::INFINITY,
            31 => f64::NAN,
            _ => s * (1.0 + m / 1024.0) * 2f64.powi(e - 15),
        }
    }

    #[test]
    fn f16_to_f32_matches_ieee_definition_for_all_65536() {
        for h in 0..=u16::MAX {
            let got = f16_to_f32(h);
            let want = f16_value(h);
            if want.is_nan() {
                assert!(got.is_nan(), "{h:#06x}");
                // payload and sign preserved
                assert_eq!(
                    got.to_bits(),
                    (((h as u32) & 0x8000) << 16) | 0x7f80_0000 | (((h & 0x3ff) as u32) << 13)
                );
            } else {
                assert_eq!(got as f64, want, "{h:#06x}");
                assert_eq!(got.is_sign_negative(), h & 0x8000 != 0, "{h:#06x}");
            }
        }
    }

    #[test]
    fn f16_rows_give_f16_to_f32_bits_for_all_65536() {
        // Every bit pattern, in rows with and without a remainder, through the row loop (and
        // its AVX2 compilation where the CPU has it) against the branchy scalar conversion.
        let src: Vec<u8> = (0..=u16::MAX).flat_map(|h| h.to_le_bytes()).collect();
        for len in [65_536, 65_535, 7, 1] {
            let mut got = vec![0f32; len];
            dequantize_f16(&src[..2 * len], &mut got);
            for (h, g) in got.iter().enumerate() {
                assert_eq!(g.to_bits(), f16_to_f32(h as u16).to_bits(), "{h:#06x}");
            }
            let mut body = vec![0f32; len];
            dequantize_f16_body(&src[..2 * len], &mut body);
            assert!(body.iter().zip(&got).all(|(a, b)| a.to_bits() == b.to_bits()));
        }
    }

    #[test]
    fn all_65536_f16_round_trip() {
        for h in 0..=u16::MAX {
            assert_eq!(f32_to_f16(f16_to_f32(h)), h, "{h:#06x}");
        }
    }

    #[test]
    fn all_65536_bf16_round_trip() {
        for h in 0..=u16::MAX {
            let f = bf16_to_f32(h);
            let back = f32_to_bf16(f);
            if f.is_nan() {
                // ggml forces NaN quiet: only signalling NaNs change, by gaining bit 6.
                assert_eq!(back, h | 64, "{h:#06x}");
            } else {
                assert_eq!(back, h, "{h:#06x}");
            }
        }
    }

    /// Nearest-even rounding checked against the exact neighbours: for every f16 `h` (finite,
    /// positive, below max), the f32 values just around the midpoint to `h + 1` must round the
    /// right way, and the midpoint itself goes to whichever of the two is even.
    #[test]
    fn f32_to_f16_rounds_to_nearest_even_at_every_midpoint() {
        for h in 0u16..0x7bff {
            let lo = f16_to_f32(h) as f64;
            let hi = f16_to_f32(h + 1) as f64;
            let mid = ((lo + hi) / 2.0) as f32; // exact: the midpoint needs one more bit than f16
            assert_eq!(mid as f64, (lo + hi) / 2.0);
            let even = if h & 1 == 0 { h } else { h + 1 };
            assert_eq!(f32_to_f16(mid), even, "tie after {h:#06x}");
            assert_eq!(
                f32_to_f16(-mid),
                even | 0x8000,
                "negative tie after {h:#06x}"
            );
            let below = f32::from_bits(mid.to_bits() - 1);
            let above = f32::from_bits(mid.to_bits() + 1);
            assert_eq!(f32_to_f16(below), h, "just below tie after {h:#06x}");
            assert_eq!(f32_to_f16(above), h + 1, "just above tie after {h:#06x}");
        }
    }

    #[test]
    fn f32_to_f16_specials() {
        assert_eq!(f32_to_f16(0.0), 0x0000);
        assert_eq!(f32_to_f16(-0.0), 0x8000);
        assert_eq!(f32_to_f16(f32::INFINITY), 0x7c00);
        assert_eq!(f32_to_f16(f32::NEG_INFINITY), 0xfc00);
        assert_eq!(f32_to_f16(65504.0), 0x7bff);
        assert_eq!(f32_to_f16(65519.996), 0x7bff); // below the 65520 midpoint
        assert_eq!(f32_to_f16(65520.0), 0x7c00); // tie to even = Inf
        assert_eq!(f32_to_f16(1e10), 0x7c00);
        assert_eq!(f32_to_f16(-1e10), 0xfc00);
        assert_eq!(f32_to_f16(f32::MAX), 0x7c00);
        assert_eq!(f32_to_f16(2f32.powi(-24)), 0x0001); // smallest subnormal
        assert_eq!(f32_to_f16(2f32.powi(-25)), 0x0000); // tie between 0 and 1 ulp -> 0 (even)
        assert_eq!(
            f32_to_f16(f32::from_bits(2f32.powi(-25).to_bits() + 1)),
            0x0001
        );
        assert_eq!(f32_to_f16(-2f32.powi(-26)), 0x8000);
        assert_eq!(f32_to_f16(f32::from_bits(1)), 0x0000); // f32 subnormal
        assert_eq!(f32_to_f16(2f32.powi(-14)), 0x0400); // smallest normal
        assert_eq!(f32_to_f16(1.0), 0x3c00);
        assert_eq!(f32_to_f16(1.0 + 2f32.powi(-11)), 0x3c00); // tie, 0x3c00 is even
        assert_eq!(f32_to_f16(1.0 + 3.0 * 2f32.powi(-11)), 0x3c02); // tie, 0x3c01 odd -> up
                                                                    // NaN stays NaN, keeps sign; an all-low-bits payload gets the quiet bit, not Inf.
        assert_eq!(f32_to_f16(f32::NAN) & 0x7e00, 0x7e00);
        assert_eq!(f32_to_f16(f32::from_bits(0x7f80_0001)), 0x7e00);
        assert_eq!(f32_to_f16(f32::from_bits(0xff80_0001)), 0xfe00);
        assert_eq!(f32_to_f16(f32::from_bits(0x7fa0_0000)), 0x7d00);
    }

    #[test]
    fn f32_to_f16_agrees_with_f64_nearest_on_a_sweep() {
        // Independent check: pick the nearer of the two bracketing f16 values in f64.
        let mut x: u32 = 0x1234_5678;
        for _ in 0..200_000 {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            // Magnitudes from ~2^-30 to ~2^17 (both sides of the f16 range).
            let bits = (x & 0x807f_ffff) | (((x >> 23) % 48 + 97) << 23);
            let f = f32::from_bits(bits);
            let h = f32_to_f16(f);
            let v = f16_to_f32(h) as f64;
            let fv = f as f64;
            if v.is_infinite() {
                assert!(fv.abs() >= 65520.0, "{f:e}");
                continue;
            }
            let mag = h & 0x7fff;
            let down = if mag == 0 {
                0.0
            } else {
                f16_to_f32(mag - 1) as f64
            };
            let up = f16_to_f32(mag + 1) as f64;
            let err = (fv.abs() - v.abs()).abs();
            assert!(
                err <= (fv.abs() - down).abs() && err <= (up - fv.abs()).abs(),
                "{f:e} -> {h:#06x}"
            );
        }
    }

    #[test]
    fn f32_to_bf16_rounding_and_specials() {
        assert_eq!(f32_to_bf16(1.0), 0x3f80);
        assert_eq!(f32_to_bf16(f32::from_bits(0x3f80_8000)), 0x3f80); // tie, even stays
        assert_eq!(f32_to_bf16(f32::from_bits(0x3f81_8000)), 0x3f82); // tie, odd rounds up
        assert_eq!(f32_to_bf16(f32::from_bits(0x3f80_8001)), 0x3f81);
        assert_eq!(f32_to_bf16(f32::from_bits(0x3f80_7fff)), 0x3f80);
        assert_eq!(f32_to_bf16(f32::MAX), 0x7f80); // rounds to Inf
        assert_eq!(f32_to_bf16(f32::INFINITY), 0x7f80);
        assert_eq!(f32_to_bf16(f32::NEG_INFINITY), 0xff80);
        assert_eq!(f32_to_bf16(f32::from_bits(0x7f80_0001)), 0x7fc0); // sNaN -> quiet
        assert_eq!(f32_to_bf16(f32::from_bits(0xffc0_1234)), 0xffc0);
        assert_eq!(f32_to_bf16(f32::from_bits(1)), 0x0000); // subnormal rounds, no flush rule
        assert_eq!(f32_to_bf16(f32::from_bits(0x0000_8001)), 0x0001);
        assert_eq!(f32_to_bf16(-0.0), 0x8000);
    }
}
