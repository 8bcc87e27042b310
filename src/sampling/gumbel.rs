//! Gumbel-max: a draw from softmax(z / T) as the argmax of `z_j / T + g_j`, with `g_j`
//! independent standard Gumbel noise, one per token.
//!
//! Why this form: an argmax screens. The noise of token `j` is a function of a per-step key
//! (one draw of the sampler's RNG) and `j` alone, so the screened output head can bound every
//! row's score from its pass-1 bounds and compute exactly only the rows that can still win —
//! the same token as the draw over every logit, with the same RNG state after it. A draw by
//! the inverse CDF (`Sampler::draw`) sums over the whole vocabulary and cannot screen.
//!
//! Most rows need no logarithm: a row's noise exceeds [`CUT`] only when its uniform bits are at
//! or above [`NOISY_FROM`] (about 1 row in 2,500), so a row whose upper bound is more than
//! `CUT` (plus a margin) below a score some row is known to reach cannot win, whatever its noise.

/// The uniform bits of `(key, id)`: splitmix64's output number `id + 1` from seed `key`, top 52
/// bits. Identical on every target.
#[inline]
fn bits(key: u64, id: u32) -> u64 {
    let mut z = key.wrapping_add((id as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    (z ^ (z >> 31)) >> 12
}

/// Rows whose bits are at least this (u ≥ 0.9996) may have noise above [`CUT`]:
/// `ceil(0.9996 · 2^52)`.
const NOISY_FROM: u64 = 4_501_798_187_519_548;

/// Every row with bits below [`NOISY_FROM`] has noise below this: `-ln(-ln 0.9996)` is
/// 7.8238…, and the noise grows with the bits (a test checks the bits just below).
pub const CUT: f64 = 7.83;

/// A row whose upper score is below a reached score by more than `CUT + MARGIN` cannot win;
/// the margin covers the rounding of the score's two operations many times over.
const MARGIN: f64 = 1.0;

/// Token `id`'s noise at the step keyed `key`: `-ln(-ln u)`, `u = (bits + ½) / 2^52` in (0, 1)
/// (exact in f64), by `libm`'s logarithm so every target gets the same bits.
#[inline]
pub fn noise(key: u64, id: u32) -> f64 {
    noise_of(bits(key, id))
}

#[inline]
fn noise_of(b: u64) -> f64 {
    let u = (b as f64 + 0.5) * f64::powi(2.0, -52);
    -libm::log(-libm::log(u))
}

/// The score Gumbel-max ranks token `id` by: `z / t + g`, in f64. Monotone in `z`, so a bound
/// on a logit bounds its score.
#[inline]
pub fn score(z: f64, t: f32, g: f64) -> f64 {
    z / t as f64 + g
}

/// The rows that can hold the largest score, given bounds `lo ≤ z ≤ up` on each of the `n`
/// rows' values (`bounds(i)`; `id(i)`: the row's token id, which keys its noise): their indices
/// in `out` (ascending; at most `limit + 1`: more than `limit` stops the search, and the caller
/// computes every row instead), and the returned threshold `L`, a score some row reaches. Every row
/// left out scores below `L`; a row with exact bounds (`lo = up`) is returned only if it reaches
/// `L`. Rows with a NaN bound are never returned (nor can they raise `L`).
///
/// Three sweeps, logarithms only where needed: (1) the best upper bound's row and the noisy
/// rows give a first reached score `L0`; (2) every row whose upper score can reach
/// `L0 − CUT − MARGIN` or that is noisy raises `L` with its lower score; (3) those rows whose
/// upper score reaches `L` are the candidates. A row skipped by (2) has `up / t < L0 − CUT −
/// MARGIN` and noise below `CUT`: its score is below `L0 ≤ L`.
pub fn candidates(n: usize, bounds: impl Fn(usize) -> (f64, f64), id: impl Fn(usize) -> u32, t: f32, key: u64, limit: usize, out: &mut Vec<u32>) -> f64 {
    out.clear();
    let mut best: Option<(usize, f64)> = None;
    let mut l0 = f64::NEG_INFINITY;
    for i in 0..n {
        let (lo, up) = bounds(i);
        if best.is_none_or(|(_, b)| up > b || b.is_nan()) {
            best = Some((i, up));
        }
        let b = bits(key, id(i));
        if b >= NOISY_FROM {
            l0 = l0.max(score(lo, t, noise_of(b)));
        }
    }
    let Some((top, _)) = best else { return f64::NEG_INFINITY };
    l0 = l0.max(score(bounds(top).0, t, noise(key, id(top))));
    let cutoff = l0 - (CUT + MARGIN);
    let reach = |i: usize| -> Option<(f64, f64)> {
        let (lo, up) = bounds(i);
        let b = bits(key, id(i));
        (score(up, t, 0.0) >= cutoff || b >= NOISY_FROM).then(|| {
            let g = noise_of(b);
            (score(lo, t, g), score(up, t, g))
        })
    };
    let mut l = l0;
    for i in 0..n {
        if let Some((lo, _)) = reach(i) {
            l = l.max(lo);
        }
    }
    for i in 0..n {
        if reach(i).is_some_and(|(_, up)| up >= l) {
            out.push(i as u32);
            if out.len() > limit {
                break;
            }
        }
    }
    l
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn noise_below_the_noisy_bits_is_below_the_cut() {
        assert!(noise_of(NOISY_FROM - 1) < CUT);
        assert!(noise_of(NOISY_FROM) > 7.8 && noise_of(NOISY_FROM) < CUT + 1e-6);
        // Monotone over the range the cut relies on, and at the ends.
        let mut prev = f64::NEG_INFINITY;
        for k in 0..10_000u64 {
            let b = NOISY_FROM - 5_000 + k * 997;
            let g = noise_of(b.min((1 << 52) - 1));
            assert!(g >= prev);
            prev = g;
        }
        assert!(noise_of(0).is_finite() && noise_of((1 << 52) - 1).is_finite());
    }

    #[test]
    fn noise_is_standard_gumbel() {
        // Mean γ ≈ 0.5772, variance π²/6 ≈ 1.645, and the share of noisy rows ≈ 0.0004.
        let n = 400_000u32;
        let (mut sum, mut sq, mut noisy) = (0.0, 0.0, 0usize);
        for id in 0..n {
            let g = noise(0xDEAD_BEEF, id);
            sum += g;
            sq += g * g;
            noisy += (bits(0xDEAD_BEEF, id) >= NOISY_FROM) as usize;
        }
        let mean = sum / n as f64;
        let var = sq / n as f64 - mean * mean;
        assert!((mean - 0.5772).abs() < 0.01, "{mean}");
        assert!((var - 1.6449).abs() < 0.03, "{var}");
        assert!((100..=220).contains(&noisy), "{noisy}");
    }

    /// The argmax over every row of its exact score.
    fn full_argmax(z: &[f64], t: f32, key: u64) -> usize {
        let mut best = 0;
        let mut bv = f64::NEG_INFINITY;
        for (j, &v) in z.iter().enumerate() {
            let s = score(v, t, noise(key, j as u32));
            if s > bv {
                bv = s;
                best = j;
            }
        }
        best
    }

    #[test]
    fn candidates_hold_the_argmax_and_leave_out_only_lower_scores() {
        let mut out = Vec::new();
        let mut rng = crate::sampling::Rng::new(9);
        for case in 0..60 {
            let n = [1, 2, 50, 3000, 20_000][case % 5];
            let spread = [0.5, 3.0, 12.0][case % 3];
            let t = [0.3f32, 1.0, 2.5][(case / 3) % 3];
            let z: Vec<f64> = (0..n).map(|_| (rng.next_f64() - 0.5) * 2.0 * spread).collect();
            let err: Vec<f64> = (0..n).map(|_| rng.next_f64() * [0.0, 0.5, 2.0][case % 3]).collect();
            let key = rng.next_u64();
            let l = candidates(n, |i| (z[i] - err[i], z[i] + err[i]), |i| i as u32, t, key, usize::MAX, &mut out);
            let want = full_argmax(&z, t, key);
            assert!(out.contains(&(want as u32)), "case {case}: argmax {want} not among {} candidates", out.len());
            for (j, &zj) in z.iter().enumerate() {
                let s = score(zj, t, noise(key, j as u32));
                assert!(out.contains(&(j as u32)) || s < l, "case {case}: row {j} left out at {s} >= {l}");
            }
            assert!(out.windows(2).all(|w| w[0] < w[1]));
            // Exact values: only rows that reach the threshold, and the argmax reaches it.
            candidates(n, |i| (z[i], z[i]), |i| i as u32, t, key, usize::MAX, &mut out);
            assert!(out.contains(&(want as u32)));
            if n >= 3000 {
                assert!(out.len() < 40, "case {case}: {} exact candidates", out.len());
            }
        }
    }

    #[test]
    fn past_the_limit_the_search_stops_with_one_more() {
        // Wide bounds on a flat distribution: many rows can win.
        let mut out = Vec::new();
        let (n, key) = (5000, 3);
        candidates(n, |i| (-2.0 + (i % 7) as f64 * 0.01, 2.0), |i| i as u32, 1.0, key, usize::MAX, &mut out);
        let all = out.clone();
        assert!(all.len() > 20, "{}", all.len());
        candidates(n, |i| (-2.0 + (i % 7) as f64 * 0.01, 2.0), |i| i as u32, 1.0, key, 20, &mut out);
        assert_eq!(out, all[..21], "the first 21 candidates, then it stops");
    }

    #[test]
    fn non_finite_rows_never_win() {
        let mut out = Vec::new();
        let z = [f64::NEG_INFINITY, 1.0, f64::NAN, 0.5];
        candidates(4, |i| (z[i], z[i]), |i| i as u32, 1.0, 77, usize::MAX, &mut out);
        assert!(!out.is_empty() && out.iter().all(|&i| i == 1 || i == 3), "{out:?}");
        let all_masked = [f64::NEG_INFINITY; 3];
        candidates(3, |i| (all_masked[i], all_masked[i]), |i| i as u32, 1.0, 77, usize::MAX, &mut out);
        assert!(candidates(0, |_| (0.0, 0.0), |i| i as u32, 1.0, 1, usize::MAX, &mut out) == f64::NEG_INFINITY && out.is_empty());
    }
}
