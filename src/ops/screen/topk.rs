//! Top-k's two selections over the screen's bounds, without a select over every row.
//!
//! The screen needs, for top-k, (1) the rows with the best upper bounds, to compute them
//! exactly first, and (2) the k-th largest lower bound over every row, the threshold. Each was
//! a copy of a vocabulary-sized list and a select over it (Gemma 3: 262,144 rows, twice a
//! token, ~4 % of a sampled decode step in Chromium with the scans around them). Both are
//! found here from a short list instead:
//! - (1): a strided sample of the upper bounds gives a value that a few hundred rows reach;
//!   one scan keeps those rows, and a select among them picks the best `m`;
//! - (2): the k-th largest exact value among rows already computed is a lower bound `v` of the
//!   threshold (k rows have a lower bound that high), so only rows whose upper bound reaches
//!   `v` can hold the k-th largest lower bound, and only they can be candidates; one scan keeps
//!   them and a select among them gives the threshold, exactly the one of every row.
//!
//! Where the short list would outgrow the candidate buffer (a flat distribution, a tiny
//! vocabulary), each falls back to the select over every row. Both paths return the same.

use std::cmp::Ordering;

use super::{lo64, up64};
use crate::quant::planes::f32_down;
use super::sweep::push_hits;

/// One sampled row in this many for the guess of (1).
const SAMPLE_STRIDE: usize = 64;

/// Largest first, by `total_cmp`.
fn desc(a: &f32, b: &f32) -> Ordering {
    b.total_cmp(a)
}

/// A row's upper bound as (1) ranks it (f32, as the screen always did).
#[inline(always)]
fn upper(est: f32, err: f32) -> f32 {
    est + err
}

/// The `m` rows (`1 ≤ m ≤ rows`) with the largest upper bounds `est + err`, ties to the lower
/// index, into `ids`, ascending. `ids` and `tmp` are scratch of capacity `cap` (≥ `m`) and are
/// not grown past it; `lo` is scratch of the rows' count (the fallback's).
pub(super) fn best_upper(est: &[f32], err: &[f32], m: usize, cap: usize, ids: &mut Vec<u32>, tmp: &mut Vec<f32>, lo: &mut Vec<f32>) {
    let n = est.len();
    debug_assert!(m >= 1 && m <= n.min(cap) && err.len() == n);
    ids.clear();
    let key = |j: u32| upper(est[j as usize], err[j as usize]);
    // The guess: the r-th best of one row in SAMPLE_STRIDE; about r·SAMPLE_STRIDE rows reach it.
    let samples = n.div_ceil(SAMPLE_STRIDE);
    let r = m.div_ceil(SAMPLE_STRIDE) * 2 + 8;
    if r <= samples && samples <= cap {
        tmp.clear();
        tmp.extend((0..n).step_by(SAMPLE_STRIDE).map(|j| upper(est[j], err[j])));
        let guess = *tmp.select_nth_unstable_by(r - 1, desc).1;
        let fits = push_hits(est, err, |a, e| upper(a, e).total_cmp(&guess) != Ordering::Less, cap, ids);
        if fits && ids.len() >= m {
            ids.select_nth_unstable_by(m - 1, |&a, &b| key(b).total_cmp(&key(a)).then(a.cmp(&b)));
            ids.truncate(m);
            ids.sort_unstable();
            return;
        }
        ids.clear();
    }
    // Every row: the m-th best value, then the rows above it and, in index order, enough of
    // those equal to it.
    lo.clear();
    lo.extend((0..n).map(|j| upper(est[j], err[j])));
    let (above, &mut mth, _) = lo.select_nth_unstable_by(m - 1, desc);
    let mut equal_left = m - above.iter().filter(|&&v| v.total_cmp(&mth) == Ordering::Greater).count();
    for j in 0..n {
        match upper(est[j], err[j]).total_cmp(&mth) {
            Ordering::Greater => ids.push(j as u32),
            Ordering::Equal if equal_left > 0 => {
                equal_left -= 1;
                ids.push(j as u32);
            }
            _ => {}
        }
    }
}

/// A row's lower bound as the threshold ranks it: `est − err` in f64, rounded down to f32.
#[inline(always)]
fn lower(est: f32, err: f32) -> f32 {
    f32_down(lo64(est, err))
}

/// Whether a row's upper bound (`est + err` in f64) reaches `t`: a candidate of threshold `t`.
#[inline(always)]
fn reaches(est: f32, err: f32, t: f64) -> bool {
    up64(est, err) >= t
}

/// Top-k's threshold, the k-th largest lower bound over every row (`1 ≤ k ≤ rows`), and its
/// candidates, the rows whose upper bound reaches it: into `ids`, ascending, but at most `cap`
/// of them (the buffer is not grown: a full one means too many, the caller falls back, and
/// which rows it holds then is unspecified). On entry `ids` holds rows known
/// exactly (`err` 0); with `k` or more of them the scan keeps only rows that reach the k-th
/// best of their values. `tmp` is scratch of capacity `cap`, `lo` of the rows' count.
pub(super) fn threshold(est: &[f32], err: &[f32], k: usize, cap: usize, ids: &mut Vec<u32>, tmp: &mut Vec<f32>, lo: &mut Vec<f32>) -> f64 {
    let n = est.len();
    debug_assert!(k >= 1 && k <= n && err.len() == n);
    debug_assert!(ids.iter().all(|&j| err[j as usize] == 0.0));
    if ids.len() >= k {
        tmp.clear();
        tmp.extend(ids.iter().map(|&j| est[j as usize]));
        let v = *tmp.select_nth_unstable_by(k - 1, desc).1 as f64;
        // Every row left out has `lower ≤ upper < v ≤ threshold`: it is neither among the k
        // largest lower bounds (unless tied at a value below them, which changes nothing) nor
        // a candidate.
        ids.clear();
        if push_hits(est, err, |a, e| reaches(a, e, v), cap, ids) {
            tmp.clear();
            tmp.extend(ids.iter().map(|&j| lower(est[j as usize], err[j as usize])));
            let t = *tmp.select_nth_unstable_by(k - 1, desc).1 as f64;
            ids.retain(|&j| reaches(est[j as usize], err[j as usize], t));
            return t;
        }
    }
    lo.clear();
    lo.extend((0..n).map(|j| lower(est[j], err[j])));
    let t = *lo.select_nth_unstable_by(k - 1, desc).1 as f64;
    ids.clear();
    push_hits(est, err, |a, e| reaches(a, e, t), cap, ids);
    t
}


#[cfg(test)]
mod tests {
    use super::*;

    /// Bounds like the screen's: a dense body, a few strong rows, ties, exact rows (err 0).
    fn bounds(n: usize, seed: u64, ties: bool) -> (Vec<f32>, Vec<f32>) {
        let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        let mut next = || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 40) as f32 / (1u64 << 24) as f32
        };
        let mut est = Vec::with_capacity(n);
        let mut err = Vec::with_capacity(n);
        for j in 0..n {
            let mut a = 4.0 * next() - 2.0;
            if j % 977 == 5 {
                a += 6.0;
            }
            if ties {
                a = (a * 4.0).round() / 4.0;
            }
            est.push(a);
            err.push(if ties { 0.5 } else { 0.3 + next() });
        }
        (est, err)
    }

    fn brute_best(est: &[f32], err: &[f32], m: usize) -> Vec<u32> {
        let mut all: Vec<u32> = (0..est.len() as u32).collect();
        all.sort_by(|&a, &b| upper(est[b as usize], err[b as usize]).total_cmp(&upper(est[a as usize], err[a as usize])).then(a.cmp(&b)));
        let mut best = all[..m].to_vec();
        best.sort_unstable();
        best
    }

    fn brute_threshold(est: &[f32], err: &[f32], k: usize) -> (f64, Vec<u32>) {
        let mut lo: Vec<f32> = (0..est.len()).map(|j| lower(est[j], err[j])).collect();
        lo.sort_by(desc);
        let t = lo[k - 1] as f64;
        (t, (0..est.len() as u32).filter(|&j| reaches(est[j as usize], err[j as usize], t)).collect())
    }

    #[test]
    fn best_upper_is_the_m_best_with_ties_to_the_lower_index() {
        for (n, ties) in [(300, false), (5000, false), (40_000, false), (40_000, true), (262_144, false)] {
            for m in [1, 2, 80, 300] {
                let cap = n / 4 + 1;
                if m > cap {
                    continue;
                }
                let (est, err) = bounds(n, n as u64 + m as u64, ties);
                let (mut ids, mut tmp, mut lo) = (Vec::with_capacity(cap), Vec::with_capacity(cap), Vec::new());
                best_upper(&est, &err, m, cap, &mut ids, &mut tmp, &mut lo);
                assert_eq!(ids, brute_best(&est, &err, m), "n {n}, m {m}, ties {ties}");
                assert!(ids.capacity() == cap && tmp.capacity() == cap, "no growth");
                // A tight buffer: the fallback, the same rows.
                let (mut ids, mut tmp) = (Vec::with_capacity(m), Vec::with_capacity(m));
                best_upper(&est, &err, m, m, &mut ids, &mut tmp, &mut lo);
                assert_eq!(ids, brute_best(&est, &err, m), "fallback: n {n}, m {m}, ties {ties}");
            }
        }
        // All equal: the first m.
        let (est, err) = (vec![1.0; 10_000], vec![0.5; 10_000]);
        let (mut ids, mut tmp, mut lo) = (Vec::with_capacity(2501), Vec::with_capacity(2501), Vec::new());
        best_upper(&est, &err, 80, 2501, &mut ids, &mut tmp, &mut lo);
        assert_eq!(ids, (0..80).collect::<Vec<u32>>());
    }

    #[test]
    fn threshold_is_the_kth_lower_bound_of_every_row_and_its_candidates() {
        for (n, ties) in [(300, false), (5000, false), (40_000, true), (262_144, false)] {
            for k in [1, 40, 100] {
                let (mut est, mut err) = bounds(n, 7 * n as u64 + k as u64, ties);
                let cap = n / 4 + 1;
                let (mut ids, mut tmp, mut lo) = (Vec::with_capacity(cap), Vec::with_capacity(cap), Vec::new());
                let m = (2 * k).min(n / 8 + 1);
                best_upper(&est, &err, m, cap, &mut ids, &mut tmp, &mut lo);
                // The best rows computed "exactly": a value within their bounds.
                for &j in &ids {
                    let j = j as usize;
                    est[j] -= 0.7 * err[j];
                    err[j] = 0.0;
                }
                let (want_t, want) = brute_threshold(&est, &err, k);
                let t = threshold(&est, &err, k, cap, &mut ids, &mut tmp, &mut lo);
                assert_eq!(t.to_bits(), want_t.to_bits(), "n {n}, k {k}, ties {ties}");
                if want.len() < cap {
                    assert_eq!(ids, want, "n {n}, k {k}, ties {ties}");
                } else {
                    assert_eq!(ids.len(), cap);
                }
                assert!(ids.capacity() == cap && tmp.capacity() == cap, "no growth");
                // No exact rows given: every row's lower bound, the same threshold.
                let mut none = Vec::with_capacity(cap);
                let t = threshold(&est, &err, k, cap, &mut none, &mut tmp, &mut lo);
                assert_eq!(t.to_bits(), want_t.to_bits());
                assert_eq!(none.len(), want.len().min(cap));
                assert!(none.capacity() == cap, "no growth");
            }
        }
    }
}
