//! The screen's sweeps over every row's estimate and bound (Gemma 3: 262,144 rows, several
//! sweeps a token), written so that LLVM vectorizes them: eight rows at a time, branch-free
//! tests folded into a mask, and only the rare chunk with a hit visited row by row. As plain
//! loops they were ~5 % of a sampled decode step in Chromium (a bounds check and a branch per
//! row).

/// Rows per chunk.
const CHUNK: usize = 8;

/// The first row with the largest estimate (ties: the lowest index, as `>` row after row), and
/// whether every estimate and bound is finite. With a NaN the row is unspecified (the screen
/// then falls back).
pub(super) fn best_estimate(est: &[f32], err: &[f32]) -> (usize, bool) {
    debug_assert_eq!(est.len(), err.len());
    let (mut best, mut finite) = ([f32::NEG_INFINITY; CHUNK], [true; CHUNK]);
    let (ce, cr) = (est.chunks_exact(CHUNK), err.chunks_exact(CHUNK));
    let (te, tr) = (ce.remainder(), cr.remainder());
    for (a, e) in ce.zip(cr) {
        for i in 0..CHUNK {
            best[i] = if a[i] > best[i] { a[i] } else { best[i] };
            finite[i] &= a[i].is_finite() & e[i].is_finite();
        }
    }
    let mut all_finite = finite.iter().all(|&f| f);
    let mut max = best.iter().fold(f32::NEG_INFINITY, |m, &b| if b > m { b } else { m });
    for (&a, &e) in te.iter().zip(tr) {
        max = if a > max { a } else { max };
        all_finite &= a.is_finite() & e.is_finite();
    }
    // The first row reaching the largest (`==`, so −0 and +0 alike, as `>` never moved past
    // either for the other).
    let first = if all_finite { first_hit(est, err, |a, _| a == max).unwrap_or(0) } else { 0 };
    (first, all_finite)
}

/// The first row `j` with `hit(est[j], err[j])`.
fn first_hit(est: &[f32], err: &[f32], hit: impl Fn(f32, f32) -> bool) -> Option<usize> {
    let mut found = None;
    for_each_hit(est, err, hit, |j| {
        found = Some(j);
        false
    });
    found
}

/// Calls `f(j)` for every row `j` with `hit(est[j], err[j])`, in ascending order, until `f`
/// returns `false`. `hit` must be branch-free (comparisons and arithmetic) for the chunk test
/// to vectorize.
#[inline(always)]
fn for_each_hit(est: &[f32], err: &[f32], hit: impl Fn(f32, f32) -> bool, mut f: impl FnMut(usize) -> bool) {
    debug_assert_eq!(est.len(), err.len());
    let (ce, cr) = (est.chunks_exact(CHUNK), err.chunks_exact(CHUNK));
    let tail = ce.len() * CHUNK;
    for (c, (a, e)) in ce.zip(cr).enumerate() {
        let mut any = false;
        for i in 0..CHUNK {
            any |= hit(a[i], e[i]);
        }
        if any {
            for i in 0..CHUNK {
                if hit(a[i], e[i]) && !f(c * CHUNK + i) {
                    return;
                }
            }
        }
    }
    for j in tail..est.len() {
        if hit(est[j], err[j]) && !f(j) {
            return;
        }
    }
}

/// The rows with `hit(est, err)` pushed to `ids` (not grown past `cap`): whether all fit.
#[inline(always)]
pub(super) fn push_hits(est: &[f32], err: &[f32], hit: impl Fn(f32, f32) -> bool, cap: usize, ids: &mut Vec<u32>) -> bool {
    let mut fits = true;
    for_each_hit(est, err, hit, |j| {
        fits = ids.len() < cap;
        if fits {
            ids.push(j as u32);
        }
        fits
    });
    fits
}

/// The largest of `map(est[j], err[j])` over every row (−∞ for none; `map` branch-free).
#[inline(always)]
pub(super) fn max_of(est: &[f32], err: &[f32], map: impl Fn(f32, f32) -> f64) -> f64 {
    let mut best = [f64::NEG_INFINITY; CHUNK];
    let (ce, cr) = (est.chunks_exact(CHUNK), err.chunks_exact(CHUNK));
    let (te, tr) = (ce.remainder(), cr.remainder());
    for (a, e) in ce.zip(cr) {
        for i in 0..CHUNK {
            let v = map(a[i], e[i]);
            best[i] = if v > best[i] { v } else { best[i] };
        }
    }
    let mut max = best.iter().fold(f64::NEG_INFINITY, |m, &b| if b > m { b } else { m });
    for (&a, &e) in te.iter().zip(tr) {
        let v = map(a, e);
        max = if v > max { v } else { max };
    }
    max
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sweeps_equal_the_plain_loops() {
        for n in [1usize, 7, 8, 9, 100, 1027] {
            for case in 0..4 {
                let est: Vec<f32> = (0..n)
                    .map(|j| match case {
                        0 => ((j * 37 % 101) as f32 - 50.0) * 0.25,
                        1 => 1.0,                                          // all tied
                        2 => if j % 3 == 0 { -0.0 } else { 0.0 },          // signed zeros
                        _ => -((j % 13) as f32) - if j == n / 2 { 0.0 } else { 1.0 }, // one best in the middle
                    })
                    .collect();
                let err: Vec<f32> = (0..n).map(|j| 0.5 + (j % 5) as f32 * 0.25).collect();
                // The plain loops the screen had.
                let mut kstar = 0;
                for j in 0..n {
                    if est[j] > est[kstar] {
                        kstar = j;
                    }
                }
                assert_eq!(best_estimate(&est, &err), (kstar, true), "n {n} case {case}");
                let lo = |a: f32, e: f32| a as f64 - e as f64;
                let want = (0..n).map(|j| lo(est[j], err[j])).fold(f64::NEG_INFINITY, f64::max);
                assert_eq!(max_of(&est, &err, lo).to_bits(), want.to_bits());
                let t = want + 0.3;
                let hits: Vec<usize> = (0..n).filter(|&j| est[j] as f64 + err[j] as f64 >= t).collect();
                let mut got = Vec::new();
                for_each_hit(&est, &err, |a, e| a as f64 + e as f64 >= t, |j| {
                    got.push(j);
                    true
                });
                assert_eq!(got, hits);
                let mut first3 = Vec::new();
                for_each_hit(&est, &err, |a, e| a as f64 + e as f64 >= t, |j| {
                    first3.push(j);
                    first3.len() < 3
                });
                assert_eq!(first3, hits[..hits.len().min(3)]);
            }
        }
        // Not finite: reported.
        let mut est = vec![1.0f32; 20];
        let err = vec![0.5f32; 20];
        est[17] = f32::NAN;
        assert!(!best_estimate(&est, &err).1);
        let mut err2 = err.clone();
        err2[3] = f32::INFINITY;
        assert!(!best_estimate(&vec![1.0; 20], &err2).1);
    }
}
