//! The screened output head: the logits a sampler can use, exactly, reading about half the
//! head's bytes.
//!
//! The head is a plane-layout Q8_0 weight (`quant::planes`). Pass 1 reads every row's scales,
//! `h` nibbles and the `l` nibbles of the calibrated outlier dimensions, and gives an estimate
//! `a_j` of the dot the engine computes, with a rigorous bound `|z_j − a_j| ≤ E_j` where `z_j`
//! is the f32 value today's Q8_0 kernel returns (see [`Bound`]). A threshold `L` that the
//! wanted tokens' logits reach ([`Need`]) is taken from the bounds and from one exact row (the
//! best estimate's); pass 2 then computes the exact logit of every row with `a_j + E_j ≥ L`
//! (the candidates) with the same integer dot as the Q8_0 kernel: each logit returned is
//! bit-equal to the full head's, and every row left out has `z_j < L`.

use crate::exec::{Exec, SharedMut};
use crate::gguf::GgmlType;
use crate::quant::planes::{self, Pass1, PlanesAct};
use crate::quant::{self, QuantError};
use crate::sampling::gumbel;

use super::Weight;

mod sweep;
mod topk;

/// What the sampler needs of the logits.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Need {
    /// The largest (greedy): every token that can be the argmax (ties included).
    Max,
    /// Every token that can be among the `k` largest (top-k sampling), `k ≥ 1`.
    TopK(usize),
    /// Every token whose logit can be ≥ `max + ln_p` evaluated in f32 as the sampler does
    /// (min-p with `ln_p = min_p.ln()`, ≤ 0).
    Floor(f32),
    /// Every token that can have the largest Gumbel-max score at temperature `t` under the
    /// noise keyed `key` (pure temperature sampling: `sampling::gumbel`).
    Gumbel { t: f32, key: u64 },
}

/// What the sampler asks of one screened step: the logits it needs, and the rows it ranks by
/// another value than their logit (the recent tokens, under repetition penalties): those are
/// computed exactly and ranked by `value(i, logit)` (`i`: the index in `adjusted`, ascending).
#[derive(Clone, Copy)]
pub struct Ask<'a> {
    pub need: Need,
    pub adjusted: &'a [u32],
    pub value: &'a dyn Fn(usize, f32) -> f32,
}

impl Ask<'static> {
    /// `need` on the raw logits.
    pub fn plain(need: Need) -> Ask<'static> {
        fn same(_: usize, z: f32) -> f32 {
            z
        }
        Ask { need, adjusted: &[], value: &same }
    }
}

/// How many rows ahead pass 1 prefetches (AVX2; the wasm kernel reads several streams instead):
/// two calls (one, two and four calls ahead measured alike on a 2-core EPYC VM, pass 1 then
/// streaming as fast as the body's four-row kernels; two leaves room for slower memory).
const PREFETCH_ROWS: usize = 2 * planes::PASS1_ROWS;

/// Above this share of the vocabulary as candidates, every row is computed instead. Pass 1 reads
/// ~55 % of the head, so a step's screen reads less than the full head up to ~45 % of the rows
/// as candidates; a quarter keeps a margin for pass 2's scattered rows, and a step that falls
/// back reads pass 1 and the whole head (top-k 40 on Gemma 3 has steps with ~27k candidates,
/// past an eighth).
const MAX_CANDIDATE_SHARE: usize = 4; // 1/4

/// Gumbel-max: how many of the best candidates are computed exactly before the rest are
/// filtered against their scores.
const GUMBEL_EXACT_CANDIDATES: usize = 4;

/// Top-k: how many rows per wanted token are computed exactly (those with the best upper
/// bounds) before the threshold is taken.
const TOPK_EXACT_FACTOR: usize = 2;

/// Reusable buffers of the screen.
#[derive(Default, Debug)]
pub struct ScreenScratch {
    act: Vec<u8>,
    x: PlanesAct,
    est: Vec<f32>,
    err: Vec<f32>,
    /// Lower bounds, for top-k's threshold (rounded down to f32).
    lo: Vec<f32>,
}

impl ScreenScratch {
    pub fn bytes(&self) -> usize {
        self.act.capacity() + 4 * (self.est.capacity() + self.err.capacity() + self.lo.capacity()) + self.x.bytes()
    }
}

/// What the screen's scratch grows to for a head `n_in` wide with `n_vocab` rows (the memory
/// ledger's figure; the plane-layout full head's prepared activation row included): its
/// estimates, bounds and lower bounds (f32 per row), the candidates (id and logit, at most
/// 1/4 of the rows) and two prepared activation rows.
pub fn scratch_bytes(n_in: usize, n_vocab: usize) -> usize {
    let nb = n_in / 32;
    12 * n_vocab + 8 * (n_vocab / MAX_CANDIDATE_SHARE + 1) + 34 * nb + 2 * PlanesAct::bytes_for(nb)
}

/// The screen's result: candidate ids (ascending) and their exact logits.
#[derive(Default, Debug, Clone, PartialEq)]
pub struct Screened {
    pub ids: Vec<u32>,
    pub logits: Vec<f32>,
    /// The candidates were too many (or a bound was not finite): every row was computed, into
    /// the caller's dense buffer (`ids` and `logits` are then empty).
    pub fell_back: bool,
    /// The threshold every left-out row's value is below: its exact logit, or the value the
    /// sampler ranks it by (`Ask::adjusted`, a Gumbel-max score).
    pub threshold: f64,
    /// Weight bytes of the head this step read (pass 1, and the rows computed in full).
    pub bytes_read: usize,
}

/// The bound `E` on `|z − a|` from one row's pass-1 sums (f32, rounded up), with `a = a2 / 2`.
///
/// Write `s_b = dw_b·dx_b` (exact in f32), `sumi_b` Q8_0's block integer and `A_b` pass 1's, so
/// that `2·sumi_b − A_b = Σ_unknown qx·(2l − 15)`. Then for the real numbers `Z = Σ s_b·sumi_b`
/// and `Â = ½ Σ s_b·A_b`: `|Z − Â| ≤ 7.5 · Σ_b |dw_b|·m_b` with `m_b = |dx_b|·Σ_unknown |qx|`.
/// The engine's `z` is `Z` summed in f32 in block order: `|z − Z| ≤ γ_{nb+1} Σ|s_b·sumi_b|`,
/// and `|sumi_b| ≤ 128·Σ|qx|`, so `≤ 128·γ·Σ_b |dw_b|·n_b` with `n_b = |dx_b|·Σ |qx|`; pass 1's
/// `a` has the same error against `Â` (its `|A_b|/2 ≤ 128·Σ|qx|` as well; it sums in four
/// lanes, and in any summation tree a term passes at most `nb − 1` inexact additions, those
/// with −0.0 being exact). So `E ≤ Σ_b |dw_b|·(7.5·m_b + 256·γ·n_b) ≤ Σ_b |dw_b|·w_b` with each
/// block's weight `w_b` rounded up to f32 (`PlanesAct::w`, `planes::rounding_gamma256`), and
/// pass 1 returns that sum `e` in f32: a sum of positive terms, low by at most a factor
/// `(1 + u)^{2nb}`; the final relative factor covers that and the f64 comparisons (the
/// rounding term alone exceeds `2^-40·|a|`), and the absolute term covers subnormal products.
///
/// The constants for one head width are computed once per step.
#[derive(Clone, Copy)]
struct Bound {
    /// `1 + 4(nb+1)u`, `(nb+1)·2^-120`.
    rel: f64,
    abs: f64,
}

impl Bound {
    fn new(nb: usize) -> Bound {
        let n = (nb + 1) as f64;
        Bound { rel: 1.0 + 4.0 * n * f64::powi(2.0, -24), abs: n * f64::powi(2.0, -120) }
    }

    /// `E` rounded up to f32 (branch-free, so the loop over a row group vectorizes; `e` is
    /// positive or NaN).
    #[inline(always)]
    fn of(self, p: Pass1) -> f32 {
        planes::f32_up(p.e as f64 * self.rel + self.abs)
    }

    /// A row's estimate `a2 / 2` and bound.
    #[inline(always)]
    fn put(self, p: Pass1, est: &mut f32, err: &mut f32) {
        (*est, *err) = (0.5 * p.a2, self.of(p));
    }
}

/// A row's lower and upper bounds in f64 (exact: the f32 sum or difference of two f32 is
/// exact in f64) from its estimate and bound.
#[inline(always)]
fn lo64(est: f32, err: f32) -> f64 {
    est as f64 - err as f64
}
#[inline(always)]
fn up64(est: f32, err: f32) -> f64 {
    est as f64 + err as f64
}

/// The screened head of `w` (a plane-layout Q8_0 weight) on one normalized hidden row `xn`:
/// candidate ids and exact logits for `need`, pass 1 split over `exec`'s threads (results do
/// not depend on the thread count); when it falls back, every logit in `dense`. `false` when
/// `w` is not plane-laid-out.
pub fn screened_head(exec: &Exec, w: &Weight, xn: &[f32], ask: Ask<'_>, s: &mut ScreenScratch, out: &mut Screened, dense: &mut Vec<f32>) -> Result<bool, QuantError> {
    let Some((layout, data)) = w.planes() else { return Ok(false) };
    let n_out = layout.n_out;
    quant::quantize_activation(GgmlType::Q8_0, xn, &mut s.act)?;
    s.x.prepare(layout, &s.act);
    let (pass1, pass1_n, full) = planes::kernels();
    let nb = layout.blocks();
    let bound = Bound::new(nb);
    s.est.resize(n_out, 0.0);
    s.err.resize(n_out, 0.0);
    // Top-k's lower bounds of every row, filled only where its short lists do not suffice
    // (`topk`): held from the first step, as the memory ledger counts them
    // (`scratch_bytes`), so that no later step grows the session's memory.
    s.lo.reserve_exact(n_out);
    {
        let (est, err) = (SharedMut::new(&mut s.est), SharedMut::new(&mut s.err));
        let x = &s.x;
        exec.for_ranges(n_out, planes::PASS1_ROWS, |_, rows| {
            // Safety: the ranges are disjoint.
            let (est, err) = unsafe { (est.slice(rows.clone()), err.slice(rows.clone())) };
            let ra = layout.pass1_row_bytes();
            let a_part = |r: usize| &data[layout.a_at(r)..layout.a_at(r) + ra];
            // PASS1_ROWS rows a call, from `streams::STREAMS` streams; the rest one by one.
            let (sets, tail) = quant::streams::ordered::<{ planes::PASS1_ROWS }>(rows.clone());
            for set in sets {
                // Prefetching kernels read one stream: the rows `PREFETCH_ROWS` on.
                let next = set[0] + PREFETCH_ROWS;
                let ahead = if quant::streams::STREAMS == 1 && next + planes::PASS1_ROWS <= rows.end { layout.a_at(next) - layout.a_at(set[0]) } else { 0 };
                for (r, p) in set.into_iter().zip(pass1_n(&set.map(a_part), ahead, x)) {
                    let i = r - rows.start;
                    bound.put(p, &mut est[i], &mut err[i]);
                }
            }
            for r in tail {
                let i = r - rows.start;
                bound.put(pass1(a_part(r), x), &mut est[i], &mut err[i]);
            }
        });
    }
    out.ids.clear();
    out.logits.clear();
    // Sized once for the most candidates a step keeps (beyond, it falls back): the session's
    // memory stays flat from step to step.
    let cap = n_out / MAX_CANDIDATE_SHARE + 1;
    out.ids.reserve_exact(cap);
    out.logits.reserve_exact(cap);
    out.fell_back = false;
    let pass1_bytes = n_out * layout.pass1_row_bytes();
    // Every exact row computed is counted (the step's bytes).
    let rows_read = std::cell::Cell::new(0usize);
    let row_full = |r: usize| {
        rows_read.set(rows_read.get() + 1);
        full(&data[layout.a_at(r)..], &data[layout.b_at(r)..], &s.x)
    };
    // Rows known exactly get their value as the estimate and a zero bound (a pass-1 bound is
    // never zero: its absolute term is positive), so `est ± err` bounds every row:
    // - the adjusted rows, ranked by their value (the sampler adjusts their logits itself);
    let adjusted = ask.adjusted;
    let is_adjusted = |j: usize| adjusted.binary_search(&(j as u32)).is_ok();
    for (i, &j) in adjusted.iter().enumerate() {
        let j = j as usize;
        if j < n_out {
            s.est[j] = (ask.value)(i, row_full(j));
            s.err[j] = 0.0;
        }
    }
    // - the best estimate's row (the first best on ties), whose exact value lifts the threshold.
    let (kstar, mut finite) = sweep::best_estimate(&s.est, &s.err);
    if s.err[kstar] != 0.0 {
        s.est[kstar] = row_full(kstar);
        s.err[kstar] = 0.0;
        finite &= s.est[kstar].is_finite();
    }
    if let (Need::TopK(k), true) = (ask.need, finite) {
        // Top-k's threshold is the k-th largest lower bound: with the rows whose upper bounds
        // are best computed exactly first (most are candidates either way), it sits at or
        // near the true k-th logit instead of a bound's width below it — in the dense part
        // of the distribution, where a bound's width can hold tens of thousands of rows.
        // (`out.logits` is scratch until the candidates' logits are written.)
        let m = (k.saturating_mul(TOPK_EXACT_FACTOR)).clamp(1, n_out / (2 * MAX_CANDIDATE_SHARE) + 1).min(n_out);
        topk::best_upper(&s.est, &s.err, m, cap, &mut out.ids, &mut out.logits, &mut s.lo);
        for &j in &out.ids {
            let j = j as usize;
            if s.err[j] != 0.0 {
                s.est[j] = row_full(j);
                s.err[j] = 0.0;
                finite &= s.est[j].is_finite();
            }
        }
        if !finite {
            out.ids.clear();
        }
    }
    let mut threshold = if !finite {
        f64::NAN
    } else {
        let (est, err) = (&s.est, &s.err);
        let max_lo = || sweep::max_of(est, err, lo64);
        match ask.need {
            Need::Max => max_lo(),
            Need::Floor(ln_p) => (planes::f32_down(max_lo()) + ln_p) as f64,
            // The candidates too, into `out.ids` (from the rows computed above).
            Need::TopK(k) => topk::threshold(est, err, k.clamp(1, n_out), cap, &mut out.ids, &mut out.logits, &mut s.lo),
            Need::Gumbel { t, key } => {
                let bounds = |j: usize| (lo64(est[j], err[j]), up64(est[j], err[j]));
                gumbel::candidates(n_out, bounds, |j| j as u32, t, key, n_out / MAX_CANDIDATE_SHARE, &mut out.ids)
            }
        }
    };
    match ask.need {
        _ if !threshold.is_finite() => {}
        // The search stopped past the most candidates a step keeps: it falls back below.
        Need::Gumbel { .. } if out.ids.len() > n_out / MAX_CANDIDATE_SHARE => {}
        Need::Gumbel { t, key } => {
            // Tighten the threshold (from lower bounds) with the exact scores of the candidates
            // whose upper scores are best: each is a candidate either way, so computing it now
            // costs nothing more, and each can drop many others.
            let up_score = |est: &[f32], err: &[f32], j: u32| gumbel::score(up64(est[j as usize], err[j as usize]), t, gumbel::noise(key, j));
            for _ in 0..GUMBEL_EXACT_CANDIDATES {
                let (est, err) = (&s.est, &s.err);
                let best = out.ids.iter().copied().filter(|&j| err[j as usize] != 0.0).max_by(|&a, &b| up_score(est, err, a).total_cmp(&up_score(est, err, b)));
                let Some(j) = best else { break };
                let z = row_full(j as usize);
                s.est[j as usize] = z;
                s.err[j as usize] = 0.0;
                threshold = threshold.max(gumbel::score(z as f64, t, gumbel::noise(key, j)));
                let (est, err) = (&s.est, &s.err);
                out.ids.retain(|&j| up_score(est, err, j) >= threshold);
            }
        }
        Need::TopK(_) => {}
        // More than `cap` − 1: it falls back below (the buffer keeps its size).
        _ => _ = sweep::push_hits(&s.est, &s.err, |a, e| up64(a, e) >= threshold, cap, &mut out.ids),
    }
    out.logits.clear();
    out.threshold = threshold;
    if !threshold.is_finite() || out.ids.len() > n_out / MAX_CANDIDATE_SHARE {
        out.fell_back = true;
        out.ids.clear();
        dense.resize(n_out, 0.0);
        let shared = SharedMut::new(dense);
        let x = &s.x;
        exec.for_ranges(n_out, 4, |_, rows| {
            for r in rows {
                // Safety: the ranges are disjoint.
                unsafe { shared.set(r, full(&data[layout.a_at(r)..], &data[layout.b_at(r)..], x)) };
            }
        });
        out.bytes_read = pass1_bytes + layout.bytes();
        return Ok(true);
    }
    // Each candidate's logit: known already where it was computed exactly, except an adjusted
    // row's (its estimate is its adjusted value; the sampler adjusts the raw logit itself).
    for &j in &out.ids {
        let j = j as usize;
        out.logits.push(if s.err[j] == 0.0 && !is_adjusted(j) { s.est[j] } else { row_full(j) });
    }
    out.bytes_read = pass1_bytes + rows_read.get() * layout.row_bytes();
    Ok(true)
}

/// Debug check of one screened step (asked `ask`) against the full head's logits `full`: every
/// candidate's logit is bit-equal to the full head's, and every other row's value (its
/// adjusted value, its Gumbel-max score) is below the threshold. Returns a description of the
/// first violation.
pub fn check_against_full(sc: &Screened, full: &[f32], ask: Ask<'_>) -> Result<(), String> {
    if sc.fell_back {
        return Ok(());
    }
    let mut next = 0usize;
    for (j, &z) in full.iter().enumerate() {
        if next < sc.ids.len() && sc.ids[next] as usize == j {
            let got = sc.logits[next];
            if got.to_bits() != z.to_bits() {
                return Err(format!("candidate {j}: screened logit {got} != full head's {z}"));
            }
            next += 1;
        } else {
            let v = match ask.adjusted.binary_search(&(j as u32)) {
                Ok(i) => (ask.value)(i, z),
                Err(_) => z,
            };
            let v = match ask.need {
                Need::Gumbel { t, key } => gumbel::score(v as f64, t, gumbel::noise(key, j as u32)),
                _ => v as f64,
            };
            if v >= sc.threshold {
                return Err(format!("row {j} left out with logit {z} (ranked at {v}) >= threshold {}", sc.threshold));
            }
        }
    }
    if next != sc.ids.len() {
        return Err("candidate ids not ascending or out of range".into());
    }
    Ok(())
}

/// The outlier-dimension count pass 1 reads the `l` nibbles of, for a head `n_in` wide.
pub fn outlier_count(n_in: usize) -> usize {
    32.min(n_in / 4)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::matmul::tests::pseudo;
    use crate::ops::{matmul, MatmulScratch};

    /// A Q8_0 head quantized from random rows with a spread of row norms (a few strong rows, as
    /// real vocabularies have), and activations with a few large outlier dimensions.
    fn head(n_in: usize, n_out: usize) -> (Weight, Vec<usize>) {
        let wv = pseudo(n_in * n_out, 5);
        let mut data = Vec::new();
        let mut row = Vec::new();
        for r in 0..n_out {
            let gain = 1.0 + (r % 97) as f32 / 24.0;
            let w: Vec<f32> = wv[r * n_in..(r + 1) * n_in].iter().map(|v| v * gain * 0.05).collect();
            quant::quantize_activation(GgmlType::Q8_0, &w, &mut row).unwrap();
            data.extend_from_slice(&row);
        }
        let outliers = vec![3, 17, 64, 65, 200, 333, 511, 600];
        (Weight::new(GgmlType::Q8_0, n_in, n_out, data).unwrap(), outliers)
    }

    fn activation(n_in: usize, outliers: &[usize], seed: u32) -> Vec<f32> {
        let mut x = pseudo(n_in, seed);
        for &d in outliers {
            x[d] *= 40.0;
        }
        x
    }

    #[test]
    fn candidates_are_exact_and_the_rest_below_the_threshold() {
        let (n_in, n_out) = (640, 3000);
        let (plain, outliers) = head(n_in, n_out);
        let (mut planes, _) = head(n_in, n_out);
        assert!(planes.split_planes(&outliers));
        let mut s = ScreenScratch::default();
        let mut full = vec![0.0; n_out];
        let mut full_planes = vec![0.0; n_out];
        let threads = Exec::with_threads(2).unwrap();
        for seed in 0..6 {
            let x = activation(n_in, &outliers, 11 + seed);
            matmul(&plain, &x, &mut full, &mut MatmulScratch::default()).unwrap();
            matmul_on_planes(&threads, &planes, &x, &mut full_planes);
            assert_eq!(bits(&full), bits(&full_planes), "the plane layout's full head is the Q8_0 head");
            let gumbel = |t: f32| Need::Gumbel { t, key: 0x5EED ^ seed as u64 };
            // Penalized rows: the best few of the full head's and some others, ranked lower
            // (a repetition penalty's shape: positive logits shrink, all move down).
            let mut best: Vec<u32> = (0..n_out as u32).collect();
            best.sort_by(|&a, &b| full[b as usize].total_cmp(&full[a as usize]));
            let mut adjusted: Vec<u32> = best[..3].iter().copied().chain([5, 77, 2999]).collect();
            adjusted.sort_unstable();
            adjusted.dedup();
            let value = |_: usize, z: f32| (if z > 0.0 { z / 1.3 } else { z * 1.3 }) - 0.4;
            let penalized = Ask { need: Need::Max, adjusted: &adjusted, value: &value };
            for need in [Need::Max, Need::TopK(1), Need::TopK(40), Need::Floor(0.05f32.ln()), gumbel(1.0), gumbel(0.4), gumbel(3.0)] {
                for ask in [Ask::plain(need), Ask { need, ..penalized }] {
                    let what = format!("{need:?}, {} adjusted rows", ask.adjusted.len());
                    let mut one = Screened::default();
                    assert!(screened_head(&Exec::Serial, &planes, &x, ask, &mut s, &mut one, &mut Vec::new()).unwrap());
                    check_against_full(&one, &full, ask).unwrap_or_else(|e| panic!("{what}: {e}"));
                    if matches!(need, Need::Max | Need::TopK(_) | Need::Gumbel { t: 1.0, .. }) {
                        assert!(!one.fell_back && one.bytes_read < planes.bytes() * 6 / 10, "{what}: {} candidates", one.ids.len());
                    }
                    let mut two = Screened::default();
                    screened_head(&threads, &planes, &x, ask, &mut s, &mut two, &mut Vec::new()).unwrap();
                    assert_eq!(one, two, "{what}: threads change nothing");
                }
            }
        }
    }

    #[test]
    fn non_finite_activations_fall_back_to_every_row() {
        let (n_in, n_out) = (640, 64);
        let (mut planes, outliers) = head(n_in, n_out);
        planes.split_planes(&outliers);
        let mut x = activation(n_in, &outliers, 3);
        x[7] = f32::INFINITY;
        let mut out = Screened::default();
        let mut dense = Vec::new();
        screened_head(&Exec::Serial, &planes, &x, Ask::plain(Need::Max), &mut ScreenScratch::default(), &mut out, &mut dense).unwrap();
        assert!(out.fell_back);
        assert_eq!(dense.len(), n_out);
        let mut full = vec![0.0; n_out];
        matmul_on_planes(&Exec::Serial, &planes, &x, &mut full);
        assert_eq!(bits(&dense), bits(&full));
    }

    fn matmul_on_planes(exec: &Exec, w: &Weight, x: &[f32], out: &mut [f32]) {
        crate::ops::matmul_on(exec, w, x, out, &mut MatmulScratch::default()).unwrap();
    }

    fn bits(v: &[f32]) -> Vec<u32> {
        v.iter().map(|x| x.to_bits()).collect()
    }
}
